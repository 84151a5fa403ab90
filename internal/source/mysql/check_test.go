package mysql_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// checkTable makes a table of its own from ddl (@: its name) and returns its name.
func checkTable(t *testing.T, db *sql.DB, ddl ...string) sourcedef.Table {
	t.Helper()
	return sourcetest.CheckTable(t, db, "", []string{"DROP VIEW IF EXISTS @_v", "DROP TABLE IF EXISTS @, @_version_counter"}, ddl...)
}

func TestCheckSetup(t *testing.T) {
	dsn := testenv.MySQL(t)
	db := testenv.DB(t, "mysql", dsn)
	const base = "CREATE TABLE @ (id BIGINT PRIMARY KEY, amount DECIMAL(12,2) NOT NULL"
	drv := mysql.Driver{}

	t.Run("ON UPDATE CURRENT_TIMESTAMP", func(t *testing.T) {
		tb := checkTable(t, db, base+", updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6), INDEX (updated_at))")
		s := sourcetest.Setup(t, drv, dsn, tb, state.KindTimestampPK, "updated_at")
		sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictOK, nil)
		// InnoDB ends a secondary index with the primary key: (updated_at) serves (updated_at, id).
		sourcetest.Expect(t, s, setup.CheckIndex, setup.VerdictOK, nil)
		if n := setup.Problems(s.Findings); n != 0 {
			t.Fatalf("%d problems: %+v", n, s.Findings)
		}
	})
	t.Run("a cleanup without DELETE", func(t *testing.T) {
		tb := checkTable(t, db, base+", updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6), INDEX (updated_at))")
		def := sourcetest.CheckDef(tb, state.KindTimestampPK, "updated_at")
		def.Cleanup = &sourcedef.Cleanup{Delete: true}
		reader := testenv.MySQLUser(t, db, dsn, "SELECT")
		f := sourcetest.Expect(t, sourcetest.SetupDef(t, drv, reader, def), setup.CheckPrivileges, setup.VerdictProblem,
			[]string{"lacks DELETE on the table, which its cleanup deletes the delivered rows with"}, "GRANT DELETE ON `"+tb.Name+"` TO '")
		if _, err := db.Exec(f.Fix[0]); err != nil {
			t.Fatalf("the fix %q: %v", f.Fix[0], err)
		}
		sourcetest.Expect(t, sourcetest.SetupDef(t, drv, reader, def), setup.CheckPrivileges, setup.VerdictOK, nil)
	})
	t.Run("updated_at with only a default", func(t *testing.T) {
		tb := checkTable(t, db, base+", updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))")
		s := sourcetest.Setup(t, drv, dsn, tb, state.KindTimestampPK, "updated_at")
		f := sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictProblem, []string{"no ON UPDATE CURRENT_TIMESTAMP"}, "BEFORE UPDATE ON `"+tb.Name+"`", "SET NEW.`updated_at` = UTC_TIMESTAMP(6)")
		if strings.Contains(strings.Join(f.Fix, "\n"), "BEFORE INSERT") {
			t.Errorf("the default stamps inserts already: %q", f.Fix)
		}
		sourcetest.Expect(t, s, setup.CheckIndex, setup.VerdictProblem, []string{"(updated_at, id)"}, "CREATE INDEX `ix_"+tb.Name+"_updated_at_id` ON `"+tb.Name+"` (`updated_at`, `id`)")
		sourcetest.FixAndRecheck(t, s)
	})
	t.Run("the cursor column missing", func(t *testing.T) {
		tb := checkTable(t, db, base+")", "INSERT INTO @ VALUES (1, 2)")
		s := sourcetest.Setup(t, drv, dsn, tb, state.KindInteger, "version")
		sourcetest.Expect(t, s, setup.CheckColumns, setup.VerdictProblem, nil, "ADD COLUMN `version` BIGINT NOT NULL DEFAULT 0")
		sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictProblem, nil, "BEFORE INSERT", "BEFORE UPDATE", "LAST_INSERT_ID(n + 1)")
		sourcetest.FixAndRecheck(t, s)
	})
	t.Run("a fix that fails half way", func(t *testing.T) {
		// MySQL commits each DDL statement: the statements before the failing one stay, and say so.
		tb := checkTable(t, db, base+", updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))",
			"CREATE TABLE @_other (id INT)", "CREATE TRIGGER @_stamp_updated_at_update BEFORE UPDATE ON @_other FOR EACH ROW SET NEW.id = 1")
		t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + tb.Name + "_other") })
		s := sourcetest.Setup(t, drv, dsn, tb, state.KindTimestampPK, "updated_at")
		ran, err := s.Apply(context.Background())
		if err == nil || len(ran) != 1 || !strings.HasPrefix(ran[0], "CREATE INDEX") {
			t.Fatalf("the trigger's name is taken: want the index to have run and the trigger to fail; ran %q, %v", ran, err)
		}
		if err := s.Check(context.Background()); err != nil {
			t.Fatal(err)
		}
		sourcetest.Expect(t, s, setup.CheckIndex, setup.VerdictOK, nil)
		sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictProblem, nil)
	})
	t.Run("a view", func(t *testing.T) {
		tb := checkTable(t, db, base+", updated_at TIMESTAMP(6) NOT NULL)", "CREATE VIEW @_v AS SELECT * FROM @")
		s := sourcetest.Setup(t, drv, dsn, sourcedef.Table{Name: tb.Name + "_v"}, state.KindTimestampPK, "updated_at")
		sourcetest.Expect(t, s, setup.CheckTable, setup.VerdictUnknown, []string{"is a view"})
		if n := setup.Problems(s.Findings); n != 0 {
			t.Fatalf("a view: %d problems, want none (cannot tell): %+v", n, s.Findings)
		}
	})
}
