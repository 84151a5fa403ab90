// Package tick runs one timer invocation of a poller: read the state blob, peek for rows, take
// the lease, fetch batches in keyset order and hand them to the poller's handler while the lease
// is kept alive, commit the checkpoint, and release the lease with the last commit.
//
// Costs: an idle tick is one blob read and one SQL round trip, and writes nothing (the handler
// writes a liveness mark at most once per {P}_LIVENESS_INTERVAL, see package liveness); when the
// read may have been held back by a transaction still open (driver.Stats.HoldBack), it also
// counts what waits behind it (one or two queries), so that a held transaction shows as rows
// waiting and lag, not as an idle poller. A source whose driver keeps reads behind the server's
// open transactions also reads them (driver.ReadBound: at most once a second per process). A
// tick that
// delivers B batches writes at most B+1 times: the acquire, at most one commit per batch (every
// CheckpointInterval, only when another batch follows), and the final commit, which also
// releases the lease. The next batch is fetched while the current one is handled. A tick that
// took the lease also measures the backlog (a capped count and the oldest waiting row: two
// queries) for its log line and the state document's history. At most once per StampCheckEvery
// a tick also looks for rows the cursor could never reach (source.CheckStamps).
//
// A tick whose invocation is cancelled (the host dropped the request) after it took the lease
// finishes the batch in hand, commits it and releases the lease, as on a drain: the request's
// cancellation never cuts a lease write short, which would leave the lease to expire.
//
// A batch that fails {P}_MAX_ATTEMPTS times is poison: with {P}_ON_POISON=block the poller
// retries it every tick and says so loudly (ErrBlocked); with quarantine it is bisected down to
// the rows that fail alone, which go to a dead letter (package deadletter) before the checkpoint
// moves past the batch.
package tick

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/faultpoint"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/telemetry"
)

// Outcome of a tick.
type Outcome string

// Outcomes.
const (
	Committed Outcome = "committed"  // the lease was taken and the tick ran to its end
	Idle      Outcome = "idle"       // nothing to read: no write was made
	LeaseHeld Outcome = "lease_held" // another owner holds the lease, or won the race for it
	Failed    Outcome = "failed"     // a batch failed (a 500): it comes again next tick
	Blocked   Outcome = "blocked"    // a batch failed {P}_MAX_ATTEMPTS times and {P}_ON_POISON is block
)

// WaitingCap bounds the count of rows waiting after the cursor that a tick makes.
const WaitingCap = 10_000

// Summary is the tick's result, returned to the Functions host as ReturnValue.
type Summary struct {
	Poller       string        `json:"poller"`
	Outcome      Outcome       `json:"outcome"`
	Rows         int           `json:"rows"`
	Batches      int           `json:"batches"`
	FencingToken int64         `json:"fencing_token"`
	Cursor       *state.Cursor `json:"cursor"`
	DurationMS   int64         `json:"duration_ms"`
	Holder       string        `json:"lease_holder,omitempty"`
	Attempt      int64         `json:"attempt,omitempty"`
	// LagSeconds is the age of the oldest row still waiting at the tick's end
	// (driver.Stats.LagSeconds): 0 when nothing waits, nil when not measured (the lease was held
	// elsewhere, the tick failed before it, or the cursor kind has no time and rows wait).
	LagSeconds *float64 `json:"lag_seconds,omitempty"`
	// RowsWaiting counts the rows after the cursor at the tick's end, up to WaitingCap; -1 when
	// not counted (the lease was held elsewhere, or the count failed).
	RowsWaiting int64 `json:"rows_waiting"`
	// Ops counts the delivered rows by op (insert, update, delete; upsert for keyset cursors).
	Ops map[string]int `json:"ops,omitempty"`
	// RetainedBytes is the change log the source's database keeps for the poller at the tick's
	// end (driver.Stats.RetainedBytes, measured with the backlog).
	RetainedBytes *int64 `json:"slot_retained_bytes,omitempty"`
	// LateCommitBound says how the source's reads were kept behind late commits, when it has
	// more to say than its settle lag (driver.Stats.LateCommits).
	LateCommitBound string `json:"late_commit_bound,omitempty"`
	DeadLettered    int    `json:"dead_lettered,omitempty"` // rows quarantined into a dead letter
	DeadLetter      string `json:"dead_letter,omitempty"`   // the last dead letter written
	BatchID         string `json:"batch_id,omitempty"`      // the batch that failed
	// RowsDeleted counts the delivered rows the tick's cleanup deleted (Cleaner), and
	// CleanupError is why it stopped short ("" when it did not): the rows stay behind the
	// checkpoint for the next tick; the tick itself is not failed by it.
	RowsDeleted  int64  `json:"rows_deleted,omitempty"`
	CleanupError string `json:"cleanup_error,omitempty"`
	// Follow is what the tick did once it followed ({P}_FOLLOW): since when, the rows it
	// delivered meanwhile and their latency; nil when it did not follow.
	Follow *state.Follow `json:"follow,omitempty"`
}

