// Package testenv finds the servers that tests run against. scripts/test.sh starts them and
// exports their addresses; a test whose server is not configured skips with a message naming
// the variable to set, except under CI=true, where every server the machine can have must be
// there and a missing one fails the test.
package testenv

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// AzuriteVar names the connection string of the Azurite that scripts/test.sh starts.
const AzuriteVar = "AZURITE_CONNECTION_STRING"

// Azurite returns the Azurite connection string, or skips (fails under CI=true).
func Azurite(t testing.TB) string {
	t.Helper()
	return required(t, AzuriteVar, "an Azurite connection string (scripts/test.sh starts Azurite and sets it)")
}

// AzuriteQueue returns the Azurite connection string with its QueueEndpoint (scripts/test.sh
// starts the queue service too), or skips (fails under CI=true).
func AzuriteQueue(t testing.TB) string {
	t.Helper()
	cs := Azurite(t)
	if !strings.Contains(strings.ToLower(cs), "queueendpoint=") {
		missing(t, AzuriteVar, "an Azurite connection string with a QueueEndpoint (scripts/test.sh starts Azurite's queue service and adds it)")
	}
	return cs
}

// InCI reports whether CI=true.
func InCI() bool { return strings.EqualFold(os.Getenv("CI"), "true") }

// required is the variable's value; when it is not set, the test skips (fails under CI=true),
// saying to set it to what.
func required(t testing.TB, variable, what string) string {
	t.Helper()
	v := os.Getenv(variable)
	if v == "" {
		missing(t, variable, what)
	}
	return v
}

func missing(t testing.TB, variable, what string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s is not set: CI must run this test against the real server; set it to %s", variable, what)
	}
	t.Skipf("set %s to %s to run this test", variable, what)
}

// Name returns a fresh lower-case name with prefix, for containers and blobs.
func Name(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// PostgresVar names the DSN of the PostgreSQL that scripts/test.sh starts.
const PostgresVar = "PG_TEST_DSN"

// Postgres returns the PostgreSQL DSN, or skips (fails under CI=true).
func Postgres(t testing.TB) string {
	t.Helper()
	return required(t, PostgresVar, "a PostgreSQL DSN (scripts/test.sh starts PostgreSQL and sets it)")
}

// MySQLVar names the DSN of the MariaDB that scripts/test.sh starts (or of a MySQL 8, in the
// GitHub workflow), in go-sql-driver/mysql's form: user:password@tcp(host:port)/database.
const MySQLVar = "MYSQL_TEST_DSN"

// MySQL returns the MySQL/MariaDB DSN, or skips (fails under CI=true).
func MySQL(t testing.TB) string {
	t.Helper()
	return required(t, MySQLVar, "a MySQL or MariaDB DSN (scripts/test.sh starts MariaDB and sets it)")
}

// SQLServerVar names the DSN of a SQL Server to test against. No SQL Server runs on these
// machines: the tests skip without it, also in CI; the GitHub Actions workflow sets it.
const SQLServerVar = "MSSQL_TEST_DSN"

// SQLServer returns the SQL Server DSN, or skips.
func SQLServer(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(SQLServerVar)
	if dsn == "" {
		t.Skipf("set %s to a SQL Server DSN (sqlserver://user:pass@host:1433?database=db) to run the SQL Server tests", SQLServerVar)
	}
	return dsn
}

// CountingTransport sends blob requests with http.DefaultClient and counts them by method, for
// benchmarks that report the requests each operation costs.
type CountingTransport struct{ Gets, Puts atomic.Int64 }

// Do counts and forwards the request.
func (c *CountingTransport) Do(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet:
		c.Gets.Add(1)
	case http.MethodPut:
		c.Puts.Add(1)
	}
	return http.DefaultClient.Do(req)
}

// KeysetLoop is the hand-written baseline the benchmarks compare against: it reads a whole
// table in batches with first (no argument but the limit) and next (the position, then the
// limit), scanning each row into dest, and returns the rows read. position returns the last
// row's keyset values.
func KeysetLoop(db *sql.DB, first, next string, batch int, dest []any, position func() []any) (int, error) {
	n := 0
	for start := true; ; start = false {
		var (
			rows *sql.Rows
			err  error
		)
		if start {
			rows, err = db.Query(first, batch)
		} else {
			rows, err = db.Query(next, append(position(), batch)...)
		}
		if err != nil {
			return n, err
		}
		got := 0
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				rows.Close()
				return n, err
			}
			got++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return n, err
		}
		n += got
		if got < batch {
			return n, nil
		}
	}
}

// PostgresOrdersTable opens the PostgreSQL of PostgresVar (or skips, as Postgres does), makes
// table with PostgresOrders, and returns the database, closed when the test ends, and its DSN.
// The caller registers the pgx driver (import _ "github.com/jackc/pgx/v5/stdlib").
func PostgresOrdersTable(tb testing.TB, table string, rows int) (*sql.DB, string) {
	tb.Helper()
	dsn := Postgres(tb)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if err := PostgresOrders(db, table, rows); err != nil {
		tb.Fatal(err)
	}
	return db, dsn
}

