package pollerstatus_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
)

// TestNotInThisBuild: a poller the reader does not have is stopped, a leftover, for the handler
// (which is the app); for pollerctl (Elsewhere) it is unknown, with both versions, and never
// "delete it". The folders pollerctl sees are listed; the row carries the handler version the
// state records.
func TestNotInThisBuild(t *testing.T) {
	st := memstore.New(nil)
	d := &state.Doc{Version: 1, PollerName: "shipments", SourceFingerprint: "sha256:x", HandlerVersion: "v2 rev new"}
	data, err := state.Encode(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, blobpath.State("test", "shipments"), data, store.IfNotExists()); err != nil {
		t.Fatal(err)
	}
	handler := pollerstatus.Read(ctx, st, pollerstatus.Config{App: "test"}, "shipments")
	if handler.Health != pollerstatus.HealthStopped || handler.HandlerVersion != "v2 rev new" {
		t.Fatalf("the handler's view: %s %q, version %q", handler.Health, handler.HealthReason, handler.HandlerVersion)
	}
	cfg := pollerstatus.Config{App: "test", Elsewhere: "v1 rev old", Seen: []string{"invoices"}}
	names, err := pollerstatus.Pollers(ctx, st, cfg)
	if err != nil || !slices.Equal(names, []string{"invoices", "shipments"}) {
		t.Fatalf("Pollers: %v %v", names, err)
	}
	for _, r := range pollerstatus.ReadAll(ctx, st, cfg, names) {
		if r.Health != pollerstatus.HealthUnknown || !strings.Contains(r.HealthReason, "not in this pollerctl's build (pollerctl v1 rev old") ||
			strings.Contains(r.HealthReason, "delete") {
			t.Fatalf("pollerctl's view of %s: %s %q", r.Poller, r.Health, r.HealthReason)
		}
		if r.Poller == "shipments" && !strings.Contains(r.HealthReason, "v2 rev new") {
			t.Fatalf("the reason does not name the handler's version: %q", r.HealthReason)
		}
	}
}
