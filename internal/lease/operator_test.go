package lease_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
)

const operatorOwner = "pollerctl/test"

// operator is pollerctl's Operator on the fixture's blob; what it backs up is appended to
// *backups.
func (f *fixture) operator(backups *[][]byte) lease.Operator {
	return lease.Operator{Store: f.st, Blob: f.blob, Poller: testPoller, Owner: operatorOwner, Margin: testMargin, Clock: f.svc,
		Backup: func(_ context.Context, old []byte) error {
			*backups = append(*backups, bytes.Clone(old))
			return nil
		}}
}

// read is an operator's read that must succeed.
func read(t testing.TB, op lease.Operator) lease.Current {
	t.Helper()
	cur, err := op.Read(ctx)
	if err != nil {
		t.Fatalf("operator read: %v", err)
	}
	return cur
}

// moveTo is a reset's change: the fingerprint and checkpoint n.
func moveTo(n int) func(d *state.Doc, now time.Time) {
	return func(d *state.Doc, now time.Time) {
		d.SourceFingerprint = testFingerprint
		d.Checkpoint = checkpoint(n)
		d.Checkpoint.UpdatedAt = state.At(now)
	}
}

// takeover plans a takeover to checkpoint n over what the operator reads now.
func takeover(t testing.TB, op lease.Operator, n int) lease.Plan {
	t.Helper()
	p, err := op.Takeover(read(t, op), nil, moveTo(n))
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	return p
}

// write writes a plan that must land.
func write(t testing.TB, op lease.Operator, p lease.Plan) state.Doc {
	t.Helper()
	d, err := op.Write(ctx, p)
	if err != nil {
		t.Fatalf("operator write: %v", err)
	}
	return d
}

// TestOperatorTakeoverBumpsTokenByOne: every operator takeover writes the fencing token exactly
// one above the document's, whatever its change sets, with the operator as owner and the lease
// released: the next holder acquires at once (one above again), and an older holder's commit
// fails. The document written over is backed up first. An edit keeps the lease; a create has none.
func TestOperatorTakeoverBumpsTokenByOne(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		var backups [][]byte
		op := f.operator(&backups)

		// No blob yet: token 1, created; nothing to back up.
		if d := write(t, op, takeover(t, op, 1)); d.Lease.FencingToken != 1 {
			t.Fatalf("takeover of no document: token %d, want 1", d.Lease.FencingToken)
		}
		if len(backups) != 0 {
			t.Fatalf("a create backed up %d document(s)", len(backups))
		}
		// A's own clock is real time: after the service's clock passes its expiry, A still
		// trusts its lease, so only the compare-and-swap can stop its commit.
		a := acquire(t, f.manager(t, "A", clock.System{}))
		if a.Token() != 2 {
			t.Fatalf("acquire after a takeover: token %d, want 2 (the takeover released the lease)", a.Token())
		}
		if err := a.Commit(ctx, checkpoint(5)); err != nil {
			t.Fatal(err)
		}
		f.svc.Advance(testTTL + testMargin + time.Second)

		for want := int64(3); want <= 5; want++ {
			_, before := f.doc(t)
			p, err := op.Takeover(read(t, op), nil, func(d *state.Doc, now time.Time) {
				moveTo(int(want))(d, now)
				d.Lease.FencingToken, d.Lease.OwnerID = 1000, "someone" // not the change's to set
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Doc().Lease.FencingToken; got != want {
				t.Fatalf("the plan shows token %d, want %d", got, want)
			}
			written := write(t, op, p)
			d, _ := f.doc(t)
			if d.Lease.FencingToken != want || written.Lease.FencingToken != want || d.Lease.OwnerID != operatorOwner ||
				!d.Lease.Released() || cursorOf(d) != strconv.FormatInt(want, 10) || d.WriteID != written.WriteID {
				t.Fatalf("after takeover %d: %+v", want, d)
			}
			if last := backups[len(backups)-1]; !bytes.Equal(last, before.Data) {
				t.Fatalf("takeover %d backed up %s, want the document it replaced", want, last)
			}
		}
		if err := a.Commit(ctx, checkpoint(6)); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("the old holder's commit after the takeovers: %v, want ErrLost", err)
		}

		// An edit keeps the lease, whatever its change does to it.
		p, err := op.Edit(read(t, op), func(d *state.Doc, _ time.Time) {
			d.Failure = &state.Failure{Attempts: 1, BatchID: "b", Quarantine: true}
			d.Lease.FencingToken++
		})
		if err != nil {
			t.Fatal(err)
		}
		write(t, op, p)
		if d, _ := f.doc(t); d.Lease.FencingToken != 5 || d.Failure == nil || !d.Failure.Quarantine || cursorOf(d) != "5" {
			t.Fatalf("after an edit: token %d, failure %+v, cursor %s; want token 5, the quarantine asked, cursor 5", d.Lease.FencingToken, d.Failure, cursorOf(d))
		}

		// A takeover replaces the document: the failure goes, the history goes on.
		d, _ := f.doc(t)
		history := len(d.History)
		p, err = op.Takeover(read(t, op), nil, func(d *state.Doc, now time.Time) {
			moveTo(7)(d, now)
			d.AddHistory(state.Tick{At: state.At(now), Outcome: "reset", RowsWaiting: -1})
		})
		if err != nil {
			t.Fatal(err)
		}
		write(t, op, p)
		if d, _ := f.doc(t); d.Lease.FencingToken != 6 || d.Failure != nil || len(d.History) != history+1 || d.History[history].Outcome != "reset" {
			t.Fatalf("after a takeover of an edited document: %+v", d)
		}

		// A create (a clone) has no lease: its first tick acquires token 1.
		clone := op
		clone.Blob = blobName()
		write(t, clone, clone.Create(moveTo(8)))
		m, err := lease.New(f.st, lease.Config{Poller: testPoller, Blob: clone.Blob, Owner: "B", Fingerprint: testFingerprint,
			TTL: testTTL, Margin: testMargin, HeartbeatInterval: testInterval, Clock: f.svc})
		if err != nil {
			t.Fatal(err)
		}
		if b := acquire(t, m); b.Token() != 1 || b.Checkpoint().Cursor == nil || string(b.Checkpoint().Cursor.Value) != "8" {
			t.Fatalf("the first acquire of a created document: token %d, checkpoint %+v", b.Token(), b.Checkpoint())
		}
		if _, err := op.Write(ctx, clone.Create(moveTo(9))); err == nil {
			t.Fatal("a plan for another blob was written")
		}
	})
}

