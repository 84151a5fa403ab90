package poller_test

import (
	"testing"

	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestZeroRow: the zero Row (what Before gives without a before-image) answers the methods that
// read no column as a keyset row does, rather than panicking.
func TestZeroRow(t *testing.T) {
	var r poller.Row
	if r.Op() != "upsert" || !r.HasRow() || len(r.Unchanged()) != 0 {
		t.Errorf("op %q, has row %v, unchanged %v", r.Op(), r.HasRow(), r.Unchanged())
	}
	if _, ok := r.Before(); ok {
		t.Error("a zero Row has a before-image")
	}
	if _, ok := r.Changed(); ok {
		t.Error("a zero Row knows its changed columns")
	}
	if _, ok := r.Transaction(); ok {
		t.Error("a zero Row has a transaction")
	}
}
