package pollerstatus_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/liveness"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
)

// TestCleanupStatus: a poller with a cleanup shows the rows awaiting it as the probe counted
// them, in the JSON, the figures (the page and pollerctl status) and the page; a tick whose
// cleanup failed (its liveness mark, written after its commit) makes it degraded with the error;
// a later commit (no mark: its cleanup succeeded) clears it.
func TestCleanupStatus(t *testing.T) {
	now, clk, st, marker := markedStore()
	doc := &state.Doc{Version: 1, PollerName: "orders", SourceFingerprint: "sha256:x",
		Checkpoint: state.Checkpoint{Cursor: tsCursor(now.Add(-time.Minute), 12), UpdatedAt: state.At(now)}}
	putDoc(t, st, doc)
	cfg := pollerstatus.Config{App: "test", Now: clk.Now,
		Registered: []pollerstatus.Registered{{Name: "orders", Schedule: "*/10 * * * * *", LivenessInterval: time.Minute,
			Cleanup: "delete delivered rows older than 168h0m0s", Target: "POST https://hooks.example.com/orders?sig=s3cret"}},
		Probe: func(ctx context.Context, _ string, d *state.Doc) pollerstatus.Probe {
			return pollerstatus.ProbeSource(ctx, fakeSource{awaiting: 1234, cleans: true}, "state/test/orders.json", nil, clk.Now)
		},
	}

	marker.Record(ctx, liveness.Tick{Poller: "orders", Outcome: "idle", RowsWaiting: 0, LagSeconds: ptr(0), Interval: time.Minute})
	r := pollerstatus.Read(ctx, st, cfg, "orders")
	if r.Health != pollerstatus.HealthOK || r.Cleanup == nil || r.Cleanup.RowsAwaiting != 1234 || r.Cleanup.Error != "" {
		t.Fatalf("health %q (%s), cleanup %+v; want ok with 1234 rows awaiting", r.Health, r.HealthReason, r.Cleanup)
	}
	if want := "1234 rows awaiting cleanup (delete delivered rows older than 168h0m0s)"; r.Figures().Cleanup != want {
		t.Fatalf("figures: %q, want %q", r.Figures().Cleanup, want)
	}
	b, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(b), `"cleanup":{"rule":"delete delivered rows older than 168h0m0s","rows_awaiting":1234}`) ||
		!strings.Contains(string(b), `"rows_awaiting_cleanup":1234`) {
		t.Fatalf("JSON %s (%v): want the cleanup and the probe's count", b, err)
	}

	// A committed tick whose cleanup failed: its mark comes after its commit.
	clk.Advance(time.Second)
	denied := errors.New(`source: poller "orders", table orders: deleting delivered rows (cleanup): ERROR: permission denied for table orders (SQLSTATE 42501)`)
	if !marker.Record(ctx, liveness.Tick{Poller: "orders", Outcome: "committed", WroteState: true, RowsWaiting: 0, Interval: time.Minute, CleanupErr: denied.Error()}) {
		t.Fatal("a tick whose cleanup failed wrote no liveness mark")
	}
	r = pollerstatus.Read(ctx, st, cfg, "orders")
	if r.Health != pollerstatus.HealthDegraded || !strings.Contains(r.HealthReason, "permission denied for table orders") ||
		!strings.Contains(r.HealthReason, "pollerctl check orders") || !strings.HasSuffix(r.Figures().Cleanup, "; the last cleanup failed") {
		t.Fatalf("after a failed cleanup: health %q (%s), figures %q; want degraded naming the error", r.Health, r.HealthReason, r.Figures().Cleanup)
	}
	var page strings.Builder
	if err := pollerstatus.RenderPage(&page, pollerstatus.NewPage(pollerstatus.Report{Pollers: []pollerstatus.Row{r}})); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), `<td class="cleanup bad">1234 rows awaiting cleanup`) {
		t.Errorf("the page lacks the cleanup row")
	}
	// Where it delivers, redacted (a webhook's URL may carry a key), in the JSON and on the page.
	if r.DeliversTo != "POST https://hooks.example.com/orders?sig=REDACTED" || !strings.Contains(page.String(), `<td class="delivers-to">POST https://hooks.example.com/orders?sig=REDACTED</td>`) {
		t.Errorf("delivers to %q; the page:\n%s", r.DeliversTo, page.String())
	}

	// A later commit, whose cleanup succeeded (it writes no mark), clears it.
	clk.Advance(time.Second)
	b2, err := st.Get(ctx, "state/test/orders.json")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := state.Encode(doc)
	if _, err := st.Put(ctx, "state/test/orders.json", data, store.IfMatch(b2.ETag)); err != nil {
		t.Fatal(err)
	}
	if r := pollerstatus.Read(ctx, st, cfg, "orders"); r.Health != pollerstatus.HealthOK || r.Cleanup.Error != "" {
		t.Fatalf("after a later commit: health %q (%s), cleanup %+v", r.Health, r.HealthReason, r.Cleanup)
	}
}

// markedStore is a state store of app "test" on a fake clock at a fixed now, and a liveness
// marker writing to it.
func markedStore() (time.Time, *clock.Fake, *memstore.Store, *liveness.Marker) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(now)
	st := memstore.New(clk)
	return now, clk, st, &liveness.Marker{Store: st, App: "test", Owner: "test/host/1", Clock: clk}
}
