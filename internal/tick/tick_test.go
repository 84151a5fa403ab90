package tick_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	_ "modernc.org/sqlite"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/telemetry"
	"github.com/pseudotrigger/pseudotrigger/internal/telemetry/telemetrytest"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

var ctx = context.Background()

type env struct {
	t     *testing.T
	db    *sql.DB
	dsn   string
	st    *lease.Counting
	src   *source.Source
	next  int
	batch int
}

func newEnv(t *testing.T, batchSize int) *env {
	dsn := filepath.Join(t.TempDir(), "orders.db")
	db, err := sql.Open("sqlite", dsn+"?_pragma=busy_timeout(10000)") // the test's reads wait for a cleanup's DELETE
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL, updated_at TEXT NOT NULL);
		CREATE INDEX ix_orders ON orders (updated_at, id)`); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, db: db, dsn: dsn, st: &lease.Counting{Store: memstore.New(nil)}, batch: batchSize}
	e.src, err = drivers.Open(ctx, source.Config{Poller: "orders", Driver: sqlite.Name, DSN: dsn, Definition: definition()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.src.Close() })
	return e
}

func definition() sourcedef.Definition {
	return sourcedef.Definition{
		Table: sourcedef.Table{Name: "orders"}, Columns: []string{"id", "customer", "amount", "updated_at"},
		Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "updated_at"}, PK: []string{"id"},
		SettleLag: time.Second,
	}
}

// insert adds n rows an hour old.
func (e *env) insert(n int) {
	e.t.Helper()
	tx, err := e.db.Begin()
	if err != nil {
		e.t.Fatal(err)
	}
	base := time.Now().UTC().Add(-time.Hour)
	for range n {
		e.next++
		ts := base.Add(time.Duration(e.next) * time.Microsecond).Format("2006-01-02T15:04:05.000000Z")
		if _, err := tx.Exec(`INSERT INTO orders VALUES (?, ?, ?, ?)`, e.next, fmt.Sprintf("c%d", e.next), "1.00", ts); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		e.t.Fatal(err)
	}
}

// handlerFunc is an untyped poller handler.
type handlerFunc = func(context.Context, *poller.Batch[poller.Row]) error

// ordersPoller is the tests' poller of the orders table, handing its batches to h.
func ordersPoller(h handlerFunc) *poller.Poller {
	return poller.New("orders", "orders", poller.TimestampPK, h, poller.WithColumns("id", "customer", "amount", "updated_at"),
		poller.WithKey("id"), poller.WithCursorColumn("updated_at"), poller.WithSettleLag(time.Second))
}

func (e *env) runner(owner string, h handlerFunc) *tick.Runner {
	e.t.Helper()
	r, err := tick.Open(ctx, tick.Config{Poller: pollerdef.Of(ordersPoller(h)), Store: e.st, App: "test", Owner: owner, Source: e.src,
		Settings: appsettings.Settings{BatchSize: e.batch, LeaseTTL: lease.DefaultTTL, HeartbeatInterval: lease.DefaultTTL / 4,
			TickBudget: time.Minute, CheckpointInterval: 0}})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) doc() *state.Doc {
	e.t.Helper()
	b, err := e.st.Store.Get(ctx, "state/test/orders.json")
	if err != nil {
		e.t.Fatal(err)
	}
	d, err := state.Decode("state/test/orders.json", "orders", b.Data)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// recorder is a handler that records every delivered id.
type recorder struct {
	mu      sync.Mutex
	ids     []int64
	batches []*poller.Batch[poller.Row]
}

func (r *recorder) handle(_ context.Context, b *poller.Batch[poller.Row]) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, b)
	for _, row := range b.Rows {
		r.ids = append(r.ids, row.Get("id").(int64))
	}
	return nil
}

func TestTickDeliversAndCountsWrites(t *testing.T) {
	e := newEnv(t, 10)
	rec := &recorder{}
	r := e.runner("A", rec.handle)

	// Nothing to read: one blob read, no write.
	sum, err := r.Tick(ctx, "inv-1")
	if err != nil || sum.Outcome != tick.Idle || e.st.Puts.Load() != 0 || e.st.Gets.Load() != 1 {
		t.Fatalf("idle tick: %+v %v; %d reads %d writes", sum, err, e.st.Gets.Load(), e.st.Puts.Load())
	}

	// An exact multiple of the batch size: the last full batch must still carry the release.
	e.insert(100)
	puts0 := e.st.Puts.Load()
	if sum, err := r.Tick(ctx, "inv-exact"); err != nil || sum.Batches != 10 || e.st.Puts.Load()-puts0 != 11 {
		t.Fatalf("10 full batches: %+v %v, %d writes (want 11)", sum, err, e.st.Puts.Load()-puts0)
	}
	rec.ids = nil
	e.insert(95)
	gets, puts := e.st.Gets.Load(), e.st.Puts.Load()
	sum, err = r.Tick(ctx, "inv-2")
	if err != nil {
		t.Fatal(err)
	}
	writes := e.st.Puts.Load() - puts
	if sum.Outcome != tick.Committed || sum.Rows != 95 || sum.Batches != 10 || sum.FencingToken != 2 {
		t.Fatalf("summary %+v", sum)
	}
	if writes > int64(sum.Batches)+1 || e.st.Gets.Load()-gets != 1 {
		t.Fatalf("a tick of %d batches cost %d writes (at most %d) and %d reads", sum.Batches, writes, sum.Batches+1, e.st.Gets.Load()-gets)
	}
	if len(rec.ids) != 95 || rec.ids[0] != 101 || rec.ids[94] != 195 {
		t.Fatalf("delivered %d ids", len(rec.ids))
	}
	d := e.doc()
	if !d.Lease.Released() || d.Checkpoint.Cursor == nil || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "195" || d.Checkpoint.Metadata.RowCount != 5 {
		t.Fatalf("document after the tick: %+v", d)
	}
	if sum.Cursor == nil || string(sum.Cursor.Tiebreaker["id"]) != "195" {
		t.Fatalf("summary cursor %+v", sum.Cursor)
	}

	// Caught up: idle again, no write.
	puts = e.st.Puts.Load()
	if sum, err := r.Tick(ctx, "inv-3"); err != nil || sum.Outcome != tick.Idle || e.st.Puts.Load() != puts {
		t.Fatalf("caught-up tick: %+v %v", sum, err)
	}

	// With a checkpoint interval, fewer writes: still B+1 at most, and everything committed.
	r.Settings.CheckpointInterval = time.Hour
	e.insert(50)
	puts = e.st.Puts.Load()
	if sum, err := r.Tick(ctx, "inv-4"); err != nil || sum.Rows != 50 || e.st.Puts.Load()-puts != 2 {
		t.Fatalf("tick with a long checkpoint interval: %+v %v, %d writes (want acquire + final commit)", sum, err, e.st.Puts.Load()-puts)
	}
	if d := e.doc(); string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "245" {
		t.Fatal("the final commit did not land")
	}
}

func TestHandlerFailureIsRecordedAndRetried(t *testing.T) {
	for _, mode := range []string{"error", "panic"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, 10)
			e.insert(25)
			var fail atomic.Bool
			fail.Store(true)
			rec := &recorder{}
			var attempts []int64
			var ids []string
			r := e.runner("A", func(ctx context.Context, b *poller.Batch[poller.Row]) error {
				if b.From != nil && string(b.From.Tiebreaker["id"]) == "10" { // the second batch fails
					attempts = append(attempts, b.Attempt)
					ids = append(ids, b.ID)
					if fail.Load() {
						if mode == "panic" {
							panic("boom")
						}
						return errors.New("webhook said 503")
					}
				}
				return rec.handle(ctx, b)
			})
			for i := 1; i <= 3; i++ {
				sum, err := r.Tick(ctx, "")
				if !errors.Is(err, tick.ErrBatchFailed) || !strings.Contains(err.Error(), "keys") {
					t.Fatalf("tick %d: %v", i, err)
				}
				d := e.doc()
				if d.Failure == nil || d.Failure.Attempts != int64(i) || !d.Lease.Released() || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "10" {
					t.Fatalf("tick %d: failure %+v, released %v, cursor %s", i, d.Failure, d.Lease.Released(), d.Checkpoint.Cursor.Value)
				}
				if i == 1 && (sum.Rows != 10 || sum.Batches != 1) {
					t.Fatalf("first tick: %+v", sum)
				}
				if mode == "panic" && !strings.Contains(d.Failure.LastError, "panic: boom") {
					t.Fatalf("last error %q", d.Failure.LastError)
				}
			}
			fail.Store(false)
			if sum, err := r.Tick(ctx, ""); err != nil || sum.Rows != 15 {
				t.Fatalf("after the fix: %+v %v", sum, err)
			}
			if want := []int64{1, 2, 3, 4}; fmt.Sprint(attempts) != fmt.Sprint(want) {
				t.Fatalf("attempts %v, want %v", attempts, want)
			}
			if ids[0] != ids[1] || ids[1] != ids[3] {
				t.Fatalf("the retried batch changed its id: %v", ids)
			}
			if d := e.doc(); d.Failure != nil || len(rec.ids) != 25 {
				t.Fatalf("after success: failure %+v, %d rows", d.Failure, len(rec.ids))
			}
		})
	}
}

func TestLeaseHeldWritesNothing(t *testing.T) {
	e := newEnv(t, 10)
	e.insert(5)
	m, err := lease.New(e.st, lease.Config{Poller: "orders", Blob: "state/test/orders.json", Owner: "other", Fingerprint: e.src.Fingerprint()})
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := m.Read(ctx)
	if res, err := m.Acquire(ctx, snap); err != nil || !res.Won() {
		t.Fatal(err)
	}
	puts := e.st.Puts.Load()
	sum, err := e.runner("A", (&recorder{}).handle).Tick(ctx, "")
	if err != nil || sum.Outcome != tick.LeaseHeld || sum.Holder != "other" || e.st.Puts.Load() != puts {
		t.Fatalf("%+v %v", sum, err)
	}
}

func TestDrainingAndBudgetStopTakingBatches(t *testing.T) {
	e := newEnv(t, 10)
	e.insert(100)
	drain := make(chan struct{})
	rec := &recorder{}
	r := e.runner("A", func(ctx context.Context, b *poller.Batch[poller.Row]) error {
		if len(rec.batches) == 2 {
			close(drain) // shutdown arrives during the third batch
		}
		return rec.handle(ctx, b)
	})
	r.Draining = drain
	sum, err := r.Tick(ctx, "")
	if err != nil || sum.Batches != 3 || sum.Rows != 30 {
		t.Fatalf("draining: %+v %v", sum, err)
	}
	if d := e.doc(); !d.Lease.Released() || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "30" {
		t.Fatal("the draining tick did not commit and release")
	}

	r.Draining = nil
	r.Settings.TickBudget = time.Nanosecond
	if sum, err := r.Tick(ctx, ""); err != nil || sum.Batches != 1 {
		t.Fatalf("an exhausted budget takes one batch: %+v %v", sum, err)
	}
}

func TestLeaseLostCancelsHandlerAndCommitsNothing(t *testing.T) {
	e := newEnv(t, 10)
	e.insert(5)
	clk := clock.NewFake(time.Now())
	started := make(chan struct{})
	r := e.runner("A", func(ctx context.Context, b *poller.Batch[poller.Row]) error {
		close(started)
		<-ctx.Done() // a delivery that only ends when the lease does
		return context.Cause(ctx)
	})
	m, err := lease.New(e.st, lease.Config{Poller: "orders", Blob: "state/test/orders.json", Owner: "A", Fingerprint: e.src.Fingerprint(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	r.Lease, r.Clock = m, clk
	done := make(chan error, 1)
	go func() { _, err := r.Tick(ctx, ""); done <- err }()
	<-started
	// Someone else takes the blob over (as after an expiry, or a reset).
	b, err := e.st.Get(ctx, "state/test/orders.json")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := state.Decode("state/test/orders.json", "orders", b.Data)
	d.Lease.OwnerID, d.Lease.FencingToken, d.WriteID = "intruder", d.Lease.FencingToken+1, "x"
	data, _ := state.Encode(d)
	if _, err := e.st.Put(ctx, "state/test/orders.json", data, store.IfMatch(b.ETag)); err != nil {
		t.Fatal(err)
	}
	// The next heartbeat finds it and cancels the handler.
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := clk.BlockUntilWaiters(wait, 2); err != nil {
		t.Fatal(err)
	}
	clk.Advance(lease.DefaultTTL / 4)
	select {
	case err := <-done:
		if !errors.Is(err, lease.ErrLost) {
			t.Fatalf("tick: %v, want ErrLost", err)
		}
	case <-wait.Done():
		t.Fatal("the handler was not cancelled when the lease was lost")
	}
	if got := e.doc(); got.Lease.OwnerID != "intruder" || got.Checkpoint.Cursor != nil || got.Failure != nil {
		t.Fatalf("the stale holder wrote over the new owner: %+v", got)
	}
}

// stoppedTimers is a clock whose timers never fire: a process paused (a VM freeze, SIGSTOP)
// whose watchdog and heartbeats have not yet run when it resumes.
type stoppedTimers struct{ *clock.Fake }

func (stoppedTimers) After(time.Duration) <-chan time.Time { return nil }

// TestPausedPastTrustWindowDeliversNothing: a tick paused during a batch past its trust window
// hands no further batch to the handler on resuming, even before its watchdog has run, and
// commits nothing.
func TestPausedPastTrustWindowDeliversNothing(t *testing.T) {
	e := newEnv(t, 5)
	e.insert(10)
	fake := clock.NewFake(time.Now())
	clk := stoppedTimers{fake}
	var batches atomic.Int64
	r := e.runner("A", func(ctx context.Context, b *poller.Batch[poller.Row]) error {
		if batches.Add(1) == 1 {
			fake.Advance(lease.DefaultTTL) // paused in the handler, past the trust window
		}
		return nil
	})
	m, err := lease.New(e.st, lease.Config{Poller: "orders", Blob: "state/test/orders.json", Owner: "A", Fingerprint: e.src.Fingerprint(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	r.Lease, r.Clock = m, clk
	r.Settings.CheckpointInterval = time.Hour // no commit between the batches
	r.Settings.TickBudget = time.Hour
	_, err = r.Tick(ctx, "")
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("tick: %v, want ErrLost", err)
	}
	if n := batches.Load(); n != 1 {
		t.Fatalf("the handler was given %d batches, want only the one it was paused in", n)
	}
	if d := e.doc(); d.Checkpoint.Cursor != nil || d.Lease.Released() {
		t.Fatalf("a holder past its trust window wrote: %+v", d)
	}
}

// TestQuarantineBisects: two poison rows in a batch of 20 are isolated by bisection, dead-lettered
// with their errors, every other row is delivered, and the checkpoint moves past the batch with
// the tick recorded in the document's history.
func TestQuarantineBisects(t *testing.T) {
	e := newEnv(t, 20)
	e.insert(20)
	poison := map[int64]bool{5: true, 13: true}
	delivered := map[int64]int{}
	calls := 0
	r := e.runner("A", func(_ context.Context, b *poller.Batch[poller.Row]) error {
		calls++
		for _, row := range b.Rows {
			if id := row.Get("id").(int64); poison[id] {
				return fmt.Errorf("row %d is poison", id)
			}
		}
		for _, row := range b.Rows {
			delivered[row.Get("id").(int64)]++
		}
		return nil
	})
	r.Settings.MaxAttempts, r.Settings.OnPoison = 1, appsettings.Quarantine
	reader := sdkmetric.NewManualReader()
	r.Metrics = telemetry.NewMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	var letters []*deadletter.Letter
	r.DeadLetters = func(ctx context.Context, l *deadletter.Letter) (string, error) {
		letters = append(letters, l)
		return deadletter.Write(ctx, e.st, "test", l)
	}
	sum, err := r.Tick(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 || len(letters[0].Rows) != 2 || string(letters[0].Rows[0].Key["id"]) != "5" || string(letters[0].Rows[1].Key["id"]) != "13" ||
		letters[0].Rows[0].Error != "row 5 is poison" || letters[0].Delivered != 18 || letters[0].BatchRows != 20 {
		t.Fatalf("letters: %+v", letters)
	}
	for id := int64(1); id <= 20; id++ {
		if (delivered[id] > 0) == poison[id] {
			t.Errorf("row %d delivered %d times", id, delivered[id])
		}
	}
	// 1 whole-batch call, then at most 2 calls per level for each poison row.
	if calls > 1+2*2*5 {
		t.Errorf("%d handler calls to isolate 2 rows of 20", calls)
	}
	d := e.doc()
	if string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "20" || d.Failure != nil || sum.DeadLettered != 2 || sum.Rows != 18 {
		t.Fatalf("checkpoint %s, failure %+v, summary %+v", d.Checkpoint.Cursor.Tiebreaker["id"], d.Failure, sum)
	}
	if n := len(d.History); n != 1 || d.History[0].Outcome != "committed" || d.History[0].RowsWaiting != 0 || d.History[0].Rows != 18 {
		t.Fatalf("history %+v", d.History)
	}
	// The metrics count the rows the bisection delivered, by op, and the rows dead-lettered.
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	m := telemetrytest.Values(t, rm)
	if sum.Ops["upsert"] != 18 || m["pseudotrigger.rows{pseudotrigger.op=upsert,pseudotrigger.poller=orders}"] != 18 ||
		m["pseudotrigger.dead_lettered{pseudotrigger.poller=orders}"] != 2 {
		t.Fatalf("ops %v, metrics %v: want 18 rows delivered, 2 dead-lettered", sum.Ops, m)
	}
	if _, err := e.st.Get(ctx, blobpath.DeadLetter("test", "orders", letters[0].BatchID)); err != nil {
		t.Fatalf("the dead letter is not in the store: %v", err)
	}
}
