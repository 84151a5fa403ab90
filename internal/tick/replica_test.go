package tick_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/replicacheck"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// replicaWorld is the in-process replica test's world: the table, slots and workload in the
// test PostgreSQL, the state blob in Azurite, and runners of one logical poller.
type replicaWorld struct {
	t     *testing.T
	dsn   string
	db    *sql.DB
	setup *replicacheck.Setup
	st    *blobstore.Store
	app   string
	rec   *replicacheck.Recorder
	fail  atomic.Int64 // every failEvery-th handler call fails (0: none)
	calls atomic.Int64
	batch int
	// initial: the poller starts with a snapshot of the table (poller.WithInitialSnapshot).
	initial bool
	// opts are the table's (REPLICA IDENTITY FULL, the publication's row filter, which is the
	// poller's filter); origin, if set, is the writer whose changes the poller skips.
	opts   replicacheck.Options
	origin string
}

const replicaPoller = "replica"

func newReplicaWorld(t *testing.T, batch int) *replicaWorld {
	return newReplicaWorldWith(t, batch, replicacheck.Options{}, false)
}

// newReplicaWorldWith is newReplicaWorld with the table made with opts and, with skip, a writer
// of the application's own whose changes the poller skips.
func newReplicaWorldWith(t *testing.T, batch int, opts replicacheck.Options, skip bool) *replicaWorld {
	t.Helper()
	// A server of its own: the checks compare the checkpoint with the stream's end and expect idle
	// ticks at the end, which a keep-up would break; a keep-up comes when the WAL's end, which
	// every test writing to a shared server moves, is far enough past the slot.
	w := &replicaWorld{t: t, dsn: testenv.PostgresOwn(t), app: testenv.Name("rep-"), rec: &replicacheck.Recorder{}, batch: batch, opts: opts}
	az := testenv.Azurite(t)
	var err error
	if w.db, err = sql.Open("pgx", w.dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.db.Close() })
	s, cleanup, err := replicacheck.CreateWith(ctx, w.db, testenv.Name("rep"), opts)
	t.Cleanup(cleanup)
	if err != nil {
		t.Fatal(err)
	}
	w.setup = s
	if skip {
		w.origin = s.Table + "-app"
	}
	if w.st, err = blobstore.New(blobstore.Settings{Setting: "test", ConnectionString: az, Container: "db-state"}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		name := blobpath.State(w.app, replicaPoller)
		if b, err := w.st.Get(context.Background(), name); err == nil {
			_ = w.st.Delete(context.Background(), name, store.IfMatch(b.ETag))
		}
	})
	return w
}

func (w *replicaWorld) settings() appsettings.Settings {
	return appsettings.Settings{Driver: postgres.Name, DSN: w.dsn, BatchSize: w.batch, LeaseTTL: lease.DefaultTTL,
		HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: 5 * time.Millisecond, CheckpointInterval: 0,
		MaxAttempts: 1000, Slot: w.setup.Slot, Publication: w.setup.Publication}
}

func (w *replicaWorld) poller(owner string) *pollerdef.Def {
	return pollerdef.Of(poller.New(replicaPoller, w.setup.Table, poller.Logical, func(_ context.Context, b *poller.Batch[poller.Row]) error {
		rb, err := replicacheck.FromBatch(b, owner)
		if err != nil {
			w.t.Errorf("handler: %v", err)
			return err
		}
		w.rec.Add(rb) // recorded also when it fails below: a consumer may have applied part of it
		if n := w.fail.Load(); n > 0 && w.calls.Add(1)%n == 0 {
			return errors.New("injected failure: the batch comes again from the checkpoint")
		}
		return nil
	}, w.options()...))
}

func (w *replicaWorld) options() []poller.Option {
	opts := []poller.Option{poller.WithColumns(replicacheck.Columns...), poller.WithKey("id")}
	if w.initial {
		opts = append(opts, poller.WithInitialSnapshot())
	}
	if w.opts.Filter != "" {
		opts = append(opts, poller.WithFilter(w.opts.Filter))
	}
	if w.origin != "" {
		opts = append(opts, poller.WithSkipWriter(w.origin))
	}
	if w.setup.Second != "" {
		opts = append(opts, poller.WithTables(poller.Table{Name: w.setup.Second, Columns: replicacheck.Columns, Key: []string{"id"}, Filter: w.opts.Filter}))
	}
	return opts
}

