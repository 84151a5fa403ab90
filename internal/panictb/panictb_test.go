package panictb_test

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/panictb"
)

var _ testing.TB = (*panictb.TB)(nil)

// panics returns the value f panics with, or nil.
func panics(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// TestFailuresPanic: every way a helper fails or skips panics with its message, so that the
// example fails saying why instead of going on.
func TestFailuresPanic(t *testing.T) {
	tb := panictb.New()
	defer tb.Close()
	for name, f := range map[string]func(){
		"Fatalf":  func() { tb.Fatalf("no %s", "table") },
		"Fatal":   func() { tb.Fatal("no ", "table") },
		"Errorf":  func() { tb.Errorf("no %s", "table") },
		"Error":   func() { tb.Error("no ", "table") },
		"Skipf":   func() { tb.Skipf("no %s", "table") },
		"Skip":    func() { tb.Skip("no ", "table") },
		"Fail":    tb.Fail,
		"FailNow": tb.FailNow,
		"SkipNow": tb.SkipNow,
		"Setenv":  func() { tb.Setenv("X", "1") },
		"Chdir":   func() { tb.Chdir(os.TempDir()) },
	} {
		v := panics(f)
		if v == nil {
			t.Errorf("%s returned", name)
			continue
		}
		if s, _ := v.(string); (name == "Fatalf" || name == "Fatal" || name == "Errorf" || name == "Error") && s != "no table" {
			t.Errorf("%s panicked with %q, want the message", name, s)
		}
	}
	if !tb.Skipped() {
		t.Error("Skipped is false after a skip")
	}
}

// TestClose: Close runs the cleanups last first, cancels the context and removes the temporary
// directories; a second Close does nothing.
func TestClose(t *testing.T) {
	tb := panictb.New()
	dir := tb.TempDir()
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("TempDir %s: %v", dir, err)
	}
	var order []int
	tb.Cleanup(func() { order = append(order, 1) })
	tb.Cleanup(func() { order = append(order, 2) })
	tb.Close()
	if !slices.Equal(order, []int{2, 1}) {
		t.Errorf("cleanups ran in order %v, want [2 1]", order)
	}
	if tb.Context().Err() == nil {
		t.Error("Context not cancelled")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("TempDir %s after Close: %v", dir, err)
	}
	tb.Close()
	if len(order) != 2 {
		t.Errorf("a second Close ran the cleanups again: %v", order)
	}
}
