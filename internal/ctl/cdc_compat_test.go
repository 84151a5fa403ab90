package ctl_test

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestCDCOutputCompat pins what `pollerctl cdc enable` and `disable` print, dry run and done,
// with the names, positions and sizes that change from run to run replaced.
func TestCDCOutputCompat(t *testing.T) {
	forEachCDCStore(t, func(t *testing.T, w *cdcWorld) {
		if _, ok := w.st.(*memstore.Store); !ok {
			t.Skip("the output is the same on every store")
		}
		slot := w.slot("lg")
		lsn := regexp.MustCompile(`\b[0-9A-F]+/[0-9A-F]+\b`)
		size := regexp.MustCompile(`\b\d+(\.\d)? (B|KiB|MiB|GiB)\b`)
		server := regexp.MustCompile(`\bpostgres [^/ ]+/`) // (postgres SERVER/...), and a reset plan's source
		fingerprint := regexp.MustCompile(`sha256:[0-9a-f]{12,64}`)
		var out strings.Builder
		step := func(code int, args ...string) {
			t.Helper()
			w.must(code, args)
			text := strings.NewReplacer(slot, "SLOT", w.table, "TABLE", w.app, "APP").Replace(w.out.String())
			text = size.ReplaceAllString(lsn.ReplaceAllString(text, "LSN"), "SIZE")
			text = fingerprint.ReplaceAllString(server.ReplaceAllString(text, "postgres SERVER/"), "FINGERPRINT")
			out.WriteString("$ pollerctl " + strings.Join(args, " ") + "\n" + text)
		}
		step(ctl.ExitUsage, "cdc", "enable", "orders")
		step(ctl.ExitOK, "cdc", "enable", "lg")
		step(ctl.ExitOK, "cdc", "enable", "lg", "--yes")
		step(ctl.ExitOK, "cdc", "enable", "lg", "--yes")
		step(ctl.ExitOK, "reset", "lg", "--to-beginning", "--yes")
		step(ctl.ExitOK, "cdc", "disable", "lg")
		step(ctl.ExitOK, "cdc", "disable", "lg", "--yes")
		step(ctl.ExitOK, "cdc", "disable", "lg", "--yes")
		w.exec("ALTER TABLE " + w.table + " REPLICA IDENTITY NOTHING")
		step(ctl.ExitRefused, "cdc", "enable", "lg", "--yes")
		path := filepath.Join("testdata", "cdc_output.txt")
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if out.String() != string(want) {
			t.Errorf("pollerctl cdc output changed:\n%s\nwant:\n%s", out.String(), want)
		}
	})
}
