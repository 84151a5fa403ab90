package tick_test

// Benchmarks of the logical cursor (PostgreSQL logical decoding) through the real tick, each
// against baselines measured in the same run: scripts/bench.sh logical runs them.
//
//   - BenchmarkLogicalCatchUp: catch-up rows/s against a bare pg_logical_slot_peek_binary_changes
//     of the same changes decoded with pglogrepl.Parse, and against the xid keyset cursor on the
//     same table; blob requests per tick; and, from one more counted repetition, the SQL round
//     trips of a catch-up tick and the pgoutput messages PostgreSQL sent per row delivered. Two
//     more bare reads of the same changes say what the other ways of reading cost: the peek read
//     through pgconn without database/sql (pgconn-peek-rows/s), and the streaming replication
//     protocol, START_REPLICATION as pg_recvlogical uses it (stream-rows/s).
//   - BenchmarkLogicalIdleTick: an idle tick's blob requests, SQL round trips and time, logical
//     against xid, ticking on a 1 s schedule as the host's timer does.
//   - BenchmarkLogicalLatency: commit-to-delivery time on a 1 s schedule, logical against xid,
//     with the server's synchronous_commit (off here) and with the writer's on.
//
// SQL round trips are counted by pgProxy, a TCP proxy between the source and PostgreSQL that
// reads the protocol's messages: a round trip is a Sync (the end of an extended-protocol query:
// pgx's prepared statements) or a simple Query (pgx's ping when database/sql reuses a connection
// idle for more than a second). The timed runs do not go through it.

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// lgDDL: one table for both cursors: the xid cursor reads xid, the logical cursor the changes.
const lgDDL = `CREATE TABLE %s (id bigint PRIMARY KEY, customer text NOT NULL, amount numeric(12,2) NOT NULL,
  xid xid8 NOT NULL DEFAULT pg_current_xact_id())`

// lgEnv is a table with its publication (named as the table), the slots made on it, and a state
// store on Azurite whose blob requests are counted.
type lgEnv struct {
	tb         testing.TB
	db         *sql.DB
	dsn        string
	table, pub string
	ct         *testenv.CountingTransport
	st         *blobstore.Store
	nextID     int64
	mu         sync.Mutex
	slots      []string
}

