package tick_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// countingSource counts the reads and cleanup statements a tick runs on its source, and fails
// the next cleanup statements while fail is above 0.
type countingSource struct {
	*source.Source
	fetches, looks, deletes atomic.Int64
	fail                    atomic.Int64
}

func (c *countingSource) Fetch(ctx context.Context, after *state.Cursor, limit int) (*row.Batch, error) {
	c.fetches.Add(1)
	return c.Source.Fetch(ctx, after, limit)
}

func (c *countingSource) Cleanup(ctx context.Context, upTo *state.Cursor, limit int) (int64, error) {
	c.deletes.Add(1)
	if c.fail.Add(-1) >= 0 {
		return 0, errors.New("permission denied for table orders")
	}
	return c.Source.Cleanup(ctx, upTo, limit)
}

func (c *countingSource) AwaitingCleanup(ctx context.Context, upTo *state.Cursor, limit int) (int64, error) {
	c.looks.Add(1)
	return c.Source.AwaitingCleanup(ctx, upTo, limit)
}

// cleanupRunner is a runner of the orders poller with cleanup c over its own counting source,
// deleting at most rows a statement, statements a tick; its tick commits once, as it ends
// (TestCleanupBehindCommits commits more often).
func (e *env) cleanupRunner(c *poller.Cleanup, h handlerFunc, rows, statements int) (*tick.Runner, *countingSource) {
	e.t.Helper()
	def := definition()
	opts := []poller.Option{poller.WithColumns("id", "customer", "amount", "updated_at"), poller.WithKey("id"),
		poller.WithCursorColumn("updated_at"), poller.WithSettleLag(time.Second)}
	if c != nil {
		cd := sourcedef.Cleanup(*c)
		def.Cleanup = &cd
		opts = append(opts, poller.WithCleanup(*c))
	}
	src, err := drivers.Open(ctx, source.Config{Poller: "orders", Driver: sqlite.Name, DSN: e.dsn, Definition: def})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { src.Close() })
	r, err := tick.Open(ctx, tick.Config{Poller: pollerdef.Of(poller.New("orders", "orders", poller.TimestampPK, h, opts...)), Store: e.st, App: "test",
		Owner: "A", Source: src, Settings: appsettings.Settings{BatchSize: e.batch, LeaseTTL: lease.DefaultTTL,
			HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: time.Minute, CheckpointInterval: time.Hour}}) // one commit, at the end
	if err != nil {
		e.t.Fatal(err)
	}
	cs := &countingSource{Source: src}
	r.Source, r.CleanupRows, r.CleanupStatements = cs, rows, statements
	return r, cs
}

