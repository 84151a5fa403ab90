package tick_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/replicacheck"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestKeysetBackfillReplica: an integer-cursor poller on SQLite, MariaDB and PostgreSQL backfills
// a table of KEYSET_BACKFILL_ROWS (20,000) rows while a writer inserts rows and updates others
// (each write stamps the row with the next version, its cursor), and two runners take turns,
// every ninth handler call failing. Per key, no read arrives after a newer version of its row;
// the deliveries applied as they arrived equal the table; every row present when the backfill
// began was read, or delivered by the live side at a newer version.
func TestKeysetBackfillReplica(t *testing.T) {
	rows := envInt("KEYSET_BACKFILL_ROWS", 20_000)
	for _, drv := range []string{sqlite.Name, mysql.Name, postgres.Name} {
		t.Run(drv, func(t *testing.T) { keysetBackfillReplica(t, drv, rows) })
	}
}

func keysetBackfillReplica(t *testing.T, drv string, rows int) {
	var dsn string
	switch drv {
	case sqlite.Name:
		dsn = filepath.Join(t.TempDir(), "kb.db")
	case mysql.Name:
		dsn = testenv.MySQL(t)
	default:
		dsn = testenv.Postgres(t)
	}
	wdsn := dsn
	if drv == sqlite.Name { // the writer waits for the poller's reads, which WAL lets run beside it
		wdsn += "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	}
	db, err := sql.Open(map[string]string{sqlite.Name: "sqlite", mysql.Name: "mysql", postgres.Name: "pgx"}[drv], wdsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	table := testenv.Name("kb_")
	mark := func(n int) string { // the driver's n-th placeholder
		if drv == postgres.Name {
			return fmt.Sprintf("$%d", n)
		}
		return "?"
	}
	for _, q := range []string{
		"CREATE TABLE " + table + " (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, note VARCHAR(40) NOT NULL)",
		"CREATE INDEX " + table + "_v ON " + table + " (v, id)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + table) })
	version := int64(0)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for lo := 1; lo <= rows; lo += 500 {
		var vals []string
		for id := lo; id < lo+500 && id <= rows; id++ {
			version++
			vals = append(vals, fmt.Sprintf("(%d, %d, 'seed')", id, version))
		}
		if _, err := tx.Exec("INSERT INTO " + table + " VALUES " + strings.Join(vals, ", ")); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	type delivered struct {
		read  bool
		id    int64
		v     int64
		note  string
		token int64 // the tick's (each tick takes the lease anew)
	}
	var mu sync.Mutex
	var got []delivered
	var calls int
	p := poller.New("kb", table, poller.Integer, func(_ context.Context, b *poller.Batch[poller.Row]) error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range b.Raw {
			got = append(got, delivered{read: r.Op() == row.OpRead, id: asInt(r.Get("id")), v: asInt(r.Get("v")), note: fmt.Sprint(r.Get("note")), token: b.FencingToken})
		}
		if calls++; calls%9 == 0 {
			return fmt.Errorf("injected failure")
		}
		return nil
	}, poller.WithColumns("id", "v", "note"), poller.WithKey("id"), poller.WithCursorColumn("v"))
	settings := appsettings.Settings{Driver: drv, DSN: dsn, BatchSize: 200, LeaseTTL: lease.DefaultTTL, HeartbeatInterval: lease.DefaultTTL / 4,
		TickBudget: 20 * time.Millisecond, MaxAttempts: 1000}
	st := memstore.New(nil)
	var runners []*tick.Runner
	for _, owner := range []string{"A", "B"} {
		r, err := tick.Open(ctx, tick.Config{Poller: pollerdef.Of(p), Settings: settings, Store: st, App: "kb", Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		runners = append(runners, r)
	}
	deadline, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	drain := func(what string) {
		for n := 0; ; n++ {
			sum, err := runners[0].Tick(ctx, "")
			if err == nil && sum.Outcome == tick.Idle && readDoc(t, st, "kb", "kb").Backfill == nil {
				return
			}
			if deadline.Err() != nil {
				t.Fatalf("%s: not idle after %d ticks: %+v %v", what, n, sum, err)
			}
		}
	}
	drain("catch-up")
	mu.Lock()
	start := len(got)
	mu.Unlock()
	writeBackfill(t, st, "kb", "kb", &state.Backfill{ID: "bf_kb", Kind: state.BackfillRequested, Chunk: 50, StartedAt: state.At(time.Now())})

	stop := make(chan struct{})
	loops := tickLoops(runners, 2*time.Millisecond, stop, &replicacheck.Ticks{}, func(int, tick.Summary, error) {})
	// One writer, so that versions commit in order (an integer cursor trusts that): inserts of
	// new ids and updates of old ones, until the backfill has ended.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	next := int64(rows)
	writes := 0
	for readDoc(t, st, "kb", "kb").Backfill != nil {
		if deadline.Err() != nil {
			t.Fatal("the backfill did not end")
		}
		version++
		var q string
		var args []any
		if rng.IntN(4) == 0 {
			next++
			q, args = "INSERT INTO "+table+" VALUES ("+mark(1)+", "+mark(2)+", 'new')", []any{next, version}
		} else {
			q, args = "UPDATE "+table+" SET v = "+mark(1)+", note = 'w' WHERE id = "+mark(2), []any{version, 1 + rng.Int64N(next)}
		}
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
		writes++
	}
	close(stop)
	loops.Wait()
	drain("drain")

	mu.Lock()
	defer mu.Unlock()
	newest := map[int64]int64{}
	replica := map[int64]string{}
	type tickKey struct{ token, id int64 }
	readIn := map[tickKey]int64{} // the version of the last read of a key in a tick
	reads := 0
	for i, d := range got {
		if d.read {
			reads++
			if d.v < newest[d.id] && i >= start {
				t.Errorf("the read of %d (version %d) arrived after version %d of it", d.id, d.v, newest[d.id])
			}
			readIn[tickKey{d.token, d.id}] = d.v
		} else if rv, ok := readIn[tickKey{d.token, d.id}]; ok && d.v < rv {
			// A later tick may replay older changes from its checkpoint (at least once); within one,
			// a change older than a read of its row must not follow it.
			t.Errorf("version %d of %d arrived after its read at version %d in the same tick", d.v, d.id, rv)
		}
		newest[d.id] = max(newest[d.id], d.v)
		replica[d.id] = fmt.Sprint(d.v, d.note)
	}
	table2 := map[int64]string{}
	rs, err := db.Query("SELECT id, v, note FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var id, v int64
		var note string
		if err := rs.Scan(&id, &v, &note); err != nil {
			t.Fatal(err)
		}
		table2[id] = fmt.Sprint(v, note)
	}
	rs.Close()
	diffs := 0
	for id, want := range table2 {
		if replica[id] != want && diffs < 5 {
			diffs++
			t.Errorf("row %d: the replica has %q, the table %q", id, replica[id], want)
		}
	}
	since := map[int64]bool{}
	for _, d := range got[start:] {
		since[d.id] = true
	}
	for id := int64(1); id <= int64(rows); id++ {
		if !since[id] {
			t.Errorf("row %d was neither read nor delivered since the backfill began", id)
			break
		}
	}
	t.Logf("%d rows, %d writes during the backfill, %d reads, %d deliveries in all", rows, writes, reads, len(got))
	if reads < rows/2 || writes == 0 {
		t.Errorf("the run did not exercise the backfill: %d reads, %d writes", reads, writes)
	}
}

// asInt reads an integer column's value as drivers return it.
func asInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int32:
		return int64(n)
	case int:
		return int64(n)
	}
	var out int64
	fmt.Sscan(fmt.Sprint(v), &out)
	return out
}