func newLgEnv(tb testing.TB) *lgEnv {
	tb.Helper()
	az := testenv.Azurite(tb)
	dsn := testenv.Postgres(tb)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	e := &lgEnv{tb: tb, db: db, dsn: dsn, table: testenv.Name("lgbench"), ct: &testenv.CountingTransport{}, nextID: 1}
	e.pub = e.table
	e.exec(fmt.Sprintf(lgDDL, e.table), "CREATE INDEX ON "+e.table+" (xid, id)", "CREATE PUBLICATION "+e.pub+" FOR TABLE "+e.table)
	tb.Cleanup(func() {
		for _, s := range e.slots {
			db.Exec("SELECT pg_drop_replication_slot($1)", s)
		}
		db.Exec("DROP PUBLICATION IF EXISTS " + e.pub)
		db.Exec("DROP TABLE IF EXISTS " + e.table)
		db.Close()
	})
	e.st, err = blobstore.New(blobstore.Settings{Setting: "bench", ConnectionString: az, Container: "db-state"}, &blobstore.Options{Transport: e.ct})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func (e *lgEnv) exec(qs ...string) {
	e.tb.Helper()
	for _, q := range qs {
		if _, err := e.db.Exec(q); err != nil {
			e.tb.Fatalf("%s: %v", q, err)
		}
	}
}

// slot makes a fresh logical slot (pgoutput): it sees only the changes committed after this.
func (e *lgEnv) slot() string {
	s := testenv.Name("lgs")
	e.exec(fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", s))
	e.mu.Lock()
	e.slots = append(e.slots, s)
	e.mu.Unlock()
	return s
}

func (e *lgEnv) dropSlot(s string) {
	e.exec(fmt.Sprintf("SELECT pg_drop_replication_slot('%s')", s))
	e.mu.Lock()
	e.slots = slices.DeleteFunc(e.slots, func(x string) bool { return x == s })
	e.mu.Unlock()
}

// insert commits rows new rows in transactions of txRows rows each, many transactions to a
// simple-protocol round trip; the last commit waits for its WAL flush (the server runs with
// synchronous_commit=off and logical decoding reads only flushed WAL), which flushes all before it.
func (e *lgEnv) insert(rows, txRows int) {
	e.tb.Helper()
	const perExec = 200
	var q strings.Builder
	for done := 0; done < rows; {
		q.Reset()
		for k := 0; k < perExec && done < rows; k++ {
			n := min(txRows, rows-done)
			q.WriteString("BEGIN;")
			if done+n == rows {
				q.WriteString("SET LOCAL synchronous_commit = on;")
			}
			fmt.Fprintf(&q, "INSERT INTO %s (id, customer, amount) SELECT g, 'customer ' || g, (g %% 100000) / 100.0 FROM generate_series(%d, %d) g;COMMIT;",
				e.table, e.nextID, e.nextID+int64(n)-1)
			e.nextID += int64(n)
			done += n
		}
		if _, err := e.db.Exec(q.String()); err != nil {
			e.tb.Fatalf("inserting: %v", err)
		}
	}
}

func lgPoller(kind poller.CursorKind, table string, handle func(context.Context, *poller.Batch[poller.Row]) error) *poller.Poller {
	opts := []poller.Option{poller.WithColumns("id", "customer", "amount", "xid"), poller.WithKey("id")}
	if kind == poller.XID {
		opts = append(opts, poller.WithCursorColumn("xid"))
	}
	return poller.New("orders", table, kind, handle, opts...)
}

func noop(context.Context, *poller.Batch[poller.Row]) error { return nil }

// lgSettings: batches of 500, the default checkpoint interval, the default lease.
func lgSettings(dsn, slot, pub string) appsettings.Settings {
	return appsettings.Settings{Driver: postgres.Name, DSN: dsn, BatchSize: 500, LeaseTTL: lease.DefaultTTL, HeartbeatInterval: lease.DefaultTTL / 4,
		TickBudget: time.Hour, CheckpointInterval: appsettings.DefaultCheckpointInterval, SettleLag: sourcedef.DefaultSettleLag,
		Slot: slot, Publication: pub}
}

// runner opens p's source (with s) and a runner on a fresh state blob; closed at the end.
func (e *lgEnv) runner(p *poller.Poller, s appsettings.Settings) *tick.Runner {
	e.tb.Helper()
	d := pollerdef.Of(p)
	src, err := drivers.Open(context.Background(), s.Config(d))
	if err != nil {
		e.tb.Fatal(err)
	}
	var logger *slog.Logger
	if os.Getenv("BENCH_LOG") != "" { // the ticks' log lines on stderr, to see what a run did
		logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	r, err := tick.Open(context.Background(), tick.Config{Poller: d, Settings: s, Store: e.st, App: testenv.Name("lgbench-"), Owner: "bench/1", Source: src, Logger: logger})
	if err != nil {
		src.Close()
		e.tb.Fatal(err)
	}
	e.tb.Cleanup(func() { src.Close() })
	return r
}

// peekAll is the hand-written baseline: the least any reader of the slot must do, one peek of
// everything with the options the source uses, each message decoded with pglogrepl.Parse. It
// returns the inserts seen.
func peekAll(db *sql.DB, slot, pub string) (int, error) {
	rows, err := db.Query(`SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)`, slot, pub)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	var data sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&data); err != nil {
			return n, err
		}
		m, err := pglogrepl.Parse(data)
		if err != nil {
			return n, err
		}
		if _, ok := m.(*pglogrepl.InsertMessage); ok {
			n++
		}
	}
	return n, rows.Err()
}

// peekPgconn is peekAll read through pgconn (the pool's connection, raw bytes per row, no
// database/sql): what a peek costs without database/sql's per-row work.
func peekPgconn(db *sql.DB, slot, pub string) (int, error) {
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	n := 0
	err = c.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn().PgConn()
		rr := pc.ExecParams(ctx, `SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)`,
			[][]byte{[]byte(slot), []byte(pub)}, nil, nil, []int16{1})
		for rr.NextRow() {
			m, err := pglogrepl.Parse(rr.Values()[0])
			if err != nil {
				rr.Close()
				return err
			}
			if _, ok := m.(*pglogrepl.InsertMessage); ok {
				n++
			}
		}
		_, err := rr.Close()
		return err
	})
	return n, err
}

