package liveness_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/liveness"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
)

// TestMarkers: two processes mark the same poller (a second instance, a redeploy). Each write is
// conditional; a marker whose ETag is stale re-reads and writes once more, so the newest mark
// wins and neither fails a tick. A changed outcome is written at once, a repeated one only after
// the interval, a changing error at most every ErrorEvery.
func TestMarkers(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	st := memstore.New(clk)
	a := &liveness.Marker{Store: st, App: "app", Owner: "a", Clock: clk}
	b := &liveness.Marker{Store: st, App: "app", Owner: "b", Clock: clk}
	idle := liveness.Tick{Poller: "p", Outcome: "idle", Interval: time.Minute}
	if !a.Record(ctx, idle) || !b.Record(ctx, idle) {
		t.Fatal("each process's first tick writes a mark")
	}
	clk.Advance(time.Minute)
	if !a.Record(ctx, idle) { // a's ETag is stale: b wrote since
		t.Fatal("a stale ETag must be settled by a re-read, not fail")
	}
	m, _, err := liveness.Read(ctx, st, "app", "p")
	if err != nil || m == nil || m.Owner != "a" || m.Failed() {
		t.Fatalf("the newest mark: %+v %v", m, err)
	}
	fail := idle
	fail.Outcome, fail.Err = "failed", errors.New("boom 1")
	clk.Advance(time.Second)
	if !a.Record(ctx, fail) {
		t.Fatal("ok to failed must be written at once")
	}
	fail.Err = errors.New("boom 2")
	if a.Record(ctx, fail) {
		t.Fatal("a changed error within ErrorEvery was written")
	}
	clk.Advance(liveness.ErrorEvery)
	if !a.Record(ctx, fail) {
		t.Fatal("a changed error after ErrorEvery must be written")
	}
	if m, _, _ := liveness.Read(ctx, st, "app", "p"); m.Error != "boom 2" || m.Outcome != "failed" {
		t.Fatalf("mark %+v", m)
	}
	// A tick that wrote the state document is a signal of its own: no mark.
	if a.Record(ctx, liveness.Tick{Poller: "p", Outcome: "committed", WroteState: true, Interval: time.Minute}) {
		t.Fatal("a committed tick wrote a mark")
	}
}
