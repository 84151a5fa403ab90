package bicep

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
)

// TestTimersUseMonitor: every timer function.json the repository ships (the example pollers', the
// dev script's, and the one pollerctl new writes) says useMonitor explicitly, and false wherever a
// schedule it is shipped with (main.bicepparam, local.settings.json.example, scripts/dev.sh,
// pollerctl new's default) fires more than once a minute. With useMonitor the host writes the
// timer's status blob after every invocation (TimerListener.InvokeJobFunction calls
// ScheduleMonitor.UpdateStatusAsync: Azure/azure-webjobs-sdk-extensions 9feb4f2
// src/WebJobs.Extensions/Extensions/Timers/Listener/TimerListener.cs), 2,880 writes a day at
// */30, to run an occurrence missed across a restart at once, which the next tick of a sub-minute
// schedule does anyway; Microsoft's timer trigger reference makes false the default for such
// schedules (functions-bindings-timer.md, useMonitor). docs/deploying.md says when to set it true.
func TestTimersUseMonitor(t *testing.T) {
	// The schedules each {P}_SCHEDULE setting is shipped with.
	shipped := map[string][]string{}
	params := read(t, "main.bicepparam")
	names := regexp.MustCompile(`(?m)^    name: '([^']+)'`).FindAllStringSubmatch(params, -1)
	schedules := regexp.MustCompile(`(?m)^    schedule: '([^']+)'`).FindAllStringSubmatch(params, -1)
	for i := range names {
		p := appsettings.Prefix(names[i][1]) + "_SCHEDULE"
		shipped[p] = append(shipped[p], schedules[i][1])
	}
	var local struct{ Values map[string]string }
	if err := json.Unmarshal([]byte(read(t, "../../local.settings.json.example")), &local); err != nil {
		t.Fatal(err)
	}
	for k, v := range local.Values {
		if strings.HasSuffix(k, "_SCHEDULE") {
			shipped[k] = append(shipped[k], v)
		}
	}
	devScripts, _ := filepath.Glob("../../scripts/dev/*.sh")
	for _, f := range append([]string{"../../scripts/dev.sh"}, devScripts...) {
		for _, m := range regexp.MustCompile(`export (\w+_SCHEDULE)=\$\{\w+:-([^}]+)\}`).FindAllStringSubmatch(read(t, f), -1) {
			shipped[m[1]] = append(shipped[m[1]], m[2])
		}
	}
	scaffold := read(t, "../../internal/scaffold/scaffold.go")
	def := regexp.MustCompile(`const schedule = "([^"]+)"`).FindStringSubmatch(scaffold)
	if def == nil {
		t.Fatal("internal/scaffold/scaffold.go: no default schedule")
	}
	shipped["{{.Prefix}}_SCHEDULE"] = []string{def[1]}
	tmpl := regexp.MustCompile("(?s)var functionTemplate = template.Must\\(template.New\\(\"function\"\\).Parse\\(`(.*?)`\\)\\)").FindStringSubmatch(scaffold)
	if tmpl == nil {
		t.Fatal("internal/scaffold/scaffold.go: no functionTemplate")
	}

	files := map[string]string{"pollerctl new's function.json (internal/scaffold)": tmpl[1]}
	for _, pattern := range []string{"../../*/function.json", "../../scripts/dev/*/*/function.json"} {
		found, _ := filepath.Glob(pattern)
		for _, f := range found {
			files[strings.TrimPrefix(f, "../../")] = read(t, f)
		}
	}
	at := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	timers := 0
	for name, text := range files {
		var fn struct {
			Bindings []map[string]any `json:"bindings"`
		}
		if err := json.Unmarshal([]byte(text), &fn); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, b := range fn.Bindings {
			if b["type"] != "timerTrigger" {
				continue
			}
			timers++
			monitor, set := b["useMonitor"].(bool)
			if !set {
				t.Errorf("%s: useMonitor is not set: say it (false for a schedule under a minute)", name)
				continue
			}
			setting := strings.Trim(b["schedule"].(string), "%")
			if len(shipped[setting]) == 0 {
				t.Errorf("%s: its schedule %s is shipped with no value this test knows", name, setting)
			}
			for _, s := range shipped[setting] {
				if p := appsettings.SchedulePeriod(s, at); monitor && p < time.Minute {
					t.Errorf("%s: useMonitor true with %s = %q (every %v): a status blob write per tick for a catch-up the next tick makes anyway", name, setting, s, p)
				}
			}
		}
	}
	if timers < 4 {
		t.Fatalf("found %d timer bindings in %v", timers, files)
	}
	wantIn(t, "docs/deploying.md", strings.Join(strings.Fields(read(t, "../../docs/deploying.md")), " "),
		"`useMonitor` false", "status blob", "set it to `true`")
}
