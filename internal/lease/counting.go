package lease

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// Counting wraps a Store and counts its reads, its writes and the conditional writes it refused:
// the handler logs them per tick, tests assert them.
type Counting struct {
	Store
	Gets, Puts, Conflicts atomic.Int64
}

// Get counts a read.
func (c *Counting) Get(ctx context.Context, name string) (store.Blob, error) {
	c.Gets.Add(1)
	return c.Store.Get(ctx, name)
}

// Put counts a write, and a refused one as a conflict.
func (c *Counting) Put(ctx context.Context, name string, data []byte, cond store.Condition) (store.Written, error) {
	c.Puts.Add(1)
	w, err := c.Store.Put(ctx, name, data, cond)
	if errors.Is(err, store.ErrConflict) {
		c.Conflicts.Add(1)
	}
	return w, err
}

// Counts returns the requests (reads and writes) and the conflicts so far.
func (c *Counting) Counts() (requests, conflicts int64) {
	return c.Gets.Load() + c.Puts.Load(), c.Conflicts.Load()
}
