package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// newWriteID is the one generator of write ids: 16 random bytes from r (nil: crypto/rand), hex.
func newWriteID(r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	b := make([]byte, 16)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("lease: write id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// written is what one conditional write of a state document came to.
type written struct {
	landed bool   // our write is there
	etag   string // its ETag, when it landed
	perr   error  // the put's error; nil when its reply came back

	// When the put failed, the re-read: its error (store.ErrNotFound: no blob), else the blob
	// and its decoding.
	gerr error
	seen store.Blob
	doc  *state.Doc
	derr error
}

// put is the one conditional write of a state document: the acquire, the holder's writes and
// Writer's all go through it. It stamps next with a fresh write id from r, puts it under cond
// (the put alone bounded by timeout when positive) and, when the put fails, settles it by
// re-reading the blob: our write id there means it landed (a lost reply's retry gets 412 or 409;
// a 5xx or a time-out is just as ambiguous). What else the re-read saw is the caller's to judge.
// The error is for a write that could not be sent at all (no write id, no encoding).
func put(ctx context.Context, st Store, blob, poller string, r io.Reader, timeout time.Duration, next *state.Doc, cond store.Condition) (written, error) {
	id, err := newWriteID(r)
	if err != nil {
		return written{}, err
	}
	next.WriteID = id
	data, err := state.Encode(next)
	if err != nil {
		return written{}, err
	}
	pctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		pctx, cancel = context.WithTimeout(ctx, timeout)
	}
	w, perr := st.Put(pctx, blob, data, cond)
	cancel()
	if perr == nil {
		return written{landed: true, etag: w.ETag}, nil
	}
	o := written{perr: perr}
	if o.seen, o.gerr = st.Get(ctx, blob); o.gerr != nil {
		return o, nil
	}
	o.doc, o.derr = state.Decode(blob, poller, o.seen.Data)
	if o.derr == nil && o.doc.WriteID == id {
		o.landed, o.etag = true, o.seen.ETag
	}
	return o, nil
}

// DocStore is what Writer needs: the protocol's reads and conditional writes, and deletes.
type DocStore interface {
	Store
	Delete(ctx context.Context, name string, cond store.Condition) error
}

// Writer changes a state document from outside a held lease: pollerctl's reset, clone and
// quarantine write a whole document, its delete removes one. The writes are compare-and-swaps
// through the same put as the acquire and the holder's writes, with write ids from the same
// generator, so a write whose reply was lost is settled by re-reading in the same way. A write
// that did not land because the blob changed (or, for a create, exists) is an error wrapping
// store.ErrConflict; nothing was written then.
type Writer struct {
	Store DocStore
	Rand  io.Reader // source of write ids; default crypto/rand
}

// Create writes doc as a new state blob (If-None-Match: *) and returns its ETag. It sets
// doc.WriteID.
func (w Writer) Create(ctx context.Context, blob string, doc *state.Doc) (string, error) {
	return w.write(ctx, blob, doc, "")
}

// Replace writes doc over the version of the state blob that a read saw (If-Match: etag) and
// returns the new ETag. It sets doc.WriteID.
func (w Writer) Replace(ctx context.Context, blob, etag string, doc *state.Doc) (string, error) {
	if etag == "" {
		return "", fmt.Errorf("lease: replacing %s needs the ETag it was read with", blob)
	}
	return w.write(ctx, blob, doc, etag)
}

// write creates (etag "") or replaces the blob.
func (w Writer) write(ctx context.Context, blob string, doc *state.Doc, etag string) (string, error) {
	cond := store.IfNotExists()
	if etag != "" {
		cond = store.IfMatch(etag)
	}
	o, err := put(ctx, w.Store, blob, doc.PollerName, w.Rand, 0, doc, cond)
	switch {
	case err != nil:
		return "", err
	case o.landed:
		return o.etag, nil
	case errors.Is(o.gerr, store.ErrNotFound):
		if etag == "" {
			return "", o.perr // a create that did not land: there is still no blob
		}
		return "", fmt.Errorf("lease: %s was deleted since it was read (put: %v): %w", blob, o.perr, store.ErrConflict)
	case o.gerr != nil:
		return "", fmt.Errorf("lease: write of %s unsettled (put: %v; re-read: %w)", blob, o.perr, o.gerr)
	case etag != "" && o.seen.ETag == etag:
		return "", o.perr // it did not land and nothing changed
	case etag == "":
		return "", fmt.Errorf("lease: %s exists (put: %v): %w", blob, o.perr, store.ErrConflict)
	default:
		return "", fmt.Errorf("lease: %s changed since it was read (put: %v): %w", blob, o.perr, store.ErrConflict)
	}
}

// Remove deletes the state blob if it is still the version that a read saw (If-Match: etag). A
// delete carries no write id, so a failed one is settled by what a re-read finds: no blob is
// what the delete wanted (done); the same ETag means it did not happen; another ETag is
// store.ErrConflict.
func (w Writer) Remove(ctx context.Context, blob, etag string) error {
	derr := w.Store.Delete(ctx, blob, store.IfMatch(etag))
	if derr == nil {
		return nil
	}
	b, gerr := w.Store.Get(ctx, blob)
	switch {
	case errors.Is(gerr, store.ErrNotFound):
		return nil
	case gerr != nil:
		return fmt.Errorf("lease: delete of %s unsettled (delete: %v; re-read: %w)", blob, derr, gerr)
	case b.ETag == etag:
		return derr
	default:
		return fmt.Errorf("lease: %s changed since it was read (delete: %v): %w", blob, derr, store.ErrConflict)
	}
}
