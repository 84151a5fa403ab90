package sourcetest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// A GoldenCase is a definition whose keyset SQL a golden file pins: testdata/golden/Name.sql in
// the driver's package, read with its columns of the database types Types (by column).
type GoldenCase struct {
	Name  string
	Def   sourcedef.Definition
	Types map[string]string
}

// Golden renders each case's keyset SQL with drv, without a database (source.Offline), and
// compares it with its golden file; update rewrites the files instead.
func Golden(t *testing.T, drv driver.Driver, update bool, cases []GoldenCase) {
	t.Helper()
	for _, c := range cases {
		src, _, err := source.Offline(drv, source.Config{Poller: "orders", Driver: drv.Name(), Definition: c.Def}, c.Types)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		q := src.Queries()
		got := "-- fetch first\n" + q.FetchFirst + "\n-- fetch after\n" + q.FetchAfter + "\n"
		if q.BacklogFirst != q.FetchFirst || q.BacklogAfter != q.FetchAfter {
			got += "-- backlog first (no bound on open transactions)\n" + q.BacklogFirst + "\n-- backlog after\n" + q.BacklogAfter + "\n"
		}
		if q.StampCheck != "" {
			got += fmt.Sprintf("-- stamp check (argument %v)\n%s\n", q.StampArg, q.StampCheck)
		}
		if q.Cleanup != "" {
			got += fmt.Sprintf("-- cleanup (%v)\n%s\n-- rows awaiting cleanup\n%s\n", c.Def.Cleanup, q.Cleanup, q.CleanupCount)
		}
		CompareGolden(t, c.Name, got, update)
	}
}

// CompareGolden compares got with testdata/golden/name.sql; update rewrites the file instead.
func CompareGolden(t *testing.T, name, got string, update bool) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".sql")
	if update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s: the generated SQL changed:\n%s\nwant:\n%s", name, got, want)
	}
}

// Orders is the golden cases' orders table (id, customer, amount, updated_at) in schema ("":
// none), read with a cursor of kind on column cursor, keyed by pk.
func Orders(schema, kind, cursor string, pk ...string) sourcedef.Definition {
	return sourcedef.Definition{
		Table:   sourcedef.Table{Schema: schema, Name: "orders"},
		Columns: []string{"id", "customer", "amount", "updated_at"},
		Cursor:  sourcedef.Cursor{Kind: kind, Column: cursor},
		PK:      pk,
	}
}

// Cleaned is d with a cleanup of its delivered rows: every one (olderThan 0), or those older than
// olderThan by column ("" the cursor column).
func Cleaned(d sourcedef.Definition, olderThan time.Duration, column string) sourcedef.Definition {
	d.Cleanup = &sourcedef.Cleanup{Delete: true, OlderThan: olderThan, Column: column}
	return d
}

// OrdersFiltered is Orders read by a timestamp+pk cursor with a fixed filter.
func OrdersFiltered() sourcedef.Definition {
	d := Orders("", state.KindTimestampPK, "updated_at", "id")
	d.Filter = "customer <> 'test'"
	return d
}

// OddIdentifiers reads a table and columns whose names need every kind of quoting, with an
// integer cursor on "Row ID" (of type intType in the driver's terms).
func OddIdentifiers(intType string) GoldenCase {
	return GoldenCase{Def: sourcedef.Definition{Table: sourcedef.Table{Schema: "my schema", Name: `Order "Details" [x]`}, Columns: []string{"Row ID", "it's"},
		Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "Row ID"}, PK: []string{"Row ID"}},
		Types: map[string]string{"Row ID": intType, "it's": "TEXT"}}
}