// runner opens a runner with a source of its own, as a process of its own would have.
func (w *replicaWorld) runner(owner string) *tick.Runner {
	w.t.Helper()
	r, err := tick.Open(ctx, tick.Config{Poller: w.poller(owner), Settings: w.settings(), Store: w.st, App: w.app, Owner: owner})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { r.Close() })
	return r
}

func (w *replicaWorld) checkpoint(ctx context.Context) (*state.Cursor, error) {
	name := blobpath.State(w.app, replicaPoller)
	b, err := w.st.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d, err := state.Decode(name, replicaPoller, b.Data)
	if err != nil {
		return nil, err
	}
	return d.Checkpoint.Cursor, nil
}

// tickErrors sorts the errors of ticks into the expected and the rest.
type tickErrors struct {
	w                                           *replicaWorld
	mu                                          sync.Mutex
	injected, busy, stalePeek, slotAhead, other int
	examples, stale                             []string
}

var slotAtRE = regexp.MustCompile(`slot "[^"]*" is at ([0-9A-F]+/[0-9A-F]+), the checkpoint at`)

// staleView reports whether an ErrSlotAhead named a slot position that the blob's checkpoint,
// read after the error, has reached: the tick compared the slot with a checkpoint it had read
// before another runner committed and advanced the slot (see TestLogicalReplicaStalePeek), not
// a slot that ran ahead of the checkpoint. The sampler checks the real invariant.
func (e *tickErrors) staleView(err error) bool {
	m := slotAtRE.FindStringSubmatch(err.Error())
	if m == nil {
		return false
	}
	slot, perr := pgcdc.ParsePosition(m[1])
	cp, cerr := e.w.checkpoint(context.Background())
	if perr != nil || cerr != nil || cp == nil {
		return false
	}
	pos, perr := pgcdc.CursorPosition(cp)
	return perr == nil && slot.LSN <= pos.LSN
}

func (e *tickErrors) add(owner string, err error) {
	stale := errors.Is(err, postgres.ErrSlotAhead) && e.staleView(err)
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case stale:
		e.stalePeek++
		if len(e.stale) < 3 {
			e.stale = append(e.stale, owner+": "+err.Error())
		}
		return
	case err == nil:
		return
	case errors.Is(err, tick.ErrBatchFailed) && strings.Contains(err.Error(), "injected failure"):
		e.injected++
		return
	case errors.Is(err, driver.ErrBusy):
		e.busy++ // a fetch under the lease met another runner's peek of the slot
		return
	case errors.Is(err, postgres.ErrSlotAhead):
		e.slotAhead++
	default:
		e.other++
	}
	if len(e.examples) < 10 {
		e.examples = append(e.examples, owner+": "+err.Error())
	}
}

// TestLogicalReplica: writers insert, update (the key too) and delete in concurrent
// transactions, some held open across ticks, some rolled back, while three runners (each with a
// source of its own, as three processes) tick one logical poller in batches of 7 with a tick
// budget of 5 ms, so that the lease moves between them, and every 11th handler call fails, so
// that batches are redelivered from the checkpoint. A sampler reads the slot and then the blob
// every 2 ms. At the end (writers done, WAL flushed, ticks run until idle):
//   - the batches chain: each starts at the checkpoint, which is the beginning or the position
//     of a change delivered before, and a redelivery repeats exactly what was delivered there;
//   - the rebuilt stream, applied strictly (no insert of a present key, no update or delete of
//     an absent one) to an empty map, is the table; so is every delivery applied as it arrived;
//   - the stream is the witness slot's (made with the poller's slot, never advanced): every
//     change, in commit order, nothing rolled back;
//   - no sample saw the slot ahead of the checkpoint, and the checkpoint is the stream's end.
func TestLogicalReplica(t *testing.T) {
	runLogicalReplica(t, newReplicaWorld(t, 7))
}

// TestLogicalReplicaImages is TestLogicalReplica on a table with REPLICA IDENTITY FULL, whose
// publication filters out the keys ending in 3 or 8 (the poller's filter), with a fifth writer
// of the application's own, whose session is marked with the replication origin the poller
// skips. Besides TestLogicalReplica's checks: no change of a filtered key or of the application's
// writer arrives (a key moved out of the filter arrives as its delete, one moved in as its
// insert); the replica equals the table's other rows; every update and delete carries the row
// the replica held before it, every update the columns that differ (replicacheck.CheckImages);
// and every change its transaction, whose changes come together, numbered, the last marked.
func TestLogicalReplicaImages(t *testing.T) {
	runLogicalReplica(t, newReplicaWorldWith(t, 7, replicacheck.Options{Full: true, Filter: replicacheck.KeyFilter}, true))
}

