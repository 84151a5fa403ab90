package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// slotState reads the slot's confirmed position and whether it is active.
func slotState(t *testing.T, db *sql.DB, slot string) (string, bool) {
	t.Helper()
	var lsn string
	var active bool
	if err := db.QueryRow("SELECT confirmed_flush_lsn::text, active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&lsn, &active); err != nil {
		t.Fatal(err)
	}
	return lsn, active
}

// awaitSlot polls the slot until ok says yes, for at most 10 s.
func awaitSlot(t *testing.T, db *sql.DB, slot, what string, ok func(lsn string, active bool) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		lsn, active := slotState(t, db, slot)
		if ok(lsn, active) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %s: %s: still at %s, active %v", slot, what, lsn, active)
		}
		time.Sleep(5 * time.Millisecond) // polling, with a deadline
	}
}

func lsnOf(t *testing.T, c *state.Cursor) string {
	t.Helper()
	p, err := pgcdc.CursorPosition(c)
	if err != nil {
		t.Fatal(err)
	}
	return p.LSN.String()
}

func fetchIDs(t *testing.T, src *source.Source, c *state.Cursor, limit int) ([]int64, *state.Cursor) {
	t.Helper()
	b, err := src.Fetch(context.Background(), c, limit)
	if err != nil {
		t.Fatalf("fetch after %v: %v", c, err)
	}
	var out []int64
	for _, r := range b.Rows {
		out = append(out, r.Key()["id"].(int64))
	}
	if b.To == nil {
		return out, c
	}
	return out, b.To
}

// TestLogicalStream: a follower streams the slot (it is active while it does) and delivers the
// changes committed after the stream started, the status's count included, while another
// process's probe finds the slot busy and says so without failing; the slot's confirmed
// position never passes what was committed (a stream ended without a commit leaves it where it
// was, and a peek then reads the same changes again); a commit through the stream moves it; an
// ended stream leaves the slot inactive, and a peek reads on.
func TestLogicalStream(t *testing.T) {
	db, table, cfg, src := logicalSource(t)
	ctx := context.Background()
	f := follower(t, src)
	exec(t, db, "INSERT INTO "+table+" VALUES (1,'a',NULL),(2,'b',NULL)")
	got, c := fetchIDs(t, src, nil, 10) // caught up by peeking
	if fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("peeked %v", got)
	}
	if err := src.Committed(ctx, c); err != nil {
		t.Fatal(err)
	}
	checkpoint := lsnOf(t, c)

	if ok, err := f.Await(ctx, c, 10*time.Millisecond); err != nil || ok {
		t.Fatalf("await with nothing after the checkpoint: %v, %v", ok, err)
	}
	awaitSlot(t, db, cfg.Definition.Slot, "active while streamed", func(_ string, active bool) bool { return active })
	exec(t, db, "INSERT INTO "+table+" VALUES (3,'c',NULL)")
	exec(t, db, "UPDATE "+table+" SET name='c2' WHERE id=3", "INSERT INTO "+table+" VALUES (4,'d',NULL)")
	streamed, _ := streamIDs(t, f, src, c, 3)
	if fmt.Sprint(streamed) != "[3 3 4]" {
		t.Fatalf("streamed %v, want [3 3 4]", streamed)
	}
	if _, active := slotState(t, db, cfg.Definition.Slot); !active {
		t.Fatal("the slot is not active: the changes were not streamed")
	}
	// The counts, in this process (from the stream) and in another (the slot is busy).
	if b, err := src.Backlog(ctx, c, 100); err != nil || b.Rows != 3 {
		t.Fatalf("backlog after the checkpoint while streaming: %+v, %v", b, err)
	}
	other, err := drivers.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Backlog(ctx, c, 100); !errors.Is(err, driver.ErrBusy) {
		t.Fatalf("another process's count while the slot is streamed: %v, want ErrBusy", err)
	}
	p := pollerstatus.ProbeSource(ctx, other, "", nil, time.Now)
	if !p.OK || p.Busy == "" || p.Error != "" {
		t.Fatalf("another process's probe while the slot is streamed: %+v", p)
	}
	details, err := other.Inspect(ctx, "lg")
	if err != nil || len(details) != 1 || details[0].Health != driver.Fine {
		t.Fatalf("the slot's detail while streamed: %+v, %v", details, err)
	}

	// Ended without a commit: the slot stays at the checkpoint, and a peek reads the same again.
	if err := f.EndFollow(ctx); err != nil {
		t.Fatal(err)
	}
	if lsn, active := slotState(t, db, cfg.Definition.Slot); lsn != checkpoint || active {
		t.Fatalf("after a stream ended without a commit: slot at %s, active %v; want %s, inactive", lsn, active, checkpoint)
	}
	if again, _ := fetchIDs(t, src, c, 10); fmt.Sprint(again) != "[3 3 4]" {
		t.Fatalf("peeked after the stream: %v, want [3 3 4]", again)
	}

	// Streamed again, and committed through the stream: the slot moves to the checkpoint.
	got, at := nil, c
	for len(got) < 2 {
		if ok, err := f.Await(ctx, at, 10*time.Second); err != nil || !ok {
			t.Fatalf("await on a new stream: %v, %v", ok, err)
		}
		var more []int64
		more, at = fetchIDs(t, src, at, 2-len(got))
		got = append(got, more...)
	}
	if fmt.Sprint(got) != "[3 3]" {
		t.Fatalf("streamed %v, want [3 3]", got)
	}
	if err := src.Committed(ctx, at); err != nil {
		t.Fatal(err)
	}
	awaitSlot(t, db, cfg.Definition.Slot, "confirmed through the stream", func(lsn string, active bool) bool { return lsn == lsnOf(t, at) && active })
	if err := f.EndFollow(ctx); err != nil {
		t.Fatal(err)
	}
	if lsn, active := slotState(t, db, cfg.Definition.Slot); lsn != lsnOf(t, at) || active {
		t.Fatalf("after the stream ended: slot at %s, active %v; want %s, inactive", lsn, active, lsnOf(t, at))
	}
	// The next reader peeks at once (no busy slot), from the checkpoint.
	if got, _ := fetchIDs(t, other, at, 10); fmt.Sprint(got) != "[4]" {
		t.Fatalf("another process's peek after the stream ended: %v, want [4]", got)
	}
}