// Source is what a tick needs of a poller's source; *source.Source has it.
type Source interface {
	// Fetch reads up to limit rows after the cursor, in keyset order.
	Fetch(ctx context.Context, after *state.Cursor, limit int) (*row.Batch, error)
	// Fingerprint names the source's definition, for batch ids and dead letters.
	Fingerprint() string
	// Backlog measures what waits after the cursor (a count up to limit and the oldest row),
	// with the rest of the source's Stats.
	Backlog(ctx context.Context, after *state.Cursor, limit int) (driver.Stats, error)
	// CheckStamps looks for rows the cursor could never reach (run at most once per
	// StampCheckEvery).
	CheckStamps(ctx context.Context) error
	// Committed says the checkpoint c is in the state blob: a change stream may move its own
	// position to it (a logical cursor's replication slot). Called only after a commit that
	// succeeded.
	Committed(ctx context.Context, c *state.Cursor) error
	// CommitWanted says that committing the checkpoint now would spare the next fetch work (a
	// change stream that re-reads from its own position until a commit moves it).
	CommitWanted() bool
	// Backfills says whether the source can read a backfill's chunks (nil), or why not;
	// ReadChunk reads one, and CountChunkRows estimates how many rows a backfill reads.
	Backfills() error
	ReadChunk(ctx context.Context, after map[string]json.RawMessage, where string, position *state.Cursor, limit int) (*source.Chunk, error)
	CountChunkRows(ctx context.Context, where string, limit int64) (int64, error)
	// Identity is what decides the source's order and positions, as the state document and a
	// dead letter record it; ReplayChange and FetchKeyOf read a dead letter's row again
	// (pollerctl deadletter replay), and ReplayEvent reads an outbox's event from its letter.
	Identity() state.SourceDef
	ReplayChange(ctx context.Context, table, op string, key map[string]json.RawMessage, cursor state.Cursor) (*row.Row, string, error)
	ReplayEvent(table, op string, data json.RawMessage, cursor state.Cursor) (*row.Row, error)
	FetchKeyOf(ctx context.Context, c *state.Cursor) (*row.Batch, error)
	// Stats reports the last read without reading: whether a transaction still open may have
	// held it back, the change log the database keeps (every tick's log line carries it, so that
	// an alert sees a stuck poller), how reads are kept behind late commits.
	Stats() driver.Stats
}

var _ Source = (*source.Source)(nil)

