package source_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// benchRows is the table size: BENCH_ROWS, default 1,000,000.
func benchRows() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_ROWS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

const benchBatch = 1000

// BenchmarkKeysetScan reads a whole table of benchRows() orders in batches of 1,000: through the
// source, and through a hand-written database/sql keyset loop with typed scanning, alternating
// within each iteration so that both see the same machine. It reports rows/s for each and their
// ratio (the target is >= 0.9), and MB/s (testenv.JSONBytesPerRow); on PostgreSQL also a native-pgx loop, the fastest way to read.
// MySQL runs against MYSQL_TEST_DSN (MariaDB from scripts/bench.sh; MySQL 8 in the workflow).
func BenchmarkKeysetScan(b *testing.B) {
	b.Run("postgres", func(b *testing.B) {
		table := "bench_orders_" + strconv.Itoa(benchRows())
		db, dsn := testenv.PostgresOrdersTable(b, table, benchRows())
		hand := func() int {
			n, err := testenv.PostgresKeysetLoop(db, table, benchBatch)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(context.Background())
		native := func() int {
			ctx := context.Background()
			var (
				n        int
				id       int64
				customer string
				amount   string
				ts       time.Time
			)
			rows, _ := conn.Query(ctx, `SELECT id, customer, amount::text, updated_at FROM `+table+` ORDER BY updated_at, id LIMIT $1`, benchBatch)
			for {
				got := 0
				_, err := pgx.ForEachRow(rows, []any{&id, &customer, &amount, &ts}, func() error { got++; return nil })
				if err != nil {
					b.Fatal(err)
				}
				n += got
				if got < benchBatch {
					return n
				}
				rows, _ = conn.Query(ctx, `SELECT id, customer, amount::text, updated_at FROM `+table+` WHERE (updated_at, id) > ($1, $2) ORDER BY updated_at, id LIMIT $3`, ts, id, benchBatch)
			}
		}
		compare(b, postgres.Name, dsn, table, hand, native)
	})
	b.Run("sqlite", func(b *testing.B) {
		dir := os.Getenv("BENCH_DIR")
		if dir == "" {
			dir = b.TempDir()
		}
		dsn := filepath.Join(dir, "bench-"+strconv.Itoa(benchRows())+".db") + "?_pragma=journal_mode(WAL)"
		db := testenv.DB(b, "sqlite", dsn)
		table := "bench_orders"
		if !exists(db, "SELECT 1 FROM "+table+" LIMIT 1") {
			b.Logf("creating %s ...", table)
			mustExec(b, db, `CREATE TABLE `+table+` (id INTEGER PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL, updated_at TEXT NOT NULL)`)
			mustExec(b, db, `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < `+strconv.Itoa(benchRows())+`)
			  INSERT INTO `+table+` SELECT n, 'customer ' || n, (n % 100000) / 100.0,
			  strftime('%Y-%m-%dT%H:%M:%f', 'now', '-2 hours', '+' || (n / 1000.0) || ' seconds') || '000Z' FROM g`)
			mustExec(b, db, `CREATE INDEX ix_bench_ts ON `+table+` (updated_at, id)`)
		}
		var (
			id       int64
			customer string
			amount   float64
			ts       string
		)
		hand := func() int {
			n, err := testenv.KeysetLoop(db,
				`SELECT id, customer, amount, updated_at FROM `+table+` ORDER BY updated_at, id LIMIT ?`,
				`SELECT id, customer, amount, updated_at FROM `+table+` WHERE (updated_at, id) > (?, ?) ORDER BY updated_at, id LIMIT ?`,
				benchBatch, []any{&id, &customer, &amount, &ts}, func() []any { return []any{ts, id} })
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
		compare(b, sqlite.Name, dsn, table, hand, nil)
	})
	b.Run("mysql", func(b *testing.B) {
		table := "bench_orders_" + strconv.Itoa(benchRows())
		db, dsn := testenv.MySQLOrdersTable(b, table, benchRows())
		hand := func() int {
			n, err := testenv.MySQLKeysetLoop(db, table, benchBatch)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
		compare(b, mysql.Name, dsn, table, hand, nil)
	})
}

// BenchmarkMySQLKeysetAlone reads the MySQL orders table of BenchmarkKeysetScan (BENCH_ROWS) in
// batches of 1,000 through the source (source) or the hand-written loop (hand) alone, an
// iteration a read of the whole table: scripts/bench.sh instructions counts each one's
// instructions a row.
func BenchmarkMySQLKeysetAlone(b *testing.B) {
	table := "bench_orders_" + strconv.Itoa(benchRows())
	db, dsn := testenv.MySQLOrdersTable(b, table, benchRows())
	src, viaSource := sourceLoop(b, mysql.Name, dsn, table)
	defer src.Close()
	hand := func() int {
		n, err := testenv.MySQLKeysetLoop(db, table, benchBatch)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		name string
		read func() int
	}{{"source", viaSource}, {"hand", hand}} {
		read := c.read
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if n := read(); n != benchRows() {
					b.Fatalf("read %d rows, want %d", n, benchRows())
				}
			}
		})
	}
}

