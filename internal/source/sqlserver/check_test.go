package sqlserver_test

import (
	"testing"

	_ "github.com/microsoft/go-mssqldb"

	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlserver"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestCheckSetupSQLServer checks the setup checks on SQL Server (MSSQL_TEST_DSN; the GitHub
// workflow's SQL Server job runs it): an updated_at with only a default, a rowversion, no index,
// a view.
func TestCheckSetupSQLServer(t *testing.T) {
	dsn := testenv.SQLServer(t)
	db := testenv.DB(t, "sqlserver", dsn)
	drv := sqlserver.Driver{}
	table := func(t *testing.T, ddl ...string) sourcedef.Table {
		t.Helper()
		return sourcetest.CheckTable(t, db, "dbo", []string{"DROP VIEW IF EXISTS dbo.@_v", "DROP TABLE IF EXISTS dbo.@"}, ddl...)
	}
	const base = "CREATE TABLE dbo.@ (id BIGINT PRIMARY KEY, amount DECIMAL(12,2) NOT NULL"

	t.Run("updated_at with only a default", func(t *testing.T) {
		tb := table(t, base+", updated_at DATETIME2(7) NOT NULL DEFAULT SYSUTCDATETIME())")
		s := sourcetest.Setup(t, drv, dsn, tb, state.KindTimestampPK, "updated_at")
		sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictProblem, []string{"never delivered"}, "AFTER UPDATE AS", "SET [updated_at] = SYSUTCDATETIME()")
		sourcetest.Expect(t, s, setup.CheckIndex, setup.VerdictProblem, nil, "CREATE INDEX [ix_"+tb.Name+"_updated_at_id]")
		sourcetest.FixAndRecheck(t, s)
	})
	t.Run("rowversion", func(t *testing.T) {
		tb := table(t, base+", rv ROWVERSION)", "CREATE INDEX ix ON dbo.@ (rv)")
		s := sourcetest.Setup(t, drv, dsn, tb, state.KindRowversion, "rv")
		sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictOK, nil)
		// The clustered primary key ends every nonclustered index: (rv) serves (rv, id).
		sourcetest.Expect(t, s, setup.CheckIndex, setup.VerdictOK, nil)
	})
	t.Run("a view", func(t *testing.T) {
		tb := table(t, base+", rv ROWVERSION)", "CREATE VIEW dbo.@_v AS SELECT * FROM dbo.@")
		s := sourcetest.Setup(t, drv, dsn, sourcedef.Table{Schema: "dbo", Name: tb.Name + "_v"}, state.KindRowversion, "rv")
		sourcetest.Expect(t, s, setup.CheckTable, setup.VerdictUnknown, []string{"is a view"})
		if n := setup.Problems(s.Findings); n != 0 {
			t.Fatalf("a view: %d problems, want none: %+v", n, s.Findings)
		}
	})
}
