package tick

import (
	"context"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/faultpoint"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Cleaner is what a tick needs of a source that deletes its delivered rows (a poller's cleanup:
// poller.WithCleanup, poller.json's "cleanup"); *source.Source has it.
type Cleaner interface {
	// Cleans says whether the source deletes its delivered rows.
	Cleans() bool
	// Cleanup deletes up to limit of the rows behind the committed checkpoint upTo, in one
	// statement, and says how many it deleted.
	Cleanup(ctx context.Context, upTo *state.Cursor, limit int) (int64, error)
	// AwaitingCleanup counts up to limit of the rows Cleanup would delete behind upTo.
	AwaitingCleanup(ctx context.Context, upTo *state.Cursor, limit int) (int64, error)
}

// The bounds of a tick's cleanup (Runner.CleanupRows, CleanupStatements): a tick deletes at
// most DefaultCleanupRows rows a statement and DefaultCleanupStatements statements, and leaves
// the rest to the next tick.
const (
	DefaultCleanupRows       = 1000
	DefaultCleanupStatements = 10
)

// cleanupLookEvery is how long a tick trusts this process's finding that nothing was left to
// delete behind a checkpoint when the cleanup keeps a window (older_than): rows behind it age
// into the cleanup as time passes, and are deleted within this of it. Without a window nothing
// can join them behind a checkpoint that stays where it is.
const cleanupLookEvery = time.Minute

// cleanupTimeout bounds a tick's cleanup, all its statements.
const cleanupTimeout = 30 * time.Second

// cleaned is the runner's memory of the last cleanup that left nothing behind a checkpoint.
type cleaned struct {
	at     string    // the checkpoint, as state.Cursor.JSON renders it ("" none)
	looked time.Time // when
}

// cleanup deletes the delivered rows behind the checkpoint that is committed once the tick has
// ended: its own last commit, or for an idle tick the one it read. It runs after the release:
// an idle tick deletes without a lease anyway (taking one is a write, and an idle tick writes
// nothing), and whoever deletes rows behind a committed checkpoint deletes delivered rows; a
// process that lost its lease to a newer owner knows an older checkpoint, so it deletes less.
// An idle tick first looks whether anything is left (AwaitingCleanup, one row): it runs no
// DELETE when nothing is, nor that look again for a checkpoint this process already found clean.
// A failed delete does not fail the tick, whose delivery is committed: it is logged, in the
// summary (the liveness mark, and so the status, shows it) and tried again by the next tick.
func (t *tickRun) cleanup() {
	r := t.r
	c, ok := r.Source.(Cleaner)
	if !ok || !c.Cleans() {
		return
	}
	var upTo *state.Cursor
	switch {
	case t.l != nil:
		upTo = t.l.Checkpoint().Cursor
	case t.sum.Outcome == Idle:
		upTo = t.sum.Cursor
	}
	if upTo == nil {
		return
	}
	key, now := upTo.JSON(), t.clk.Now()
	if r.cleanedAt(key, now) {
		return
	}
	ctx, cancel := context.WithTimeout(t.ctx, cleanupTimeout)
	defer cancel()
	if t.l == nil {
		n, err := c.AwaitingCleanup(ctx, upTo, 1)
		if err != nil {
			t.cleanupFailed(err, key)
			return
		}
		if n == 0 {
			r.setCleaned(key, now)
			return
		}
	}
	faultpoint.Hit(faultpoint.BeforeCleanup)
	rows, statements := r.cleanupBounds()
	for range statements {
		n, err := c.Cleanup(ctx, upTo, rows)
		t.sum.RowsDeleted += n
		if err != nil {
			t.cleanupFailed(err, key)
			return
		}
		if n < int64(rows) {
			r.setCleaned(key, now)
			break
		}
	}
}

// cleanupFailed records a cleanup's failure: the tick's summary carries it, and a log line says
// what it means.
func (t *tickRun) cleanupFailed(err error, checkpoint string) {
	t.sum.CleanupError = err.Error()
	t.log.Warn("cleanup failed: the delivered rows behind the checkpoint stay (they are never sent again) and the next tick deletes them",
		"checkpoint", checkpoint, "rows_deleted", t.sum.RowsDeleted, "error", err.Error())
}

// cleanupBounds are the runner's bounds of a tick's cleanup, defaults resolved.
func (r *Runner) cleanupBounds() (rows, statements int) {
	rows, statements = r.CleanupRows, r.CleanupStatements
	if rows <= 0 {
		rows = DefaultCleanupRows
	}
	if statements <= 0 {
		statements = DefaultCleanupStatements
	}
	return rows, statements
}

// cleanedAt says whether this process found nothing left to delete behind the checkpoint key,
// recently enough (cleanupLookEvery) when the cleanup keeps a window.
func (r *Runner) cleanedAt(key string, now time.Time) bool {
	r.cleanMu.Lock()
	defer r.cleanMu.Unlock()
	if r.clean.at != key {
		return false
	}
	c := r.Poller.Source().Cleanup
	return c == nil || c.OlderThan <= 0 || now.Sub(r.clean.looked) < cleanupLookEvery
}

// setCleaned notes that nothing was left to delete behind the checkpoint key at now.
func (r *Runner) setCleaned(key string, now time.Time) {
	r.cleanMu.Lock()
	r.clean = cleaned{at: key, looked: now}
	r.cleanMu.Unlock()
}
