package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// ErrHeld: an operator's write refused because the document it read shows a live lease; nothing
// was written. The error wrapping it names the holder.
var ErrHeld = errors.New("lease held")

// DocStore is what an Operator needs: the protocol's reads and conditional writes, and deletes.
type DocStore interface {
	Store
	Delete(ctx context.Context, name string, cond store.Condition) error
}

// Operator changes one poller's state document from outside a held lease: pollerctl's reset,
// clone, quarantine and delete. It reads the document (Read), plans a change (Takeover, Edit or
// Create: a Plan, which can be shown before anything is written) and writes it (Write, or Remove
// to delete the document). Every write keeps the protocol's rules:
//
//   - it is refused while the read shows a live lease (ErrHeld), which it could race;
//   - the document read is saved by Backup before anything is written over it or removed;
//   - it is a compare-and-swap on the ETag of the read (a create: If-None-Match: *), through the
//     same put as the acquire and the holder's writes, so a lost reply is settled by write_id in
//     the same way; a write that lost to another writer is an error wrapping store.ErrConflict,
//     and nothing was written then;
//   - the lease section is the Operator's alone: a takeover bumps the fencing token by exactly
//     one, an edit keeps the lease as it is, a create starts without one.
type Operator struct {
	Store  DocStore
	Blob   string // state/{app}/{poller}.json
	Poller string
	// Owner is who operates (e.g. pollerctl/{user}@{host}): the owner a takeover records.
	Owner  string
	Margin time.Duration // the expiry margin of Holder; default DefaultMargin
	Clock  clock.Clock   // default clock.System
	Rand   io.Reader     // source of write ids; default crypto/rand
	// Backup saves the bytes of the document that a write replaces or Remove deletes, before it
	// does; its error stops the write. Required for those: nothing is written over unsaved.
	Backup func(ctx context.Context, old []byte) error
}

// Current is what an operator's read of the state blob saw.
type Current struct {
	Blob *store.Blob // nil: there is no blob
	Doc  *state.Doc  // nil: no blob, or a blob that does not decode (Problem says why)
	// Problem is why the blob does not decode (a *state.Error), when it does not.
	Problem error
	// Tombstone is what a deleted document of this poller left (its last fencing token); zero
	// when none was deleted. A takeover starts above it, and Remove raises it.
	Tombstone     state.Tombstone
	tombstoneBlob *store.Blob
}

// Read reads the state blob. A missing blob, or one that does not decode, is not an error: the
// caller decides what to do about it (Current.Problem).
func (o Operator) Read(ctx context.Context) (Current, error) {
	t, tb, err := lastToken(ctx, o.Store, o.Blob)
	if err != nil {
		return Current{}, err
	}
	b, err := o.Store.Get(ctx, o.Blob)
	if errors.Is(err, store.ErrNotFound) {
		return Current{Tombstone: t, tombstoneBlob: tb}, nil
	}
	if err != nil {
		return Current{}, fmt.Errorf("lease: read %s: %w", o.Blob, err)
	}
	d, derr := state.Decode(o.Blob, o.Poller, b.Data)
	return Current{Blob: &b, Doc: d, Problem: derr, Tombstone: t, tombstoneBlob: tb}, nil
}

// Holder returns the owner of a lease that cur shows live on the storage service's clock (Live,
// with the Operator's margin).
func (o Operator) Holder(cur Current) (owner string, live bool) {
	if cur.Doc == nil {
		return "", false
	}
	return Live(cur.Doc.Lease, cur.Blob.LastModified, cur.Blob.Date, o.margin())
}

func (o Operator) margin() time.Duration {
	if o.Margin == 0 {
		return DefaultMargin
	}
	return o.Margin
}

func (o Operator) now() time.Time {
	if o.Clock == nil {
		return clock.System{}.Now()
	}
	return o.Clock.Now()
}

// Plan is a document an Operator is to write over the version of the blob that a read saw. Doc
// shows it; only Write writes it, as it is.
type Plan struct {
	blob string
	cur  Current
	doc  state.Doc
}

// Doc returns the document the plan writes, to show it.
func (p Plan) Doc() state.Doc { return p.doc }

