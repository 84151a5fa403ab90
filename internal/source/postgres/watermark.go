package postgres

// A backfill beside the logical cursor: the DBLog watermark technique, judged by transaction ids.
//
// A chunk of the table's current rows is read in a REPEATABLE READ transaction, whose first
// statement takes the snapshot S and says what it holds (pg_current_snapshot). The same
// transaction then writes a logical decoding message (the watermark) and commits: the message's
// place in the WAL is after the commit record of every transaction S sees, since a transaction
// is visible only once its commit record is written. So:
//   - a change of a transaction S does not see (its xid at or past S's xmax, or in S's list of
//     those in progress) is newer than the chunk: a tick that delivers one drops that key's read
//     (Watermark.Newer);
//   - once the stream is delivered past the watermark, every change S sees has been delivered,
//     and the reads left are each key's state at that point (Watermark.Reached): they go then.
//
// The gap: PostgreSQL writes a commit record before it makes the transaction visible, so a
// transaction can be decoded (its record flushed) and delivered while a snapshot taken after
// still sees it in progress (most often under synchronous replication, while it waits for the
// standby). Such a transaction is in S's list and already committed in the commit log: the first
// statement asks, and the chunk is read again (a few times at once, then after the next live
// batch: source.ErrChunkAgain). A transaction committed in that list but not yet delivered only
// costs a read again. What the check cannot see: a transaction whose commit record is flushed
// and decoded but whose commit-log entry is not yet written (a few instructions later in
// PostgreSQL's commit, unless its process is descheduled right there) at the moment the
// snapshot is taken, and delivered before it.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// watermarkSnapshot is a chunk transaction's first statement: its snapshot, and whether a
// transaction it sees in progress has already committed (the gap above).
const watermarkSnapshot = `SELECT pg_current_snapshot()::text,
  EXISTS (SELECT 1 FROM pg_snapshot_xip(pg_current_snapshot()) x WHERE pg_xact_status(x) = 'committed')`

// watermarkMessage writes the watermark: a transactional message the decoder takes as a
// keep-up mark (a place the cursor moves to), flushed at commit so that the next peek reads it.
const watermarkMessage = `SELECT pg_logical_emit_message(true, '` + keepUpPrefix + `', 'backfill')::text`

// Watermark runs read, a backfill chunk's query, in a snapshot it then judges the stream's
// changes against (see the top of this file).
func (l *logical) Watermark(ctx context.Context, read func(q driver.Querier) error) (driver.Watermark, error) {
	if err := l.Watermarks(); err != nil {
		return nil, err
	}
	// The gap is a moment's (a transaction between its commit record and its visibility): a
	// snapshot taken again right away is most often clear of it.
	for try := 1; ; try++ {
		w, err := l.watermarkOnce(ctx, read)
		if !errors.Is(err, source.ErrChunkAgain) || try == 3 {
			return w, err
		}
	}
}

// watermarkOnce is one try of Watermark.
func (l *logical) watermarkOnce(ctx context.Context, read func(q driver.Querier) error) (driver.Watermark, error) {
	tx, err := l.lay.DB().BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		return nil, l.lay.Errorf("backfill chunk: beginning its transaction: %v", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	var snap string
	var gap bool
	if err := tx.QueryRowContext(ctx, watermarkSnapshot).Scan(&snap, &gap); err != nil {
		return nil, l.lay.Errorf("backfill chunk: reading its snapshot: %v", err)
	}
	if gap {
		return nil, fmt.Errorf("source: poller %q, table %s: %w", l.poller, l.def.Table, source.ErrChunkAgain)
	}
	w, err := parseSnapshot(snap)
	if err != nil {
		return nil, l.lay.Errorf("backfill chunk: %v", err)
	}
	if err := read(tx); err != nil {
		return nil, err
	}
	var mark string
	if _, err := tx.ExecContext(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
		return nil, l.lay.Errorf("backfill chunk: %v", err)
	}
	if err := tx.QueryRowContext(ctx, watermarkMessage).Scan(&mark); err != nil {
		return nil, l.lay.Errorf("backfill chunk: writing its watermark into the stream (pg_logical_emit_message): %v", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, l.lay.Errorf("backfill chunk: committing its watermark: %v", err)
	}
	if w.mark, err = pglogrepl.ParseLSN(mark); err != nil {
		return nil, l.lay.Errorf("backfill chunk: the watermark's LSN %q: %v", mark, err)
	}
	return w, nil
}

// Watermarks says whether the server sends the messages a watermark is (PostgreSQL 14 or later).
func (l *logical) Watermarks() error {
	if !l.messages {
		return fmt.Errorf("source: poller %q, table %s: %w: a backfill of a logical cursor marks its place in the stream with a logical decoding message, which pgoutput sends from PostgreSQL 14", l.poller, l.def.Table, driver.ErrNoWatermark)
	}
	return nil
}

// watermark is a chunk's snapshot (its xmin, xmax and the transactions in progress, 64-bit ids)
// and the watermark's place in the WAL.
type watermark struct {
	xmin, xmax uint64
	xip        map[uint64]bool
	mark       pglogrepl.LSN
}

// parseSnapshot reads pg_snapshot's text: "xmin:xmax:xip,xip,...".
func parseSnapshot(s string) (*watermark, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("the snapshot %q is not xmin:xmax:xip", s)
	}
	w := &watermark{xip: map[uint64]bool{}}
	var err error
	if w.xmin, err = strconv.ParseUint(parts[0], 10, 64); err == nil {
		w.xmax, err = strconv.ParseUint(parts[1], 10, 64)
	}
	for _, x := range strings.Split(parts[2], ",") {
		if err != nil || x == "" {
			break
		}
		var id uint64
		id, err = strconv.ParseUint(x, 10, 64)
		w.xip[id] = true
	}
	if err != nil {
		return nil, fmt.Errorf("the snapshot %q: %v", s, err)
	}
	return w, nil
}

// Newer says r's transaction is not in the snapshot: its id at or past xmax, or in progress
// then. A change whose transaction is unknown counts as newer (its read is dropped: the stream
// delivered it).
func (w *watermark) Newer(r row.Row) bool {
	x := r.Tx()
	if x == 0 {
		return true
	}
	full := widenXid(uint32(x), w.xmax)
	return full >= w.xmax || w.xip[full]
}

// Reached says the cursor c is at or past the watermark: every transaction whose commit record
// starts before it is done, and so is every one the snapshot sees.
func (w *watermark) Reached(c *state.Cursor) bool {
	if c == nil {
		return false
	}
	p, err := pgcdc.CursorPosition(c)
	return err == nil && p.LSN >= w.mark
}

// widenXid gives a 32-bit transaction id (pgoutput's) its epoch, the one nearest ref (a 64-bit
// id of the same moment): ids in use are within 2^31 of each other.
func widenXid(x uint32, ref uint64) uint64 {
	full := ref&^0xffffffff | uint64(x)
	switch {
	case full > ref+1<<31 && full >= 1<<32:
		full -= 1 << 32
	case full+1<<31 < ref:
		full += 1 << 32
	}
	return full
}