// PostgresOrders creates, unless it exists, a benchmark orders table (the example's shape) of rows
// rows one microsecond apart, two hours old, indexed on (updated_at, id) and analysed.
func PostgresOrders(db *sql.DB, table string, rows int) error {
	var one int
	if db.QueryRow("SELECT 1 FROM "+table+" LIMIT 1").Scan(&one) == nil {
		return nil
	}
	for _, q := range []string{
		`CREATE TABLE ` + table + ` (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL, updated_at TIMESTAMPTZ(6) NOT NULL)`,
		`INSERT INTO ` + table + ` SELECT g, 'customer ' || g, (g % 100000) / 100.0, now() - interval '2 hours' + g * interval '1 microsecond' FROM generate_series(1, ` + strconv.Itoa(rows) + `) g`,
		`CREATE INDEX ON ` + table + ` (updated_at, id)`,
		`VACUUM ANALYZE ` + table,
	} {
		if _, err := db.Exec(q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// PostgresKeysetLoop is the hand-written baseline over a PostgresOrders table: database/sql,
// typed scans, keyset on (updated_at, id). It returns the rows read.
func PostgresKeysetLoop(db *sql.DB, table string, batch int) (int, error) {
	return ordersKeysetLoop(db,
		`SELECT id, customer, amount, updated_at FROM `+table+` ORDER BY updated_at, id LIMIT $1`,
		`SELECT id, customer, amount, updated_at FROM `+table+` WHERE (updated_at, id) > ($1, $2) ORDER BY updated_at, id LIMIT $3`,
		batch, func(ts time.Time, id int64) []any { return []any{ts, id} })
}

// PostgresPKLoop reads an orders table (id, customer, amount, updated_at) with typed scans, in
// batches of batch rows by primary key: a backfill's read of the table written by hand.
func PostgresPKLoop(db *sql.DB, table string, batch int) (int, error) {
	return ordersKeysetLoop(db,
		`SELECT id, customer, amount, updated_at FROM `+table+` ORDER BY id LIMIT $1`,
		`SELECT id, customer, amount, updated_at FROM `+table+` WHERE id > $1 ORDER BY id LIMIT $2`,
		batch, func(_ time.Time, id int64) []any { return []any{id} })
}

// ordersKeysetLoop reads an orders table (id, customer, amount, updated_at) with typed scans by
// the keyset queries first and after; args gives after's keyset arguments from the last row's
// time and id. It returns the rows read.
func ordersKeysetLoop(db *sql.DB, first, after string, batch int, args func(ts time.Time, id int64) []any) (int, error) {
	var (
		id       int64
		customer string
		amount   string
		ts       time.Time
	)
	return KeysetLoop(db, first, after, batch, []any{&id, &customer, &amount, &ts}, func() []any { return args(ts, id) })
}

// Buffer is a bytes.Buffer safe for concurrent writers: a process's or a handler's log.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// PostgresLogical opens the PostgreSQL of PostgresVar (or skips, as Postgres does), makes a
// table from ddl (a CREATE TABLE with one %s for the name), a publication of it and a logical
// replication slot (pgoutput) named slot, which is also the publication's name: what `pollerctl
// cdc enable` makes. All three are dropped when the test ends. The server must run with
// wal_level=logical (scripts/test.sh's does).
func PostgresLogical(tb testing.TB, ddl string) (db *sql.DB, dsn, table, slot string) {
	tb.Helper()
	return PostgresLogicalOn(tb, Postgres(tb), ddl)
}

// PostgresLogicalOn is PostgresLogical on the server of dsn (PostgresOwn's, say).
func PostgresLogicalOn(tb testing.TB, dsn, ddl string) (db *sql.DB, _, table, slot string) {
	tb.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	table = Name("lg")
	slot = strings.ToLower(table)
	for _, q := range []string{
		fmt.Sprintf(ddl, table),
		fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s", slot, table),
		fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", slot),
	} {
		if _, err := db.Exec(q); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
	tb.Cleanup(func() {
		db.Exec("SELECT pg_drop_replication_slot($1)", slot)
		db.Exec("DROP PUBLICATION IF EXISTS " + slot)
		db.Exec("DROP TABLE IF EXISTS " + table)
	})
	return db, dsn, table, slot
}

// ExecFlushed runs statements in one transaction that commits with synchronous_commit on:
// scripts/test.sh's PostgreSQL runs with it off, and logical decoding reads only flushed WAL, so
// a change made this way can be read at once.
func ExecFlushed(tb testing.TB, db *sql.DB, statements ...string) {
	tb.Helper()
	tx, err := db.Begin()
	if err != nil {
		tb.Fatal(err)
	}
	for _, q := range append([]string{"SET LOCAL synchronous_commit = on"}, statements...) {
		if _, err := tx.Exec(q); err != nil {
			tx.Rollback()
			tb.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
}

// WithParam returns the URL-form DSN with the query parameter key=value added (after ? or &).
func WithParam(dsn, key, value string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + key + "=" + value
}

// FreePort returns a 127.0.0.1 port that was free a moment ago, for a server a test starts.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// InTurn runs each of steps, in order on even iterations i and in reverse on odd ones: a
// benchmark that measures a path against its baseline in the same run alternates which goes
// first, so that neither always finds the caches (or the machine) as the other left them.
func InTurn(i int, steps ...func()) {
	for k := range steps {
		if i%2 == 1 {
			k = len(steps) - 1 - k
		}
		steps[k]()
	}
}