// sourceLoop opens the source of the orders table and returns it with a loop that reads the whole
// table through it, in batches of 1,000, returning the rows it read.
func sourceLoop(b *testing.B, driver, dsn, table string) (*source.Source, func() int) {
	src, err := drivers.Open(context.Background(), source.Config{Poller: "bench", Driver: driver, DSN: dsn, Definition: sourcedef.Definition{
		Table: sourcedef.Table{Name: table}, Columns: []string{"id", "customer", "amount", "updated_at"},
		Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "updated_at"}, PK: []string{"id"},
	}})
	if err != nil {
		b.Fatal(err)
	}
	return src, func() int {
		var (
			n      int
			cursor *state.Cursor
		)
		for {
			batch, err := src.Fetch(context.Background(), cursor, benchBatch)
			if err != nil {
				b.Fatal(err)
			}
			n += len(batch.Rows)
			if len(batch.Rows) < benchBatch {
				return n
			}
			cursor = batch.To
		}
	}
}

func compare(b *testing.B, driver, dsn, table string, hand, native func() int) {
	src, viaSource := sourceLoop(b, driver, dsn, table)
	defer src.Close()
	want := benchRows()
	sample, err := src.Fetch(context.Background(), nil, benchBatch)
	if err != nil {
		b.Fatal(err)
	}
	bytesPerRow := testenv.JSONBytesPerRow(b, sample, len(sample.Rows))
	var tSource, tHand, tNative time.Duration
	timed := func(fn func() int, into *time.Duration) {
		t0 := time.Now()
		if got := fn(); got != want {
			b.Fatalf("read %d rows, want %d", got, want)
		}
		*into += time.Since(t0)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		testenv.InTurn(i, func() { timed(viaSource, &tSource) }, func() { timed(hand, &tHand) })
		if native != nil {
			timed(native, &tNative)
		}
	}
	b.StopTimer()
	rows := float64(want) * float64(b.N)
	b.ReportMetric(rows/tSource.Seconds(), "source-rows/s")
	b.ReportMetric(rows/tHand.Seconds(), "handwritten-rows/s")
	b.ReportMetric(tHand.Seconds()/tSource.Seconds(), "source/handwritten")
	if native != nil {
		b.ReportMetric(rows/tNative.Seconds(), "pgx-native-rows/s")
		b.ReportMetric(tNative.Seconds()/tSource.Seconds(), "source/pgx-native")
	}
	testenv.ReportMB(b, bytesPerRow, map[string]float64{"source": rows / tSource.Seconds(), "handwritten": rows / tHand.Seconds()})
}

func exists(db *sql.DB, q string) bool {
	var one int
	return db.QueryRow(q).Scan(&one) == nil
}

func mustExec(b *testing.B, db *sql.DB, q string) {
	if _, err := db.Exec(q); err != nil {
		b.Fatalf("%s: %v", q, err)
	}
}
