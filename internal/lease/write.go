package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
// an Operator's all go through it. It stamps next with a fresh write id from r, puts it under cond
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