// streamAll is the streaming protocol's bare read: a replication connection (replication=database),
// START_REPLICATION of the slot with the source's options, XLogData read and decoded with
// pglogrepl.Parse until a keepalive says the server has sent the WAL flushed before the start,
// then CopyDone (the slot is free again when it returns). It returns the inserts seen.
func streamAll(db *sql.DB, dsn, slot, pub string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgconn.Connect(ctx, dsn+"&replication=database")
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var flushed string
	if err := db.QueryRow("SELECT pg_current_wal_flush_lsn()::text").Scan(&flushed); err != nil {
		return 0, err
	}
	end, err := pglogrepl.ParseLSN(flushed)
	if err != nil {
		return 0, err
	}
	err = pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + pub + "'", "messages 'true'"}})
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			return n, err
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok {
			return n, fmt.Errorf("unexpected %T", msg)
		}
		switch cd.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			k, err := pglogrepl.ParsePrimaryKeepaliveMessage(cd.Data[1:])
			if err != nil {
				return n, err
			}
			if k.ServerWALEnd >= end {
				_, err := pglogrepl.SendStandbyCopyDone(ctx, conn)
				return n, err
			}
		case pglogrepl.XLogDataByteID:
			x, err := pglogrepl.ParseXLogData(cd.Data[1:])
			if err != nil {
				return n, err
			}
			m, err := pglogrepl.Parse(x.WALData)
			if err != nil {
				return n, err
			}
			if _, ok := m.(*pglogrepl.InsertMessage); ok {
				n++
			}
		}
	}
}