// TestLogicalReplicaTables is TestLogicalReplicaImages with two tables in one poller (one slot,
// one publication, each table with the filter): the writers write the even keys to the second
// table, in the same transactions as the odd ones. Besides its checks: every change names the
// table its key is in, the replica built from both tables' changes in one stream equals both
// tables, and a transaction's changes of both tables come together, numbered across them.
func TestLogicalReplicaTables(t *testing.T) {
	runLogicalReplica(t, newReplicaWorldWith(t, 7, replicacheck.Options{Full: true, Filter: replicacheck.KeyFilter, Second: true}, true))
}

// filtered says whether the world's poller never sees key id: the publication filters it out,
// or the application's own writer writes it.
func (w *replicaWorld) filtered(wl *replicacheck.Workload, id int64) bool {
	return w.opts.Filter != "" && replicacheck.FilteredOut(id) || wl.OwnKey(id)
}

func runLogicalReplica(t *testing.T, w *replicaWorld) {
	start := time.Now()
	startPos, err := w.setup.SlotLSN(ctx, w.setup.Slot)
	if err != nil {
		t.Fatal(err)
	}
	w.fail.Store(11)
	owners := []string{"A", "B", "C"}
	runners := make([]*tick.Runner, len(owners))
	for i, o := range owners {
		runners[i] = w.runner(o)
	}

	deadline, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	sampleCtx, stopSampling := context.WithCancel(deadline)
	sampler := &replicacheck.Sampler{Setup: w.setup, Checkpoint: w.checkpoint, Start: startPos}
	sampled := make(chan struct{})
	go func() { defer close(sampled); sampler.Run(sampleCtx, 2*time.Millisecond) }()

	ticks := &replicacheck.Ticks{}
	errs := tickErrors{w: w}
	outcomes := map[string]int{}
	var outMu sync.Mutex
	stop := make(chan struct{})
	loops := tickLoops(runners, 5*time.Millisecond, stop, ticks, func(i int, sum tick.Summary, err error) {
		errs.add(owners[i], err)
		outMu.Lock()
		o := string(sum.Outcome)
		if sum.Outcome == tick.LeaseHeld && strings.Contains(sum.Holder, "reader") {
			o += " (slot busy)"
		}
		outcomes[o]++
		outMu.Unlock()
	})

	wl := &replicacheck.Workload{Setup: w.setup, Writers: 4, Txns: 40, Pace: 40 * time.Millisecond, Seed: uint64(time.Now().UnixNano()),
		Hold: func(ctx context.Context) error { return ticks.Await(ctx, 2*len(runners), nil) }, Origin: w.origin}
	t.Logf("workload seed %d", wl.Seed)
	if err := wl.Run(deadline); err != nil {
		t.Fatalf("%v\n%s", err, inTicks())
	}
	if err := w.setup.Flush(deadline); err != nil {
		t.Fatal(err)
	}
	close(stop)
	loops.Wait()
	concurrent := w.rec.Len()
	t.Logf("writing took %v", time.Since(start))

	// Ticks until idle, one runner (no other reader of the slot is left), with a source of its
	// own: a source may answer from a peek it made a moment ago, before the last commits.
	drainer := w.runner("D")
	for n := 0; ; n++ {
		sum, err := drainer.Tick(ctx, "")
		errs.add("D (drain)", err)
		if err == nil && sum.Outcome == tick.Idle {
			break
		}
		if deadline.Err() != nil {
			t.Fatalf("not idle after %d ticks: %+v %v", n, sum, err)
		}
	}
	stopSampling()
	<-sampled
	sampler.Sample(ctx) // and one at the very end
	samples, sampleErrs, violations, lastErr := sampler.Result()
	elapsed := time.Since(start)

	batches := w.rec.Batches()
	stream, repeats, err := replicacheck.Stream(batches)
	t.Logf("%s; %d batches (%s; %d while writing), %d changes, %d delivered again; ticks while writing %v; tick errors: %d injected, %d busy; %d samples; %v",
		wl.Stats(), len(batches), replicacheck.Owners(batches), concurrent, len(stream), repeats, outcomes, errs.injected, errs.busy, samples, elapsed)
	if err != nil {
		t.Fatalf("the batches do not chain: %v", err)
	}
	if errs.other > 0 || errs.slotAhead > 0 {
		t.Errorf("%d unexpected tick errors, %d ErrSlotAhead with the blob still behind the slot: %s", errs.other, errs.slotAhead, strings.Join(errs.examples, "\n"))
	}
	if errs.stalePeek > 0 { // what TestLogicalReplicaStalePeek pins down: no loss, but a tick failed for nothing
		t.Errorf("%d ticks failed with a spurious ErrSlotAhead (a checkpoint read before another runner committed and advanced the slot), e.g. %s",
			errs.stalePeek, strings.Join(errs.stale, "\n"))
	}
	for _, v := range violations {
		t.Errorf("the slot was ahead of the checkpoint: %v", v)
	}
	if samples < 20 || sampleErrs > samples/10 {
		t.Errorf("%d samples, %d failed (last: %v)", samples, sampleErrs, lastErr)
	}

	table, err := w.setup.Rows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all := len(table)
	w.setup.Options.Hidden = func(id int64) bool { return w.filtered(wl, id) }
	for _, p := range slices.Concat(w.setup.Tables(stream), w.setup.Hide(table, stream), replicacheck.CheckImages(stream, w.opts.Full)) {
		t.Error(p)
	}
	if tables := map[string]int{}; w.setup.Second != "" {
		mixed := map[uint64]map[string]bool{} // the transactions that changed both tables
		for _, c := range stream {
			tables[c.Table]++
			if mixed[c.Tx] == nil {
				mixed[c.Tx] = map[string]bool{}
			}
			mixed[c.Tx][c.Table] = true
		}
		both := 0
		for _, m := range mixed {
			if len(m) == 2 {
				both++
			}
		}
		t.Logf("changes by table %v; %d transactions changed both", tables, both)
		if len(tables) != 2 || both == 0 {
			t.Errorf("the run did not exercise two tables: changes by table %v, %d transactions of both", tables, both)
		}
	}
	if hidden := all - len(table); w.opts.Filter != "" && hidden == 0 || w.origin != "" && wl.Own == 0 {
		t.Errorf("the run did not exercise the filter or the skipped writer: %d rows hidden, %d transactions of the application's own", hidden, wl.Own)
	}
	replica, err := replicacheck.Apply(stream)
	if err != nil {
		t.Errorf("applying the stream: %v", err)
	}
	for _, d := range replicacheck.Diff(replica, table) {
		t.Errorf("stream applied in order: %s", d)
	}
	for _, d := range replicacheck.Diff(replicacheck.ApplyArrival(batches), table) {
		t.Errorf("deliveries applied as they arrived: %s", d)
	}
	witness, err := w.setup.WitnessStream(ctx, w.settings().Config(w.poller("witness")))
	if err != nil {
		t.Fatal(err)
	}
	if err := replicacheck.SameStream(stream, witness); err != nil {
		t.Error(err)
	}

	cp, err := w.checkpoint(ctx)
	if err != nil || cp == nil {
		t.Fatalf("checkpoint %v, %v", cp, err)
	}
	cpPos, _ := pgcdc.CursorPosition(cp)
	if len(stream) > 0 && cpPos.String() != stream[len(stream)-1].Pos {
		t.Errorf("the checkpoint is %s, the stream ends at %s", cpPos, stream[len(stream)-1].Pos)
	}
	if slot, err := w.setup.SlotLSN(ctx, w.setup.Slot); err != nil || slot.LSN > cpPos.LSN || slot.Before(startPos) {
		t.Errorf("at the end the slot is at %s (%v), the checkpoint %s", slot, err, cpPos)
	}

	// The run did what it is meant to exercise.
	owned, mid := map[string]bool{}, 0
	for _, b := range batches {
		owned[b.Owner] = true
		if strings.Contains(b.To, "+") {
			mid++
		}
	}
	if len(owned) < 2 || repeats == 0 || mid == 0 || wl.Held == 0 || wl.RolledBack == 0 || wl.Moved == 0 {
		t.Errorf("the run did not exercise everything: %d owners delivered, %d repeats, %d batches ending inside a transaction; %s",
			len(owned), repeats, mid, wl.Stats())
	}
}

