package source

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Backlog is what waits after a cursor: the committed rows the poller has not delivered, but those
// younger than the settle lag. Rows committed behind a transaction still open count (the reads
// wait for it: an xid or rowversion cursor's bound, a MySQL timestamp's open-transaction bound),
// so that a transaction held open shows as a growing backlog and lag, not as a poller with
// nothing to do.
type Backlog struct {
	Rows   int64         // rows waiting, up to the cap the count was made with
	Oldest *state.Cursor // the first waiting row's cursor (the oldest); nil when none waits
	// SlotRetainedBytes is the WAL a logical cursor's replication slot keeps; nil for the other
	// kinds.
	SlotRetainedBytes *int64
}

// Backlog counts the rows waiting after the cursor (nil: the beginning), up to limit, and reads
// the first of them: two bounded queries.
// A logical cursor also says the WAL its slot retains (as its last peek found it); a MySQL
// timestamp+pk source reads its open-transaction bound too (OpenTrxBound).
func (s *Source) Backlog(ctx context.Context, after *state.Cursor, limit int) (Backlog, error) {
	var out Backlog
	if s.openTrx != nil { // not a bound on what waits, but read so that OpenTrxBound says it now
		if _, err := s.openTrx.arg(ctx, s.db); err != nil {
			return out, fmt.Errorf("source: poller %q, table %s: %w", s.poller, s.def.Table, err)
		}
	}
	n, err := s.Waiting(ctx, after, limit)
	out.SlotRetainedBytes = s.SlotRetained() // the count's peek, or the one before it
	if err != nil || n == 0 {
		return out, err
	}
	b, err := s.fetch(ctx, after, 1, true)
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
	return out, nil
}

// LagSeconds is the product's one definition of lag: the age of the oldest row not yet
// delivered, in seconds (milliseconds rounded), at now; 0 when nothing waits. It is nil when
// rows wait but their cursor has no time (integer, xid and rowversion cursors): then only the
// count says how far behind the poller is.
func (b Backlog) LagSeconds(now time.Time) *float64 {
	if b.Rows == 0 {
		zero := 0.0
		return &zero
	}
	ts, ok := b.Oldest.Time()
	if !ok {
		return nil
	}
	lag := math.Round(now.Sub(ts).Seconds()*1000) / 1000
	return &lag
}

// MayHoldBack says whether the source's last read may have stopped short of committed rows
// because of a transaction still open: always for xid and rowversion cursors (their bound is the
// oldest open transaction), and for a MySQL timestamp+pk cursor whose last read was bounded by
// an open write transaction, or by an older bound than a fresh one. An idle tick measures the backlog only then (Backlog counts
// those rows).
func (s *Source) MayHoldBack() bool {
	switch {
	case s.def.Cursor.Kind == state.KindXID || s.def.Cursor.Kind == state.KindRowversion:
		return true
	case s.openTrx != nil:
		o, ok := s.openTrx.current()
		return ok && o.Active && (o.Reason != "" || o.OldestThread != 0 || o.OldestSeconds != 0)
	}
	return false
}

// SlotRetained is, for a logical cursor, the WAL its replication slot kept at the source's last
// peek (every fetch and count peeks, so a tick always has it, idle or failing); nil for the other
// kinds and before any peek.
func (s *Source) SlotRetained() *int64 {
	if l, ok := s.stream.(*logical); ok {
		return l.retained()
	}
	return nil
}
