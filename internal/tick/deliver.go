package tick

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/faultpoint"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/telemetry"
)

type fetched struct {
	batch *row.Batch
	err   error
}

// deliver is steps 4-8: fetch, handle, commit, repeat, release. first is the batch the peek read;
// ahead, if not nil, is the one after it, already being read. When the host dropped the
// invocation, like on a drain, no batch is taken after the one in hand.
func (t *tickRun) deliver(first *row.Batch, firstDur time.Duration, ahead <-chan fetched) error {
	l := t.l
	// The handler's work stops when the lease is lost (ctx is never cancelled: see Tick).
	wctx, cancel := context.WithCancelCause(t.ctx)
	defer cancel(nil)
	stop := context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) })
	defer stop()
	t.wctx = wctx

	t.cursor = l.Checkpoint().Cursor
	t.attempt = 1
	if f := l.Failure(); f != nil {
		t.attempt = f.Attempts + 1
	}
	t.sum.Attempt = t.attempt
	t.budgetEnd = t.clk.Now().Add(t.r.Settings.TickBudget)
	if !t.followUntil.IsZero() { // it may have followed without the lease: the budget is from its start
		t.budgetEnd = t.start.Add(t.r.Settings.TickBudget)
	}
	t.lastCommit = t.clk.Now()

	// The next batch is read while the current one is handled when that pays: when the handler
	// takes at least half as long as a fetch. Measured with a no-op handler on two cores, reading
	// ahead cost throughput (0.61-0.72 of a hand-written loop against 0.78-0.88 without).
	t.fetchDur, t.handleDur, t.ahead = firstDur, 0, ahead
	// A fetch is one bounded query and is not cancelled midway: database/sql starts a goroutine
	// per query under a cancellable context, which cost 8% of catch-up throughput (0.77-0.83 of
	// a hand-written loop against 0.87-0.92). A lost lease cancels the handler's context, so a
	// batch read meanwhile is never delivered. Bound a hung database with the driver's own
	// time-outs in the DSN (statement_timeout, connect_timeout, dial timeout).
	t.fctx = context.WithoutCancel(wctx)
	t.fromText = t.cursor.JSON() // rendered once per batch, for the batch id and the log
	// While a backfill runs, a chunk of it follows each live batch (and each look for one, once
	// the live changes are caught up): the live lag is held up by one chunk at a time, never by
	// the whole backfill.
	for f := (fetched{batch: first}); ; f = t.next() {
		if f.err != nil {
			t.awaitAhead()
			if t.columnsChanged(f.err) { // what came before is committed; the next tick reads on
				return t.end(nil)
			}
			return t.end(wrapLost(l, f.err))
		}
		more := false
		if len(f.batch.Rows) > 0 || f.batch.To != nil {
			var err error
			if more, err = t.step(f.batch); err != nil {
				t.awaitAhead()
				return err
			}
			if more {
				t.streamSoon()
			}
		}
		if t.over() && !t.chunkWaits() {
			t.awaitAhead()
			break
		}
		backfill, err := t.backfillStep(more)
		if err != nil {
			t.awaitAhead()
			return t.end(wrapLost(l, err))
		}
		if !more && !backfill {
			t.awaitAhead() // a chunk's read-ahead, if any
			again, err := t.follow()
			if err != nil {
				return err
			}
			if !again {
				break
			}
			continue
		}
		if t.over() && !t.chunkWaits() { // the chunk took the rest of the budget, or a drain began meanwhile
			t.awaitAhead()
			break
		}
	}
	return t.end(nil)
}

// chunkWaits says the tick goes on past its budget for a change-stream chunk it has read and
// not yet delivered: a few more live fetches, which usually bring its watermark. Without it, a
// budget shorter than a chunk's read and the fetch after it would read the same chunk in every
// tick and deliver none. Never past a drain or a lost lease.
func (t *tickRun) chunkWaits() bool {
	if t.pending == nil || t.stopping() || t.l.Err() != nil || t.pendingGrace >= 4 {
		return false
	}
	t.pendingGrace++
	return true
}