// BenchmarkLogicalCatchUp: LOGICAL_ROWS (default 50,000) rows inserted in transactions of
// LOGICAL_TX_ROWS (default 5) rows, read by the logical cursor through the real tick (state on
// Azurite, no-op handler, batches of 500, the default checkpoint interval), by a bare peek of the
// same changes (its own slot, made with the tick's before the inserts), by the xid cursor's
// tick over the same table, and by the two other bare reads (peekPgconn, streamAll; a slot each),
// alternating the order. Each repetition truncates the table and makes
// new slots first.
func BenchmarkLogicalCatchUp(b *testing.B) {
	rows, txRows := envInt("LOGICAL_ROWS", 50_000), envInt("LOGICAL_TX_ROWS", 5)
	e := newLgEnv(b)
	lp, xp := lgPoller(poller.Logical, e.table, noop), lgPoller(poller.XID, e.table, noop)
	xs := lgSettings(e.dsn, "", "")

	// tickRun runs one catch-up tick and returns its duration and blob requests.
	type counts struct {
		dur                time.Duration
		gets, puts, batchs int64
	}
	catchUp := func(r *tick.Runner) counts {
		g0, p0 := e.ct.Gets.Load(), e.ct.Puts.Load()
		t0 := time.Now()
		sum, err := r.Tick(context.Background(), "")
		d := time.Since(t0)
		if err != nil || sum.Rows != rows {
			b.Fatalf("catch-up tick: %d rows of %d, %+v %v", sum.Rows, rows, sum, err)
		}
		return counts{d, e.ct.Gets.Load() - g0, e.ct.Puts.Load() - p0, int64(sum.Batches)}
	}
	idle := func(r *tick.Runner) (gets, puts int64) {
		g0, p0 := e.ct.Gets.Load(), e.ct.Puts.Load()
		if sum, err := r.Tick(context.Background(), ""); err != nil || sum.Outcome != tick.Idle {
			b.Fatalf("idle tick: %+v %v", sum, err)
		}
		return e.ct.Gets.Load() - g0, e.ct.Puts.Load() - p0
	}
	var lg, xd counts
	var tPeek, tRaw, tStream time.Duration
	var idleLG, idleXG, idleLP, idleXP int64
	for i := 0; b.Loop(); i++ {
		e.exec("TRUNCATE " + e.table)
		sTick, sPeek, sRaw, sStream := e.slot(), e.slot(), e.slot(), e.slot()
		e.insert(rows, txRows)
		lr := e.runner(lp, lgSettings(e.dsn, sTick, e.pub))
		xr := e.runner(xp, xs)
		// bare times one baseline read of all the inserts into acc.
		bare := func(what string, acc *time.Duration, read func() (int, error)) func() {
			return func() {
				t0 := time.Now()
				n, err := read()
				*acc += time.Since(t0)
				if err != nil || n != rows {
					b.Fatalf("%s: %d inserts of %d, %v", what, n, rows, err)
				}
			}
		}
		steps := []func(){
			func() { c := catchUp(lr); lg.dur += c.dur; lg.gets += c.gets; lg.puts += c.puts; lg.batchs += c.batchs },
			bare("bare peek", &tPeek, func() (int, error) { return peekAll(e.db, sPeek, e.pub) }),
			func() { c := catchUp(xr); xd.dur += c.dur; xd.gets += c.gets; xd.puts += c.puts; xd.batchs += c.batchs },
			bare("bare peek through pgconn", &tRaw, func() (int, error) { return peekPgconn(e.db, sRaw, e.pub) }),
			bare("bare stream", &tStream, func() (int, error) { return streamAll(e.db, e.dsn, sStream, e.pub) }),
		}
		testenv.InTurn(i, steps...)
		g, p := idle(lr)
		idleLG, idleLP = idleLG+g, idleLP+p
		g, p = idle(xr)
		idleXG, idleXP = idleXG+g, idleXP+p
		e.dropSlot(sTick)
		e.dropSlot(sPeek)
		e.dropSlot(sRaw)
		e.dropSlot(sStream)
	}
	n := float64(b.N)
	total := float64(rows) * n
	// The MB/s: the last repetition's rows, read once through the xid cursor's source.
	xsrc, err := drivers.Open(context.Background(), xs.Config(pollerdef.Of(xp)))
	if err != nil {
		b.Fatal(err)
	}
	sample, err := xsrc.Fetch(context.Background(), nil, 500)
	xsrc.Close()
	if err != nil {
		b.Fatal(err)
	}
	testenv.ReportMB(b, testenv.JSONBytesPerRow(b, sample, len(sample.Rows)),
		map[string]float64{"logical": total / lg.dur.Seconds(), "peek": total / tPeek.Seconds(), "xid": total / xd.dur.Seconds()})
	b.ReportMetric(total/lg.dur.Seconds(), "logical-rows/s")
	b.ReportMetric(total/tPeek.Seconds(), "peek-rows/s")
	b.ReportMetric(total/xd.dur.Seconds(), "xid-rows/s")
	b.ReportMetric(total/tRaw.Seconds(), "pgconn-peek-rows/s")
	b.ReportMetric(total/tStream.Seconds(), "stream-rows/s")
	b.ReportMetric(tPeek.Seconds()/lg.dur.Seconds(), "logical/peek")
	b.ReportMetric(xd.dur.Seconds()/lg.dur.Seconds(), "logical/xid")
	b.ReportMetric(float64(lg.batchs)/n, "batches/tick")
	b.ReportMetric(float64(lg.puts)/n, "logical-blob-writes/tick")
	b.ReportMetric(float64(lg.gets)/n, "logical-blob-reads/tick")
	b.ReportMetric(float64(xd.puts)/n, "xid-blob-writes/tick")
	b.ReportMetric(float64(idleLG+idleLP)/n, "logical-idle-blob-reqs")
	b.ReportMetric(float64(idleXG+idleXP)/n, "xid-idle-blob-reqs")

	// One more repetition, not timed, through the counting proxy: the SQL round trips of each
	// catch-up tick, and the messages PostgreSQL sent the logical source per row delivered.
	b.StopTimer()
	e.exec("TRUNCATE " + e.table)
	sTick := e.slot()
	e.insert(rows, txRows)
	px, pdsn := startProxy(b, e.dsn)
	lr := e.runner(lp, lgSettings(pdsn, sTick, e.pub))
	xr := e.runner(xp, lgSettings(pdsn, "", ""))
	px.reset()
	catchUp(lr)
	lTrips, lMsgs, lTexts := px.trips.Load(), px.rows.Load(), px.texts()
	px.reset()
	catchUp(xr)
	xTrips := px.trips.Load()
	e.dropSlot(sTick)
	b.ReportMetric(float64(lTrips), "logical-sql-trips/tick")
	b.ReportMetric(float64(xTrips), "xid-sql-trips/tick")
	b.ReportMetric(float64(lMsgs)/float64(rows), "logical-msgs-read/row")
	b.Logf("logical catch-up tick of %d rows (%d per transaction): %d round trips, %d messages read (a bare peek reads about %d):\n%s",
		rows, txRows, lTrips, lMsgs, rows+2*((rows+txRows-1)/txRows), lTexts)
}

