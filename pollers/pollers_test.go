package pollers_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/pollers"
)

const root = ".."

// otherFunctions are the function folders that are not pollers: the HTTP function `status`
// (handler/status.go), whose names no poller may take.
var otherFunctions = pollerdef.ReservedNames

// TestPollerFoldersMatchFunctions: every pollers/<name> is in All and has <name>/function.json
// with a timer on %{P}_SCHEDULE%; every poller in All has its folder; every function folder is a
// poller.
func TestPollerFoldersMatchFunctions(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(root, "pollers"))
	if err != nil {
		t.Fatal(err)
	}
	var folders []string
	for _, e := range entries {
		if e.IsDir() {
			folders = append(folders, e.Name())
		}
	}
	var registered []string
	for _, p := range pollers.All() {
		if slices.Contains(registered, p.Name()) {
			t.Errorf("poller %s is listed twice in All", p.Name())
		}
		registered = append(registered, p.Name())
	}
	for _, name := range folders {
		if !slices.Contains(registered, name) {
			t.Errorf("pollers/%s is not in All: add its New() to All in pollers/pollers.go", name)
		}
		checkFunction(t, name)
	}
	for _, name := range registered {
		if !slices.Contains(folders, name) {
			t.Errorf("poller %s is in All but has no pollers/%s folder", name, name)
		}
	}
	// Function folders (any top-level folder with a function.json) must be pollers, or one of
	// otherFunctions, which no poller may be named.
	top, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range top {
		_, fnErr := os.Stat(filepath.Join(root, e.Name(), "function.json"))
		_, declErr := os.Stat(filepath.Join(root, e.Name(), "poller.json")) // a declared poller
		switch {
		case declErr == nil && slices.Contains(folders, e.Name()):
			t.Errorf("%s is a Go poller (pollers/%s) and a declared one (%s/poller.json)", e.Name(), e.Name(), e.Name())
		case declErr == nil:
			checkFunction(t, e.Name())
		case fnErr == nil && !slices.Contains(folders, e.Name()) && !slices.Contains(otherFunctions, e.Name()):
			t.Errorf("%s/function.json has no pollers/%s and no %s/poller.json", e.Name(), e.Name(), e.Name())
		}
	}
	for _, name := range otherFunctions {
		if slices.Contains(folders, name) || slices.Contains(registered, name) {
			t.Errorf("a poller is named %s, which is the name of another function", name)
		}
	}
	if len(folders) == 0 {
		t.Fatal("no pollers found")
	}
}

func checkFunction(t *testing.T, name string) {
	data, err := os.ReadFile(filepath.Join(root, name, "function.json"))
	if err != nil {
		t.Errorf("pollers/%s has no %s/function.json: %v", name, name, err)
		return
	}
	var fn struct {
		Bindings []struct {
			Type, Direction, Name, Schedule string
		} `json:"bindings"`
	}
	if err := json.Unmarshal(data, &fn); err != nil {
		t.Errorf("%s/function.json: %v", name, err)
		return
	}
	want := "%" + appsettings.Prefix(name) + "_SCHEDULE%"
	if len(fn.Bindings) != 1 || fn.Bindings[0].Type != "timerTrigger" || fn.Bindings[0].Direction != "in" || fn.Bindings[0].Schedule != want {
		t.Errorf("%s/function.json: want one timerTrigger binding with schedule %s, got %+v", name, want, fn.Bindings)
	}
}
