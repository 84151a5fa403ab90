package source_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestChunkRefusesANullCursor: a row whose cursor column became NULL after the source was
// opened (the live reads never reach it) is not sent as a read: the chunk fails, naming the
// column and the row.
func TestChunkRefusesANullCursor(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "n.db")
	db := testenv.DB(t, "sqlite", dsn, `CREATE TABLE t (id INTEGER PRIMARY KEY, seq INTEGER, name TEXT); INSERT INTO t VALUES (1, 1, 'a'), (2, 2, 'b')`)
	src, err := drivers.Open(context.Background(), source.Config{Poller: "p", Driver: sqlite.Name, DSN: dsn, Definition: sourcedef.Definition{
		Table: sourcedef.Table{Name: "t"}, Columns: []string{"id", "seq", "name"}, PK: []string{"id"}, Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "seq"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	live, err := src.Fetch(context.Background(), nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE t SET seq = NULL WHERE id = 2`); err != nil {
		t.Fatal(err)
	}
	_, err = src.ReadChunk(context.Background(), nil, "", live.To, 10)
	if !errors.Is(err, source.ErrNullCursor) || !strings.Contains(err.Error(), `column "seq"`) || !strings.Contains(err.Error(), `{"id":2}`) {
		t.Fatalf("a NULL cursor: %v", err)
	}
}