// BenchmarkLogicalIdleTick: an idle tick of a logical poller and of an xid poller on the same
// table, both caught up, ticking alternately on a 1 s schedule (as the host's timer): blob
// requests, SQL round trips (through pgProxy) and the tick's time per idle tick. Use -benchtime
// Nx: each iteration is one tick of each, a second apart.
func BenchmarkLogicalIdleTick(b *testing.B) {
	e := newLgEnv(b)
	slot := e.slot()
	e.insert(100, 5)
	px, pdsn := startProxy(b, e.dsn)
	lr := e.runner(lgPoller(poller.Logical, e.table, noop), lgSettings(pdsn, slot, e.pub))
	xr := e.runner(lgPoller(poller.XID, e.table, noop), lgSettings(pdsn, "", ""))
	for _, r := range []*tick.Runner{lr, xr} {
		if sum, err := r.Tick(context.Background(), ""); err != nil || sum.Rows != 100 {
			b.Fatalf("catch-up: %+v %v", sum, err)
		}
	}
	type acc struct {
		dur               time.Duration
		gets, puts, trips int64
		texts             map[string]int64
	}
	var l, x acc
	l.texts, x.texts = map[string]int64{}, map[string]int64{}
	one := func(r *tick.Runner, a *acc) {
		px.reset()
		g0, p0 := e.ct.Gets.Load(), e.ct.Puts.Load()
		t0 := time.Now()
		sum, err := r.Tick(context.Background(), "")
		a.dur += time.Since(t0)
		if err != nil || sum.Outcome != tick.Idle {
			b.Fatalf("idle tick: %+v %v", sum, err)
		}
		a.gets += e.ct.Gets.Load() - g0
		a.puts += e.ct.Puts.Load() - p0
		a.trips += px.trips.Load()
		px.mu.Lock()
		for k, v := range px.byText {
			a.texts[k] += v
		}
		px.mu.Unlock()
	}
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	for i := 0; b.Loop(); i++ {
		<-tk.C
		testenv.InTurn(i, func() { one(lr, &l) }, func() { one(xr, &x) })
	}
	n := float64(b.N)
	b.ReportMetric(float64(l.dur.Microseconds())/1000/n, "logical-idle-ms")
	b.ReportMetric(float64(x.dur.Microseconds())/1000/n, "xid-idle-ms")
	b.ReportMetric(l.dur.Seconds()/x.dur.Seconds(), "logical/xid-time")
	b.ReportMetric(float64(l.gets)/n, "logical-blob-reads")
	b.ReportMetric(float64(l.puts)/n, "logical-blob-writes")
	b.ReportMetric(float64(x.gets)/n, "xid-blob-reads")
	b.ReportMetric(float64(x.puts)/n, "xid-blob-writes")
	b.ReportMetric(float64(l.trips)/n, "logical-sql-trips")
	b.ReportMetric(float64(x.trips)/n, "xid-sql-trips")
	b.Logf("SQL round trips over %d idle ticks each:\nlogical:\n%s\nxid:\n%s", b.N, textList(l.texts), textList(x.texts))
}

