package tick_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestLogicalSetupWritesNothing: a logical poller whose slot, publication or wal_level is
// missing fails before any state is read or written, with the error naming the fix; once set up,
// its first tick delivers, counts its ops and reports the slot's retained WAL. On a server of its
// own: its second tick must be idle, which a keep-up would not be (other tests' WAL moves the
// WAL's end a shared server's slot is measured against).
func TestLogicalSetupWritesNothing(t *testing.T) {
	db, dsn, table, slot := testenv.PostgresLogicalOn(t, testenv.PostgresOwn(t), "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL)")
	p := poller.New("cdc", table, poller.Logical, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
		poller.WithColumns("id", "name"), poller.WithKey("id"))
	settings := appsettings.Settings{Driver: postgres.Name, DSN: dsn, BatchSize: 10, LeaseTTL: lease.DefaultTTL,
		HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: time.Hour, Slot: slot, Publication: slot}
	st := &lease.Counting{Store: memstore.New(nil)}
	for name, mutate := range map[string]func(s *appsettings.Settings){
		"slot":        func(s *appsettings.Settings) { s.Slot = "missing_slot" },
		"publication": func(s *appsettings.Settings) { s.Publication = "missing_pub" },
	} {
		s := settings
		mutate(&s)
		_, err := tick.Open(context.Background(), tick.Config{Poller: pollerdef.Of(p), Store: st, App: "test", Owner: "test/1", Settings: s})
		if !errors.Is(err, postgres.ErrNotEnabled) || !strings.Contains(err.Error(), "pollerctl cdc enable cdc --yes") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n, _ := st.Counts(); n != 0 {
		t.Errorf("%d state requests before the source was set up", n)
	}
	testenv.ExecFlushed(t, db, "INSERT INTO "+table+" VALUES (1, 'a'), (2, 'b')", "DELETE FROM "+table+" WHERE id = 1")
	r, err := tick.Open(context.Background(), tick.Config{Poller: pollerdef.Of(p), Store: st, App: "test", Owner: "test/1", Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sum, err := r.Tick(context.Background(), "")
	if err != nil || sum.Rows != 3 || sum.Ops["insert"] != 2 || sum.Ops["delete"] != 1 || sum.RetainedBytes == nil || sum.RowsWaiting != 0 {
		t.Fatalf("tick: %+v, %v", sum, err)
	}
	if sum, err := r.Tick(context.Background(), ""); err != nil || sum.Outcome != tick.Idle {
		t.Fatalf("second tick: %+v, %v", sum, err)
	}
}

// TestLogicalKeepUp: while the poller's table is quiet and other tables are written, an idle
// tick whose slot has fallen KeepUp bytes behind the WAL writes a logical decoding message and
// commits its position (two blob writes), so the slot moves on; a transaction on the table that
// was open meanwhile is still delivered when it commits; the next idle tick writes nothing.
// On a server of its own: how far the slot is behind is the WAL's end, which every other test
// writing to the shared server moves (with another client writing WAL beside it, the idle tick
// after the keep-up found the slot behind again, and a keep-up left the slot still behind).
func TestLogicalKeepUp(t *testing.T) {
	db, dsn, table, slot := testenv.PostgresLogicalOn(t, testenv.PostgresOwn(t), "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL)")
	busy := table + "_busy"
	testenv.ExecFlushed(t, db, "CREATE TABLE "+busy+" (id bigint, pad text)")
	t.Cleanup(func() { db.Exec("DROP TABLE " + busy) })
	var got []int64
	p := poller.New("cdc", table, poller.Logical, func(_ context.Context, b *poller.Batch[poller.Row]) error {
		for _, r := range b.Raw {
			got = append(got, r.Key()["id"].(int64))
		}
		return nil
	}, poller.WithColumns("id", "name"), poller.WithKey("id"))
	settings := appsettings.Settings{Driver: postgres.Name, DSN: dsn, BatchSize: 10, LeaseTTL: lease.DefaultTTL,
		HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: time.Hour, Slot: slot, Publication: slot}
	cfg := settings.Config(pollerdef.Of(p))
	cfg.Definition.KeepUp = 256 << 10
	src, err := drivers.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	st := &lease.Counting{Store: memstore.New(nil)}
	r, err := tick.Open(context.Background(), tick.Config{Poller: pollerdef.Of(p), Store: st, App: "test", Owner: "test/1", Settings: settings, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	confirmed := func() (lsn string, behind int64) {
		t.Helper()
		if err := db.QueryRow(`SELECT confirmed_flush_lsn::text, (pg_current_wal_lsn() - confirmed_flush_lsn)::int8 FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&lsn, &behind); err != nil {
			t.Fatal(err)
		}
		return lsn, behind
	}
	tickOK := func(want tick.Outcome) tick.Summary {
		t.Helper()
		sum, err := r.Tick(context.Background(), "")
		if err != nil || sum.Outcome != want {
			t.Fatalf("tick: %+v, %v (want %s)", sum, err, want)
		}
		return sum
	}
	testenv.ExecFlushed(t, db, "INSERT INTO "+table+" VALUES (1, 'a')")
	tickOK(tick.Committed)
	open, err := db.Begin() // a writer of the table, open across the keep-up
	if err != nil {
		t.Fatal(err)
	}
	defer open.Rollback()
	if _, err := open.Exec("INSERT INTO " + table + " VALUES (2, 'late')"); err != nil {
		t.Fatal(err)
	}
	testenv.ExecFlushed(t, db, "INSERT INTO "+busy+" SELECT g, repeat('x', 200) FROM generate_series(1, 5000) g")
	before, behind := confirmed()
	if behind < 256<<10 {
		t.Fatalf("the busy table wrote only %d bytes of WAL", behind)
	}
	w0, _ := st.Counts()
	sum := tickOK(tick.Committed)
	w1, _ := st.Counts()
	after, behindAfter := confirmed()
	if sum.Rows != 0 || after == before || behindAfter >= 256<<10 || w1-w0 != 3 { // read, acquire, commit and release
		t.Fatalf("keep-up: %+v; slot %s -> %s, %d bytes behind; %d state requests", sum, before, after, behindAfter, w1-w0)
	}
	tickOK(tick.Idle)
	if _, err := open.Exec("SET LOCAL synchronous_commit = on"); err != nil {
		t.Fatal(err)
	}
	if err := open.Commit(); err != nil {
		t.Fatal(err)
	}
	tickOK(tick.Committed)
	if fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("delivered %v, want [1 2]", got)
	}
}

// TestLogicalColumnsAddedAndDropped: a logical poller of every column ("*"). A column added
// while it runs appears in the rows that follow: the changes written before it lack it (named
// unchanged, never null), and the tick that meets the first change with it commits what came
// before and opens the source again, so the next tick delivers it with the column. A column
// dropped stops the poller at that change with the schema error, which names the column.
// (TestLogicalAllColumns reads changes written before a column with a source that has it.)
func TestLogicalColumnsAddedAndDropped(t *testing.T) {
	db, dsn, table, slot := testenv.PostgresLogical(t, "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL)")
	var got []string
	p := poller.New("cdc", table, poller.Logical, func(_ context.Context, b *poller.Batch[poller.Row]) error {
		for _, r := range b.Raw {
			j, _ := r.MarshalJSON()
			line := r.Op() + " " + string(j)
			if u := r.Unchanged(); len(u) > 0 {
				line += fmt.Sprintf(" unchanged %v", u)
			}
			got = append(got, line)
		}
		return nil
	}, poller.WithColumns("*"), poller.WithKey("id"))
	settings := appsettings.Settings{Driver: postgres.Name, DSN: dsn, BatchSize: 10, LeaseTTL: lease.DefaultTTL,
		HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: time.Hour, Slot: slot, Publication: slot}
	r, err := tick.Open(context.Background(), tick.Config{Poller: pollerdef.Of(p), Store: &lease.Counting{Store: memstore.New(nil)}, App: "test", Owner: "test/1", Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	testenv.ExecFlushed(t, db, "INSERT INTO "+table+" VALUES (1, 'a')")
	testenv.ExecFlushed(t, db, "ALTER TABLE "+table+" ADD COLUMN note text")
	testenv.ExecFlushed(t, db, "INSERT INTO "+table+" VALUES (2, 'b', 'n2')", "UPDATE "+table+" SET note = 'n1' WHERE id = 1")
	var outcomes []string
	for range 3 {
		sum, err := r.Tick(context.Background(), "")
		if err != nil {
			t.Fatalf("tick: %+v %v", sum, err)
		}
		outcomes = append(outcomes, fmt.Sprintf("%s %d", sum.Outcome, sum.Rows))
	}
	want := []string{`insert {"id":1,"name":"a"}`, `insert {"id":2,"name":"b","note":"n2"}`, `update {"id":1,"name":"a","note":"n1"}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || strings.Join(outcomes, ", ") != "committed 1, committed 2, idle 0" {
		t.Fatalf("delivered:\n%s\nwant:\n%s\nticks: %s", strings.Join(got, "\n"), strings.Join(want, "\n"), strings.Join(outcomes, ", "))
	}

	testenv.ExecFlushed(t, db, "ALTER TABLE "+table+" DROP COLUMN note")
	testenv.ExecFlushed(t, db, "INSERT INTO "+table+" VALUES (3, 'c')")
	sum, err := r.Tick(context.Background(), "")
	if err == nil || !strings.Contains(err.Error(), `column "note"`) || !strings.Contains(err.Error(), "has no such column (it was dropped or renamed)") {
		t.Fatalf("a dropped column: %+v, %v", sum, err)
	}
	if len(got) != 3 {
		t.Errorf("delivered after the drop: %v", got[3:])
	}
}

// TestLogicalFollowStreams: a logical tick that follows streams its slot once caught up (a
// walsender holds the slot), delivers what commits meanwhile, confirms its commits through the
// stream, and ends the stream before its release: the slot is then inactive at the final
// checkpoint, and a peek reads on at once.
func TestLogicalFollowStreams(t *testing.T) {
	db, dsn, table, slot := testenv.PostgresLogical(t, "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL)")
	type delivered struct {
		ids []int64
		to  string
	}
	batches := make(chan delivered, 100)
	p := poller.New("cdc", table, poller.Logical, func(_ context.Context, b *poller.Batch[poller.Row]) error {
		var d delivered
		for _, r := range b.Raw {
			d.ids = append(d.ids, r.Key()["id"].(int64))
		}
		if at, err := pgcdc.CursorPosition(&state.Cursor{Kind: b.To.Kind, Value: b.To.Value}); err == nil {
			d.to = at.LSN.String()
		}
		batches <- d
		return nil
	}, poller.WithColumns("id", "name"), poller.WithKey("id"))
	settings := appsettings.Settings{Driver: postgres.Name, DSN: dsn, BatchSize: 10, LeaseTTL: lease.DefaultTTL,
		HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: time.Hour, Slot: slot, Publication: slot,
		Follow: 3 * time.Second, FollowInterval: 50 * time.Millisecond, FollowCommit: 100 * time.Millisecond}
	r, err := tick.Open(context.Background(), tick.Config{Poller: pollerdef.Of(p), Store: memstore.New(nil), App: "test", Owner: "test/1", Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// streamed: a walsender (not a backend's peek) holds the slot; and its confirmed position.
	streamed := func() (bool, string) {
		t.Helper()
		var n int
		var lsn string
		if err := db.QueryRow(`SELECT (SELECT count(*) FROM pg_stat_replication r WHERE r.pid = s.active_pid), confirmed_flush_lsn::text
FROM pg_replication_slots s WHERE slot_name = $1`, slot).Scan(&n, &lsn); err != nil {
			t.Fatal(err)
		}
		return n == 1, lsn
	}
	until := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("not within 10 s: %s", what)
			}
			time.Sleep(5 * time.Millisecond) // polling, with a deadline
		}
	}
	var got []int64
	var last string
	take := func(n int) {
		t.Helper()
		for len(got) < n {
			select {
			case d := <-batches:
				got, last = append(got, d.ids...), d.to
			case <-time.After(10 * time.Second):
				t.Fatalf("delivered %v, want %d changes", got, n)
			}
		}
	}
	testenv.ExecFlushed(t, db, "INSERT INTO "+table+" VALUES (1, 'a')")
	type result struct {
		sum tick.Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := r.Tick(context.Background(), "")
		done <- result{sum, err}
	}()
	take(1)
	until("the following tick streams the slot", func() bool { ok, _ := streamed(); return ok })
	testenv.ExecFlushed(t, db, "INSERT INTO "+table+" VALUES (2, 'b')")
	testenv.ExecFlushed(t, db, "INSERT INTO "+table+" VALUES (3, 'c')", "UPDATE "+table+" SET name = 'a2' WHERE id = 1")
	take(4)
	until("the commit confirmed through the stream", func() bool { ok, lsn := streamed(); return ok && lsn == last })
	var res result
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the tick did not end")
	}
	if res.err != nil || res.sum.Outcome != tick.Committed || res.sum.Rows != 4 || fmt.Sprint(got) != "[1 2 3 1]" {
		t.Fatalf("tick: %+v, %v; delivered %v", res.sum, res.err, got)
	}
	var active bool
	var lsn string
	if err := db.QueryRow("SELECT active, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active, &lsn); err != nil {
		t.Fatal(err)
	}
	end, _ := pgcdc.CursorPosition(res.sum.Cursor)
	if active || lsn != end.LSN.String() {
		t.Fatalf("after the tick: slot active %v at %s, want inactive at %s", active, lsn, end.LSN)
	}
}
