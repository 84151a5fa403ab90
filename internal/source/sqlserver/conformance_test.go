package sqlserver_test

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/golang-sql/civil"

	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlserver"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestConformanceSQLServer runs the source conformance suite against the SQL Server of
// MSSQL_TEST_DSN (skipped without it; .github/workflows/ci.yml's SQL Server job sets it).
func TestConformanceSQLServer(t *testing.T) {
	dsn := testenv.SQLServer(t)
	sourcetest.Run(t, sourcetest.Harness{Driver: sqlserver.Driver{}, DSN: dsn, DB: sourcetest.DB(t, "sqlserver", dsn), Fixture: fixture})
}

// fixture is SQL Server's side of the conformance suite: orders stamped in datetime2 (sent as
// civil.DateTime, as the source sends its cursor), with the rowversion column the rowversion
// cursor reads (it reads in commit order, below MIN_ACTIVE_ROWVERSION()), and the hazard of a
// datetime2 stamped in local time east of UTC.
var fixture = sourcetest.Fixture{
	Orders: func(name string) []string {
		return []string{
			`CREATE TABLE ` + name + ` (id BIGINT PRIMARY KEY, customer NVARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL,
			  updated_at DATETIME2(7) NOT NULL, rv ROWVERSION)`,
			`CREATE INDEX ix_` + name + `_ts ON ` + name + ` (updated_at, id)`,
			`CREATE UNIQUE INDEX ix_` + name + `_rv ON ` + name + ` (rv)`,
		}
	},
	Timestamp: dateTime2,
	Committed: &sourcetest.Committed{
		Kind:   state.KindRowversion,
		Column: "rv",
		Behind: func(table string) string {
			return "SELECT COUNT(*) FROM " + table + " WHERE rv >= MIN_ACTIVE_ROWVERSION()"
		},
		// No Update: testUpdatesAndDeletes reads timestamp+pk only here (SQL Server sets rv on
		// every update by itself; there is no SET clause to give).
	},
	ConcurrentWriters: true,
	Stamp:             "DATETIME2(7)",
	Schema:            func(testing.TB, *sql.DB) string { return "dbo" },
	Values: &sourcetest.Values{
		Table: "sqlserver",
		// xml has no =; it compares as text.
		Same: func(typ, a, b string) string {
			if typ == "xml" {
				a, b = "CAST("+a+" AS nvarchar(max))", "CAST("+b+" AS nvarchar(max))"
			}
			return "(" + a + " = " + b + " OR " + a + " IS NULL AND " + b + " IS NULL)"
		},
	},
	Types: func(_ testing.TB, _ *sql.DB, name string, ts time.Time) sourcetest.TypesTable {
		ts = ts.Add(700 * time.Nanosecond) // datetime2(7): 100 ns
		return sourcetest.TypesTable{
			DDL:    `CREATE TABLE ` + name + ` (id BIGINT PRIMARY KEY, d DECIMAL(12,2), big DECIMAL(38,10), ts DATETIME2(7) NOT NULL, bin VARBINARY(16), u UNIQUEIDENTIFIER, j NVARCHAR(100), n INT, t NVARCHAR(100), f FLOAT, b BIT, i4 INT, i2 SMALLINT, r REAL)`,
			Insert: `INSERT INTO ` + name + ` VALUES (1, 12.50, 1234567890123456789012345678.0123456789, @p1, 0xDEADBEEF, 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', N'{"a": [1, 2]}', NULL, N'grüße "q"', 1.5, 1, 7, 3, 0.25)`,
			Args:   []any{dateTime2(ts)},
			TS:     ts,
			JSON:   `{"id":1,"d":"12.50","big":"1234567890123456789012345678.0123456789","ts":"2026-04-07T01:23:45.1234567Z","bin":"3q2+7w==","u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","j":"{\"a\": [1, 2]}","n":null,"t":"grüße \"q\"","f":1.5,"b":true,"i4":7,"i2":3,"r":0.25}`,
		}
	},
	FutureStamps: &sourcetest.FutureStamps{
		Ahead: func(n int, unit string) string {
			return "DATEADD(" + unit + ", " + fmt.Sprint(n) + ", SYSUTCDATETIME())"
		},
		Fix: func(table string) string {
			return "UPDATE [" + table + "] SET [updated_at] = SYSUTCDATETIME() WHERE [updated_at] > DATEADD(minute, 10, SYSUTCDATETIME())"
		},
	},
}

// dateTime2 is a time as the datetime2 argument of a column taken as UTC.
func dateTime2(tm time.Time) any { return civil.DateTimeOf(tm.UTC()) }
