package sourcetest

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// Setup checks the set-up of table (its key id, cursor kind on column col) in the database of
// dsn with drv, as pollerctl check does; the Setup closes with the test.
func Setup(t testing.TB, drv driver.Driver, dsn string, table sourcedef.Table, kind, col string) *source.Setup {
	t.Helper()
	return SetupDef(t, drv, dsn, CheckDef(table, kind, col))
}

// CheckDef is the definition Setup checks: table's id and amount, the cursor of kind on col.
func CheckDef(table sourcedef.Table, kind, col string) sourcedef.Definition {
	def := sourcedef.Definition{Table: table, Columns: []string{"id", "amount"}, Cursor: sourcedef.Cursor{Kind: kind, Column: col}, PK: []string{"id"}}
	if state.ChangeKind(kind) {
		def.Cursor.Column = ""
	}
	return def
}

// SetupDef runs the set-up check of def with drv on dsn's database.
func SetupDef(t testing.TB, drv driver.Driver, dsn string, def sourcedef.Definition) *source.Setup {
	t.Helper()
	s, err := source.CheckSetup(context.Background(), driver.Drivers{drv}, source.Config{Poller: "chk", Driver: drv.Name(), DSN: dsn, Definition: def})
	if err != nil {
		t.Fatalf("checking %s: %v", def.Table, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Expect fails unless the check's finding has the verdict, its detail contains each of detail's
// texts, and its fix each of fix's.
func Expect(t testing.TB, s *source.Setup, check string, v setup.Verdict, detail []string, fix ...string) setup.Finding {
	t.Helper()
	for _, f := range s.Findings {
		if f.Check != check {
			continue
		}
		joined := strings.Join(f.Fix, "\n")
		if f.Verdict != v {
			t.Errorf("%s: %s: %s (%s), want %s", s, check, f.Verdict, f.Detail, v)
		}
		for _, d := range detail {
			if !strings.Contains(f.Detail, d) {
				t.Errorf("%s: %s: detail %q lacks %q", s, check, f.Detail, d)
			}
		}
		for _, x := range fix {
			if !strings.Contains(joined, x) {
				t.Errorf("%s: %s: fix\n%s\nlacks %q", s, check, joined, x)
			}
		}
		return f
	}
	t.Errorf("%s: no %s finding among %+v", s, check, s.Findings)
	return setup.Finding{}
}

// FixAndRecheck applies the fixes (as pollerctl check --fix --yes) and checks that none is
// left a problem.
func FixAndRecheck(t testing.TB, s *source.Setup) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Apply(ctx); err != nil {
		t.Fatalf("%s: applying the fixes:\n%s\n%v", s, s.Script(), err)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if n := setup.Problems(s.Findings); n > 0 {
		t.Fatalf("%s: %d problems left after the fix: %+v", s, n, s.Findings)
	}
}

// CheckTable makes a table of its own in schema (may be "") for a set-up check, from ddl ("@"
// stands for its name), dropped by drop (likewise) when the test ends, and returns it.
func CheckTable(t testing.TB, db *sql.DB, schema string, drop []string, ddl ...string) sourcedef.Table {
	t.Helper()
	name := testenv.Name("chk_")
	for _, q := range ddl {
		if _, err := db.Exec(strings.ReplaceAll(q, "@", name)); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		for _, q := range drop {
			db.Exec(strings.ReplaceAll(q, "@", name))
		}
	})
	return sourcedef.Table{Schema: schema, Name: name}
}
