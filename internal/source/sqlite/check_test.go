package sqlite_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// checkDB is a database file of its own with orders made by ddl.
func checkDB(t *testing.T, ddl ...string) string {
	t.Helper()
	dsn := filepath.Join(t.TempDir(), "chk.db")
	db := testenv.DB(t, "sqlite", dsn)
	for _, q := range ddl {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return dsn
}

func TestCheckSetup(t *testing.T) {
	orders := sourcedef.Table{Name: "orders"}
	drv := sqlite.Driver{}
	const base = `CREATE TABLE orders (id BIGINT PRIMARY KEY, amount NUMERIC NOT NULL`

	t.Run("updated_at with only a default", func(t *testing.T) {
		dsn := checkDB(t, base+`, updated_at TEXT NOT NULL DEFAULT (`+sqlite.StampExpr+`))`)
		s := sourcetest.Setup(t, drv, dsn, orders, state.KindTimestampPK, "updated_at")
		f := sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictProblem, []string{"no UPDATE trigger stamps it", "never delivered"}, `AFTER UPDATE ON "orders"`)
		if strings.Contains(strings.Join(f.Fix, "\n"), "AFTER INSERT") {
			t.Errorf("the default stamps inserts already: %q", f.Fix)
		}
		sourcetest.Expect(t, s, setup.CheckIndex, setup.VerdictProblem, nil, `CREATE INDEX "orders_updated_at_id" ON "orders" ("updated_at", "id")`)
		sourcetest.FixAndRecheck(t, s)
	})
	t.Run("a constant default and no triggers", func(t *testing.T) {
		dsn := checkDB(t, base+`, updated_at TEXT NOT NULL DEFAULT '1970-01-01T00:00:00.000000Z')`, `CREATE INDEX ix ON orders (updated_at, id)`)
		s := sourcetest.Setup(t, drv, dsn, orders, state.KindTimestampPK, "updated_at")
		sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictProblem, []string{"is a constant"}, "AFTER INSERT", "AFTER UPDATE")
		sourcetest.Expect(t, s, setup.CheckIndex, setup.VerdictOK, nil)
		sourcetest.FixAndRecheck(t, s)
	})
	t.Run("a rowid key ends every index", func(t *testing.T) {
		dsn := checkDB(t, `CREATE TABLE orders (id INTEGER PRIMARY KEY, amount NUMERIC NOT NULL, updated_at TEXT NOT NULL)`, `CREATE INDEX ix ON orders (updated_at)`)
		s := sourcetest.Setup(t, drv, dsn, orders, state.KindTimestampPK, "updated_at")
		sourcetest.Expect(t, s, setup.CheckIndex, setup.VerdictOK, nil)
	})
	t.Run("a trigger only for some columns", func(t *testing.T) {
		dsn := checkDB(t, base+`, updated_at TEXT NOT NULL DEFAULT (`+sqlite.StampExpr+`))`,
			`CREATE TRIGGER "update" AFTER UPDATE OF amount ON orders BEGIN UPDATE orders SET updated_at = `+sqlite.StampExpr+` WHERE id = NEW.id; END`)
		s := sourcetest.Setup(t, drv, dsn, orders, state.KindTimestampPK, "updated_at")
		sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictUnknown, []string{"trigger update may stamp it only for some columns"})
	})
	t.Run("a view", func(t *testing.T) {
		dsn := checkDB(t, base+`, updated_at TEXT NOT NULL)`, `CREATE VIEW orders_v AS SELECT * FROM orders`)
		s := sourcetest.Setup(t, drv, dsn, sourcedef.Table{Name: "orders_v"}, state.KindTimestampPK, "updated_at")
		sourcetest.Expect(t, s, setup.CheckTable, setup.VerdictUnknown, []string{"is a view"})
		if n := setup.Problems(s.Findings); n != 0 {
			t.Fatalf("a view: %d problems, want none (cannot tell): %+v", n, s.Findings)
		}
	})
	t.Run("the cursor column missing", func(t *testing.T) {
		dsn := checkDB(t, base+`)`, `INSERT INTO orders VALUES (1, 2)`)
		s := sourcetest.Setup(t, drv, dsn, orders, state.KindInteger, "version")
		sourcetest.Expect(t, s, setup.CheckColumns, setup.VerdictProblem, []string{"no cursor column version"}, `ADD COLUMN "version" INTEGER NOT NULL DEFAULT 0`)
		sourcetest.FixAndRecheck(t, s)
	})
}
