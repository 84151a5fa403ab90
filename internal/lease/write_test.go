package lease_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
)

func operatorDoc(n int) *state.Doc {
	d := &state.Doc{Version: state.Version, PollerName: testPoller, SourceFingerprint: testFingerprint}
	d.Checkpoint = checkpoint(n)
	return d
}

// TestWriterLostReplies: Writer's writes (pollerctl's reset, clone, quarantine) go through the
// same put as the holder's: a write that lands but whose reply is lost (its retry then gets 409
// or 412) is settled as landed by its write id; a write that lost to another writer is
// store.ErrConflict and changes nothing.
func TestWriterLostReplies(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		w := lease.Writer{Store: f.st}

		f.drop(func() {})
		created := operatorDoc(1)
		etag, err := w.Create(ctx, f.blob, created)
		if err != nil {
			t.Fatalf("create with a lost reply: %v, want it settled as landed", err)
		}
		d, b := f.doc(t)
		if b.ETag != etag || d.WriteID != created.WriteID || len(d.WriteID) != 32 || cursorOf(d) != "1" {
			t.Fatalf("after a create with a lost reply: etag %s write id %q cursor %s; want etag %s, write id %q, cursor 1", b.ETag, d.WriteID, cursorOf(d), etag, created.WriteID)
		}

		if _, err := w.Create(ctx, f.blob, operatorDoc(9)); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("create over an existing blob: %v, want store.ErrConflict", err)
		}

		f.drop(func() {})
		replaced := operatorDoc(2)
		etag2, err := w.Replace(ctx, f.blob, etag, replaced)
		if err != nil {
			t.Fatalf("replace with a lost reply: %v, want it settled as landed", err)
		}
		d, b = f.doc(t)
		if b.ETag != etag2 || d.WriteID != replaced.WriteID || d.WriteID == created.WriteID || cursorOf(d) != "2" {
			t.Fatalf("after a replace with a lost reply: etag %s write id %q cursor %s; want etag %s, a fresh write id %q, cursor 2", b.ETag, d.WriteID, cursorOf(d), etag2, replaced.WriteID)
		}

		// A stale ETag: a tick wrote in between. A conflict, and nothing is written.
		if _, err := w.Replace(ctx, f.blob, etag, operatorDoc(3)); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("replace on a stale ETag: %v, want store.ErrConflict", err)
		}
		// Another writer between our read and our put, its reply lost too: the re-read finds
		// another write id, so it is a conflict, not a write that landed.
		f.takeOver(t, "intruder")
		_, b = f.doc(t)
		f.drop(func() {})
		if _, err := w.Replace(ctx, f.blob, etag2, operatorDoc(4)); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("replace after a takeover: %v, want store.ErrConflict", err)
		}
		if d, now := f.doc(t); now.ETag != b.ETag || d.Lease.OwnerID != "intruder" {
			t.Fatalf("a conflicting replace changed the blob: owner %s", d.Lease.OwnerID)
		}

		// The holder's lease machinery reads what Writer wrote.
		m := f.manager(t, "A", f.svc)
		if _, err := m.Read(ctx); err != nil {
			t.Fatalf("read after Writer's writes: %v", err)
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

// TestWriterRemove: pollerctl delete's removal is conditional on the ETag it read; a delete whose
// reply was lost is settled by the re-read (the blob gone); a stale ETag is store.ErrConflict.
func TestWriterRemove(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(&serviceClock{})
	const blob = "state/test/remove.json"
	w := lease.Writer{Store: lostDelete{st}}
	etag, err := w.Create(ctx, blob, operatorDoc(1))
	if err != nil {
		t.Fatal(err)
	}
	etag2, err := w.Replace(ctx, blob, etag, operatorDoc(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Remove(ctx, blob, etag); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("remove on a stale ETag: %v, want store.ErrConflict", err)
	}
	if _, err := st.Get(ctx, blob); err != nil {
		t.Fatalf("a conflicting remove deleted the blob: %v", err)
	}
	if err := w.Remove(ctx, blob, etag2); err != nil {
		t.Fatalf("remove with a lost reply: %v, want it settled as done", err)
	}
	if _, err := st.Get(ctx, blob); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after remove: %v, want store.ErrNotFound", err)
	}
}