// left returns the ids left in the orders table.
func (e *env) left() []int64 {
	e.t.Helper()
	rows, err := e.db.Query("SELECT id FROM orders ORDER BY id")
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			e.t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// idleTick runs a tick that must be idle, and returns its summary and its blob reads and writes.
func (e *env) idleTick(r *tick.Runner) (tick.Summary, int64, int64) {
	e.t.Helper()
	gets, puts := e.st.Gets.Load(), e.st.Puts.Load()
	sum, err := r.Tick(ctx, "idle")
	if err != nil || sum.Outcome != tick.Idle {
		e.t.Fatalf("idle tick: %+v, %v", sum, err)
	}
	return sum, e.st.Gets.Load() - gets, e.st.Puts.Load() - puts
}

// TestCleanupAfterCommit: the delivered rows are deleted only once the tick's checkpoint is
// committed (every row is still there while batches are handled), at most rows x statements a
// tick; the idle ticks after it delete the rest without a blob write and send nothing again;
// once nothing is left an idle tick runs no DELETE and no look: one blob read and the peek.
func TestCleanupAfterCommit(t *testing.T) {
	e := newEnv(t, 10)
	rec := &recorder{}
	var whileHandled []int
	r, cs := e.cleanupRunner(&poller.Cleanup{Delete: true}, func(ctx context.Context, b *poller.Batch[poller.Row]) error {
		whileHandled = append(whileHandled, len(e.left()))
		return rec.handle(ctx, b)
	}, 7, 2)
	e.insert(30)

	sum, err := r.Tick(ctx, "deliver")
	if err != nil || sum.Outcome != tick.Committed || sum.Rows != 30 || sum.RowsDeleted != 14 || sum.CleanupError != "" {
		t.Fatalf("delivering tick: %+v, %v; want 30 rows delivered, 14 deleted (2 statements of 7)", sum, err)
	}
	if !slices.Equal(whileHandled, []int{30, 30, 30}) {
		t.Fatalf("rows in the table while each batch was handled: %v, want all 30 each time (none deleted before the tick's commit)", whileHandled)
	}
	if d := e.doc(); !d.Lease.Released() || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "30" {
		t.Fatalf("the checkpoint after the tick: %+v", d.Checkpoint)
	}
	if left := e.left(); len(left) != 16 || left[0] != 15 {
		t.Fatalf("left after the delivering tick: %v, want 15-30", left)
	}

	// Idle ticks delete the rest, bounded the same, never writing the state blob.
	for i, want := range []int64{14, 2} {
		looks := cs.looks.Load()
		sum, gets, puts := e.idleTick(r)
		if sum.RowsDeleted != want || gets != 1 || puts != 0 || cs.looks.Load()-looks != 1 {
			t.Fatalf("idle tick %d: deleted %d (want %d), %d blob reads, %d writes, %d looks", i, sum.RowsDeleted, want, gets, puts, cs.looks.Load()-looks)
		}
	}
	if left := e.left(); len(left) != 0 {
		t.Fatalf("left after the idle ticks: %v", left)
	}
	if len(rec.ids) != 30 {
		t.Fatalf("delivered %d rows, want 30 (nothing sent again)", len(rec.ids))
	}

	// Nothing left: an idle tick is one blob read and one query (the peek), no look, no DELETE.
	fetches, looks, deletes := cs.fetches.Load(), cs.looks.Load(), cs.deletes.Load()
	sum, gets, puts := e.idleTick(r)
	if sum.RowsDeleted != 0 || gets != 1 || puts != 0 || cs.fetches.Load()-fetches != 1 || cs.looks.Load() != looks || cs.deletes.Load() != deletes {
		t.Fatalf("idle tick with nothing to delete: %d blob reads, %d writes, %d fetches, %d looks, %d deletes; want 1, 0, 1, 0, 0",
			gets, puts, cs.fetches.Load()-fetches, cs.looks.Load()-looks, cs.deletes.Load()-deletes)
	}
	// A process that has not looked yet (just started): one look, which finds nothing, no DELETE.
	fresh, fcs := e.cleanupRunner(&poller.Cleanup{Delete: true}, rec.handle, 7, 2)
	if _, _, puts := e.idleTick(fresh); puts != 0 || fcs.looks.Load() != 1 || fcs.deletes.Load() != 0 {
		t.Fatalf("a new process's idle tick with nothing to delete: %d writes, %d looks, %d deletes; want 0, 1, 0", puts, fcs.looks.Load(), fcs.deletes.Load())
	}
}

// TestCleanupAfterCrash: a checkpoint committed by a process that died before its cleanup (as
// one without cleanup leaves it) has its rows deleted by the next process's first tick, an idle
// one, which sends none of them again; a cleanup that fails leaves the tick's delivery committed,
// says why in the summary, and the next tick deletes the rows.
func TestCleanupAfterCrash(t *testing.T) {
	e := newEnv(t, 10)
	rec := &recorder{}
	before, _ := e.cleanupRunner(nil, rec.handle, 0, 0)
	e.insert(25)
	if sum, err := before.Tick(ctx, "deliver"); err != nil || sum.Rows != 25 || sum.RowsDeleted != 0 {
		t.Fatalf("delivering tick without cleanup: %+v, %v", sum, err)
	}

	after, cs := e.cleanupRunner(&poller.Cleanup{Delete: true}, rec.handle, 0, 0)
	cs.fail.Store(1)
	e.insert(5)
	sum, err := after.Tick(ctx, "deliver, cleanup fails")
	if err != nil || sum.Outcome != tick.Committed || sum.Rows != 5 || sum.CleanupError == "" || sum.RowsDeleted != 0 {
		t.Fatalf("a tick whose cleanup fails: %+v, %v; want committed with the cleanup's error", sum, err)
	}
	if d := e.doc(); string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "30" {
		t.Fatalf("the checkpoint after a failed cleanup: %+v, want the delivery committed", d.Checkpoint)
	}
	if len(e.left()) != 30 {
		t.Fatalf("rows left after a failed cleanup: %d", len(e.left()))
	}
	sum, _, puts := e.idleTick(after)
	if sum.RowsDeleted != 30 || sum.CleanupError != "" || puts != 0 || len(e.left()) != 0 {
		t.Fatalf("the idle tick after: deleted %d (%q), %d writes, %d rows left; want 30 deleted, no write", sum.RowsDeleted, sum.CleanupError, puts, len(e.left()))
	}
	if len(rec.ids) != 30 || rec.ids[29] != 30 {
		t.Fatalf("delivered %v, want 1-30 once", rec.ids)
	}
}

// TestCleanupKeepsWindow: with older_than, the delivered rows younger than it stay; they go once
// they are older, on the database's clock.
func TestCleanupKeepsWindow(t *testing.T) {
	e := newEnv(t, 100)
	for id, age := range map[int]time.Duration{1: 3 * time.Hour, 2: 3 * time.Hour, 3: 90 * time.Minute, 4: 30 * time.Minute} {
		ts := time.Now().UTC().Add(-age).Format("2006-01-02T15:04:05.000000Z")
		if _, err := e.db.Exec(`INSERT INTO orders VALUES (?, ?, ?, ?)`, id, fmt.Sprint("c", id), "1.00", ts); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{}
	r, _ := e.cleanupRunner(&poller.Cleanup{OlderThan: 2 * time.Hour}, rec.handle, 0, 0)
	if sum, err := r.Tick(ctx, "deliver"); err != nil || sum.Rows != 4 || sum.RowsDeleted != 2 {
		t.Fatalf("tick: %+v, %v; want 4 delivered, the 2 older than 2h deleted", sum, err)
	}
	if left := e.left(); !slices.Equal(left, []int64{3, 4}) {
		t.Fatalf("left: %v, want 3 and 4 (younger than 2h)", left)
	}
	wider, _ := e.cleanupRunner(&poller.Cleanup{OlderThan: time.Hour}, rec.handle, 0, 0)
	if sum, _, _ := e.idleTick(wider); sum.RowsDeleted != 1 || !slices.Equal(e.left(), []int64{4}) {
		t.Fatalf("older than 1h: deleted %d, left %v; want row 3 deleted", sum.RowsDeleted, e.left())
	}
}

// TestCleanupBehindCommits: a tick that commits before its end (CheckpointInterval) deletes the
// rows behind each commit while it goes on, so that a tick catching up a backlog keeps the table
// small; a row is still there while its batch, or any later one, is handled (never deleted
// before its commit), and nothing is sent twice.
func TestCleanupBehindCommits(t *testing.T) {
	e := newEnv(t, 10)
	rec := &recorder{}
	var early []string
	r, _ := e.cleanupRunner(&poller.Cleanup{Delete: true}, func(ctx context.Context, b *poller.Batch[poller.Row]) error {
		first := b.Rows[0].Get("id").(int64)
		left := e.left()
		for id := first; id <= 30; id++ {
			if !slices.Contains(left, id) {
				early = append(early, fmt.Sprintf("row %d gone while the batch from %d was handled", id, first))
			}
		}
		if first == 11 { // the first batch's commit deletes its rows meanwhile
			deadline := time.Now().Add(10 * time.Second)
			for len(e.left()) > 20 {
				if time.Now().After(deadline) {
					return fmt.Errorf("the rows behind the first commit are still there: %v", e.left())
				}
				runtime.Gosched()
			}
		}
		return rec.handle(ctx, b)
	}, 7, 2)
	r.Settings.CheckpointInterval = 0 // a commit before each batch
	e.insert(30)
	sum, err := r.Tick(ctx, "deliver")
	if err != nil || sum.Rows != 30 || sum.CleanupError != "" {
		t.Fatalf("delivering tick: %+v, %v", sum, err)
	}
	if len(early) > 0 {
		t.Fatalf("deleted before their commit: %v", early)
	}
	// The first commit's 10 rows went meanwhile; the end's bounded cleanup (14) or the second
	// commit's (10, when the first had ended by then) took more.
	if left := e.left(); sum.RowsDeleted < 24 || int(sum.RowsDeleted)+len(left) != 30 {
		t.Fatalf("deleted %d in the tick, %d left (%v)", sum.RowsDeleted, len(left), left)
	}
	for range 2 {
		e.idleTick(r)
	}
	if left := e.left(); len(left) != 0 || len(rec.ids) != 30 {
		t.Fatalf("after the idle ticks: %v left, %d delivered (want 0, 30)", left, len(rec.ids))
	}
}