// tickLoops runs each runner's ticks on a timer of period pace, as the host's timer would, in a
// goroutine each, until stop is closed; each tick's summary and error go to after, and ticks
// counts them. Wait on the group it returns.
func tickLoops(runners []*tick.Runner, pace time.Duration, stop <-chan struct{}, ticks *replicacheck.Ticks, after func(i int, sum tick.Summary, err error)) *sync.WaitGroup {
	var loops sync.WaitGroup
	for i, r := range runners {
		loops.Add(1)
		go func() {
			defer loops.Done()
			timer := time.NewTicker(pace) // the timer's schedule, not a wait for anything
			defer timer.Stop()
			for {
				select {
				case <-stop:
					return
				case <-timer.C:
				}
				sum, err := r.Tick(ctx, "")
				after(i, sum, err)
				ticks.Add()
			}
		}()
	}
	return &loops
}

// inTicks is, for a workload that timed out waiting for ticks (issue 42: under the whole suite,
// twice, no tick of any runner returned for the rest of the deadline once writers held
// transactions open), the stacks of the goroutines inside a runner's Tick: where it waits.
func inTicks() string {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
		return "no goroutine dump: " + err.Error()
	}
	var in []string
	for _, g := range strings.Split(buf.String(), "\n\n") {
		if strings.Contains(g, "tick.(*Runner).Tick") {
			in = append(in, g)
		}
	}
	if len(in) == 0 {
		return "no goroutine is inside a tick"
	}
	return fmt.Sprintf("%d goroutines inside a tick:\n%s", len(in), strings.Join(in, "\n\n"))
}

