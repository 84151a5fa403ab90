package liveness_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/liveness"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
)

// TestMarkers: two processes mark the same poller (a second instance, a redeploy). Each write is
// conditional; a marker whose ETag is stale re-reads and writes once more, so the newest mark
// wins and neither fails a tick. A changed outcome is written at once, a repeated idle one only
// after the interval, every failed one each time (the status shows the last attempt), with the
// time the ticks began to fail.
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
	if a.Record(ctx, idle) {
		t.Fatal("a repeated idle tick within the interval wrote a mark")
	}
	clk.Advance(time.Minute)
	if !a.Record(ctx, idle) { // a's ETag is stale: b wrote since
		t.Fatal("a stale ETag must be settled by a re-read, not fail")
	}
	m, _, err := liveness.Read(ctx, st, "app", "p")
	if err != nil || m == nil || m.Owner != "a" || m.Failed() || m.FailingSince != nil {
		t.Fatalf("the newest mark: %+v %v", m, err)
	}
	fail := idle
	fail.Outcome, fail.Err = "failed", errors.New("boom 1")
	clk.Advance(time.Second)
	first := clk.Now()
	if !a.Record(ctx, fail) {
		t.Fatal("ok to failed must be written at once")
	}
	// Failing every 5 s, the same error or another: each attempt is written, since the first.
	for i := range 3 {
		clk.Advance(5 * time.Second)
		fail.Err = fmt.Errorf("boom %d", 1+(i+1)%2)
		if !a.Record(ctx, fail) {
			t.Fatalf("failed attempt %d was not written", i+2)
		}
	}
	m, blob, _ := liveness.Read(ctx, st, "app", "p")
	if m.Error != "boom 2" || m.Outcome != "failed" || m.FailingSince == nil || !m.FailingSince.Equal(first) || !m.At.Equal(clk.Now()) || !blob.LastModified.Equal(clk.Now()) {
		t.Fatalf("mark %+v (failing since %v), want failing since %v, written now", m, m.FailingSince, first)
	}
	// Another process's first tick of the poller fails too: the ticks began to fail before it.
	clk.Advance(5 * time.Second)
	c := &liveness.Marker{Store: st, App: "app", Owner: "c", Clock: clk}
	if !c.Record(ctx, fail) {
		t.Fatal("a new process's failed tick was not written")
	}
	if m, _, _ := liveness.Read(ctx, st, "app", "p"); m.Owner != "c" || m.FailingSince == nil || !m.FailingSince.Equal(first) {
		t.Fatalf("a new process's mark: %+v, want failing since %v", m, first)
	}
	// A tick that wrote the state document is a signal of its own: no mark; and the failures
	// after it are a new run.
	if a.Record(ctx, liveness.Tick{Poller: "p", Outcome: "committed", WroteState: true, Interval: time.Minute}) {
		t.Fatal("a committed tick wrote a mark")
	}
	clk.Advance(5 * time.Second)
	if !a.Record(ctx, fail) {
		t.Fatal("a failed tick after a committed one was not written")
	}
	if m, _, _ := liveness.Read(ctx, st, "app", "p"); m.FailingSince == nil || !m.FailingSince.Equal(clk.Now()) {
		t.Fatalf("failing again after a commit: %+v, want failing since now", m)
	}
	// An ok tick after failures is written at once, without failing_since; a process that starts
	// long after a failed mark (older than the interval) does not take its time.
	clk.Advance(5 * time.Second)
	if !a.Record(ctx, idle) {
		t.Fatal("failed to idle must be written at once")
	}
	if m, _, _ := liveness.Read(ctx, st, "app", "p"); m.Failed() || m.FailingSince != nil {
		t.Fatalf("idle after failures: %+v", m)
	}
	if !a.Record(ctx, fail) {
		t.Fatal("failed again")
	}
	clk.Advance(2 * time.Minute)
	d := &liveness.Marker{Store: st, App: "app", Owner: "d", Clock: clk}
	if !d.Record(ctx, fail) {
		t.Fatal("d's failed tick was not written")
	}
	if m, _, _ := liveness.Read(ctx, st, "app", "p"); m.FailingSince == nil || !m.FailingSince.Equal(clk.Now()) {
		t.Fatalf("a failed mark older than the interval is another run: %+v, want failing since now", m)
	}
}