// over says the tick takes no further batch: its budget is spent, it is stopping, or its lease
// is gone.
func (t *tickRun) over() bool {
	return !t.clk.Now().Before(t.budgetEnd) || t.stopping() || t.l.Err() != nil
}

// fetch reads the batch after the cursor in a "fetch" span.
func (r *Runner) fetch(ctx context.Context, after *state.Cursor, peek bool) (*row.Batch, error) {
	ctx, span := r.start(ctx, "fetch")
	b, err := r.Source.Fetch(ctx, after, r.Settings.BatchSize)
	if span.IsRecording() {
		if peek {
			span.SetAttributes(telemetry.Peek.Bool(true))
		}
		if b != nil {
			span.SetAttributes(telemetry.Rows.Int(len(b.Rows)))
		}
	}
	endSpan(span, err)
	return b, err
}

// handle hands pb to the handler in a "deliver" span, the parent of the handler's own (a sink's
// send).
func (t *tickRun) handle(pb *pollerdef.Batch) error {
	ctx, span := t.r.start(t.wctx, "deliver")
	if span.IsRecording() {
		span.SetAttributes(telemetry.BatchID.String(pb.ID), telemetry.Rows.Int(len(pb.Rows)), telemetry.Attempt.Int64(pb.Attempt),
			telemetry.FencingToken.Int64(pb.FencingToken))
	}
	err := t.r.handle(ctx, pb)
	endSpan(span, err)
	return err
}

// next returns the batch after the cursor: the one read ahead, or one fetched now; or, while a
// keyset backfill runs and the last look found nothing (liveQuiet), none without a look.
func (t *tickRun) next() fetched {
	if t.ahead != nil {
		f := <-t.ahead
		t.ahead = nil
		t.sawLive(f)
		return f
	}
	if t.liveQuiet() {
		return fetched{batch: &row.Batch{}}
	}
	t0 := t.clk.Now()
	b, err := t.r.fetch(t.fctx, t.cursor, false)
	t.fetchDur = t.clk.Now().Sub(t0)
	f := fetched{b, err}
	t.sawLive(f)
	return f
}

// liveLookEvery is how often a keyset backfill's chunks let the tick look for live changes
// while the last look found none: a look per chunk (a millisecond's rows) took a fifth of a
// backfill's rate on an idle table (bench.sh backfill), and this adds at most this to the lag of
// a change that arrives meanwhile.
const liveLookEvery = 10 * time.Millisecond

// sawLive notes whether a live fetch found nothing (the time of that look) or something.
func (t *tickRun) sawLive(f fetched) {
	if f.err == nil && len(f.batch.Rows) == 0 && f.batch.To == nil {
		t.liveIdleAt = t.clk.Now()
	} else {
		t.liveIdleAt = time.Time{}
	}
}

// liveQuiet says a keyset backfill runs and the live side was found idle less than
// liveLookEvery ago: its next look can wait. (A change stream's chunk waits for its watermark,
// which only a look brings.)
func (t *tickRun) liveQuiet() bool {
	return !t.liveIdleAt.IsZero() && t.l.Backfill() != nil && !t.r.Poller.Source().Changes() &&
		t.clk.Now().Sub(t.liveIdleAt) < liveLookEvery
}