// TestOperatorTakeoverOfNoDocument: with no document to go on from (none, or one that does not
// decode), a restore's token and history go on from the saved document's; the token stops at
// state.MaxFencingToken.
func TestOperatorTakeoverOfNoDocument(t *testing.T) {
	var backups [][]byte
	f := &fixture{st: memstore.New(&serviceClock{}), svc: &serviceClock{}, blob: blobName()}
	op := f.operator(&backups)
	saved := &state.Doc{Version: state.Version, PollerName: testPoller, SourceFingerprint: testFingerprint, Checkpoint: checkpoint(3)}
	saved.Lease.FencingToken = 9
	saved.AddHistory(state.Tick{Outcome: "committed"})

	p, err := op.Takeover(lease.Current{}, saved, moveTo(3))
	if err != nil {
		t.Fatal(err)
	}
	if d := write(t, op, p); d.Lease.FencingToken != 10 || len(d.History) != 1 {
		t.Fatalf("restore over no blob: token %d, history %d; want 10, 1", d.Lease.FencingToken, len(d.History))
	}

	// A blob that does not decode: the saved document's token, not 0 again.
	garbage := []byte(`{"version": 1, "poller_name": "orders", "checkpoint": `)
	_, b := f.doc(t)
	if _, err := f.st.Put(ctx, f.blob, garbage, store.IfMatch(b.ETag)); err != nil {
		t.Fatal(err)
	}
	cur := read(t, op)
	if cur.Blob == nil || cur.Doc != nil || !errors.Is(cur.Problem, state.ErrCorrupt) {
		t.Fatalf("read of a corrupt blob: %+v", cur)
	}
	saved.Lease.FencingToken = 20
	if p, err = op.Takeover(cur, saved, moveTo(4)); err != nil {
		t.Fatal(err)
	}
	if d := write(t, op, p); d.Lease.FencingToken != 21 || !bytes.Equal(backups[len(backups)-1], garbage) {
		t.Fatalf("restore over a corrupt blob: token %d, backups %q", d.Lease.FencingToken, backups)
	}

	saved.Lease.FencingToken = state.MaxFencingToken
	if _, err := op.Takeover(lease.Current{}, saved, moveTo(5)); !errors.Is(err, lease.ErrTokenExhausted) {
		t.Fatalf("takeover at token 2^53-1: %v, want ErrTokenExhausted", err)
	}
}

