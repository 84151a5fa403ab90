package ctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
)

// TestBackfillRequest: backfill refuses a poller without state, a failing poller, a --where the
// database refuses and a second backfill, each with the reason and the way out and nothing
// written; is a dry run until --yes; writes the request (with the poller's batch size as its
// chunk) and --cancel flags it for the next tick.
func TestBackfillRequest(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		if code := w.run("backfill", "orders"); code != 1 || !strings.Contains(w.out.String(), "has no state yet") {
			t.Fatalf("no state: %d %s", code, w.out.String())
		}
		l := w.acquire("worker-a")
		if err := l.FailAndRelease(ctx, nil, "batch_x", `{"id":1}..{"id":9}`, errors.New("boom")); err != nil {
			t.Fatal(err)
		}
		if code := w.run("backfill", "orders", "--yes"); code != 1 || !strings.Contains(w.out.String(), "is failing on batch batch_x") ||
			!strings.Contains(w.out.String(), "pollerctl quarantine orders") || w.doc().Backfill != nil {
			t.Fatalf("failing: %d %s", code, w.out.String())
		}
		if err := w.acquire("worker-a").CommitAndRelease(ctx, cp("2026-01-01T00:00:00.000000Z", 9)); err != nil {
			t.Fatal(err)
		}
		if code := w.run("backfill", "orders", "--where", "no_such_column = 1", "--yes"); code != 2 ||
			!strings.Contains(w.out.String(), `refuses the backfill's --where "no_such_column = 1"`) || !strings.Contains(w.out.String(), "no_such_column") || w.doc().Backfill != nil {
			t.Fatalf("bad --where: %d %s", code, w.out.String())
		}
		if code := w.run("backfill", "orders", "--chunk", "5", "--cancel"); code != 2 {
			t.Fatalf("--cancel with --chunk: %d %s", code, w.out.String())
		}
		if code := w.run("backfill", "orders", "--where", "id > 5"); code != 0 || !strings.Contains(w.out.String(), "dry run") || w.doc().Backfill != nil {
			t.Fatalf("dry run: %d %s", code, w.out.String())
		}
		if code := w.run("backfill", "orders", "--where", "id > 5", "--yes", "--detach"); code != 0 || !strings.Contains(w.out.String(), "requested") {
			t.Fatalf("request: %d %s", code, w.out.String())
		}
		b := w.doc().Backfill
		if b == nil || !strings.HasPrefix(b.ID, "bf_") || b.Kind != state.BackfillRequested || b.Where != "id > 5" || b.Chunk != 500 || b.After != nil || b.Cancel ||
			b.Estimate != 0 {
			t.Fatalf("the request written: %+v", b)
		}
		if code := w.run("backfill", "orders", "--yes", "--detach"); code != 1 || !strings.Contains(w.out.String(), "already runs backfill "+b.ID) ||
			!strings.Contains(w.out.String(), "--cancel --yes") {
			t.Fatalf("a second one: %d %s", code, w.out.String())
		}
		if code := w.run("backfill", "orders", "--cancel", "--yes"); code != 0 || !w.doc().Backfill.Cancel || w.doc().Backfill.ID != b.ID {
			t.Fatalf("cancel: %d %s", code, w.out.String())
		}
		l = w.acquire("worker-a")
		l.SetBackfill(nil) // the tick ended it
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if code := w.run("backfill", "orders", "--cancel", "--yes"); code != 1 || !strings.Contains(w.out.String(), "runs no backfill") {
			t.Fatalf("nothing to cancel: %d %s", code, w.out.String())
		}
	})
}

// TestBackfillFollowsProgress: without --detach, backfill prints the progress the poller's ticks
// commit until the backfill ends.
func TestBackfillFollowsProgress(t *testing.T) {
	clk := clock.NewFake(time.Now())
	w := &world{t: t, st: memstore.New(clk), clk: clk, app: "test"}
	if err := w.acquire("worker-a").CommitAndRelease(ctx, cp("2026-01-01T00:00:00.000000Z", 9)); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	var out bytes.Buffer
	go func() {
		done <- ctl.Run(ctx, []string{"backfill", "orders", "--chunk", "2", "--yes"}, ctl.Env{
			Store: w.st, App: w.app, Getenv: func(k string) string { return settings[k] },
			Pollers: []*pollerdef.Def{orders}, Out: &out, In: strings.NewReader(""), Clock: clk, Actor: "pollerctl/test",
		})
	}()
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	history := state.Tick{At: state.At(clk.Now()), Outcome: "committed", Rows: 2, Ops: map[string]int{"read": 2}}
	step := func(change func(b *state.Backfill) *state.Backfill) {
		t.Helper()
		if err := clk.BlockUntilWaiters(wait, 1); err != nil {
			t.Fatalf("the command does not follow: %s", out.String())
		}
		l := w.acquire("worker-a")
		l.SetBackfill(change(l.Backfill()))
		history.At = state.At(clk.Now())
		l.AddHistory(history)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Second)
	}
	step(func(b *state.Backfill) *state.Backfill {
		b.Rows, b.Left, b.After, b.Estimate = 2, 1, map[string]json.RawMessage{"id": json.RawMessage("3")}, 6
		return b
	})
	history = state.Tick{At: state.At(clk.Now()), Outcome: "committed", Rows: 3, Ops: map[string]int{"read": 3}}
	step(func(*state.Backfill) *state.Backfill { return nil })
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(out.String(), "2 rows sent, 1 left to the live changes") || !strings.Contains(out.String(), "ended: 5 rows sent as reads") ||
			!strings.Contains(out.String(), "[##########..........] backfill") || !strings.Contains(out.String(), "of about 6 rows (50%)") ||
			!strings.Contains(out.String(), "about 2s left") {
			t.Fatalf("exit %d:\n%s", code, out.String())
		}
	case <-wait.Done():
		t.Fatalf("the command did not end with the backfill:\n%s", out.String())
	}
}