// pausingSource runs pause once, at its first Fetch: between a tick's read of the state blob and
// its peek of the source, where a process can be descheduled for any time.
type pausingSource struct {
	tick.Source
	once  sync.Once
	pause func()
}

func (p *pausingSource) Fetch(ctx context.Context, after *state.Cursor, limit int) (*row.Batch, error) {
	p.once.Do(p.pause)
	return p.Source.Fetch(ctx, after, limit)
}

// insertSync commits rows first..last and waits for the commit's flush (decoding reads only
// flushed WAL).
func (w *replicaWorld) insertSync(first, last int) {
	w.t.Helper()
	tx, err := w.db.Begin()
	if err != nil {
		w.t.Fatal(err)
	}
	defer tx.Rollback()
	for _, q := range []string{"SET LOCAL synchronous_commit = on",
		fmt.Sprintf("INSERT INTO %s SELECT g, 'n' || g, NULL FROM generate_series(%d, %d) g", w.setup.Table, first, last)} {
		if _, err := tx.Exec(q); err != nil {
			w.t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		w.t.Fatal(err)
	}
}

// TestLogicalReplicaStalePeek: a tick reads the state blob (checkpoint C1), and before its
// lease-free peek of the slot another runner's tick delivers, commits C2 and advances the slot to
// C2. The slot is not ahead of the checkpoint (the blob says C2), and the stale tick would lose
// the race for the lease anyway (its acquire is a CAS on the ETag it read); it must end like a
// tick that finds the lease held, not fail with ErrSlotAhead, whose message tells the operator
// that the changes were consumed by something else and to reset the poller to the slot.
func TestLogicalReplicaStalePeek(t *testing.T) {
	w := newReplicaWorld(t, 7)
	a, b := w.runner("A"), w.runner("B")
	w.insertSync(1, 3)
	if sum, err := a.Tick(ctx, ""); err != nil || sum.Rows != 3 {
		t.Fatalf("A's first tick: %+v %v", sum, err)
	}
	w.insertSync(4, 6)
	a = w.runner("A") // a source of its own (it may answer from a peek of a moment ago, before rows 4-6)
	var aSum tick.Summary
	var aErr error
	b.Source = &pausingSource{Source: b.Source, pause: func() { aSum, aErr = a.Tick(ctx, "") }}
	sum, err := b.Tick(ctx, "") // reads C1, then (paused) A commits C2 and advances the slot, then B peeks
	if aErr != nil || aSum.Rows != 3 {
		t.Fatalf("A's second tick, while B was paused: %+v %v", aSum, aErr)
	}
	cp, _ := w.checkpoint(ctx)
	slot, _ := w.setup.SlotLSN(ctx, w.setup.Slot)
	cpPos, _ := pgcdc.CursorPosition(cp)
	if slot.LSN > cpPos.LSN {
		t.Fatalf("the slot %s is past the checkpoint %s", slot, cpPos)
	}
	if err != nil {
		t.Errorf("B's tick, whose checkpoint was stale when it peeked (the slot %s is at the blob's checkpoint %s): %v (outcome %s)", slot, cpPos, err, sum.Outcome)
	}
	if sum.Rows != 0 {
		t.Errorf("B delivered %d rows from a stale checkpoint", sum.Rows)
	}
	if sum, err := b.Tick(ctx, ""); err != nil || sum.Outcome != tick.Idle {
		t.Errorf("B's next tick: %+v %v", sum, err)
	}
}