// Runner runs ticks of one poller.
type Runner struct {
	Poller   *pollerdef.Def
	Settings appsettings.Settings
	Lease    *lease.Manager
	Source   Source
	Clock    clock.Clock  // default clock.System
	Logger   *slog.Logger // default: discard
	// Draining, when closed, makes running ticks stop taking new batches: the batch in hand
	// finishes, is committed and the lease released.
	Draining <-chan struct{}
	// DeadLetters stores a quarantined batch's failing rows (deadletter.Write); it returns the
	// letter's name.
	DeadLetters func(ctx context.Context, l *deadletter.Letter) (string, error)
	// Requests, if set, returns the state store's requests and conflicts so far; the tick logs
	// how many it made.
	Requests func() (requests, conflicts int64)
	// Observe, if set, sees every batch handed to the poller's handler and what it returned
	// (package pollertest records them).
	Observe func(b *pollerdef.Batch, err error)
	// Tracer and Metrics receive the ticks' spans and measurements (package telemetry); nil:
	// telemetry.Setup's exporters when it installed them, else none (telemetry.ActiveTracer,
	// Active).
	Tracer  trace.Tracer
	Metrics *telemetry.Metrics
	// CleanupRows and CleanupStatements bound a tick's cleanup of delivered rows: rows a DELETE,
	// DELETEs a tick (DefaultCleanupRows and DefaultCleanupStatements when 0).
	CleanupRows, CleanupStatements int

	close func() error // closes the source Open opened
	// reopen opens the poller's source anew (a source Open opened; nil for one given to it);
	// srcMu guards Source and close against its swap: held for reading while a tick or a probe
	// uses the source.
	reopen       func(ctx context.Context) (*source.Source, error)
	srcMu        sync.RWMutex
	stampMu      sync.Mutex
	stampChecked time.Time // when CheckStamps last passed
	// latencies are the following ticks' commit-to-delivery latencies over the last minute
	// (follow.go).
	latencies latencies
	cleanMu   sync.Mutex
	clean     cleaned // the last cleanup that left nothing (cleanup.go)
}

// ErrBlocked wraps the error of a tick whose batch failed {P}_MAX_ATTEMPTS times or more while
// {P}_ON_POISON is block: the poller retries it every tick and never skips it.
var ErrBlocked = errors.New("poller blocked on a poison batch")

// StampCheckEvery bounds how often a tick runs the source's CheckStamps (on SQLite a full
// scan): a row the cursor can never reach is reported within this time plus a schedule period.
const StampCheckEvery = time.Minute

// ErrBatchFailed wraps a handler's error (or panic): the batch was not committed.
var ErrBatchFailed = errors.New("batch failed")

// tickRun is one tick in progress: what Tick's steps share. The fields after l are the
// delivery's (steps 4-8, see deliver), set once the lease is won.
type tickRun struct {
	r *Runner
	// reopen: a fetch found the table's columns changed (source.ErrColumnsChanged): the tick
	// opens the source again as it ends.
	reopen  bool
	ctx     context.Context // never cancelled: see Tick
	dropped <-chan struct{} // closes when the host dropped the invocation
	clk     clock.Clock
	log     *slog.Logger
	sum     Summary
	start   time.Time
	req0    int64      // the state store's requests before the tick (Runner.Requests)
	conf0   int64      // and its conflicts
	span    trace.Span // the tick's (telemetry.go)
	// tookOver: the lease was won from an owner whose lease expired unreleased.
	tookOver bool

	l *lease.Lease // the lease, once won
	// behind deletes the rows behind the tick's commits while it goes on (cleanup.go).
	behind behindCleanup

	wctx        context.Context   // the handler's: cancelled when the lease is lost
	fctx        context.Context   // the fetches': never cancelled midway (see deliver)
	cursor      *state.Cursor     // where the next batch starts
	fromText    string            // cursor.JSON(), rendered once per batch
	attempt     int64             // the attempt at the next batch (1 but after failed ticks)
	uncommitted *state.Checkpoint // progress handled but not yet committed
	lastCommit  time.Time
	budgetEnd   time.Time
	ahead       <-chan fetched // the next batch, being read meanwhile; nil when not
	fetchDur    time.Duration  // the last fetch's duration
	handleDur   time.Duration  // the last handler call's duration
	// backfillFailed: a chunk failed in this tick, which runs no other (backfillStep).
	backfillFailed bool
	// pending is a change-stream backfill's chunk waiting for its watermark (streamChunk);
	// chunkAgain counts its reads in this tick that had to be read again.
	pending    *pendingChunk
	chunkAgain int
	counted    bool // the snapshot's estimate was counted in this tick
	// pendingGrace counts the times chunkWaits let the tick go on past its budget: it is asked
	// twice a loop, so its limit of 4 is about two more loops.
	pendingGrace int
	// liveIdleAt is when the last live fetch found nothing (zero: it found something); see
	// liveQuiet.
	liveIdleAt time.Time
	// followUntil is when the tick stops following ({P}_FOLLOW; zero: it does not follow), and
	// fol its progress once it follows (follow.go).
	followUntil time.Time
	fol         *following
	// streamed: the tick waited on its source's stream (follow.go), which it ends before its
	// lease goes.
	streamed bool
}

