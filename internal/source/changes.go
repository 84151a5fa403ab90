package source

import (
	"context"
	"errors"
	"fmt"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// A changeStream reads a database's own record of changes instead of the table in keyset order
// (the cursor kinds logical and changetracking): its rows carry their op, deletes included, in
// commit order. One file per kind; Open picks it from streams by the cursor kind.
type changeStream interface {
	// check says whether the database is set up for the stream (Open runs it after the table's
	// columns are known); its errors name the fix, and nothing is created or written.
	check(ctx context.Context) error
	// fetch reads up to limit changes after the cursor (nil: from the stream's start).
	fetch(ctx context.Context, after *state.Cursor, limit int) (*Batch, error)
	// waiting counts the changes after the cursor, up to limit.
	waiting(ctx context.Context, after *state.Cursor, limit int) (int64, error)
	// checkCursor says whether a stored cursor is a position of this stream.
	checkCursor(c *state.Cursor) error
	// cursorFromText reads a position an operator typed.
	cursorFromText(value string) (*state.Cursor, error)
	// committed tells the stream that the checkpoint c is durable (the logical cursor advances
	// its slot to it); it may do nothing.
	committed(ctx context.Context, c *state.Cursor) error
}

// streams builds a source's change stream by cursor kind.
var streams = map[string]func(s *Source) changeStream{}

// ErrBusy: another process is reading the change stream right now (PostgreSQL: the replication
// slot is active for another connection). Nothing was read; the next tick tries again.
var ErrBusy = errors.New("the change stream is being read by another process")

// Committed tells the source that the checkpoint c is durable in the state blob. A logical
// cursor advances its replication slot to c (never past it), so that PostgreSQL can recycle the
// WAL before it; the other kinds do nothing. The tick calls it after each successful commit; a
// holder whose commit was refused never calls it.
func (s *Source) Committed(ctx context.Context, c *state.Cursor) error {
	if s.stream == nil || c == nil {
		return nil
	}
	return s.stream.committed(ctx, c)
}

// streamErr names the poller and table in a change stream's error.
func (s *Source) streamErr(format string, args ...any) error {
	return fmt.Errorf("source: poller %q, table %s: %s", s.poller, s.def.Table, fmt.Sprintf(format, args...))
}
