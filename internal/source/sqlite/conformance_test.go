package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
)

// TestConformance runs the source conformance suite against a SQLite file of its own (WAL).
func TestConformance(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "source.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)"
	sourcetest.Run(t, sourcetest.Harness{Driver: sqlite.Driver{}, DSN: dsn, DB: sourcetest.DB(t, "sqlite", dsn), Fixture: fixture})
}

// fixture is SQLite's side of the conformance suite: timestamps are TEXT in the fixed-width
// layout, writers are serialised (no late commit to show), and a stamp out of the layout is the
// hazard.
var fixture = sourcetest.Fixture{
	Orders: func(name string) []string {
		return []string{
			`CREATE TABLE ` + name + ` (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL,
			  updated_at TEXT NOT NULL)`,
			`CREATE INDEX ix_` + name + `_ts ON ` + name + ` (updated_at, id)`,
		}
	},
	Timestamp: textTime,
	Stamp:     "TEXT",
	Schema:    func(testing.TB, *sql.DB) string { return "main" },
	Values: &sourcetest.Values{
		Table: "sqlite",
		Same:  func(_, a, b string) string { return a + " IS " + b },
	},
	Types: func(_ testing.TB, _ *sql.DB, name string, ts time.Time) sourcetest.TypesTable {
		return sourcetest.TypesTable{
			DDL:    `CREATE TABLE ` + name + ` (id INTEGER PRIMARY KEY, d DECIMAL(12,2), big TEXT, ts TEXT NOT NULL, bin BLOB, u TEXT, j TEXT, n INTEGER, t TEXT, f REAL, b BOOLEAN, i4 INT, i2 SMALLINT, r REAL)`,
			Insert: `INSERT INTO ` + name + ` VALUES (1, 12.50, '12345678901234567890.0123456789', ?, x'deadbeef', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2]}', NULL, 'grüße "q"', 1.5, 1, 7, 3, 0.25)`,
			Args:   []any{textTime(ts)},
			TS:     ts,
			JSON:   `{"id":1,"d":"12.50","big":"12345678901234567890.0123456789","ts":"2026-04-07T01:23:45.123456Z","bin":"3q2+7w==","u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","j":"{\"a\": [1, 2]}","n":null,"t":"grüße \"q\"","f":1.5,"b":1,"i4":7,"i2":3,"r":0.25}`,
		}
	},
	TextStamps: &sourcetest.TextStamps{
		Stamp: stamp,
		Fix: func(table string) string {
			return `UPDATE "` + table + `" SET "updated_at" = ` + stamp + ` WHERE "updated_at"` +
				" NOT GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]Z'"
		},
	},
}

// stamp is the SQL that stamps now in the layout: %f has milliseconds, "000" pads them to six
// digits.
const stamp = "strftime('%Y-%m-%dT%H:%M:%f000Z','now')"

// textTime is a time as the TEXT a timestamp column holds.
func textTime(tm time.Time) any { return tm.UTC().Format("2006-01-02T15:04:05.000000Z") }