// BenchmarkLogicalLatency: commit-to-delivery time on a 1 s schedule. A writer commits
// LATENCY_ROWS (default 30) rows one at a time, a random 0-1.5 s apart, recording when each commit
// returned; a loop on a 1 s ticker runs a tick of a logical poller and of an xid poller (the
// baseline) on the same table, concurrently; the handlers record when each row arrives. With
// synchronous_commit off (the server's setting here) a commit returns before its WAL is flushed,
// and logical decoding sees it only once the WAL writer flushes it (within wal_writer_delay,
// 200 ms by default); writer-sync-commit sets it on for the writer's session.
func BenchmarkLogicalLatency(b *testing.B) {
	for _, mode := range []string{"server-default", "writer-sync-commit"} {
		b.Run(mode, func(b *testing.B) { latency(b, mode == "writer-sync-commit") })
	}
}

func latency(b *testing.B, syncCommit bool) {
	n := envInt("LATENCY_ROWS", 30)
	e := newLgEnv(b)
	wdsn := e.dsn
	if syncCommit {
		wdsn += "&synchronous_commit=on" // a run-time parameter of the writer's sessions
	}
	w := testenv.DB(b, "pgx", wdsn)
	var setting string
	if err := w.QueryRow("SHOW synchronous_commit").Scan(&setting); err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	committed := map[int64]time.Time{}
	arrived := [2]map[int64]time.Time{{}, {}} // logical, xid
	handler := func(k int) func(context.Context, *poller.Batch[poller.Row]) error {
		return func(_ context.Context, bt *poller.Batch[poller.Row]) error {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			for _, r := range bt.Raw {
				id := r.Key()["id"].(int64)
				if _, ok := arrived[k][id]; !ok {
					arrived[k][id] = now
				}
			}
			return nil
		}
	}
	slot := e.slot()
	runners := []*tick.Runner{
		e.runner(lgPoller(poller.Logical, e.table, handler(0)), lgSettings(e.dsn, slot, e.pub)),
		e.runner(lgPoller(poller.XID, e.table, handler(1)), lgSettings(e.dsn, "", "")),
	}
	var lat [2][]time.Duration
	next := int64(1)
	for b.Loop() {
		first := next
		done := writeSpaced(b, w, e.table, first, n, &mu, committed)
		next += int64(n)
		tickUntil(done, func() bool {
			var wg sync.WaitGroup
			for _, r := range runners {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sum, err := r.Tick(context.Background(), "")
					if err != nil {
						b.Error(err)
					}
					if testing.Verbose() {
						b.Logf("%s tick: %s, %d rows", r.Poller.Source().Cursor.Kind, sum.Outcome, sum.Rows)
					}
				}()
			}
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			return len(arrived[0]) >= int(next-1) && len(arrived[1]) >= int(next-1)
		})
		mu.Lock()
		for k := range 2 {
			for id := first; id < next; id++ {
				a, ok := arrived[k][id]
				if !ok {
					b.Fatalf("row %d never reached the %s poller (%d of %d rows arrived)", id, []string{"logical", "xid"}[k], len(arrived[k]), next-1)
				}
				lat[k] = append(lat[k], a.Sub(committed[id]))
			}
		}
		mu.Unlock()
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for k, name := range []string{"logical", "xid"} {
		s := slices.Clone(lat[k])
		slices.Sort(s)
		b.ReportMetric(ms(pct(s, 0.50)), name+"-p50-ms")
		b.ReportMetric(ms(pct(s, 0.95)), name+"-p95-ms")
		b.ReportMetric(ms(s[len(s)-1]), name+"-max-ms")
	}
	b.Logf("writer's synchronous_commit = %s; %d rows per iteration", setting, n)
}

// pct is the q-quantile of sorted s (nearest rank).
// writeSpaced inserts rows first to first+n-1 into table through w, a random 0-1.5 s apart, and
// notes when each committed (in committed, under mu); the channel closes when it is done.
func writeSpaced(b *testing.B, w *sql.DB, table string, first int64, n int, mu *sync.Mutex, committed map[int64]time.Time) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k := 0; k < n; k++ {
			time.Sleep(time.Duration(rand.Int64N(int64(1500 * time.Millisecond)))) // the writer's pace
			id := first + int64(k)
			if _, err := w.Exec("INSERT INTO "+table+" (id, customer, amount) VALUES ($1, 'c', 1)", id); err != nil {
				b.Error(err)
				return
			}
			t := time.Now()
			mu.Lock()
			committed[id] = t
			mu.Unlock()
		}
	}()
	return done
}