// step hands b to the handler (quarantining it if it is poison and the policy says so) and
// moves the cursor past it. It reports whether the tick takes another batch; an error ends
// the tick as it stands (a failed batch was recorded by fail; a lease still held is released
// by Tick).
func (t *tickRun) step(b *row.Batch) (more bool, err error) {
	l, s := t.l, t.r.Settings
	faultpoint.Hit(faultpoint.AfterFetch)
	if err := l.Err(); err != nil { // lost while the batch was read: deliver nothing
		return false, err
	}
	if err := t.commitDue(); err != nil {
		return false, err
	}
	more = len(b.Rows) == s.BatchSize && t.clk.Now().Before(t.budgetEnd) && !t.stopping()
	if more && t.ahead == nil && t.handleDur >= t.fetchDur/2 {
		t.ahead = t.r.readAhead(t.fctx, b.To)
	}
	toText := b.To.JSON()
	name := t.r.Poller.Name()
	pb := &pollerdef.Batch{
		Poller: name, ID: batchID(name, t.r.Source.Fingerprint(), t.fromText, toText),
		FencingToken: l.Token(), Attempt: t.attempt, From: t.cursor, To: b.To, Rows: b.Rows,
	}
	if t.pending != nil {
		t.pending.see(b.Rows) // before a read of the same key is delivered
	}
	faultpoint.Hit(faultpoint.InHandle)
	if err := t.trusted("batch", pb.ID); err != nil {
		t.awaitAhead()
		return false, err
	}
	t0 := t.clk.Now()
	var herr error
	if len(b.Rows) > 0 { // else a move with nothing to deliver (a logical cursor's keep-up)
		herr = t.handle(pb)
	}
	t.handleDur = t.clk.Now().Sub(t0)
	if herr != nil {
		if err := t.failed(pb, herr); err != nil {
			return false, err
		}
	} else {
		t.sum.Rows += len(b.Rows)
		t.countOps(b.Rows)
		t.fol.delivered(b.Rows, t.clk.Now())
	}
	t.sum.Batches++
	t.log.Info("batch", "batch_id", pb.ID, "rows", len(b.Rows), "attempt", t.attempt, "fencing_token", pb.FencingToken,
		"cursor", toText, "cursor_age_seconds", ageValue(b.To, t.clk.Now()), "duration_ms", t.clk.Now().Sub(t0).Milliseconds())
	t.cursor, t.fromText, t.attempt = b.To, toText, 1
	t.uncommitted = &state.Checkpoint{Cursor: b.To, LastSuccessfulBatchID: pb.ID, Metadata: state.Metadata{RowCount: int64(len(b.Rows))}}
	t.sum.Cursor = b.To
	if !more || !t.clk.Now().Before(t.budgetEnd) || t.stopping() {
		t.awaitAhead() // dropped: the next tick reads it again from the checkpoint
		return false, nil
	}
	return true, nil
}

// trusted refuses to hand a batch (what, id) to the handler once the lease's trust window has
// passed. Checked on the clock, not only through the watchdog: a process that was paused (a VM
// freeze, a stop signal) past its trust window runs this before the watchdog's timer does. A
// pause after this check is what the fencing token in the batch is for.
func (t *tickRun) trusted(what, id string) error {
	if t.l.Trusted() {
		return nil
	}
	return fmt.Errorf("%w: the trust window passed before %s %s was handed to the handler", lease.ErrLost, what, id)
}

// countOps adds rows' changes to the summary's count by Op, a map entry per run of rows of one
// Op rather than per row (a keyset batch is one run: every row an upsert).
func (t *tickRun) countOps(rows []row.Row) {
	if t.sum.Ops == nil {
		t.sum.Ops = map[string]int{}
	}
	for i := 0; i < len(rows); {
		op, n := rows[i].Op(), 1
		for i+n < len(rows) && rows[i+n].Op() == op {
			n++
		}
		t.sum.Ops[op] += n
		i += n
	}
}

// commitDue commits the progress not yet committed once CheckpointInterval has passed since
// the last commit, or sooner when the source asks for it (Source.CommitWanted). It runs before a
// batch is handled: a commit made then has a successor (that batch), so it is never the last
// one: the last commit is always the one folded into the release, keeping B batches at B+1
// writes.
func (t *tickRun) commitDue() error {
	if t.uncommitted == nil {
		return nil
	}
	if t.clk.Now().Sub(t.lastCommit) < t.commitEvery() && !t.commitWanted() {
		return nil
	}
	return t.commit()
}

// commit commits the progress not yet committed, with a following tick's progress.
func (t *tickRun) commit() error {
	faultpoint.Hit(faultpoint.BeforeCommit)
	if t.fol != nil {
		t.l.SetFollow(t.fol.state(t.followUntil, t.clk.Now()))
	}
	if err := t.write("commit", false, func(ctx context.Context) error { return t.l.Commit(ctx, *t.uncommitted) }); err != nil {
		return wrapLost(t.l, err)
	}
	t.advance(t.uncommitted.Cursor)
	t.cleanupBehind(t.uncommitted.Cursor)
	t.uncommitted, t.lastCommit = nil, t.clk.Now()
	return nil
}