// Takeover plans an operator's replacement of the document (pollerctl reset): a new document of
// this version and poller whose history goes on from the document it replaces, filled in by
// change (the fingerprint, the checkpoint, a history entry), under a lease that Owner takes over
// and releases at once. Its fencing token is one above the replaced document's, so a holder of an
// older lease can no longer commit, and the next tick takes the lease at once.
//
// When cur has no document (no blob, or one that does not decode), the token and the history go
// on from saved's, the document the new one is restored from; with neither, the token is 1. The
// token is above any a deleted document of the poller had (cur.Tombstone) in every case, and the
// handler version the document records goes on. A token at state.MaxFencingToken is
// ErrTokenExhausted.
func (o Operator) Takeover(cur Current, saved *state.Doc, change func(d *state.Doc, now time.Time)) (Plan, error) {
	base := cur.Doc
	if base == nil {
		base = saved
	}
	var token int64
	next := state.Doc{Version: state.Version, PollerName: o.Poller}
	if base != nil {
		token = base.Lease.FencingToken
		next.History = append([]state.Tick(nil), base.History...)
		next.HandlerVersion = base.HandlerVersion
	}
	token, err := nextToken(o.Blob, max(token, cur.Tombstone.FencingToken))
	if err != nil {
		return Plan{}, err
	}
	now := o.now()
	change(&next, now)
	next.Version, next.PollerName = state.Version, o.Poller
	next.Lease = state.Lease{OwnerID: o.Owner, FencingToken: token, AcquiredAt: state.At(now), HeartbeatAt: state.At(now),
		ExpiresAt: state.At(now), TTLSeconds: int64(DefaultTTL / time.Second), ReleasedAt: state.At(now)}
	return Plan{blob: o.Blob, cur: cur, doc: next}, nil
}

// Edit plans a change to the document cur read that leaves its lease as it is (pollerctl
// quarantine). cur must have a document.
func (o Operator) Edit(cur Current, change func(d *state.Doc, now time.Time)) (Plan, error) {
	if cur.Doc == nil {
		return Plan{}, fmt.Errorf("lease: %s: no document to edit", o.Blob)
	}
	next := *cur.Doc
	next.History = append([]state.Tick(nil), cur.Doc.History...)
	change(&next, o.now())
	next.Version, next.PollerName, next.Lease = cur.Doc.Version, cur.Doc.PollerName, cur.Doc.Lease
	return Plan{blob: o.Blob, cur: cur, doc: next}, nil
}

// Create plans a new document of this version and poller, filled in by change, without a lease
// (pollerctl clone): the poller's first tick acquires it, with fencing token 1. Write refuses it
// when the blob exists.
func (o Operator) Create(change func(d *state.Doc, now time.Time)) Plan {
	next := state.Doc{Version: state.Version, PollerName: o.Poller}
	change(&next, o.now())
	next.Version, next.PollerName, next.Lease = state.Version, o.Poller, state.Lease{}
	return Plan{blob: o.Blob, doc: next}
}

// Write writes p: refused while the read it was planned on shows a live lease (ErrHeld); a
// document that does not encode changes nothing; the document read is backed up (Backup); then a
// compare-and-swap on the read's ETag (a create: If-None-Match: *), a lost reply settled by
// write_id. A write that lost to another writer (or a create of a blob that exists) is an error
// wrapping store.ErrConflict. It returns the document written.
func (o Operator) Write(ctx context.Context, p Plan) (state.Doc, error) {
	next := p.doc
	if p.blob != o.Blob {
		return state.Doc{}, fmt.Errorf("lease: a plan for %s cannot be written to %s", p.blob, o.Blob)
	}
	if err := o.free(p.cur); err != nil {
		return state.Doc{}, err
	}
	if _, err := state.Encode(&next); err != nil {
		return state.Doc{}, err
	}
	if err := o.backup(ctx, p.cur); err != nil {
		return state.Doc{}, err
	}
	etag := ""
	if p.cur.Blob != nil {
		etag = p.cur.Blob.ETag
	}
	if err := o.write(ctx, &next, etag); err != nil {
		return state.Doc{}, err
	}
	return next, nil
}

