package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestDatetimeDeclaredCursor: a timestamp cursor on a column declared DATETIME (or DATE,
// TIMESTAMP), holding the fixed-width text, reads its rows and keeps their text. modernc's driver
// turns such a column's text into a time.Time, which the cursor refused as "a row the cursor can
// never reach" until the select list read it as +"ts".
func TestDatetimeDeclaredCursor(t *testing.T) {
	dsn := "file:" + filepath.Join(t.TempDir(), "dt.db")
	testenv.DB(t, "sqlite", dsn, `CREATE TABLE t (id INTEGER PRIMARY KEY, ts DATETIME NOT NULL, d DATE);
		INSERT INTO t VALUES (1, '2020-01-01T00:00:00.000000Z', '2020-01-01'), (2, '2020-01-01T00:00:01.000000Z', '2020-01-02 03:04:05')`)
	src, err := drivers.Open(context.Background(), source.Config{Poller: "dt", Driver: "sqlite", DSN: dsn, Definition: sourcedef.Definition{
		Table: sourcedef.Table{Name: "t"}, Columns: []string{"id", "ts", "d"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "ts"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	b, err := src.Fetch(context.Background(), nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Rows) != 1 {
		t.Fatalf("%d rows", len(b.Rows))
	}
	b, err = src.Fetch(context.Background(), b.To, 10)
	if err != nil || len(b.Rows) != 1 {
		t.Fatalf("after the first row: %v, %v", b, err)
	}
	j, err := b.Rows[0].MarshalJSON()
	if want := `{"id":2,"ts":"2020-01-01T00:00:01.000000Z","d":"2020-01-02 03:04:05"}`; err != nil || string(j) != want {
		t.Fatalf("row %s (%v), want %s", j, err, want)
	}
}