// Tick runs one tick. invocationID (the Functions invocation id, may be empty) goes into the logs.
// A returned error means the tick failed; the summary still says what it did before.
//
// Cancelling ctx (the host dropped the invocation) is a drain, not an abort: before the lease
// is taken the tick stops there; after, the batch in hand is finished, committed and the lease
// released. Lease writes and the handler run on a context the cancellation does not end.
func (r *Runner) Tick(ctx context.Context, invocationID string) (Summary, error) {
	t := r.begin(ctx, invocationID)
	defer t.releaseIfHeld() // after finish: the tick's log line counts the requests before it
	r.srcMu.RLock()         // the source stays while the tick uses it (reopenSource waits)
	err := t.run()
	t.endStream(false) // on the paths that did not end it before the lease went (a failure, a lost lease)
	r.srcMu.RUnlock()
	if t.reopen && t.l == nil { // met before the lease was taken: read again at once
		t.reopen = false
		if err = r.reopenSource(t.ctx, t.log); err == nil {
			r.srcMu.RLock()
			err = t.run()
			r.srcMu.RUnlock()
		}
	}
	r.srcMu.RLock()
	t.cleanup()
	sum, err := t.finish(err)
	r.srcMu.RUnlock()
	if t.reopen {
		t.releaseIfHeld()
		if rerr := r.reopenSource(t.ctx, t.log); rerr != nil {
			return sum, rerr
		}
	}
	return sum, err
}

// InUse returns the runner's source and a release to call when done with it: the source is not
// closed (nor replaced by one opened again) until then. For readers beside the ticks (the
// status's probe).
func (r *Runner) InUse() (Source, func()) {
	r.srcMu.RLock()
	return r.Source, r.srcMu.RUnlock
}

// columnsChanged says whether err is a fetch's finding that the table gained a column which the
// source, reading every column, must open again to read (source.ErrColumnsChanged), and notes
// it: the tick ends as if nothing more waited, and opens the source again. A source the runner
// did not open (shared by tests) cannot be: the error stands.
func (t *tickRun) columnsChanged(err error) bool {
	if !errors.Is(err, source.ErrColumnsChanged) || t.r.reopen == nil {
		return false
	}
	t.reopen = true
	t.log.Info("the table's columns changed: the source opens again", "reason", err.Error())
	return true
}

// reopenSource opens the poller's source again and closes the old one.
func (r *Runner) reopenSource(ctx context.Context, log *slog.Logger) error {
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	src, err := r.reopen(octx)
	if err != nil {
		return fmt.Errorf("poller %s: opening the source again after its table's columns changed: %w", r.Poller.Name(), err)
	}
	r.srcMu.Lock() // once no tick or probe uses the old one
	old := r.close
	r.Source, r.close = src, src.Close
	r.srcMu.Unlock()
	if old != nil {
		_ = old()
	}
	log.Info("source opened again", "columns", src.Identity().Columns)
	return nil
}

// begin starts a tick: its clock, logger, start time and the store's counters so far.
func (r *Runner) begin(ctx context.Context, invocationID string) *tickRun {
	t := &tickRun{r: r, dropped: ctx.Done(), ctx: context.WithoutCancel(ctx), clk: r.clock()}
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t.log = log.With("poller", r.Poller.Name(), "invocation_id", invocationID)
	t.startSpan(invocationID)
	t.start = t.clk.Now()
	t.followUntil = r.followEnd(t.start)
	t.sum = Summary{Poller: r.Poller.Name(), RowsWaiting: -1}
	if r.Requests != nil {
		t.req0, t.conf0 = r.Requests()
	}
	return t
}

