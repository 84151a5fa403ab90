package postgres_test

import (
	"context"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
)

// TestLogicalWatermark: a logical poller's backfill chunk is read in a snapshot its watermark
// judges the stream against: a change committed before the chunk is not newer, one of a
// transaction open while the chunk was read (committed after) and one committed after are newer;
// the stream is not past the watermark before it and is at the first change after it.
func TestLogicalWatermark(t *testing.T) {
	ctx := context.Background()
	db, table, cfg := logicalTable(t, logicalDDL)
	exec(t, db, "INSERT INTO "+table+" SELECT g, 'n' || g, NULL FROM generate_series(1, 5) g")
	src, err := drivers.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := src.Backfills(); err != nil {
		t.Fatalf("Backfills: %v", err)
	}
	_, c0 := drain(t, src, nil, 100, false)

	open, err := db.Begin() // a transaction in progress while the chunk is read
	if err != nil {
		t.Fatal(err)
	}
	defer open.Rollback()
	if _, err := open.Exec("UPDATE " + table + " SET name = 'open' WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	exec(t, db, "INSERT INTO "+table+" VALUES (6, 'n6', NULL)")
	c, err := src.ReadChunk(ctx, nil, "", nil, 10)
	if err != nil || c.Watermark == nil || len(c.Rows) != 6 || c.Rows[1].Get("name") != "n2" || c.Full {
		t.Fatalf("chunk: %+v, %v", c, err)
	}
	if _, err := open.Exec("SET LOCAL synchronous_commit = on"); err != nil {
		t.Fatal(err)
	}
	if err := open.Commit(); err != nil {
		t.Fatal(err)
	}
	exec(t, db, "INSERT INTO "+table+" VALUES (7, 'n7', NULL)")

	rows := sourcetest.CheckWatermark(t, src, c, c0, []sourcetest.WatermarkWant{{ID: 6}, {ID: 2, Newer: true, Reached: true}, {ID: 7, Newer: true, Reached: true}})
	k, err := c.Rows[1].BackfillKey()
	k2, err2 := rows[1].BackfillKey()
	if err != nil || err2 != nil || k != k2 {
		t.Errorf("a read's key %q (%v) and its change's %q (%v) differ", k, err, k2, err2)
	}
}
