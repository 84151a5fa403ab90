package testenv

import (
	"database/sql"
	"testing"
)

// DB opens a pool of the database/sql driver named driverName (the test imports its package) on
// dsn, closed when the test ends, and runs stmts on it in order; a failure ends the test,
// naming the statement.
func DB(tb testing.TB, driverName, dsn string, stmts ...string) *sql.DB {
	tb.Helper()
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			if len(q) > 200 {
				q = q[:200] + "..."
			}
			tb.Fatalf("%s: %v", q, err)
		}
	}
	return db
}
