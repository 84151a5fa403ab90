package tick_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// startBackfill writes a backfill of chunks of chunk rows into the poller's state document, as
// an operator's command would between ticks.
func (e *env) startBackfill(chunk int) {
	e.t.Helper()
	const name = "state/test/orders.json"
	b, err := e.st.Store.Get(ctx, name)
	if err != nil {
		e.t.Fatal(err)
	}
	d, err := state.Decode(name, "orders", b.Data)
	if err != nil {
		e.t.Fatal(err)
	}
	d.Backfill = &state.Backfill{ID: "bf_test", Kind: state.BackfillRequested, Chunk: chunk, StartedAt: state.At(time.Now())}
	data, err := state.Encode(d)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.Store.Put(ctx, name, data, store.IfMatch(b.ETag)); err != nil {
		e.t.Fatal(err)
	}
}

// stamp sets row id's customer and stamps it ago before now, as an UPDATE by the application.
func (e *env) stamp(id int, customer string, ago time.Duration) {
	e.t.Helper()
	ts := time.Now().UTC().Add(-ago).Format("2006-01-02T15:04:05.000000Z")
	if _, err := e.db.Exec(`UPDATE orders SET customer = ?, updated_at = ? WHERE id = ?`, customer, ts, id); err != nil {
		e.t.Fatal(err)
	}
}

// replica applies delivered rows in arrival order and checks that no read of a row arrives
// after a newer version of it.
type replica struct {
	t       *testing.T
	version map[int64]string // the newest updated_at applied, by id
	rows    map[int64]string // customer, by id
	reads   []int64
	live    []int64
}

func (r *replica) apply(b *poller.Batch[poller.Row]) {
	for _, row := range b.Rows {
		id, v := row.Get("id").(int64), row.Get("updated_at").(string)
		if row.Op() == "read" {
			r.reads = append(r.reads, id)
			if v < r.version[id] {
				r.t.Errorf("a read of row %d (version %s) arrived after its newer version %s", id, v, r.version[id])
			}
		} else {
			r.live = append(r.live, id)
		}
		if v >= r.version[id] {
			r.version[id], r.rows[id] = v, row.Get("customer").(string)
		}
	}
}

// TestBackfillBesideLiveChanges: a backfill sends the table's rows as reads, a chunk after each
// live batch, while the application keeps changing rows; a row changed after the live position
// is left to the live batches, so no read overwrites a newer change, and the replica built from
// the deliveries equals the table. Its progress is written with the lease's writes; when done it
// is gone from the document.
func TestBackfillBesideLiveChanges(t *testing.T) {
	e := newEnv(t, 5)
	e.insert(12)
	rep := &replica{t: t, version: map[int64]string{}, rows: map[int64]string{}}
	changed := false
	r := e.runner("A", func(_ context.Context, b *poller.Batch[poller.Row]) error {
		rep.apply(b)
		// While the backfill's first live batch is handled, the application changes row 4 (which
		// the next chunk reads) and row 11: after the live position, so theirs are live changes.
		if len(rep.reads) == 0 && rep.version[13] != "" && !changed {
			changed = true
			e.stamp(4, "c4-late", 5*time.Second)
			e.stamp(11, "c11-late", 4*time.Second)
		}
		return nil
	})
	if sum, err := r.Tick(ctx, "catch-up"); err != nil || sum.Rows != 12 {
		t.Fatalf("catch-up: %+v, %v", sum, err)
	}
	e.startBackfill(5)
	e.stamp(3, "c3-new", 10*time.Second) // changed before the backfill's tick: a live change
	e.insert(1)                          // row 13
	e.stamp(13, "c13", 9*time.Second)
	sum, err := r.Tick(ctx, "backfill")
	if err != nil {
		t.Fatalf("backfill tick: %+v, %v", sum, err)
	}
	if !changed {
		t.Fatal("the application's changes were not made")
	}
	if sum.Ops["read"] == 0 || sum.Ops["upsert"] == 0 {
		t.Fatalf("ops %v: want reads and live changes", sum.Ops)
	}
	// Every row was delivered since the backfill began: none skipped.
	since := map[int64]bool{}
	for _, id := range append(append([]int64{}, rep.reads...), rep.live[12:]...) {
		since[id] = true
	}
	for id := int64(1); id <= 13; id++ {
		if !since[id] {
			t.Errorf("row %d was not delivered since the backfill began (reads %v, live %v)", id, rep.reads, rep.live[12:])
		}
	}
	// The replica equals the table.
	rows, err := e.db.Query(`SELECT id, customer FROM orders`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id int64
		var customer string
		if err := rows.Scan(&id, &customer); err != nil {
			t.Fatal(err)
		}
		n++
		if rep.rows[id] != customer {
			t.Errorf("replica row %d: %q, the table %q", id, rep.rows[id], customer)
		}
	}
	if n != 13 || len(rep.rows) != 13 {
		t.Fatalf("replica of %d rows, table of %d", len(rep.rows), n)
	}
	if d := e.doc(); d.Backfill != nil || !d.Lease.Released() {
		t.Fatalf("after the backfill: %+v", d.Backfill)
	}
	// The next tick is idle again.
	if sum, err := r.Tick(ctx, "idle"); err != nil || sum.Outcome != "idle" {
		t.Fatalf("after the backfill: %+v, %v", sum, err)
	}
}

