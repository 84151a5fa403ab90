package tick

import (
	"context"
	"sync"
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
	err := t.behind.stop()
	t.sum.RowsDeleted += t.behind.deleted
	if err != nil { // the next tick retries
		t.cleanupFailed(err, "")
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

// behindCleanup deletes, while a tick goes on, the rows behind the checkpoints it commits before
// its end (commitDue): a tick that catches up a backlog keeps the table as small as its commits
// allow, rather than deleting it all once it ends. One runs at a time, in the background, on
// the source's pool, so delivery does not wait for it; statements of the runner's rows bound
// (CleanupRows) until nothing is left behind the checkpoint or the tick ends. The tick's end
// stops it (between two statements) before its own bounded cleanup.
type behindCleanup struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	running bool  // one is deleting
	stopped bool  // the tick ends: none starts, the running one stops after its statement
	deleted int64 // rows deleted, read after stop
	err     error // the first failure, read after stop; none starts after it
}

// start begins deleting the rows behind upTo, a checkpoint just committed, unless a cleanup is
// still running (the next commit's will delete these too).
func (b *behindCleanup) start(ctx context.Context, c Cleaner, upTo state.Cursor, rows int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running || b.stopped || b.err != nil {
		return
	}
	b.running = true
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
		defer cancel()
		faultpoint.Hit(faultpoint.BeforeCleanup)
		for {
			n, err := c.Cleanup(ctx, &upTo, rows)
			b.mu.Lock()
			b.deleted += n
			if err != nil {
				b.err = err
			}
			done := err != nil || n < int64(rows) || b.stopped
			b.running = !done
			b.mu.Unlock()
			if done {
				return
			}
		}
	}()
}

// stop waits for the running cleanup to end (after its statement) and returns its failure;
// none starts after it.
func (b *behindCleanup) stop() error {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	b.wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// cleanupBehind starts deleting the rows behind the checkpoint c the tick just committed, in the
// background (behindCleanup), when the source deletes its delivered rows.
func (t *tickRun) cleanupBehind(c *state.Cursor) {
	cl, ok := t.r.Source.(Cleaner)
	if !ok || !cl.Cleans() || c == nil {
		return
	}
	rows, _ := t.r.cleanupBounds()
	t.behind.start(t.ctx, cl, *c, rows)
}
