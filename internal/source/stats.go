package source

import (
	"context"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Stats reports the source's last read (see Stats), without reading; its backlog is not
// measured.
func (s *Source) Stats() driver.Stats { return s.reader.stats() }

// Backlog measures what waits after the cursor (nil: the beginning): it counts the rows up to
// limit and reads the first of them, two bounded queries, and reports them with the rest of the
// source's Stats as the count found them. When the last fetch after the same cursor found the
// key repeated (a key the catalog cannot confirm, see fetchChecked), it fails with that error.
func (s *Source) Backlog(ctx context.Context, after *state.Cursor, limit int) (driver.Stats, error) {
	// A key the last fetch after this cursor found repeated: what waits cannot be read (a
	// view's key, see fetchChecked).
	if err := s.repeatAt(after); err != nil {
		return s.reader.stats(), err
	}
	// Not a bound on what waits, but read so that the stats say it now (a MySQL timestamp's
	// open-transaction bound).
	if err := s.reader.refresh(ctx); err != nil {
		return driver.Stats{}, err
	}
	n, err := s.Waiting(ctx, after, limit)
	out := s.reader.stats() // the count's, or the read's before it
	if err != nil || n == 0 {
		return out, err
	}
	b, err := s.reader.oldest(ctx, after)
	if err != nil {
		return out, err
	}
	if len(b.Rows) == 0 { // delivered between the two queries
		return out, nil
	}
	c, err := b.Rows[0].Cursor()
	if err != nil {
		return out, err
	}
	out.Rows, out.Oldest = n, &c
	if tx, ok := b.Rows[0].Transaction(); ok {
		out.OldestCommit = tx.CommitTime
	}
	return out, nil
}

// Inspect reads what the source's change stream reads from besides the table, for the status
// (ChangeStream.Inspect); nothing for the other sources. poller names the poller in the fixes an error
// gives.
func (s *Source) Inspect(ctx context.Context, poller string) ([]driver.Detail, error) {
	if r, ok := s.reader.(streamReader); ok {
		return r.Inspect(ctx, poller)
	}
	return nil, nil
}
