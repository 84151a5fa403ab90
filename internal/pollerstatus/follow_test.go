package pollerstatus_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
)

// TestFollowing: a tick that follows shows as such in the JSON, on the page and in words while
// its lease is live (since when, until when, changes, latency, or why there is none), and no
// longer once the lease expired (a killed follower leaves the document's follow behind).
func TestFollowing(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(now)
	st := memstore.New(clk)
	p50, p95 := 18.5, 41.0
	putDoc(t, st, &state.Doc{Version: 1, PollerName: "orders", Checkpoint: state.Checkpoint{Cursor: tsCursor(now, 12)},
		Lease: state.Lease{OwnerID: "local/host/1", FencingToken: 3, TTLSeconds: 60},
		Follow: &state.Follow{Since: state.At(now.Add(-42 * time.Second)), Until: state.At(now.Add(8 * time.Second)), Changes: 1234,
			LatencyP50MS: &p50, LatencyP95MS: &p95}})
	putDoc(t, st, &state.Doc{Version: 1, PollerName: "ledger", Checkpoint: state.Checkpoint{Cursor: &state.Cursor{Kind: state.KindXID, Value: json.RawMessage(`"1:2:3"`)}},
		Lease:  state.Lease{OwnerID: "local/host/2", FencingToken: 1, TTLSeconds: 60},
		Follow: &state.Follow{Since: state.At(now), Until: state.At(now.Add(50 * time.Second)), Changes: 0}})
	cfg := pollerstatus.Config{App: "test"}

	o := pollerstatus.Read(ctx, st, cfg, "orders")
	want := "following since 2026-11-29T11:59:18Z (42s), until 2026-11-29T12:00:08Z: 1234 changes delivered, commit to delivery p50 18.5 ms and p95 41 ms over the last minute"
	if o.Following == nil || pollerstatus.FollowText(o.Following, now) != want {
		t.Fatalf("orders: %+v\ngot  %q\nwant %q", o.Following, pollerstatus.FollowText(o.Following, now), want)
	}
	js, _ := json.Marshal(o)
	if !strings.Contains(string(js), `"following":{"since":"2026-11-29T11:59:18`) || !strings.Contains(string(js), `"latency_p95_ms":41`) {
		t.Errorf("JSON: %s", js)
	}
	l := pollerstatus.Read(ctx, st, cfg, "ledger")
	if l.Following == nil || !strings.Contains(pollerstatus.FollowText(l.Following, now), "latency not measured") {
		t.Errorf("ledger: %+v", l.Following)
	}
	var page bytes.Buffer
	rep := pollerstatus.Report{App: "test", Pollers: []pollerstatus.Row{o, l}, GeneratedAt: state.At(now)}
	if err := pollerstatus.RenderPage(&page, pollerstatus.NewPage(rep)); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(page.String(), `<tr><th>following</th><td class="following">following since`); n != 2 {
		t.Errorf("the page shows %d following rows, want 2", n)
	}

	clk.Advance(66 * time.Second) // the lease expired: a killed follower's document says nothing
	if o := pollerstatus.Read(ctx, st, cfg, "orders"); o.LeaseLive || o.Following != nil {
		t.Errorf("after the TTL: live %v, following %+v", o.LeaseLive, o.Following)
	}
}