// commitWanted says the source asks for a commit before the next fetch.
func (t *tickRun) commitWanted() bool {
	return t.r.Source.CommitWanted()
}

// advance tells the source that the checkpoint c is committed (a logical cursor moves its
// replication slot up to it). A failure is logged, not returned: the blob is the truth, the slot
// only trails it, and the next commit advances it further.
func (t *tickRun) advance(c *state.Cursor) {
	faultpoint.Hit(faultpoint.BeforeSlotAdvance)
	if err := t.r.Source.Committed(t.ctx, c); err != nil {
		t.log.Warn("source position not advanced after the commit (the next commit moves it)", "cursor", c.JSON(), "error", err.Error())
	}
}

// stopping says the tick takes no new batch: the runner drains or the host dropped the invocation.
func (t *tickRun) stopping() bool { return closed(t.r.Draining) || closed(t.dropped) }

// awaitAhead lets the batch being read ahead, if any, finish (before the lease goes) and
// drops it.
func (t *tickRun) awaitAhead() {
	if t.ahead != nil {
		<-t.ahead
	}
	t.ahead = nil
}

// end commits what is uncommitted and releases the lease in one write (or only releases).
func (t *tickRun) end(cause error) error {
	var err error
	l := t.l
	cursor := l.Checkpoint().Cursor
	if t.uncommitted != nil {
		cursor = t.uncommitted.Cursor
	}
	outcome := Committed
	if cause != nil {
		outcome = Failed
	}
	t.observe(cursor, outcome)
	// The stream ends before the lease goes, so that whoever takes it next finds the source free
	// (a replication slot inactive); this last write's checkpoint then moves the source's
	// position as without a stream. Or it is held for the next tick of this process, and the
	// checkpoint is confirmed through it (endStream).
	t.endStream(cause == nil)
	if t.uncommitted != nil {
		faultpoint.Hit(faultpoint.BeforeCommit)
		if err = t.write("commit", true, func(ctx context.Context) error { return l.CommitAndRelease(ctx, *t.uncommitted) }); err == nil {
			t.advance(t.uncommitted.Cursor)
		}
	} else {
		err = t.write("release", true, l.Release)
	}
	if cause != nil {
		return errors.Join(cause, err)
	}
	return err
}

// readAhead fetches the batch after the cursor in the background.
func (r *Runner) readAhead(ctx context.Context, after *state.Cursor) <-chan fetched {
	ch := make(chan fetched, 1)
	go func() {
		b, err := r.fetch(ctx, after, false)
		ch <- fetched{b, err}
	}()
	return ch
}

// handle runs the poller's handler, turning a panic into an error, and tells Observe.
func (r *Runner) handle(ctx context.Context, b *pollerdef.Batch) error {
	err := r.Poller.Handle(ctx, b)
	if r.Observe != nil {
		r.Observe(b, err)
	}
	return err
}

// wrapLost explains an error that happened because the lease was lost.
func wrapLost(l *lease.Lease, err error) error {
	if lerr := l.Err(); lerr != nil && !errors.Is(err, lease.ErrLost) && errors.Is(lerr, lease.ErrLost) {
		return fmt.Errorf("%w (%v)", lerr, err)
	}
	return err
}

// ageValue is the seconds from a timestamp cursor's value to now, for the batch log line's
// cursor_age_seconds (how old the batch's last row is when delivered); nil for other kinds.
func ageValue(c *state.Cursor, now time.Time) any {
	ts, ok := c.Time()
	if !ok {
		return nil
	}
	return math.Round(now.Sub(ts).Seconds()*1000) / 1000
}

// batchID is "batch_" and 24 hex digits of a SHA-256 over the poller, the source fingerprint
// and the cursor range (as state.Cursor.JSON renders it): the same batch always gets the same ID.
func batchID(pollerName, fingerprint, from, to string) string {
	sum := sha256.Sum256([]byte(pollerName + "\x00" + fingerprint + "\x00" + from + "\x00" + to))
	return "batch_" + hex.EncodeToString(sum[:12])
}
