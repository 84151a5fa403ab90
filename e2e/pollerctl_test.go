package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestPollerctlInTheAppFolder runs the pollerctl binary as an operator would, in a folder with a
// local.settings.json and nothing in the environment: it reads the settings from the file, says
// on stderr which app and store it reads, and deletes an experiment's state after a dry run,
// keeping a backup that `backups` lists. Before, it read only the environment and said nothing,
// and no command removed a poller's state.
func TestPollerctlInTheAppFolder(t *testing.T) {
	cs := testenv.Azurite(t)
	app := testenv.Name("ctl-")
	dir := t.TempDir()
	values, _ := json.Marshal(map[string]any{"IsEncrypted": false, "Values": map[string]string{"StateStorage": cs, "POLLER_APP_NAME": app}})
	if err := os.WriteFile(filepath.Join(dir, "local.settings.json"), values, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := blobstore.New(blobstore.Settings{Setting: "test", ConnectionString: cs, Container: "db-state"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc := &state.Doc{Version: 1, PollerName: "exp", SourceFingerprint: "sha256:x"}
	data, _ := state.Encode(doc)
	if _, err := st.Put(context.Background(), "state/"+app+"/exp.json", data, store.IfNotExists()); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(pollerctl(t), args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
	}
	out, errOut, code := run("status", "--no-probe", "--json")
	if !strings.Contains(errOut, `pollerctl: app "`+app+`"`) || !strings.Contains(errOut, "local.settings.json") || !strings.Contains(errOut, "127.0.0.1") {
		t.Fatalf("stderr does not say the app, the store and the settings file:\n%s", errOut)
	}
	var rows []struct{ Poller, Health string }
	if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 3 {
		t.Fatalf("status --json: exit %d, %v\n%s", code, err, out)
	}
	found := false
	for _, r := range rows {
		found = found || (r.Poller == "exp" && r.Health == "unknown")
	}
	if !found { // the app may run it: a newer build than this pollerctl's
		t.Fatalf("exp is not listed as unknown (not in this pollerctl's build): %s", out)
	}
	if out, _, code := run("delete", "exp"); code != 0 || !strings.Contains(out, "dry run") {
		t.Fatalf("delete dry run: %d\n%s", code, out)
	}
	if out, _, code := run("delete", "exp", "--yes"); code != 1 || !strings.Contains(out, "--force") {
		t.Fatalf("delete --yes without --force of a poller this build does not have: %d\n%s", code, out)
	}
	if out, _, code := run("delete", "exp", "--yes", "--force"); code != 0 || !strings.Contains(out, "deleted state/"+app+"/exp.json") {
		t.Fatalf("delete: %d\n%s", code, out)
	}
	if out, _, code := run("backups", "exp"); code != 0 || !strings.Contains(out, "--from-backup") {
		t.Fatalf("backups: %d\n%s", code, out)
	}
}