// TestLogicalStreamAhead: a stream does not start from a slot past the checkpoint.
func TestLogicalStreamAhead(t *testing.T) {
	db, table, cfg, src := logicalSource(t)
	ctx := context.Background()
	exec(t, db, "INSERT INTO "+table+" VALUES (1,'a',NULL)")
	_, c := fetchIDs(t, src, nil, 10)
	exec(t, db, "INSERT INTO "+table+" VALUES (2,'b',NULL)")
	if _, err := db.Exec("SELECT pg_replication_slot_advance($1, pg_current_wal_flush_lsn())", cfg.Definition.Slot); err != nil {
		t.Fatal(err)
	}
	f := follower(t, src)
	if _, err := f.Await(ctx, c, 10*time.Millisecond); !errors.Is(err, postgres.ErrSlotAhead) {
		t.Fatalf("await from a slot past the checkpoint: %v, want ErrSlotAhead", err)
	}
	if _, active := slotState(t, db, cfg.Definition.Slot); active {
		t.Fatal("the slot is active")
	}
}

// TestLogicalStreamBackpressure: a stream that receives faster than it is fetched stops reading
// once it holds its bound, and every change still comes, in order, as the fetches and commits
// make room.
func TestLogicalStreamBackpressure(t *testing.T) {
	defer postgres.SetStreamBounds(8, 16)()
	db, table, _, src := logicalSource(t)
	ctx := context.Background()
	f := follower(t, src)
	exec(t, db, "INSERT INTO "+table+" VALUES (0,'z',NULL)")
	_, c := fetchIDs(t, src, nil, 10)
	if err := src.Committed(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Await(ctx, c, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := 1; i <= n; i++ {
		exec(t, db, fmt.Sprintf("INSERT INTO %s VALUES (%d,'x',NULL)", table, i))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		held, paused := postgres.StreamBuffer(f)
		if held > 8 {
			t.Fatalf("the stream holds %d changes unfetched, bound 8", held)
		}
		if paused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream did not stop reading (holds %d)", held)
		}
		time.Sleep(5 * time.Millisecond) // polling, with a deadline
	}
	var got []int64
	for len(got) < n {
		if ok, err := f.Await(ctx, c, 10*time.Second); err != nil || !ok {
			t.Fatalf("await after %d: %v, %v", len(got), ok, err)
		}
		var more []int64
		more, c = fetchIDs(t, src, c, 5)
		got = append(got, more...)
		if len(got)%10 == 0 || src.CommitWanted() { // the stream's bound of 16 is reached before every 10th
			if err := src.Committed(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		if held, _ := postgres.StreamBuffer(f); held > 16 {
			t.Fatalf("the stream holds %d changes, bound 16", held)
		}
	}
	for i, id := range got {
		if id != int64(i+1) {
			t.Fatalf("change %d is %d: %v", i, id, got)
		}
	}
}

// TestLogicalStreamGivesWay: a transaction larger than the stream's give-way size is read by
// peeking (the walsender sends it slower than a peek reads it), whole and once; the follower
// streams again after it.
func TestLogicalStreamGivesWay(t *testing.T) {
	defer postgres.SetStreamGiveWay(10)()
	db, table, _, src := logicalSource(t)
	ctx := context.Background()
	f := follower(t, src)
	exec(t, db, "INSERT INTO "+table+" VALUES (0,'z',NULL)")
	_, c := fetchIDs(t, src, nil, 10)
	if _, err := f.Await(ctx, c, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if held, _ := postgres.StreamBuffer(f); held < 0 {
		t.Fatal("no stream")
	}
	exec(t, db, "INSERT INTO "+table+" SELECT g, 'big', NULL FROM generate_series(1, 50) g")
	if ok, err := f.Await(ctx, c, 10*time.Second); err != nil || !ok {
		t.Fatalf("await the large transaction: %v, %v", ok, err)
	}
	if held, _ := postgres.StreamBuffer(f); held >= 0 {
		t.Fatal("the stream did not give way")
	}
	var got []int64
	for len(got) < 50 {
		var more []int64
		more, c = fetchIDs(t, src, c, 20)
		if len(more) == 0 {
			t.Fatalf("peeked %d of 50", len(got))
		}
		got = append(got, more...)
	}
	if len(got) != 50 || got[0] != 1 || got[49] != 50 {
		t.Fatalf("peeked %v", got)
	}
	exec(t, db, "INSERT INTO "+table+" VALUES (51,'after',NULL)")
	if ok, err := f.Await(ctx, c, 10*time.Second); err != nil || !ok {
		t.Fatalf("await after the large transaction: %v, %v", ok, err)
	}
	if held, _ := postgres.StreamBuffer(f); held < 0 {
		t.Fatal("no stream after the large transaction")
	}
	if more, _ := fetchIDs(t, src, c, 20); fmt.Sprint(more) != "[51]" {
		t.Fatalf("streamed %v, want [51]", more)
	}
}

// TestLogicalStreamInsideTransaction: a stream from a checkpoint inside a transaction (a batch
// ended in it) delivers the rest of that transaction, and what follows.
func TestLogicalStreamInsideTransaction(t *testing.T) {
	db, table, _, src := logicalSource(t)
	ctx := context.Background()
	f := follower(t, src)
	exec(t, db, "INSERT INTO "+table+" VALUES (1,'a',NULL),(2,'b',NULL),(3,'c',NULL)")
	got, c := fetchIDs(t, src, nil, 2)
	if fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("peeked %v", got)
	}
	if err := src.Committed(ctx, c); err != nil {
		t.Fatal(err)
	}
	exec(t, db, "INSERT INTO "+table+" VALUES (4,'d',NULL)")
	got = nil
	for len(got) < 2 {
		if ok, err := f.Await(ctx, c, 10*time.Second); err != nil || !ok {
			t.Fatalf("await: %v, %v", ok, err)
		}
		var more []int64
		more, c = fetchIDs(t, src, c, 10)
		got = append(got, more...)
	}
	if fmt.Sprint(got) != "[3 4]" {
		t.Fatalf("streamed %v, want [3 4]", got)
	}
	if held, _ := postgres.StreamBuffer(f); held < 0 {
		t.Fatal("not streamed")
	}
}

// logicalSource is a table of logicalDDL with its slot and publication (logicalTable), and its
// source, closed when the test ends.
func logicalSource(t *testing.T) (*sql.DB, string, source.Config, *source.Source) {
	t.Helper()
	db, table, cfg := logicalTable(t, logicalDDL)
	src, err := drivers.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return db, table, cfg, src
}

// follower is src's driver.Follower, whose stream ends when the test does.
func follower(t *testing.T, src *source.Source) driver.Follower {
	t.Helper()
	f := src.Follower()
	if f == nil {
		t.Fatal("a logical source is no Follower")
	}
	t.Cleanup(func() { f.EndFollow(context.Background()) })
	return f
}

// TestLogicalStreamHeld: a stream held for the next tick (Hold) goes on streaming: a commit
// through it confirms the checkpoint, the changes committed meanwhile are fetched from it, and
// the next Await takes it over on the same walsender (not started again) and past the hold.
// Held and not taken over, it ends when the hold passes, leaving the slot at the last commit;
// held and asked for changes it no longer holds (a checkpoint behind its commits), it ends and
// the fetch peeks; held when the source closes, it ends.
func TestLogicalStreamHeld(t *testing.T) {
	db, table, cfg, src := logicalSource(t)
	ctx := context.Background()
	slot := cfg.Definition.Slot
	f := follower(t, src)
	walsender := func() int64 {
		var pid sql.NullInt64
		if err := db.QueryRow("SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return pid.Int64
	}
	c0 := streamAfterOne(t, db, table, cfg, src, f)
	exec(t, db, "INSERT INTO "+table+" VALUES (2,'b',NULL)")
	got, c1 := streamIDs(t, f, src, c0, 1)
	pid := walsender()
	if fmt.Sprint(got) != "[2]" || pid == 0 {
		t.Fatalf("streamed %v (walsender %d)", got, pid)
	}

	// Held: the last commit goes through it, and it goes on receiving.
	f.Hold(2 * time.Second)
	if err := src.Committed(ctx, c1); err != nil {
		t.Fatal(err)
	}
	awaitSlot(t, db, slot, "confirmed through the held stream", func(lsn string, active bool) bool { return lsn == lsnOf(t, c1) && active })
	exec(t, db, "INSERT INTO "+table+" VALUES (3,'c',NULL)")
	var first []int64 // the next tick's first fetch, before its lease: from the held stream
	for deadline := time.Now().Add(10 * time.Second); len(first) == 0 && time.Now().Before(deadline); {
		first, _ = fetchIDs(t, src, c1, 10)
	}
	if fmt.Sprint(first) != "[3]" {
		t.Fatalf("fetched %v from the held stream, want [3]", first)
	}
	got, c2 := streamIDs(t, f, src, c1, 1) // taken over
	if fmt.Sprint(got) != "[3]" || walsender() != pid {
		t.Fatalf("streamed %v on walsender %d after the hold, want [3] on %d (the same stream)", got, walsender(), pid)
	}
	time.Sleep(2500 * time.Millisecond) // past the hold: a stream taken over does not end with it
	exec(t, db, "INSERT INTO "+table+" VALUES (4,'d',NULL)")
	if got, _ := streamIDs(t, f, src, c2, 1); fmt.Sprint(got) != "[4]" || walsender() != pid {
		t.Fatalf("streamed %v on walsender %d past the hold, want [4] on %d", got, walsender(), pid)
	}
	if err := src.Committed(ctx, c2); err != nil {
		t.Fatal(err)
	}

	// Held and not taken over: it ends when the hold passes, the slot at the last commit.
	f.Hold(300 * time.Millisecond)
	awaitSlot(t, db, slot, "inactive once the hold passed", func(lsn string, active bool) bool { return !active })
	if lsn, _ := slotState(t, db, slot); lsn != lsnOf(t, c2) {
		t.Fatalf("the slot is at %s after the hold, want the last commit's %s", lsn, lsnOf(t, c2))
	}

	// Held, then asked for what it dropped (a checkpoint behind its commits): it ends, and the
	// fetch peeks, which finds the slot past that checkpoint (not a busy slot).
	streamIDs(t, f, src, c2, 1)
	f.Hold(time.Minute)
	if _, err := src.Fetch(ctx, c0, 10); !errors.Is(err, postgres.ErrSlotAhead) {
		t.Fatalf("fetch after a checkpoint before the held stream's commits: %v, want ErrSlotAhead", err)
	}
	if _, active := slotState(t, db, slot); active {
		t.Fatal("the held stream did not end for a fetch it could not serve")
	}

	// Held when its source closes: it ends.
	other, err := drivers.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := other.Follower()
	fetchIDs(t, other, c2, 10) // a peek first: a stream starts only from a recent one
	if _, err := g.Await(ctx, c2, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	awaitSlot(t, db, slot, "active, streamed by another source", func(_ string, active bool) bool { return active })
	g.Hold(time.Minute)
	other.Close()
	if _, active := slotState(t, db, slot); active {
		t.Fatal("a held stream outlived its source")
	}
}

// TestLogicalStreamBroken: a stream whose walsender goes away mid-follow (terminated, as a
// failover or a restart would) says it broke, and the changes come by peeking, none lost: those
// the stream had received and not yet served, and those committed after it broke.
func TestLogicalStreamBroken(t *testing.T) {
	db, table, cfg, src := logicalSource(t)
	ctx := context.Background()
	slot := cfg.Definition.Slot
	f := follower(t, src)
	c := streamAfterOne(t, db, table, cfg, src, f)
	exec(t, db, "INSERT INTO "+table+" VALUES (2,'b',NULL)")
	if ok, err := f.Await(ctx, c, 10*time.Second); err != nil || !ok {
		t.Fatalf("await: %v, %v", ok, err)
	}
	if _, err := db.Exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1", slot); err != nil {
		t.Fatal(err)
	}
	exec(t, db, "INSERT INTO "+table+" VALUES (3,'c',NULL)")
	var err error
	for deadline := time.Now().Add(10 * time.Second); err == nil && time.Now().Before(deadline); {
		_, err = f.Await(ctx, c, 100*time.Millisecond)
	}
	if err == nil || !strings.Contains(err.Error(), "broke") {
		t.Fatalf("await after the walsender was terminated: %v, want the stream broke", err)
	}
	var got []int64
	for deadline := time.Now().Add(10 * time.Second); len(got) < 2 && time.Now().Before(deadline); {
		b, err := src.Fetch(ctx, c, 10) // peeks (the slot may still be active a moment: busy)
		if err != nil && !errors.Is(err, driver.ErrBusy) {
			t.Fatal(err)
		}
		if err != nil {
			time.Sleep(10 * time.Millisecond) // polling, with a deadline
			continue
		}
		got = got[:0]
		for _, r := range b.Rows {
			got = append(got, r.Key()["id"].(int64))
		}
	}
	if fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("after the stream broke: %v, want [2 3]", got)
	}
}

// TestLogicalStreamRetained: while a stream runs no peek reads the slot's retained WAL: a commit
// through the stream reads it again, so that the tick's log line and the status do not show the
// last peek's for as long as the tick follows.
func TestLogicalStreamRetained(t *testing.T) {
	db, table, cfg, src := logicalSource(t)
	ctx := context.Background()
	f := follower(t, src)
	c := streamAfterOne(t, db, table, cfg, src, f)
	before := *src.Stats().RetainedBytes
	scratch := table + "_wal" // not published: WAL the slot keeps, no change for the poller
	exec(t, db, "CREATE TABLE "+scratch+" (v text)", "INSERT INTO "+scratch+" SELECT repeat('x', 100) FROM generate_series(1, 20000)")
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + scratch) })
	exec(t, db, "INSERT INTO "+table+" VALUES (2,'b',NULL)")
	_, c2 := streamIDs(t, f, src, c, 1)
	if err := src.Committed(ctx, c2); err != nil {
		t.Fatal(err)
	}
	after := *src.Stats().RetainedBytes
	var now int64
	if err := db.QueryRow("SELECT (pg_current_wal_lsn() - restart_lsn)::int8 FROM pg_replication_slots WHERE slot_name = $1", cfg.Definition.Slot).Scan(&now); err != nil {
		t.Fatal(err)
	}
	if after > now || now-after > 512<<10 {
		t.Fatalf("retained WAL %d bytes after 2 MB were written and committed through the stream, the slot's %d (%d at the last peek)", after, now, before)
	}
}

