package ctl_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/liveness"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// TestDeadLetterListShowDiscard: list shows a letter's batch, rows and error; show prints it as
// stored; discard is a dry run until --yes, then backs the letter up and deletes it.
func TestDeadLetterListShowDiscard(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		if code := w.run("deadletter", "list", "orders"); code != 0 || !strings.Contains(w.out.String(), "no dead letters") {
			t.Fatalf("list with none: %d %s", code, w.out.String())
		}
		letter := &deadletter.Letter{Poller: "orders", BatchID: "batch_0123456789abcdef01234567", BatchRows: 7, Delivered: 6,
			Rows: []deadletter.Row{{Key: map[string]json.RawMessage{"id": json.RawMessage("17")}, Cursor: state.Cursor{Kind: state.KindInteger, Value: json.RawMessage("17")},
				Data: json.RawMessage(`{"id":17}`), Error: "webhook answered 500", Attempts: 5}}}
		if _, err := deadletter.Write(ctx, w.st, w.app, letter); err != nil {
			t.Fatal(err)
		}
		// A ticking poller with a dead letter is degraded: status says so and exits 3.
		marker := &liveness.Marker{Store: w.st, App: w.app, Owner: "test/1", Clock: w.clk}
		marker.Record(ctx, liveness.Tick{Poller: "orders", Outcome: "idle", LagSeconds: new(float64)})
		if code := w.run("status", "orders"); code != ctl.ExitUnhealthy || !strings.Contains(w.out.String(), "DEGRADED") ||
			!strings.Contains(w.out.String(), "orders: degraded: 1 dead letter, the oldest written ") || !strings.Contains(w.out.String(), "(list them: pollerctl deadletter list orders)") {
			t.Fatalf("status with a dead letter: exit %d\n%s", code, w.out.String())
		}
		if code := w.run("deadletter", "list", "orders"); code != 0 || !strings.Contains(w.out.String(), letter.BatchID) ||
			!strings.Contains(w.out.String(), `{"id":17}`) || !strings.Contains(w.out.String(), "webhook answered 500") {
			t.Fatalf("list: %d %s", code, w.out.String())
		}
		if code := w.run("deadletter", "show", "orders", letter.BatchID); code != 0 || !strings.Contains(w.out.String(), `"error": "webhook answered 500"`) {
			t.Fatalf("show: %d %s", code, w.out.String())
		}
		if code := w.run("deadletter", "show", "orders", "batch_nope"); code != 2 {
			t.Fatalf("show of a missing letter: exit %d, want 2", code)
		}
		name := blobpath.DeadLetter(w.app, "orders", letter.BatchID)
		if code := w.run("deadletter", "discard", "orders", letter.BatchID); code != 0 || !strings.Contains(w.out.String(), "dry run") {
			t.Fatalf("discard without --yes: %d %s", code, w.out.String())
		}
		if _, err := w.st.Get(ctx, name); err != nil {
			t.Fatalf("the dry run deleted the letter: %v", err)
		}
		if code := w.run("deadletter", "discard", "orders", letter.BatchID, "--yes"); code != 0 {
			t.Fatalf("discard: %d %s", code, w.out.String())
		}
		if _, err := w.st.Get(ctx, name); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("after discard: %v", err)
		}
		// Without the probe: the world's table has no keyset index or stamping trigger, which the
		// probe's set-up check would call degraded too.
		if code := w.run("status", "orders", "--no-probe"); code != 0 || strings.Contains(w.out.String(), "dead letter") {
			t.Fatalf("status once the letter is discarded: exit %d\n%s", code, w.out.String())
		}
		backups, err := w.st.List(ctx, "backups/"+w.app+"/orders/deadletter-"+letter.BatchID)
		if err != nil || len(backups) != 1 {
			t.Fatalf("backups %v, %v", backups, err)
		}
		if b, _ := w.st.Get(ctx, backups[0]); !strings.Contains(string(b.Data), "webhook answered 500") {
			t.Fatalf("the backup is not the letter: %s", b.Data)
		}
	})
}

// TestQuarantineRequest: quarantine refuses when nothing failed, is a dry run until --yes, and
// then flags the failure for the next tick, with a backup.
func TestQuarantineRequest(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		l := w.acquire("worker-a")
		if err := l.FailAndRelease(ctx, nil, "batch_x", `{"id":11}..{"id":20}`, errors.New("boom")); err != nil {
			t.Fatal(err)
		}
		if code := w.run("quarantine", "orders"); code != 0 || !strings.Contains(w.out.String(), "dry run") || w.doc().Failure.Quarantine {
			t.Fatalf("dry run: %d %s", code, w.out.String())
		}
		if code := w.run("quarantine", "orders", "--yes"); code != 0 || !w.doc().Failure.Quarantine || w.doc().Failure.Attempts != 1 {
			t.Fatalf("quarantine: %d %s %+v", code, w.out.String(), w.doc().Failure)
		}
		l = w.acquire("worker-b")
		if err := l.CommitAndRelease(ctx, state.Checkpoint{Cursor: &state.Cursor{Kind: state.KindTimestampPK, Value: json.RawMessage(`"2026-01-01T00:00:00Z"`),
			Tiebreaker: map[string]json.RawMessage{"id": json.RawMessage("20")}}}); err != nil {
			t.Fatal(err)
		}
		if code := w.run("quarantine", "orders"); code != 1 || !strings.Contains(w.out.String(), "no failed batch") {
			t.Fatalf("with nothing failed: %d %s", code, w.out.String())
		}
	})
}
