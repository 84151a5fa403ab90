package pollerstatus

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestErrorPageReloadsCalmly: the page, and the one shown when the status cannot be read, reload
// every 15 s, not at once in a loop (a meta refresh of 0).
func TestErrorPageReloadsCalmly(t *testing.T) {
	for name, d := range map[string]PageData{"error": ErrorPage("app1", "state store: no such account", time.Now()), "report": NewPage(Report{App: "app1"})} {
		var b bytes.Buffer
		if err := RenderPage(&b, d); err != nil {
			t.Fatal(err)
		}
		if want := `<meta http-equiv="refresh" content="15">`; !strings.Contains(b.String(), want) {
			t.Errorf("%s page: want %s in:\n%s", name, want, b.String())
		}
	}
}