// run is steps 1-3: read the state, peek for rows, take the lease; then deliver.
func (t *tickRun) run() error {
	r := t.r
	// 1. Read.
	snap, err := r.Lease.Read(t.ctx)
	if err != nil {
		return err
	}
	var cursor *state.Cursor
	if snap.Doc != nil {
		cursor = snap.Doc.Checkpoint.Cursor
		t.sum.FencingToken = snap.Doc.Lease.FencingToken
	}
	t.sum.Cursor = cursor

	// 2. Peek, without the lease: the peek is the first batch itself, so a tick with work saves
	// a round trip and an idle one costs one query. The batch stays valid once the lease is
	// won, because the acquire is a CAS on the ETag read above: the checkpoint cannot have moved.
	if holder, live := r.Lease.Holder(snap); live {
		t.sum.Outcome, t.sum.Holder = LeaseHeld, holder
		return nil
	}
	if err := t.checkStamps(); err != nil {
		return err
	}
	backfill := initialBackfill(r.Poller, r.Settings.BatchSize) // a new document's
	if snap.Doc != nil {
		backfill = snap.Doc.Backfill
	}
	backfills := backfill != nil && canBackfill(r.Source)
	t0 := t.clk.Now()
	first, err := r.fetch(t.ctx, cursor, true) // never cancelled midway: see deliver
	// Following, a tick that found nothing looks again, without the lease and writing nothing,
	// until something comes (then it takes the lease as usual: the acquire is a CAS on the ETag
	// read in step 1, so a tick that committed meanwhile makes it lose) or its follow time ends.
	for err == nil && len(first.Rows) == 0 && first.To == nil && !backfills && t.pause() {
		t0 = t.clk.Now()
		first, err = r.fetch(t.ctx, cursor, true)
	}
	if busy, ok := errors.AsType[*driver.BusyError](err); ok { // another process's tick is reading the change stream: as a held lease
		t.sum.Outcome, t.sum.Holder = LeaseHeld, busy.Holder
		return nil
	}
	if errors.Is(err, driver.ErrStreamAhead) && t.raced(snap) {
		// The checkpoint read in step 1 was stale: another owner committed and moved the
		// stream's position since. This tick would have lost the acquire; it is not the loss the
		// error reports.
		t.sum.Outcome, t.sum.Holder = LeaseHeld, "another owner, which committed after this tick read the state"
		return nil
	}
	if t.columnsChanged(err) { // nothing before the change to deliver
		t.sum.Outcome = Idle
		return nil
	}
	if err != nil {
		return err
	}
	firstDur := t.clk.Now().Sub(t0)
	// No rows and no place to move to: idle. (No rows but a place is a change stream's keep-up,
	// which keeps its position from falling behind while the table is quiet: the tick takes the
	// lease and commits the move.) Nothing waits, unless the read was held back by a transaction
	// still open: then what waits behind it is measured, so that the tick shows it (and its lag)
	// instead of an idle poller.
	if len(first.Rows) == 0 && first.To == nil && !backfills {
		zero := 0.0
		t.sum.Outcome, t.sum.RowsWaiting, t.sum.LagSeconds = Idle, 0, &zero
		if r.Source.Stats().HoldBack {
			if b, err := r.Source.Backlog(t.ctx, cursor, WaitingCap); err != nil {
				t.sum.RowsWaiting, t.sum.LagSeconds = -1, nil
			} else {
				t.sum.RowsWaiting, t.sum.LagSeconds = b.Rows, b.LagSeconds(t.clk.Now())
			}
		}
		return nil
	}
	if closed(t.dropped) {
		return errors.New("the invocation was cancelled (the host dropped the request) before the lease was taken: nothing was written")
	}
	return t.acquire(snap, first, firstDur)
}

// raced reports whether the state document changed since snap was read.
func (t *tickRun) raced(snap lease.Snapshot) bool {
	now, err := t.r.Lease.Read(t.ctx)
	return err == nil && now.ETag != snap.ETag
}

// acquire is step 3: take the lease, reading the second batch meanwhile (the acquire only
// waits on storage), and deliver from first on.
func (t *tickRun) acquire(snap lease.Snapshot, first *row.Batch, firstDur time.Duration) error {
	r := t.r
	var ahead <-chan fetched
	if len(first.Rows) == r.Settings.BatchSize {
		ahead = r.readAhead(t.ctx, first.To)
	}
	var res lease.Result
	err := t.write("acquire", false, func(ctx context.Context) (err error) {
		res, err = r.Lease.Acquire(ctx, snap)
		return err
	})
	if err != nil || !res.Won() {
		if ahead != nil {
			<-ahead
		}
		if err != nil {
			return err
		}
		t.sum.Outcome, t.sum.Holder = LeaseHeld, res.Holder
		return nil
	}
	l := res.Lease
	t.sum.Outcome, t.sum.FencingToken = Committed, l.Token()
	t.tookOver = tookOver(snap)
	l.KeepAlive()
	faultpoint.Hit(faultpoint.AfterAcquire)
	t.l = l
	return t.deliver(first, firstDur, ahead)
}

