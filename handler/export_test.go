package handler

import (
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
)

// Internals are the knobs the package's tests set besides Options: a clock, a state store (or the
// blob store's options), no live probe on the status page.
type Internals = internals

// NewForTest is New with in's knobs; it fails t when New fails.
func NewForTest(t testing.TB, o Options, in Internals) *App {
	t.Helper()
	a, err := newApp(o, in)
	if err != nil {
		t.Fatalf("handler.New: %v", err)
	}
	return a
}

// Report is the status function's JSON reply (pollerstatus makes it), for the tests to read.
type Report = pollerstatus.Report