// TestBackfillResumesAfterItsLastChunk: a handler failing on a backfill's second chunk does not
// hold the live batches up: the tick goes on with them, runs no other chunk, and records the
// failure in the backfill's progress (the first chunk's progress committed); the next tick
// resumes with the second chunk, not from the start, and clears the failure.
func TestBackfillResumesAfterItsLastChunk(t *testing.T) {
	e := newEnv(t, 5)
	e.insert(12)
	var reads, live []int64
	fail := true
	r := e.runner("A", func(_ context.Context, b *poller.Batch[poller.Row]) error {
		if b.Rows[0].Op() != "read" {
			for _, row := range b.Rows {
				live = append(live, row.Get("id").(int64))
			}
			return nil
		}
		if fail && len(reads) == 5 {
			return errors.New("the consumer is down")
		}
		for _, row := range b.Rows {
			reads = append(reads, row.Get("id").(int64))
		}
		return nil
	})
	if _, err := r.Tick(ctx, "catch-up"); err != nil {
		t.Fatal(err)
	}
	e.startBackfill(5)
	e.insert(12) // rows 13-24: live batches for the failing tick
	sum, err := r.Tick(ctx, "fails")
	if err != nil || sum.Outcome != tick.Committed || len(live) != 24 {
		t.Fatalf("the tick with the failing chunk: %+v, %v; %d live rows delivered, want 24", sum, err, len(live))
	}
	d := e.doc()
	if b := d.Backfill; b == nil || b.Rows != 5 || string(b.After["id"]) != "5" || b.Failures != 1 ||
		!strings.Contains(b.LastError, "the consumer is down") || !d.Lease.Released() {
		t.Fatalf("progress after the failure: %+v", d.Backfill)
	}
	fail = false
	if _, err := r.Tick(ctx, "resumes"); err != nil {
		t.Fatal(err)
	}
	want := []int64{1, 2, 3, 4, 5}
	for id := int64(6); id <= 24; id++ {
		want = append(want, id)
	}
	if len(reads) != len(want) {
		t.Fatalf("reads %v, want %v", reads, want)
	}
	for i := range want {
		if reads[i] != want[i] {
			t.Fatalf("reads %v, want %v (resumed after row 5)", reads, want)
		}
	}
	if d := e.doc(); d.Backfill != nil {
		t.Fatalf("not done: %+v", d.Backfill)
	}
}

// TestBackfillStopsOnDrain: a drain that begins while a chunk is handled ends the tick after it:
// no live batch is taken after the drain began.
func TestBackfillStopsOnDrain(t *testing.T) {
	e := newEnv(t, 5)
	e.insert(7)
	drain := make(chan struct{})
	drained := false
	var afterDrain []string
	r := e.runner("A", func(_ context.Context, b *poller.Batch[poller.Row]) error {
		if drained {
			afterDrain = append(afterDrain, b.Rows[0].Op())
		}
		if b.Rows[0].Op() == "read" && !drained {
			drained = true
			close(drain)
			e.insert(2) // live rows waiting when the drain begins
		}
		return nil
	})
	if _, err := r.Tick(ctx, "catch-up"); err != nil {
		t.Fatal(err)
	}
	e.startBackfill(5)
	r.Draining = drain
	if _, err := r.Tick(ctx, "drains"); err != nil {
		t.Fatal(err)
	}
	if !drained || len(afterDrain) != 0 {
		t.Fatalf("batches handed over after the drain began: %v", afterDrain)
	}
	if d := e.doc(); d.Backfill == nil || d.Backfill.Rows != 5 || !d.Lease.Released() {
		t.Fatalf("the drained tick's progress: %+v", d.Backfill)
	}
}