// releaseIfHeld releases the lease on a path that did not.
func (t *tickRun) releaseIfHeld() {
	if t.l == nil || t.l.Err() != nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = t.l.Release(rctx)
}

// finish completes the summary and writes the tick's log line: one per tick, for "is it keeping
// up" and "why did it stop" (the queries of docs/operations.md).
func (t *tickRun) finish(err error) (Summary, error) {
	sum := &t.sum
	sum.DurationMS = t.clk.Now().Sub(t.start).Milliseconds()
	if err != nil && sum.Outcome != Blocked {
		sum.Outcome = Failed
	}
	attrs := []any{"outcome", string(sum.Outcome), "rows", sum.Rows, "batches", sum.Batches, "attempt", sum.Attempt,
		"fencing_token", sum.FencingToken, "cursor", sum.Cursor.JSON(), "rows_waiting", sum.RowsWaiting,
		"duration_ms", sum.DurationMS}
	if sum.LagSeconds != nil {
		attrs = append(attrs, "lag_seconds", *sum.LagSeconds)
	}
	if t.r.Requests != nil {
		req, conf := t.r.Requests()
		attrs = append(attrs, "blob_requests", req-t.req0, "conflicts", conf-t.conf0)
	}
	if sum.Holder != "" {
		attrs = append(attrs, "lease_holder", sum.Holder)
	}
	if len(sum.Ops) > 0 {
		attrs = append(attrs, "ops", sum.Ops)
	}
	st := t.r.Source.Stats()
	if sum.RetainedBytes == nil { // not measured with a backlog: idle, lease held, failed
		sum.RetainedBytes = st.RetainedBytes
	}
	if sum.RetainedBytes != nil {
		attrs = append(attrs, "slot_retained_bytes", *sum.RetainedBytes)
	}
	if st.LateCommits != "" {
		sum.LateCommitBound = st.LateCommits
		attrs = append(attrs, "late_commit_bound", sum.LateCommitBound)
	}
	if sum.DeadLettered > 0 {
		attrs = append(attrs, "dead_lettered", sum.DeadLettered, "dead_letter", sum.DeadLetter)
	}
	if sum.RowsDeleted > 0 {
		attrs = append(attrs, "rows_deleted", sum.RowsDeleted)
	}
	if sum.CleanupError != "" {
		attrs = append(attrs, "cleanup_error", sum.CleanupError)
	}
	if t.fol != nil {
		f := t.fol.state(t.followUntil, t.clk.Now())
		sum.Follow = &f
		attrs = append(attrs, "follow_since", f.Since, "follow_changes", f.Changes)
		if f.LatencyP50MS != nil {
			attrs = append(attrs, "latency_p50_ms", *f.LatencyP50MS, "latency_p95_ms", *f.LatencyP95MS)
		}
	}
	if err != nil {
		if sum.BatchID != "" {
			attrs = append(attrs, "batch_id", sum.BatchID)
		}
		t.log.Error("tick", append(attrs, "error", err.Error())...)
	} else {
		t.log.Info("tick", attrs...)
	}
	t.record(err)
	return *sum, err
}

func (r *Runner) clock() clock.Clock {
	if r.Clock == nil {
		return clock.System{}
	}
	return r.Clock
}

func closed(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// write runs one of the tick's state writes (what: acquire, commit) in a span of its name.
func (t *tickRun) write(what string, release bool, f func(ctx context.Context) error) error {
	ctx, span := t.r.start(t.ctx, what)
	err := f(ctx)
	if release && span.IsRecording() {
		span.SetAttributes(telemetry.Release.Bool(true))
	}
	endSpan(span, err)
	return err
}
