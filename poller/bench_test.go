package poller_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// benchOrder is a row of the benchmark's table.
type benchOrder struct {
	ID        int64     `db:"id,key,cursor"`
	Customer  string    `db:"customer"`
	Amount    string    `db:"amount"`
	UpdatedAt time.Time `db:"updated_at"`
}

// sqliteRows reads rows 1..n of an SQLite orders table, as the runtime reads them (an integer
// cursor on id): for the benchmarks to hand to a handler again and again, and for the tests.
func sqliteRows(b testing.TB, n int) []row.Row {
	b.Helper()
	dsn := filepath.Join(b.TempDir(), "bench.db")
	db := testenv.DB(b, "sqlite", dsn, `CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, amount TEXT, updated_at TEXT)`)
	for i := 1; i <= n; i++ {
		ts := time.Date(2025, 1, 1, 0, 0, i, 0, time.UTC).Format("2006-01-02T15:04:05.000000Z")
		if _, err := db.Exec(`INSERT INTO orders VALUES (?, ?, ?, ?)`, i, fmt.Sprint("customer ", i), "12.50", ts); err != nil {
			b.Fatal(err)
		}
	}
	def := sourcedef.Definition{Table: sourcedef.Table{Name: "orders"}, Columns: []string{"id", "customer", "amount", "updated_at"},
		PK: []string{"id"}, Cursor: sourcedef.Cursor{Kind: string(poller.Integer), Column: "id"}}
	src, err := drivers.Open(context.Background(), source.Config{Poller: "bench", Driver: sqlite.Name, DSN: dsn, Definition: def})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { src.Close() })
	batch, err := src.Fetch(context.Background(), nil, n)
	if err != nil || len(batch.Rows) != n {
		b.Fatalf("fetched %v rows: %v", batch, err)
	}
	return batch.Rows
}

// BenchmarkHandle: the row path from the runtime's batch to the author's handler, without the
// database and the state store: a batch of 1000 rows decoded into a row type (typed), handed
// over as poller.Row (untyped), and handed over with each row's key, values and JSON read
// (rows-read, what a sink does).
func BenchmarkHandle(b *testing.B) {
	const n = 1000
	rows := sqliteRows(b, n)
	for _, c := range []struct {
		name string
		p    *poller.Poller
	}{
		{"typed", poller.New("bench", "orders", poller.Integer, func(_ context.Context, b *poller.Batch[benchOrder]) error {
			if len(b.Rows) != n {
				return fmt.Errorf("%d rows", len(b.Rows))
			}
			return nil
		})},
		{"untyped", poller.New("bench", "orders", poller.Integer, func(_ context.Context, b *poller.Batch[poller.Row]) error {
			if len(b.Rows) != n {
				return fmt.Errorf("%d rows", len(b.Rows))
			}
			return nil
		}, poller.WithColumns("id", "customer", "amount", "updated_at"), poller.WithKey("id"), poller.WithCursorColumn("id"))},
		{"rows-read", poller.New("bench", "orders", poller.Integer, func(_ context.Context, b *poller.Batch[poller.Row]) error {
			for _, r := range b.Raw {
				if _, err := r.MarshalJSON(); err != nil {
					return err
				}
				if _, err := r.Cursor(); err != nil {
					return err
				}
				_, _, _ = r.Key(), r.Get("customer"), r.Op()
			}
			return nil
		}, poller.WithColumns("id", "customer", "amount", "updated_at"), poller.WithKey("id"), poller.WithCursorColumn("id"))},
	} {
		d := pollerdef.Of(c.p) // as the runtime does, once
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := d.Handle(context.Background(), &pollerdef.Batch{Poller: "bench", ID: "batch_1", Attempt: 1, Rows: rows}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
