package source_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// refusing is SQLite refusing BLOB columns, as SQL Server refuses sql_variant (Driver.Refuse).
type refusing struct{ sqlite.Driver }

func (refusing) Refuse(c row.ColumnType) (string, error) {
	if strings.EqualFold(c.DBType, "BLOB") {
		return "blobs cannot travel", nil
	}
	return "", nil
}

// TestRefusedType: a column of a type the driver refuses fails the poller's open and is a
// problem of pollerctl check's set-up check, naming the column either way; a poller that leaves
// it out of its columns opens.
func TestRefusedType(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "r.db")
	testenv.DB(t, "sqlite", dsn, `CREATE TABLE r (id INTEGER PRIMARY KEY, note TEXT, b BLOB)`)
	ds := driver.Drivers{refusing{}}
	cfg := func(cols ...string) source.Config {
		return source.Config{Poller: "r", Driver: sqlite.Name, DSN: dsn, Definition: sourcedef.Definition{
			Table: sourcedef.Table{Name: "r"}, Columns: cols, PK: []string{"id"}, Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "id"}}}
	}
	ctx := context.Background()
	for _, cols := range [][]string{{"id", "note", "b"}, {"b", "id"}} {
		_, err := source.Open(ctx, ds, cfg(cols...))
		if !errors.Is(err, source.ErrSchema) || !strings.Contains(err.Error(), `column "b"`) || !strings.Contains(err.Error(), "blobs cannot travel") {
			t.Fatalf("open reading %v: %v", cols, err)
		}
		st, err := source.CheckSetup(ctx, ds, cfg(cols...))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range st.Findings {
			if f.Check == setup.CheckTypes {
				found = f.Verdict == setup.VerdictProblem && strings.Contains(f.Detail, "column b (BLOB): blobs cannot travel")
			}
		}
		st.Close()
		if !found {
			t.Fatalf("check reading %v: %+v", cols, st.Findings)
		}
	}
	src, err := source.Open(ctx, ds, cfg("id", "note"))
	if err != nil {
		t.Fatalf("open without the column: %v", err)
	}
	src.Close()
	st, err := source.CheckSetup(ctx, ds, cfg("id", "note"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, f := range st.Findings {
		if f.Check == setup.CheckTypes && f.Verdict != setup.VerdictOK {
			t.Fatalf("check without the column: %+v", f)
		}
	}
}
