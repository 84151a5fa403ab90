package sqlserver_test

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlserver"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden SQL files")

// TestChangeTrackingSQLServer runs the changetracking cursor's conformance suite against the SQL
// Server of MSSQL_TEST_DSN (skipped without it; .github/workflows/ci.yml's SQL Server job sets it).
func TestChangeTrackingSQLServer(t *testing.T) {
	changeTrackingSuite(t, testenv.SQLServer(t))
}

// TestGoldenSQL pins the exact SQL of each cursor kind (go test -run Golden -update rewrites
// testdata/golden).
func TestGoldenSQL(t *testing.T) {
	types := map[string]string{"id": "BIGINT", "customer": "NVARCHAR", "amount": "DECIMAL", "updated_at": "DATETIME2", "region": "NVARCHAR", "rv": "TIMESTAMP"}
	zoned := map[string]string{"id": "BIGINT", "customer": "NVARCHAR", "amount": "DECIMAL", "updated_at": "DATETIMEOFFSET"}
	odd := sourcetest.OddIdentifiers("INT")
	odd.Name = "sqlserver_odd_identifiers"
	sourcetest.Golden(t, sqlserver.Driver{}, *update, []sourcetest.GoldenCase{
		{Name: "sqlserver_timestamp_pk_datetime2", Def: sourcetest.Orders("dbo", state.KindTimestampPK, "updated_at", "id"), Types: types},
		{Name: "sqlserver_timestamp_pk_datetimeoffset", Def: sourcetest.Orders("dbo", state.KindTimestampPK, "updated_at", "id"), Types: zoned},
		{Name: "sqlserver_timestamp_composite_pk", Def: sourcetest.Orders("dbo", state.KindTimestampPK, "updated_at", "region", "id"), Types: types},
		{Name: "sqlserver_integer", Def: sourcetest.Orders("dbo", state.KindInteger, "id", "id"), Types: types},
		{Name: "sqlserver_rowversion", Def: sourcetest.Orders("dbo", state.KindRowversion, "rv", "id"), Types: types},
		{Name: "sqlserver_cleanup_composite", Def: sourcetest.Cleaned(sourcetest.Orders("dbo", state.KindTimestampPK, "updated_at", "region", "id"), 0, ""), Types: types},
		{Name: "sqlserver_cleanup_rowversion_older_than", Def: sourcetest.Cleaned(sourcetest.Orders("dbo", state.KindRowversion, "rv", "id"), 30*24*time.Hour, "updated_at"), Types: types},
		{Name: "sqlserver_cleanup_datetimeoffset_older_than", Def: sourcetest.Cleaned(sourcetest.Orders("dbo", state.KindTimestampPK, "updated_at", "id"), 7*24*time.Hour, ""), Types: zoned},
		odd,
	})
	if got := (sqlserver.Driver{}).Quote("a]b"); got != "[a]]b]" {
		t.Errorf("quoting: %s", got)
	}
}

func TestLocation(t *testing.T) {
	for dsn, want := range map[string]driver.Location{
		"sqlserver://u:p@srv.database.windows.net?database=shop&fedauth=ActiveDirectoryDefault": {Server: "srv.database.windows.net", Database: "shop"},
		"server=srv;user id=u;password=p;port=1433;database=shop":                               {Server: "srv:1433", Database: "shop"},
	} {
		if got, err := (sqlserver.Driver{}).Location(dsn); err != nil || got != want {
			t.Errorf("%s: got %+v, %v; want %+v", dsn, got, err, want)
		}
	}
}

// TestChangeTrackingSupported: only sqlserver reads a changetracking cursor; the others refuse
// it, naming sqlserver.
func TestChangeTrackingSupported(t *testing.T) {
	def := sourcedef.Definition{Table: sourcedef.Table{Name: "orders"}, Columns: []string{"id"}, Cursor: sourcedef.Cursor{Kind: state.KindChangeTracking}, PK: []string{"id"}}
	if _, _, err := source.Offline(sqlserver.Driver{}, source.Config{Poller: "orders", Driver: sqlserver.Name, Definition: def}, map[string]string{"id": "BIGINT"}); err != nil {
		t.Fatalf("sqlserver refuses changetracking: %v", err)
	}
	for _, driver := range drivers.Names() {
		if driver == sqlserver.Name {
			continue
		}
		_, err := drivers.Open(ctx, source.Config{Poller: "orders", Driver: driver, Definition: def})
		if !errors.Is(err, sourcedef.ErrDefinition) || !strings.Contains(err.Error(), "needs sqlserver") {
			t.Errorf("%s: %v, want a refusal naming sqlserver", driver, err)
		}
	}
}

// TestGoldenChangeTracking pins the SQL of the changetracking cursor (-update rewrites it).
func TestGoldenChangeTracking(t *testing.T) {
	cases := []struct {
		name                string
		table               sourcedef.Table
		cols                []string
		pk                  []string
		columns, commitTime bool
		skip                string
	}{
		{"sqlserver_changetracking", sourcedef.Table{Schema: "dbo", Name: "orders"}, []string{"id", "customer", "amount", "updated_at"}, []string{"id"}, false, false, ""},
		{"sqlserver_changetracking_odd_composite", sourcedef.Table{Schema: "my schema", Name: `Order "Details" [x]`}, []string{"Row ID", "it's", "region]"}, []string{"region]", "Row ID"}, false, false, ""},
		// TRACK_COLUMNS_UPDATED on, the commit time readable, the application's writes left out.
		{"sqlserver_changetracking_columns_time_skip", sourcedef.Table{Schema: "dbo", Name: "it's"}, []string{"id", "customer", "amount"}, []string{"id"}, true, true, "orders-app"},
	}
	for _, c := range cases {
		q := sqlserver.BuildCTQueries(sqlserver.Driver{}, c.table, c.cols, c.pk, c.columns, c.commitTime, c.skip)
		got := "-- check (argument: the quoted table name)\n" + q.Check + "\n" +
			"-- the bound, before the snapshot transaction\n" + q.Current + "\n" +
			"-- the minimum valid version, in the snapshot transaction (argument: the quoted table name)\n" + q.MinValid + "\n" +
			"-- fetch from a version boundary (base, version, current version, limit)\n" + q.FetchFrom + "\n" +
			"-- fetch inside a version (base, version, key..., current version, limit)\n" + q.FetchAfter + "\n" +
			"-- waiting from a version boundary\n" + q.WaitingFrom + "\n" +
			"-- waiting inside a version\n" + q.WaitingAfter + "\n"
		sourcetest.CompareGolden(t, c.name, got, *update)
	}
}
