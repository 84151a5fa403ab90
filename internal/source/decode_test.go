package source_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// decoded has a field of each way Decode assigns: a sql.Scanner, a pointer, a time and plain
// values.
type decoded struct {
	ID        int64          `db:"id"`
	Note      sql.NullString `db:"note"`
	Amount    *float64       `db:"amount"`
	UpdatedAt time.Time      `db:"updated_at"`
}

func decodeRows(t testing.TB, n int) []row.Row {
	t.Helper()
	dsn := filepath.Join(t.TempDir(), "d.db")
	db := testenv.DB(t, "sqlite", dsn)
	if _, err := db.Exec(`CREATE TABLE d (id INTEGER PRIMARY KEY, note TEXT, amount REAL, updated_at TEXT NOT NULL);
		WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)
		INSERT INTO d SELECT n, CASE WHEN n % 2 = 0 THEN 'note ' || n END, CASE WHEN n % 3 <> 0 THEN n / 4.0 END,
		  strftime('%Y-%m-%dT%H:%M:%f', '2026-01-01', '+' || n || ' seconds') || '000Z' FROM g`, n); err != nil {
		t.Fatal(err)
	}
	src, err := drivers.Open(context.Background(), source.Config{Poller: "decode", Driver: sqlite.Name, DSN: dsn, Definition: sourcedef.Definition{
		Table: sourcedef.Table{Name: "d"}, Columns: []string{"id", "note", "amount", "updated_at"},
		Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "updated_at"}, PK: []string{"id"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	b, err := src.Fetch(context.Background(), nil, n)
	if err != nil || len(b.Rows) != n {
		t.Fatalf("fetch: %v", err)
	}
	return b.Rows
}

// TestDecodeScannerPointerTime: Decode fills a sql.Scanner field through its Scan (NULL as not
// Valid), a pointer field (NULL as nil), and a time, row after row (what is cached per type is
// right for every row).
func TestDecodeScannerPointerTime(t *testing.T) {
	rows := decodeRows(t, 6)
	for i, r := range rows {
		var d decoded
		if err := r.Decode(&d); err != nil {
			t.Fatal(err)
		}
		id := int64(i + 1)
		if d.ID != id || d.Note.Valid != (id%2 == 0) || d.Note.Valid && d.Note.String != "note "+itoa(id) ||
			(d.Amount != nil) != (id%3 != 0) || d.Amount != nil && *d.Amount != float64(id)/4 ||
			!d.UpdatedAt.Equal(time.Date(2026, 1, 1, 0, 0, int(id), 0, time.UTC)) {
			t.Fatalf("row %d decoded as %+v (amount %v)", id, d, d.Amount)
		}
	}
}

// Two struct types decoded in turn from the same source: each keeps its own plan (the source
// remembers the last one used, and must not hand it to the other type).
func TestDecodeTwoTypesInTurn(t *testing.T) {
	type short struct {
		When time.Time `db:"updated_at"`
		ID   string    `db:"id"`
	}
	for i, r := range decodeRows(t, 4) {
		var d decoded
		var s short
		if err := r.Decode(&s); err != nil {
			t.Fatal(err)
		}
		if err := r.Decode(&d); err != nil {
			t.Fatal(err)
		}
		id := int64(i + 1)
		want := time.Date(2026, 1, 1, 0, 0, int(id), 0, time.UTC)
		if s.ID != itoa(id) || !s.When.Equal(want) || d.ID != id || !d.UpdatedAt.Equal(want) {
			t.Fatalf("row %d decoded as %+v and %+v", id, s, d)
		}
	}
}

func itoa(n int64) string { return string(rune('0' + n)) }

// BenchmarkDecode: a row into a struct of four fields.
func BenchmarkDecode(b *testing.B) {
	rows := decodeRows(b, 1000)
	var d decoded
	for b.Loop() {
		for _, r := range rows {
			if err := r.Decode(&d); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}
