package tick_test

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
)

// TestKeyRepeatBlocksTheTick: a poller of a view (whose key the catalog cannot confirm) where
// two rows share (updated_at, id): the tick delivers and commits the batches before them, then
// fails naming the repeat and the fix, and commits nothing past it, tick after tick; the status
// probe calls it misconfigured with the same text. Once the repeat is gone, the rest is
// delivered. A table without a key is refused when its source opens, a misconfiguration too.
func TestKeyRepeatBlocksTheTick(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "orders.db")
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE orders_raw (id BIGINT NOT NULL, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL, updated_at TEXT NOT NULL);
		CREATE VIEW orders AS SELECT id, customer, amount, updated_at FROM orders_raw`); err != nil {
		t.Fatal(err)
	}
	base := time.Now().UTC().Add(-time.Hour)
	for i := 1; i <= 10; i++ {
		ts := base.Add(time.Duration(i) * time.Millisecond).Format("2006-01-02T15:04:05.000000Z")
		if _, err := db.Exec(`INSERT INTO orders_raw VALUES (?, ?, '1.00', ?)`, i, fmt.Sprint("c", i), ts); err != nil {
			t.Fatal(err)
		}
		if i == 6 { // the twin: rows 6 and 7 in key order, inside the second batch of 3
			if _, err := db.Exec(`INSERT INTO orders_raw VALUES (?, 'twin', '1.00', ?)`, i, ts); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The table itself has no key: refused when the source opens.
	raw := definition()
	raw.Table.Name = "orders_raw"
	_, err = drivers.Open(ctx, source.Config{Poller: "orders", Driver: sqlite.Name, DSN: dsn, Definition: raw})
	if p := pollerstatus.ProbeFailed(err); !errors.Is(err, source.ErrKeyNotUnique) || !p.Misconfigured || !strings.Contains(p.Error, `"id":6`) {
		t.Fatalf("opening the table without a key: %v (probe %+v)", err, p)
	}

	src, err := drivers.Open(ctx, source.Config{Poller: "orders", Driver: sqlite.Name, DSN: dsn, Definition: definition()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	e := &env{t: t, db: db, dsn: dsn, st: &lease.Counting{Store: memstore.New(nil)}, src: src, batch: 3}
	rec := &recorder{}
	r := e.runner("A", rec.handle)

	blocked := func(tickID string) {
		t.Helper()
		sum, err := r.Tick(ctx, tickID)
		if !errors.Is(err, source.ErrKeyNotUnique) || sum.Outcome != tick.Failed {
			t.Fatalf("tick %s: %+v, %v; want a failure wrapping ErrKeyNotUnique", tickID, sum, err)
		}
		for _, want := range []string{`poller "orders"`, "table orders", "(updated_at, id)", `"id":6`, "view", "CREATE UNIQUE INDEX"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("tick %s: the error does not name %s: %v", tickID, want, err)
			}
		}
		if !slices.Equal(rec.ids, []int64{1, 2, 3}) {
			t.Fatalf("tick %s: delivered %v, want the first batch only", tickID, rec.ids)
		}
		d := e.doc()
		if d.Checkpoint.Cursor == nil || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "3" || !d.Lease.Released() {
			t.Fatalf("tick %s: checkpoint %+v, want row 3's, the lease released", tickID, d.Checkpoint.Cursor)
		}
		p := pollerstatus.ProbeSource(ctx, src, "state/test/orders.json", d, time.Now)
		if p.OK || !p.Misconfigured || !strings.Contains(p.Error, `"id":6`) || !strings.Contains(p.Error, "CREATE UNIQUE INDEX") {
			t.Fatalf("tick %s: the probe says %+v, want misconfigured naming the repeat and the fix", tickID, p)
		}
		t.Log(err)
	}
	blocked("1")
	blocked("2") // tick after tick, nothing past it

	if _, err := db.Exec(`DELETE FROM orders_raw WHERE customer = 'twin'`); err != nil {
		t.Fatal(err)
	}
	if sum, err := r.Tick(ctx, "3"); err != nil || !slices.Equal(rec.ids, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("after the twin is gone: %+v, %v, delivered %v", sum, err, rec.ids)
	}
	if p := pollerstatus.ProbeSource(ctx, src, "state/test/orders.json", e.doc(), time.Now); !p.OK {
		t.Fatalf("after the twin is gone the probe says %+v", p)
	}
}