// Remove deletes the blob cur read, if it is still that version (If-Match): refused while cur
// shows a live lease (ErrHeld); the document is backed up first (Backup), and its fencing token
// kept in the poller's tombstone (state.TombstoneBlob), so that a document created again under
// the name starts above it: a sink comparing tokens never sees them go backwards. A delete carries no
// write id, so a failed one is settled by what a re-read finds: no blob is what the delete wanted
// (done); the same ETag means it did not happen; another ETag is store.ErrConflict.
func (o Operator) Remove(ctx context.Context, cur Current) error {
	if cur.Blob == nil {
		return fmt.Errorf("lease: %s: no blob to remove", o.Blob)
	}
	if err := o.free(cur); err != nil {
		return err
	}
	if err := o.backup(ctx, cur); err != nil {
		return err
	}
	if err := o.bury(ctx, cur); err != nil {
		return err
	}
	derr := o.Store.Delete(ctx, o.Blob, store.IfMatch(cur.Blob.ETag))
	if derr == nil {
		return nil
	}
	b, gerr := o.Store.Get(ctx, o.Blob)
	switch {
	case errors.Is(gerr, store.ErrNotFound):
		return nil
	case gerr != nil:
		return fmt.Errorf("lease: delete of %s unsettled (delete: %v; re-read: %w)", o.Blob, derr, gerr)
	case b.ETag == cur.Blob.ETag:
		return derr
	default:
		return fmt.Errorf("lease: %s changed since it was read (delete: %v): %w", o.Blob, derr, store.ErrConflict)
	}
}

// bury raises the poller's tombstone to the fencing token of the document cur read, before it is
// removed. A document that does not decode has no token to keep: the tombstone stays as it is.
func (o Operator) bury(ctx context.Context, cur Current) error {
	if cur.Doc == nil || cur.Doc.Lease.FencingToken <= cur.Tombstone.FencingToken {
		return nil
	}
	name := blobpath.TombstoneOf(o.Blob)
	t := state.Tombstone{PollerName: o.Poller, FencingToken: cur.Doc.Lease.FencingToken, DeletedAt: state.At(o.now())}
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return fmt.Errorf("lease: encode %s: %w", name, err)
	}
	cond := store.IfNotExists()
	if cur.tombstoneBlob != nil {
		cond = store.IfMatch(cur.tombstoneBlob.ETag)
	}
	if _, err := o.Store.Put(ctx, name, append(data, '\n'), cond); err != nil {
		return fmt.Errorf("lease: keeping the last fencing token in %s: %w (nothing deleted)", name, err)
	}
	return nil
}

// free refuses a write over a document whose lease cur shows live.
func (o Operator) free(cur Current) error {
	if owner, live := o.Holder(cur); live {
		return fmt.Errorf("lease: %s holds a live lease on %s: %w", owner, o.Blob, ErrHeld)
	}
	return nil
}

// backup saves the document cur read, if any, before it is written over or removed.
func (o Operator) backup(ctx context.Context, cur Current) error {
	switch {
	case cur.Blob == nil:
		return nil
	case o.Backup == nil:
		return fmt.Errorf("lease: %s: an operator's write over a document needs a Backup", o.Blob)
	}
	return o.Backup(ctx, cur.Blob.Data)
}

// write creates (etag "") or replaces the blob, and settles a failed put by the re-read.
func (o Operator) write(ctx context.Context, doc *state.Doc, etag string) error {
	cond := store.IfNotExists()
	if etag != "" {
		cond = store.IfMatch(etag)
	}
	w, err := put(ctx, o.Store, o.Blob, o.Poller, o.Rand, 0, doc, cond)
	switch {
	case err != nil:
		return err
	case w.landed:
		return nil
	case errors.Is(w.gerr, store.ErrNotFound):
		if etag == "" {
			return w.perr // a create that did not land: there is still no blob
		}
		return fmt.Errorf("lease: %s was deleted since it was read (put: %v): %w", o.Blob, w.perr, store.ErrConflict)
	case w.gerr != nil:
		return fmt.Errorf("lease: write of %s unsettled (put: %v; re-read: %w)", o.Blob, w.perr, w.gerr)
	case etag != "" && w.seen.ETag == etag:
		return w.perr // it did not land and nothing changed
	case etag == "":
		return fmt.Errorf("lease: %s exists (put: %v): %w", o.Blob, w.perr, store.ErrConflict)
	default:
		return fmt.Errorf("lease: %s changed since it was read (put: %v): %w", o.Blob, w.perr, store.ErrConflict)
	}
}