// TestOperatorRefusesLiveLease: while another owner's lease is live, a takeover, an edit and a
// removal are refused (ErrHeld) before anything is backed up or written; once it has expired on
// the service's clock, the takeover goes through and the old holder can no longer commit.
func TestOperatorRefusesLiveLease(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		var backups [][]byte
		op := f.operator(&backups)
		a := acquire(t, f.manager(t, "A", clock.System{}))
		if err := a.Commit(ctx, checkpoint(1)); err != nil {
			t.Fatal(err)
		}
		_, before := f.doc(t)
		cur := read(t, op)
		if owner, live := op.Holder(cur); owner != "A" || !live {
			t.Fatalf("Holder: %q %v, want A live", owner, live)
		}
		edit, err := op.Edit(cur, func(d *state.Doc, _ time.Time) { d.Checkpoint = checkpoint(9) })
		if err != nil {
			t.Fatal(err)
		}
		for what, try := range map[string]func() error{
			"takeover": func() error { _, err := op.Write(ctx, takeover(t, op, 9)); return err },
			"edit":     func() error { _, err := op.Write(ctx, edit); return err },
			"remove":   func() error { return op.Remove(ctx, cur) },
		} {
			if err := try(); !errors.Is(err, lease.ErrHeld) {
				t.Errorf("%s under A's live lease: %v, want ErrHeld", what, err)
			}
		}
		if _, b := f.doc(t); b.ETag != before.ETag || len(backups) != 0 {
			t.Fatalf("refused writes changed the blob (%v) or backed it up (%d)", b.ETag != before.ETag, len(backups))
		}

		f.svc.Advance(testTTL + testMargin + time.Second)
		if _, live := op.Holder(read(t, op)); live {
			t.Fatal("the lease is still live after its expiry on the service's clock")
		}
		if d := write(t, op, takeover(t, op, 2)); d.Lease.FencingToken != a.Token()+1 {
			t.Fatalf("takeover after expiry: token %d, want %d", d.Lease.FencingToken, a.Token()+1)
		}
		if err := a.Commit(ctx, checkpoint(3)); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("the expired holder's commit after the takeover: %v, want ErrLost", err)
		}
		if d, _ := f.doc(t); cursorOf(d) != "2" {
			t.Fatalf("the takeover's checkpoint was overwritten: cursor %s", cursorOf(d))
		}
	})
}

// TestOperatorStaleETag: a write planned on a read that a tick has since written over is refused
// by the compare-and-swap (store.ErrConflict), and changes nothing; so is a removal.
func TestOperatorStaleETag(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		var backups [][]byte
		op := f.operator(&backups)
		write(t, op, takeover(t, op, 1))
		stale := read(t, op)
		p, err := op.Takeover(stale, nil, moveTo(2))
		if err != nil {
			t.Fatal(err)
		}

		a := acquire(t, f.manager(t, "A", f.svc)) // a tick slips in between the read and the write
		if err := a.CommitAndRelease(ctx, checkpoint(5)); err != nil {
			t.Fatal(err)
		}
		_, before := f.doc(t)
		if _, err := op.Write(ctx, p); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("takeover on a stale ETag: %v, want store.ErrConflict", err)
		}
		if err := op.Remove(ctx, stale); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("remove on a stale ETag: %v, want store.ErrConflict", err)
		}
		if d, b := f.doc(t); b.ETag != before.ETag || cursorOf(d) != "5" || d.Lease.FencingToken != 2 {
			t.Fatalf("a refused write changed the blob: cursor %s, token %d", cursorOf(d), d.Lease.FencingToken)
		}
		if _, err := op.Write(ctx, op.Create(moveTo(3))); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("create over an existing blob: %v, want store.ErrConflict", err)
		}
	})
}

