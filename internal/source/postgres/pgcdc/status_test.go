package pgcdc

import (
	"errors"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
)

// TestCheckSlot: a missing slot, a slot of another kind and a slot that lost its WAL are
// misconfigured, each saying why and what to run; a slot that serves the poller is fine.
func TestCheckSlot(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	good := SlotState{Name: "pt_orders", Exists: true, Type: "logical", Plugin: "pgoutput", Database: "app", Here: true,
		ConfirmedFlush: "0/16D3290", RestartLSN: "0/16D0000", RetainedBytes: n(4096)}
	for _, tc := range []struct {
		name string
		slot func(s SlotState) SlotState
		want []string // nil: fine
	}{
		{"fine", func(s SlotState) SlotState { return s }, nil},
		{"missing", func(s SlotState) SlotState { return SlotState{Name: s.Name} }, []string{"replication slot pt_orders: does not exist", "pollerctl cdc enable orders --yes"}},
		{"another plugin", func(s SlotState) SlotState { s.Plugin = "wal2json"; return s }, []string{`plugin "wal2json"`, "{P}_CDC_SLOT"}},
		{"lost WAL", func(s SlotState) SlotState { s.WALStatus = "lost"; return s }, []string{"wal_status lost", "pollerctl cdc disable orders --yes"}},
	} {
		err := checkSlot(tc.slot(good), "orders")
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, source.ErrMisconfigured) {
			t.Errorf("%s: %v, want a misconfiguration", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
	}
	if err := checkSlot(SlotState{Name: "s"}, ""); err == nil || !strings.Contains(err.Error(), "pollerctl cdc enable POLLER --yes") {
		t.Errorf("without the poller's name: %v", err)
	}
}

func TestBytesText(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 1 << 30: "1.0 GiB", 5 << 40: "5.0 TiB"} {
		if got := bytesText(n); got != want {
			t.Errorf("bytesText(%d) = %q, want %q", n, got, want)
		}
	}
}