// tickUntil runs tick on a 1 s timer (the host's) until it reports every row arrived, or until
// 15 s after the writer is done (a row lost: the caller reports it).
func tickUntil(done <-chan struct{}, tick func() (all bool)) {
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	var deadline time.Time
	for {
		<-tk.C
		all := tick()
		select {
		case <-done:
			if deadline.IsZero() {
				deadline = time.Now().Add(15 * time.Second)
			}
		default:
		}
		if all || !deadline.IsZero() && time.Now().After(deadline) {
			return
		}
	}
}

func pct(s []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// pgProxy forwards PostgreSQL connections and counts, from the protocol's messages, the client's
// round trips (Sync and simple Query messages), by statement, and the DataRow messages sent back.
type pgProxy struct {
	ln       net.Listener
	upstream string
	trips    atomic.Int64
	rows     atomic.Int64
	mu       sync.Mutex
	byText   map[string]int64
}

// startProxy starts a proxy to dsn's server and returns it and a DSN through it (which must
// have sslmode=disable: the proxy reads plain messages).
func startProxy(tb testing.TB, dsn string) (*pgProxy, string) {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Query().Get("sslmode") != "disable" {
		tb.Fatalf("the proxy needs a URL DSN with sslmode=disable: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &pgProxy{ln: ln, upstream: u.Host, byText: map[string]int64{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	tb.Cleanup(func() { ln.Close() })
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *pgProxy) reset() {
	p.trips.Store(0)
	p.rows.Store(0)
	p.mu.Lock()
	p.byText = map[string]int64{}
	p.mu.Unlock()
}

func (p *pgProxy) trip(text string) {
	p.trips.Add(1)
	text = strings.Join(strings.Fields(text), " ")
	if len(text) > 110 {
		text = text[:110] + "..."
	}
	p.mu.Lock()
	p.byText[text]++
	p.mu.Unlock()
}

func (p *pgProxy) texts() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return textList(p.byText)
}

func textList(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	var s strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&s, "  %6d  %s\n", m[k], k)
	}
	return s.String()
}

func (p *pgProxy) serve(c net.Conn) {
	s, err := net.Dial("tcp", p.upstream)
	if err != nil {
		c.Close()
		return
	}
	go func() {
		p.pipe(s, c, false)
		c.Close()
		s.Close()
	}()
	p.pipe(c, s, true)
	c.Close()
	s.Close()
}

// pipe copies messages from src to dst, reading the client's (fromClient: its first message,
// the startup, has no type byte) or the server's.
func (p *pgProxy) pipe(src, dst net.Conn, fromClient bool) {
	r := bufio.NewReaderSize(src, 64<<10)
	w := bufio.NewWriterSize(dst, 64<<10)
	var hdr [5]byte
	var body []byte
	read := func(h []byte) bool {
		if _, err := io.ReadFull(r, h); err != nil {
			return false
		}
		n := int(binary.BigEndian.Uint32(h[len(h)-4:])) - 4
		if cap(body) < n {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			return false
		}
		w.Write(h)
		w.Write(body)
		return true
	}
	if fromClient {
		if !read(hdr[1:]) || w.Flush() != nil {
			return
		}
	}
	stmts := map[string]string{}
	last := ""
	for read(hdr[:]) {
		if fromClient {
			switch hdr[0] {
			case 'P': // Parse: statement name, query
				name, rest := cstr(body)
				q, _ := cstr(rest)
				stmts[name], last = q, q
			case 'B': // Bind: portal, statement name
				_, rest := cstr(body)
				name, _ := cstr(rest)
				last = stmts[name]
			case 'S':
				p.trip(last)
			case 'Q':
				q, _ := cstr(body)
				p.trip("simple query: " + q)
			}
		} else if hdr[0] == 'D' {
			p.rows.Add(1)
		}
		if r.Buffered() == 0 && w.Flush() != nil {
			return
		}
	}
	w.Flush()
}

func cstr(b []byte) (string, []byte) {
	for i, c := range b {
		if c == 0 {
			return string(b[:i]), b[i+1:]
		}
	}
	return string(b), nil
}