// TestOperatorLostReplies: an operator's writes go through the same put as the holder's: a write
// that lands but whose reply is lost (its retry then gets 409 or 412) is settled as landed by its
// write id; a write that lost to another writer is store.ErrConflict and changes nothing.
func TestOperatorLostReplies(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		var backups [][]byte
		op := f.operator(&backups)

		f.drop(func() {})
		created, err := op.Write(ctx, op.Create(moveTo(1)))
		if err != nil {
			t.Fatalf("create with a lost reply: %v, want it settled as landed", err)
		}
		d, _ := f.doc(t)
		if d.WriteID != created.WriteID || len(d.WriteID) != 32 || cursorOf(d) != "1" {
			t.Fatalf("after a create with a lost reply: write id %q cursor %s; want write id %q, cursor 1", d.WriteID, cursorOf(d), created.WriteID)
		}

		p := takeover(t, op, 2)
		f.drop(func() {})
		replaced, err := op.Write(ctx, p)
		if err != nil {
			t.Fatalf("takeover with a lost reply: %v, want it settled as landed", err)
		}
		d, _ = f.doc(t)
		if d.WriteID != replaced.WriteID || d.WriteID == created.WriteID || cursorOf(d) != "2" || d.Lease.FencingToken != 1 {
			t.Fatalf("after a takeover with a lost reply: write id %q cursor %s token %d; want a fresh write id %q, cursor 2, token 1",
				d.WriteID, cursorOf(d), d.Lease.FencingToken, replaced.WriteID)
		}

		// Another writer between our read and our put, its reply lost too: the re-read finds
		// another write id, so it is a conflict, not a write that landed.
		p = takeover(t, op, 4)
		f.takeOver(t, "intruder")
		_, b := f.doc(t)
		f.drop(func() {})
		if _, err := op.Write(ctx, p); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("takeover after another writer's: %v, want store.ErrConflict", err)
		}
		if d, now := f.doc(t); now.ETag != b.ETag || d.Lease.OwnerID != "intruder" {
			t.Fatalf("a conflicting write changed the blob: owner %s", d.Lease.OwnerID)
		}

		// The holder's lease machinery reads what the operator wrote.
		if _, err := f.manager(t, "A", f.svc).Read(ctx); err != nil {
			t.Fatalf("read after the operator's writes: %v", err)
		}
	})
}

// lostDelete deletes, then loses the reply: the caller sees an error although the blob is gone.
type lostDelete struct{ store.Store }

func (s lostDelete) Delete(ctx context.Context, name string, cond store.Condition) error {
	if err := s.Store.Delete(ctx, name, cond); err != nil {
		return err
	}
	return errors.New("test: connection reset after the delete was sent (reply lost)")
}

// TestOperatorRemove: pollerctl delete's removal backs the document up and is conditional on the
// ETag it read; a delete whose reply was lost is settled by the re-read (the blob gone); a stale
// ETag is store.ErrConflict; a failed or missing backup removes and writes nothing.
func TestOperatorRemove(t *testing.T) {
	svc := &serviceClock{}
	var backups [][]byte
	f := &fixture{st: lostDelete{memstore.New(svc)}, svc: svc, blob: blobName()}
	op := f.operator(&backups)
	write(t, op, takeover(t, op, 1))
	stale := read(t, op)
	write(t, op, takeover(t, op, 2))
	if err := op.Remove(ctx, stale); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("remove on a stale ETag: %v, want store.ErrConflict", err)
	}
	cur := read(t, op)
	failing := op
	failing.Backup = func(context.Context, []byte) error { return errors.New("test: backup refused") }
	if err := failing.Remove(ctx, cur); err == nil {
		t.Fatal("a remove whose backup failed went on")
	}
	unsaved := op
	unsaved.Backup = nil
	if err := unsaved.Remove(ctx, cur); err == nil {
		t.Fatal("a remove without a Backup went on")
	}
	if _, err := unsaved.Write(ctx, takeover(t, unsaved, 3)); err == nil {
		t.Fatal("a takeover without a Backup went on")
	}
	if b, err := f.st.Get(ctx, f.blob); err != nil || b.ETag != cur.Blob.ETag {
		t.Fatalf("a remove or write whose backup failed or was missing changed the blob: %v", err)
	}
	backups = nil
	if err := op.Remove(ctx, cur); err != nil {
		t.Fatalf("remove with a lost reply: %v, want it settled as done", err)
	}
	if _, err := f.st.Get(ctx, f.blob); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after remove: %v, want store.ErrNotFound", err)
	}
	if len(backups) != 1 || !bytes.Equal(backups[0], cur.Blob.Data) {
		t.Fatalf("remove backed up %q, want the document removed", backups)
	}
}
