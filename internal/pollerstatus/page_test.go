package pollerstatus

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestErrorPageReloadsCalmly: the page shown when the status cannot be read reloads at the
// page's usual pace, not at once in a loop (a meta refresh of 0).
func TestErrorPageReloadsCalmly(t *testing.T) {
	var b bytes.Buffer
	if err := RenderPage(&b, ErrorPage("app1", "state store: no such account", time.Now())); err != nil {
		t.Fatal(err)
	}
	if want := `<meta http-equiv="refresh" content="15">`; !strings.Contains(b.String(), want) || !strings.Contains(b.String(), "no such account") {
		t.Fatalf("want %s and the error in:\n%s", want, b.String())
	}
}
