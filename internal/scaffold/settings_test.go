package scaffold_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/declared"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// TestScaffoldWebhookDefaultMode: a scaffolded webhook poller sends in the documented default
// mode (docs/sinks.md: a message per row), and says so.
func TestScaffoldWebhookDefaultMode(t *testing.T) {
	dir := miniRepo(t, nil)
	got, out := run(dir, "zzhook", "--sink", "webhook")
	if got != done {
		t.Fatalf("%s: %s", got, out)
	}
	body, err := os.ReadFile(filepath.Join(dir, "zzhook", declared.File))
	if err != nil {
		t.Fatal(err)
	}
	var spec declared.Spec
	if err := json.Unmarshal(body, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Sink.Mode != "" && spec.Sink.Mode != sink.ModeRow {
		t.Errorf("the scaffolded webhook's mode is %q, the documented default is %s:\n%s", spec.Sink.Mode, sink.ModeRow, body)
	}
	if !strings.Contains(out, "one POST per row") {
		t.Errorf("the output does not say a POST per row:\n%s", out)
	}
}

// TestScaffoldSettings: pollerctl new prints only the settings that apply to the new poller's
// cursor (a timestamp+pk poller: SETTLE_LAG, no CDC_*), and adds its required settings to
// local.settings.json.example (keeping the file's other keys, in order), saying so.
func TestScaffoldSettings(t *testing.T) {
	for _, args := range [][]string{{"zznew"}, {"zznew", "--sink", "storagequeue"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			dir := miniRepo(t, nil)
			examplePath := filepath.Join(dir, "local.settings.json.example")
			before, err := os.ReadFile(examplePath)
			if err != nil {
				t.Fatal(err)
			}
			got, out := run(dir, args...)
			if got != done {
				t.Fatalf("%s: %s", got, out)
			}
			if strings.Contains(out, "ZZNEW_CDC_") || !strings.Contains(out, "ZZNEW_SETTLE_LAG") || !strings.Contains(out, "ZZNEW_BATCH_SIZE") {
				t.Errorf("the settings printed for a timestamp+pk poller:\n%s", out)
			}
			after, err := os.ReadFile(examplePath)
			if err != nil {
				t.Fatal(err)
			}
			var ex struct{ Values map[string]string }
			if err := json.Unmarshal(after, &ex); err != nil {
				t.Fatalf("the example no longer parses: %v\n%s", err, after)
			}
			if v, ok := ex.Values["ZZNEW_DB_DRIVER"]; !ok || v != "" || ex.Values["ZZNEW_SCHEDULE"] != "*/30 * * * * *" {
				t.Errorf("the example's new keys: %v", ex.Values)
			}
			if !strings.HasPrefix(string(after), strings.TrimRight(string(before), "\n\t }")) {
				t.Errorf("the example's other content changed:\n%s", after)
			}
			if !strings.Contains(out, "copy the keys added to local.settings.json.example (ZZNEW_DB_DRIVER, ZZNEW_DB_CONNECTION, ZZNEW_SCHEDULE) into local.settings.json") {
				t.Errorf("the output does not say what was added to the example:\n%s", out)
			}
		})
	}
}