// streamAfterOne commits a first row, read by peeking, and starts f's stream after it (the slot
// active); it returns the checkpoint.
func streamAfterOne(t *testing.T, db *sql.DB, table string, cfg source.Config, src *source.Source, f driver.Follower) *state.Cursor {
	t.Helper()
	ctx := context.Background()
	exec(t, db, "INSERT INTO "+table+" VALUES (1,'a',NULL)")
	_, c := fetchIDs(t, src, nil, 10)
	if err := src.Committed(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Await(ctx, c, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	awaitSlot(t, db, cfg.Definition.Slot, "active while streamed", func(_ string, active bool) bool { return active })
	return c
}

// streamIDs waits for at least n changes after c through f's stream and fetches them (10 at a
// time), and returns their ids and the cursor after them.
func streamIDs(t *testing.T, f driver.Follower, src *source.Source, c *state.Cursor, n int) ([]int64, *state.Cursor) {
	t.Helper()
	var got []int64
	for len(got) < n {
		if ok, err := f.Await(context.Background(), c, 10*time.Second); err != nil || !ok {
			t.Fatalf("await after %v: %v, %v", got, ok, err)
		}
		var more []int64
		more, c = fetchIDs(t, src, c, 10)
		got = append(got, more...)
	}
	return got, c
}
