// Package sourcetest is the conformance suite every source driver passes, run from each driver
// package's tests against its database: SQLite and PostgreSQL always (scripts/test.sh starts a
// PostgreSQL), MySQL always (scripts/test.sh starts a MariaDB; the GitHub workflow also runs a
// MySQL 8), SQL Server when MSSQL_TEST_DSN is set. It opens sources through package drivers, as
// the product does; each database's own set-up SQL (its table, its types) is in the harness.
// Golden renders a driver's keyset SQL for its golden files.
package sourcetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-sql/civil"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlserver"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// Harness is one database to run the suite against.
type Harness struct {
	Driver string  // sqlserver.Name, postgres.Name, mysql.Name or sqlite.Name
	DSN    string  // what the source opens
	DB     *sql.DB // the test's own connection, for set-up
	// ConcurrentWriters: a transaction can stay open while others commit (not SQLite).
	ConcurrentWriters bool
}

// DB opens a harness's own connection, for set-up, with the Go driver of that name (sql.Open's),
// and closes it when the test ends.
func DB(t *testing.T, goDriver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(goDriver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Run runs the whole suite.
func Run(t *testing.T, h Harness) {
	t.Run("KeysetOrder", h.testKeysetOrder)
	t.Run("LateCommit", h.testLateCommit)
	t.Run("UpdatesAndDeletes", h.testUpdatesAndDeletes)
	t.Run("Types", h.testTypes)
	t.Run("OddIdentifiers", h.testOddIdentifiers)
	t.Run("Refusals", h.testRefusals)
	t.Run("Pending", h.testPending)
	t.Run("FetchKeyOf", h.testFetchKeyOf)
	t.Run("IntKeys", h.testIntKeys)
	t.Run("UnreachableRows", h.testUnreachableRows)
}

var ctx = context.Background()

// q quotes an identifier for the harness's dialect.
func (h Harness) q(s string) string {
	switch h.Driver {
	case sqlserver.Name:
		return "[" + strings.ReplaceAll(s, "]", "]]") + "]"
	case mysql.Name:
		return "`" + strings.ReplaceAll(s, "`", "``") + "`"
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

func (h Harness) ph(i int) string {
	switch h.Driver {
	case sqlserver.Name:
		return fmt.Sprintf("@p%d", i)
	case postgres.Name:
		return fmt.Sprintf("$%d", i)
	}
	return "?"
}

func (h Harness) exec(t testing.TB, query string, args ...any) {
	t.Helper()
	if _, err := h.DB.ExecContext(ctx, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// ts converts a time to the argument the dialect stores in its timestamp column.
func (h Harness) ts(tm time.Time) any {
	switch h.Driver {
	case sqlite.Name:
		return tm.UTC().Format("2006-01-02T15:04:05.000000Z")
	case sqlserver.Name:
		return civil.DateTimeOf(tm.UTC())
	}
	return tm.UTC()
}

// orders creates an orders table (the example poller's shape plus the driver's transaction-order
// column: xid8 on PostgreSQL, rowversion on SQL Server) and drops it after the test.
func (h Harness) orders(t testing.TB) string {
	t.Helper()
	name := testenv.Name("orders_")
	var ddl []string
	switch h.Driver {
	case postgres.Name:
		ddl = []string{
			`CREATE TABLE ` + name + ` (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL,
			  updated_at TIMESTAMPTZ(6) NOT NULL, txid XID8 NOT NULL DEFAULT pg_current_xact_id())`,
			`CREATE INDEX ON ` + name + ` (updated_at, id)`,
			`CREATE INDEX ON ` + name + ` (txid, id)`,
		}
	case mysql.Name:
		ddl = []string{
			`CREATE TABLE ` + name + ` (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL,
			  updated_at DATETIME(6) NOT NULL, KEY ix_ts (updated_at, id))`,
		}
	case sqlserver.Name:
		ddl = []string{
			`CREATE TABLE ` + name + ` (id BIGINT PRIMARY KEY, customer NVARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL,
			  updated_at DATETIME2(7) NOT NULL, rv ROWVERSION)`,
			`CREATE INDEX ix_` + name + `_ts ON ` + name + ` (updated_at, id)`,
			`CREATE UNIQUE INDEX ix_` + name + `_rv ON ` + name + ` (rv)`,
		}
	default:
		ddl = []string{
			`CREATE TABLE ` + name + ` (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL,
			  updated_at TEXT NOT NULL)`,
			`CREATE INDEX ix_` + name + `_ts ON ` + name + ` (updated_at, id)`,
		}
	}
	for _, s := range ddl {
		h.exec(t, s)
	}
	t.Cleanup(func() { _, _ = h.DB.ExecContext(context.Background(), "DROP TABLE "+name) })
	return name
}

type order struct {
	ID       int64     `db:"id"`
	Customer string    `db:"customer"`
	Amount   string    `db:"amount"`
	Updated  time.Time `db:"updated_at"`
}

// insert adds orders in multi-row statements, through exec (the test's DB or an open tx).
func (h Harness) insert(t testing.TB, exec func(string, ...any) (sql.Result, error), table string, rows []order) {
	t.Helper()
	const per = 400 // 1,600 parameters: under SQL Server's 2,100
	for start := 0; start < len(rows); start += per {
		chunk := rows[start:min(start+per, len(rows))]
		var sb strings.Builder
		sb.WriteString("INSERT INTO " + table + " (id, customer, amount, updated_at) VALUES ")
		args := make([]any, 0, 4*len(chunk))
		for i, r := range chunk {
			if i > 0 {
				sb.WriteString(", ")
			}
			n := len(args)
			fmt.Fprintf(&sb, "(%s, %s, %s, %s)", h.ph(n+1), h.ph(n+2), h.ph(n+3), h.ph(n+4))
			args = append(args, r.ID, r.Customer, r.Amount, h.ts(r.Updated))
		}
		if _, err := exec(sb.String(), args...); err != nil {
			t.Fatalf("insert: %v", err)
		}
	}
}

func (h Harness) open(t testing.TB, def source.Definition) *source.Source {
	t.Helper()
	s, err := drivers.Open(ctx, source.Config{Poller: "orders", Driver: h.Driver, DSN: h.DSN, Definition: def})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ordersDef(table, kind string) source.Definition {
	d := source.Definition{
		Table:   source.Table{Name: table},
		Columns: []string{"id", "customer", "amount", "updated_at"},
		PK:      []string{"id"},
	}
	switch kind {
	case state.KindTimestampPK:
		d.Cursor = source.Cursor{Kind: kind, Column: "updated_at"}
	case state.KindInteger:
		d.Cursor = source.Cursor{Kind: kind, Column: "id"}
	case state.KindXID:
		d.Cursor = source.Cursor{Kind: kind, Column: "txid"}
	case state.KindRowversion:
		d.Cursor = source.Cursor{Kind: kind, Column: "rv"}
	}
	return d
}

// kinds are the keyset cursor kinds the harness's driver supports.
func (h Harness) kinds() []string {
	drv, _ := drivers.All().Lookup(h.Driver)
	var k []string
	for _, kind := range []string{state.KindTimestampPK, state.KindInteger, state.KindXID, state.KindRowversion} {
		if drv != nil && drv.Supports(kind) {
			k = append(k, kind)
		}
	}
	return k
}

// reader drains a source the way the poller does: each batch's cursor goes through the state
// document (encoded and decoded) before it is used for the next fetch.
type reader struct {
	t      testing.TB
	src    *source.Source
	cursor *state.Cursor
}

func (r *reader) next(limit int) []int64 {
	r.t.Helper()
	b, err := r.src.Fetch(ctx, r.cursor, limit)
	if err != nil {
		r.t.Fatalf("fetch: %v", err)
	}
	ids := make([]int64, len(b.Rows))
	for i, row := range b.Rows {
		ids[i] = row.Get("id").(int64)
	}
	if b.To != nil {
		doc := &state.Doc{Version: 1, PollerName: "orders", Checkpoint: state.Checkpoint{Cursor: b.To}}
		data, err := state.Encode(doc)
		if err != nil {
			r.t.Fatal(err)
		}
		back, err := state.Decode("state/test/orders.json", "orders", data)
		if err != nil {
			r.t.Fatal(err)
		}
		r.cursor = back.Checkpoint.Cursor
	}
	return ids
}

func (r *reader) drain(limit int) []int64 {
	r.t.Helper()
	var all []int64
	for {
		ids := r.next(limit)
		if len(ids) == 0 {
			return all
		}
		if len(ids) > limit {
			r.t.Fatalf("a batch of %d rows for a limit of %d", len(ids), limit)
		}
		all = append(all, ids...)
	}
}

// expected returns the ids in the database's own order by the keyset columns.
func (h Harness) expected(t testing.TB, table string, keys ...string) []int64 {
	t.Helper()
	qk := make([]string, len(keys))
	for i, k := range keys {
		qk[i] = h.q(k)
	}
	rows, err := h.DB.QueryContext(ctx, "SELECT id FROM "+table+" ORDER BY "+strings.Join(qk, ", "))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// tenThousand returns 10,000 orders an hour old with shuffled ids; 1,000 of them share one
// timestamp.
func tenThousand() []order {
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Microsecond)
	rng := rand.New(rand.NewPCG(1, 2))
	ids := rng.Perm(10_000)
	rows := make([]order, 10_000)
	for i := range rows {
		ts := base.Add(time.Duration(i) * time.Millisecond)
		if i >= 4000 && i < 5000 {
			ts = base.Add(4000 * time.Millisecond)
		}
		rows[i] = order{ID: int64(ids[i]) + 1, Customer: fmt.Sprintf("customer %d", i), Amount: fmt.Sprintf("%d.%02d", i, i%100), Updated: ts}
	}
	return rows
}

func (h Harness) testKeysetOrder(t *testing.T) {
	table := h.orders(t)
	rows := tenThousand()
	// Insert in a few transactions so that xid and rowversion have ties and runs as well.
	for i := 0; i < len(rows); i += 2500 {
		tx, err := h.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		h.insert(t, tx.Exec, table, rows[i:i+2500])
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for _, kind := range h.kinds() {
		h.settle(t, table, kind)
		def := ordersDef(table, kind)
		keys := append([]string{def.Cursor.Column}, "id")
		if kind == state.KindInteger {
			keys = keys[:1]
		}
		want := h.expected(t, table, keys...)
		for _, limit := range []int{7, 1000} {
			r := &reader{t: t, src: h.open(t, def)}
			got := r.drain(limit)
			if !slices.Equal(got, want) {
				t.Fatalf("%s, batches of %d: got %d rows, want %d; first difference at %d", kind, limit, len(got), len(want), firstDiff(got, want))
			}
		}
	}
}

// settle waits until every committed row of table is inside a kind's bound on open
// transactions (xid: below the oldest running transaction; rowversion: below the oldest active
// rowversion). Other tests' transactions on the same server, in any database (the late-commit
// soak holds some open on purpose), keep that bound back for a while; a reader then rightly
// delivers nothing yet, which is not what the test is about. Other kinds: no wait.
func (h Harness) settle(t *testing.T, table, kind string) {
	t.Helper()
	var q string
	switch kind {
	case state.KindXID:
		q = "SELECT COUNT(*) FROM " + table + " WHERE txid >= pg_snapshot_xmin(pg_current_snapshot())"
	case state.KindRowversion:
		q = "SELECT COUNT(*) FROM " + table + " WHERE rv >= MIN_ACTIVE_ROWVERSION()"
	default:
		return
	}
	for deadline := time.Now().Add(time.Minute); ; {
		var n int
		if err := h.DB.QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows of %s stayed behind a transaction open elsewhere on the server for a minute", n, table)
		}
		time.Sleep(50 * time.Millisecond) // polling the server, with a deadline
	}
}

func firstDiff(a, b []int64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// testLateCommit: a transaction inserts a row with an early cursor value and stays open while
// the poller reads past it. xid and rowversion deliver it after the commit, always;
// timestamp+pk delivers it when the settle lag covers the transaction, and misses it with no lag.
func (h Harness) testLateCommit(t *testing.T) {
	if !h.ConcurrentWriters {
		t.Skipf("%s serialises writers: a transaction cannot stay open while others commit", h.Driver)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	scenario := func(t *testing.T, kind string, lag time.Duration) (delivered bool) {
		table := h.orders(t)
		var early []order
		for i := range 10 {
			early = append(early, order{ID: int64(i + 1), Customer: "early", Amount: "1.00", Updated: now.Add(-time.Minute).Add(time.Duration(i) * time.Millisecond)})
		}
		h.insert(t, h.DB.Exec, table, early)
		h.settle(t, table, kind)

		tx, err := h.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		late := order{ID: 1000, Customer: "late", Amount: "2.00", Updated: now.Add(-5 * time.Second)}
		h.insert(t, tx.Exec, table, []order{late})

		var after []order
		for i := range 10 {
			after = append(after, order{ID: int64(2000 + i), Customer: "after", Amount: "3.00", Updated: now.Add(-4 * time.Second).Add(time.Duration(i) * time.Millisecond)})
		}
		h.insert(t, h.DB.Exec, table, after)

		def := ordersDef(table, kind)
		def.SettleLag = lag
		r := &reader{t: t, src: h.open(t, def)}
		seen := map[int64]bool{}
		for _, id := range r.drain(3) {
			seen[id] = true
		}
		if seen[1000] {
			t.Fatal("the uncommitted row was read")
		}
		if kind == state.KindXID || kind == state.KindRowversion {
			// The rows committed behind the open transaction wait for it: they are the backlog,
			// not nothing (a transaction held open must show, not look like an idle poller).
			b, err := r.src.Backlog(ctx, r.cursor, 100)
			if err != nil || b.Rows != int64(len(after)) || b.Oldest == nil {
				t.Fatalf("with the late transaction open: backlog %+v, %v; want the %d rows committed after it", b, err, len(after))
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		h.settle(t, table, kind)
		// Read the rest with no lag, as a later tick would once the lag has passed.
		def.SettleLag = source.NoSettleLag
		r.src = h.open(t, def)
		for _, id := range r.drain(3) {
			seen[id] = true
		}
		for _, o := range append(early, after...) {
			if !seen[o.ID] {
				t.Fatalf("committed row %d was never delivered", o.ID)
			}
		}
		return seen[1000]
	}
	for _, kind := range h.kinds() {
		switch kind {
		case state.KindXID, state.KindRowversion:
			t.Run(kind, func(t *testing.T) {
				if !scenario(t, kind, 0) {
					t.Fatalf("%s missed a row that committed late", kind)
				}
			})
		case state.KindTimestampPK:
			t.Run("timestamp+pk lag longer than the transaction", func(t *testing.T) {
				if !scenario(t, kind, 30*time.Second) {
					t.Fatal("timestamp+pk with a 30 s lag missed a row whose transaction stayed open less than that")
				}
			})
			t.Run("timestamp+pk with no lag misses it", func(t *testing.T) {
				// The documented hazard, shown rather than asserted away: with no settle lag the
				// reader moves past the open transaction's timestamp, and the row is lost.
				if scenario(t, kind, source.NoSettleLag) {
					t.Fatal("timestamp+pk with no lag delivered the late row: the hazard test no longer shows the hazard")
				}
			})
		}
	}
}

func (h Harness) testUpdatesAndDeletes(t *testing.T) {
	table := h.orders(t)
	base := time.Now().UTC().Add(-time.Hour)
	var rows []order
	for i := range 20 {
		rows = append(rows, order{ID: int64(i + 1), Customer: "c", Amount: "1.00", Updated: base.Add(time.Duration(i) * time.Second)})
	}
	h.insert(t, h.DB.Exec, table, rows)
	kinds := []string{state.KindTimestampPK}
	if h.Driver == postgres.Name {
		kinds = append(kinds, state.KindXID)
	}
	for _, kind := range kinds {
		h.settle(t, table, kind)
		r := &reader{t: t, src: h.open(t, ordersDef(table, kind))}
		if got := r.drain(6); len(got) != 20 {
			t.Fatalf("%s: first pass delivered %d rows, want 20", kind, len(got))
		}
		// An update moves the row to the end: its cursor column changes.
		set := "updated_at = " + h.ph(1)
		args := []any{h.ts(base.Add(30 * time.Minute))}
		if kind == state.KindXID {
			set = "txid = pg_current_xact_id()" // an update must set it: a trigger or the application
			args = nil
		}
		h.exec(t, "UPDATE "+table+" SET customer = 'changed', "+set+" WHERE id = 5", args...)
		h.settle(t, table, kind)
		if got := r.drain(6); !slices.Equal(got, []int64{5}) {
			t.Fatalf("%s: after an update, got %v, want [5]", kind, got)
		}
	}
	// Deletes are not seen: a deleted row is simply never (again) delivered, and nothing fails.
	h.exec(t, "DELETE FROM "+table+" WHERE id IN (3, 5)")
	r := &reader{t: t, src: h.open(t, ordersDef(table, state.KindTimestampPK))}
	got := r.drain(100)
	if len(got) != 18 || slices.Contains(got, 3) || slices.Contains(got, 5) {
		t.Fatalf("after deletes: %v", got)
	}
}

// testTypes: every supported type comes back exact in JSON, and decodes into a struct.
func (h Harness) testTypes(t *testing.T) {
	name := testenv.Name("types_")
	ts := time.Date(2026, 4, 7, 1, 23, 45, 123456000, time.UTC)
	var ddl, insert, want string
	args := []any{}
	cols := []string{"id", "d", "big", "ts", "bin", "u", "j", "n", "t", "f", "b", "i4", "i2", "r"}
	switch h.Driver {
	case postgres.Name:
		ddl = `CREATE TABLE ` + name + ` (id BIGINT PRIMARY KEY, d NUMERIC(12,2), big NUMERIC(38,10), ts TIMESTAMPTZ(6) NOT NULL, bin BYTEA, u UUID, j JSONB, n INT, t TEXT, f DOUBLE PRECISION, b BOOLEAN, i4 INT, i2 SMALLINT, r REAL)`
		insert = `INSERT INTO ` + name + ` VALUES (1, 12.50, 12345678901234567890.0123456789, $1, '\xdeadbeef', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '{"a": [1, 2]}', NULL, 'grüße "q"', 1.5, true, 7, 3, 0.25)`
		args = append(args, ts)
		want = `{"id":1,"d":"12.50","big":"12345678901234567890.0123456789","ts":"2026-04-07T01:23:45.123456Z","bin":"3q2+7w==","u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","j":{"a":[1,2]},"n":null,"t":"grüße \"q\"","f":1.5,"b":true,"i4":7,"i2":3,"r":0.25}`
	case sqlserver.Name:
		ts = ts.Add(700 * time.Nanosecond) // datetime2(7): 100 ns
		ddl = `CREATE TABLE ` + name + ` (id BIGINT PRIMARY KEY, d DECIMAL(12,2), big DECIMAL(38,10), ts DATETIME2(7) NOT NULL, bin VARBINARY(16), u UNIQUEIDENTIFIER, j NVARCHAR(100), n INT, t NVARCHAR(100), f FLOAT, b BIT, i4 INT, i2 SMALLINT, r REAL)`
		insert = `INSERT INTO ` + name + ` VALUES (1, 12.50, 1234567890123456789012345678.0123456789, @p1, 0xDEADBEEF, 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', N'{"a": [1, 2]}', NULL, N'grüße "q"', 1.5, 1, 7, 3, 0.25)`
		args = append(args, civil.DateTimeOf(ts))
		want = `{"id":1,"d":"12.50","big":"1234567890123456789012345678.0123456789","ts":"2026-04-07T01:23:45.1234567Z","bin":"3q2+7w==","u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","j":"{\"a\": [1, 2]}","n":null,"t":"grüße \"q\"","f":1.5,"b":true,"i4":7,"i2":3,"r":0.25}`
	case mysql.Name:
		// The list: DECIMAL(38,10), DATETIME(6) (the cursor), TIMESTAMP(6), JSON,
		// BINARY(16), VARBINARY, utf8mb4 text with an emoji, NULL, BIGINT UNSIGNED near its
		// maximum (a JSON number, exact), next to the columns every driver has.
		//
		// JSON differs by server. MySQL 8 has a JSON type: go-sql-driver reports it as JSON and
		// the row carries the value itself ({"a":[1,2]}, as encoding/json writes it). MariaDB's
		// JSON is an alias of LONGTEXT with a json_valid CHECK: the driver reports TEXT and the
		// row carries the stored text as a JSON string, exactly, as SQL Server's NVARCHAR JSON
		// does. Decoding into a json.RawMessage field gives the same bytes on both.
		ddl = `CREATE TABLE ` + name + ` (id BIGINT PRIMARY KEY, d DECIMAL(12,2), big DECIMAL(38,10), ts DATETIME(6) NOT NULL, bin BINARY(4), u BINARY(16), j JSON, n INT, t VARCHAR(100) CHARACTER SET utf8mb4, f DOUBLE, b BOOLEAN, i4 INT, i2 SMALLINT, r FLOAT,
		  tz TIMESTAMP(6) NULL, vb VARBINARY(32), ub BIGINT UNSIGNED, KEY (ts, id))`
		insert = `INSERT INTO ` + name + ` VALUES (1, 12.50, 1234567890123456789012345678.0123456789, ?, x'deadbeef', x'a0eebc999c0b4ef8bb6d6bb9bd380a11', '{"a": [1, 2]}', NULL, 'grüße "q" 😀', 1.5, true, 7, 3, 0.25,
		  ?, x'00ff10', 18446744073709551610)`
		args = append(args, ts, mysqlTZ)
		j := `{"a":[1,2]}`
		if h.mariaDB(t) {
			j = `"{\"a\": [1, 2]}"`
		}
		want = `{"id":1,"d":"12.50","big":"1234567890123456789012345678.0123456789","ts":"2026-04-07T01:23:45.123456Z","bin":"3q2+7w==","u":"oO68mZwLTvi7bWu5vTgKEQ==","j":` + j + `,"n":null,"t":"grüße \"q\" 😀","f":1.5,"b":1,"i4":7,"i2":3,"r":0.25,` +
			`"tz":"2026-11-23T23:59:59.000001Z","vb":"AP8Q","ub":18446744073709551610}`
		cols = append(cols, "tz", "vb", "ub")
	default:
		ddl = `CREATE TABLE ` + name + ` (id INTEGER PRIMARY KEY, d DECIMAL(12,2), big TEXT, ts TEXT NOT NULL, bin BLOB, u TEXT, j TEXT, n INTEGER, t TEXT, f REAL, b BOOLEAN, i4 INT, i2 SMALLINT, r REAL)`
		insert = `INSERT INTO ` + name + ` VALUES (1, 12.50, '12345678901234567890.0123456789', ?, x'deadbeef', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2]}', NULL, 'grüße "q"', 1.5, 1, 7, 3, 0.25)`
		args = append(args, ts.Format("2006-01-02T15:04:05.000000Z"))
		want = `{"id":1,"d":"12.50","big":"12345678901234567890.0123456789","ts":"2026-04-07T01:23:45.123456Z","bin":"3q2+7w==","u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","j":"{\"a\": [1, 2]}","n":null,"t":"grüße \"q\"","f":1.5,"b":1,"i4":7,"i2":3,"r":0.25}`
	}
	h.exec(t, ddl)
	t.Cleanup(func() { _, _ = h.DB.ExecContext(context.Background(), "DROP TABLE "+name) })
	h.exec(t, insert, args...)

	src := h.open(t, source.Definition{
		Table:     source.Table{Name: name},
		Columns:   cols,
		Cursor:    source.Cursor{Kind: state.KindTimestampPK, Column: "ts"},
		PK:        []string{"id"},
		SettleLag: time.Second,
	})
	b, err := src.Fetch(ctx, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Rows) != 1 {
		t.Fatalf("%d rows", len(b.Rows))
	}
	got, err := b.Rows[0].MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("JSON of the row:\n got %s\nwant %s", got, want)
	}
	if !json.Valid(got) {
		t.Fatalf("invalid JSON: %s", got)
	}

	var dst struct {
		ID      int64     `db:"id"`
		D       string    `db:"d"`
		Float   float64   `db:"d"`
		TS      time.Time `db:"ts"`
		Bin     []byte    `db:"bin"`
		U       string    `db:"u"`
		N       *int      `db:"n"`
		I4      int32     `db:"i4"`
		I2      int       `db:"i2"`
		R       float32   `db:"r"`
		T       string
		Skipped string `db:"-"`
	}
	if err := b.Rows[0].Decode(&dst); err != nil {
		t.Fatal(err)
	}
	wantU, wantT := "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", `grüße "q"`
	if h.Driver == mysql.Name { // a UUID kept in BINARY(16): its 16 bytes
		wantU, wantT = "\xa0\xee\xbc\x99\x9c\x0b\x4e\xf8\xbb\x6d\x6b\xb9\xbd\x38\x0a\x11", `grüße "q" 😀`
	}
	if dst.ID != 1 || dst.D != "12.50" || dst.Float != 12.5 || !dst.TS.Equal(ts) || string(dst.Bin) != "\xde\xad\xbe\xef" ||
		dst.U != wantU || dst.N != nil || dst.T != wantT || dst.I4 != 7 || dst.I2 != 3 || dst.R != 0.25 {
		t.Fatalf("decoded %+v", dst)
	}
	if h.Driver == mysql.Name {
		h.mysqlTypes(t, b.Rows[0])
	}

	// The cursor keeps the timestamp's full precision, and resuming from it reads nothing more.
	var cv string
	if err := json.Unmarshal(b.To.Value, &cv); err != nil {
		t.Fatal(err)
	}
	if back, err := time.Parse(time.RFC3339Nano, cv); err != nil || !back.Equal(ts) {
		t.Fatalf("cursor value %s does not round-trip %v", b.To.Value, ts)
	}
	if more, err := src.Fetch(ctx, b.To, 10); err != nil || len(more.Rows) != 0 {
		t.Fatalf("after the last row: %v rows, %v", len(more.Rows), err)
	}
}

// mysqlTZ is the TIMESTAMP(6) of testTypes' MySQL row: a microsecond past a day's last second.
var mysqlTZ = time.Date(2026, 11, 23, 23, 59, 59, 1000, time.UTC)

// mysqlTypes decodes the MySQL-only columns of testTypes' row: TIMESTAMP(6) at full precision,
// VARBINARY's bytes, BIGINT UNSIGNED near its maximum into uint64, string and float64 exactly
// (and into int64: an overflow error, not a wrapped number), DECIMAL(38,10) as its digits, JSON
// into a json.RawMessage as the server keeps its text (both: {"a": [1, 2]}).
func (h Harness) mysqlTypes(t *testing.T, row source.Row) {
	var dst struct {
		TZ     time.Time       `db:"tz"`
		VB     []byte          `db:"vb"`
		UB     uint64          `db:"ub"`
		UBText string          `db:"ub"`
		UBF    float64         `db:"ub"`
		Big    string          `db:"big"`
		J      json.RawMessage `db:"j"`
		T      string          `db:"t"`
	}
	if err := row.Decode(&dst); err != nil {
		t.Fatal(err)
	}
	if !dst.TZ.Equal(mysqlTZ) || dst.TZ.Location() != time.UTC || string(dst.VB) != "\x00\xff\x10" ||
		dst.UB != 18446744073709551610 || dst.UBText != "18446744073709551610" || dst.UBF != 18446744073709551610 ||
		dst.Big != "1234567890123456789012345678.0123456789" || string(dst.J) != `{"a": [1, 2]}` || dst.T != "grüße \"q\" 😀" {
		t.Fatalf("decoded %+v", dst)
	}
	var signed struct {
		UB int64 `db:"ub"`
	}
	if err := row.Decode(&signed); err == nil || !strings.Contains(err.Error(), "overflows int64") {
		t.Fatalf("BIGINT UNSIGNED 18446744073709551610 into an int64: %d, %v; want an overflow error", signed.UB, err)
	}
}

// mariaDB reports whether the MySQL harness's server is MariaDB (not MySQL).
func (h Harness) mariaDB(t testing.TB) bool {
	t.Helper()
	var v string
	if err := h.DB.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return strings.Contains(strings.ToLower(v), "mariadb")
}

// testOddIdentifiers: spaces, quotes, brackets and mixed case in table and column names.
func (h Harness) testOddIdentifiers(t *testing.T) {
	table := "Order Details \"x\" [y] " + testenv.Name("")
	cols := []string{"Row ID", `Customer "Name"`, "[weird]", "MixedCase", "it's"}
	h.exec(t, "CREATE TABLE "+h.q(table)+" ("+h.q(cols[0])+" BIGINT PRIMARY KEY, "+h.q(cols[1])+" VARCHAR(50), "+
		h.q(cols[2])+" VARCHAR(50), "+h.q(cols[3])+" INT, "+h.q(cols[4])+" VARCHAR(10))")
	t.Cleanup(func() { _, _ = h.DB.ExecContext(context.Background(), "DROP TABLE "+h.q(table)) })
	for i := 1; i <= 5; i++ {
		h.exec(t, fmt.Sprintf("INSERT INTO %s VALUES (%d, 'n%d', 'w', %d, 'x')", h.q(table), i, i, i))
	}
	src := h.open(t, source.Definition{
		Table: source.Table{Name: table}, Columns: cols,
		Cursor: source.Cursor{Kind: state.KindInteger, Column: "Row ID"}, PK: []string{"Row ID"},
		Filter: h.q("MixedCase") + " <> 3",
	})
	r := &reader{t: t, src: src}
	var got []int64
	for {
		b, err := src.Fetch(ctx, r.cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Rows) == 0 {
			break
		}
		for _, row := range b.Rows {
			got = append(got, row.Get("Row ID").(int64))
			if row.Get(`Customer "Name"`) == nil {
				t.Fatal("a quoted column came back empty")
			}
		}
		r.cursor = b.To
	}
	if !slices.Equal(got, []int64{1, 2, 4, 5}) {
		t.Fatalf("odd identifiers with a filter: got %v", got)
	}
}

// testRefusals: injection attempts, missing tables and columns, NULL cursors, unfit types and
// unreachable databases are clear errors naming the poller, table and column.
func (h Harness) testRefusals(t *testing.T) {
	table := h.orders(t)
	h.insert(t, h.DB.Exec, table, []order{{ID: 1, Customer: "c", Amount: "1.00", Updated: time.Now().Add(-time.Hour)}})
	cases := []struct {
		name     string
		mutate   func(d *source.Definition)
		sentinel error
		mentions []string
	}{
		{"table injection", func(d *source.Definition) { d.Table = source.Table{Name: "orders; DROP TABLE x"} }, source.ErrDefinition, []string{`"orders"`, "';'"}},
		{"column injection", func(d *source.Definition) { d.Columns = append(d.Columns, "id -- x") }, source.ErrDefinition, []string{"comment"}},
		{"schema injection", func(d *source.Definition) { d.Table.Schema = "dbo;" }, source.ErrDefinition, []string{"schema"}},
		{"missing table", func(d *source.Definition) { d.Table = source.Table{Name: "no_such_table"} }, source.ErrSchema, []string{"no_such_table", `"orders"`}},
		{"missing column", func(d *source.Definition) { d.Columns = append(d.Columns, "no_such_column") }, source.ErrSchema, []string{`"no_such_column"`, table}},
		{"integer cursor on text", func(d *source.Definition) { d.Cursor = source.Cursor{Kind: state.KindInteger, Column: "customer"} }, source.ErrSchema, []string{`"customer"`, "integer"}},
		{"timestamp cursor on a number", func(d *source.Definition) { d.Cursor.Column = "amount" }, source.ErrSchema, []string{`"amount"`, "timestamp"}},
		{"wrong driver kind", func(d *source.Definition) {
			d.Cursor.Kind = state.KindXID
			if h.Driver == postgres.Name {
				d.Cursor.Kind = state.KindRowversion
			}
		}, source.ErrDefinition, []string{"needs"}},
	}
	for _, c := range cases {
		def := ordersDef(table, state.KindTimestampPK)
		c.mutate(&def)
		_, err := drivers.Open(ctx, source.Config{Poller: "orders", Driver: h.Driver, DSN: h.DSN, Definition: def})
		if !errors.Is(err, c.sentinel) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.sentinel)
			continue
		}
		for _, m := range append(c.mentions, `poller "orders"`) {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("%s: %q does not mention %s", c.name, err, m)
			}
		}
	}
	// The injection attempt left the table alone.
	if got := h.expected(t, table, "id"); len(got) != 1 {
		t.Fatalf("the table has %d rows after the refusals", len(got))
	}

	// A NULL in the cursor column would be skipped by every keyset read: refused.
	nullable := testenv.Name("nullable_")
	h.exec(t, "CREATE TABLE "+nullable+" (id BIGINT PRIMARY KEY, seq BIGINT)")
	t.Cleanup(func() { _, _ = h.DB.ExecContext(context.Background(), "DROP TABLE "+nullable) })
	h.exec(t, "INSERT INTO "+nullable+" VALUES (1, 1), (2, NULL)")
	_, err := drivers.Open(ctx, source.Config{Poller: "orders", Driver: h.Driver, DSN: h.DSN, Definition: source.Definition{
		Table: source.Table{Name: nullable}, Columns: []string{"id"}, Cursor: source.Cursor{Kind: state.KindInteger, Column: "seq"}, PK: []string{"id"},
	}})
	if !errors.Is(err, source.ErrNullCursor) || !strings.Contains(err.Error(), `"seq"`) || !strings.Contains(err.Error(), nullable) {
		t.Fatalf("NULL cursor values: %v", err)
	}

	// A stored cursor of another kind or shape is refused, not misread.
	src := h.open(t, ordersDef(table, state.KindTimestampPK))
	for _, bad := range []*state.Cursor{
		{Kind: state.KindInteger, Value: json.RawMessage("5")},
		{Kind: state.KindTimestampPK, Value: json.RawMessage(`"2026-01-01T00:00:00Z"`)},
		{Kind: state.KindTimestampPK, Value: json.RawMessage(`"2026-01-01T00:00:00Z"`), Tiebreaker: map[string]json.RawMessage{"other": json.RawMessage("1")}},
		{Kind: state.KindTimestampPK, Value: json.RawMessage(`"not a time"`), Tiebreaker: map[string]json.RawMessage{"id": json.RawMessage("1")}},
	} {
		if _, err := src.Fetch(ctx, bad, 10); !errors.Is(err, source.ErrCursor) {
			t.Errorf("cursor %+v: got %v, want ErrCursor", bad, err)
		}
	}
}

func (h Harness) testPending(t *testing.T) {
	table := h.orders(t)
	src := h.open(t, ordersDef(table, state.KindTimestampPK))
	if n, err := src.Waiting(ctx, nil, 1); err != nil || n != 0 {
		t.Fatalf("empty table: waiting %d, %v", n, err)
	}
	h.insert(t, h.DB.Exec, table, []order{{ID: 1, Customer: "c", Amount: "1.00", Updated: time.Now().Add(-time.Hour)}})
	// A row newer than the settle lag is not pending yet.
	h.insert(t, h.DB.Exec, table, []order{{ID: 2, Customer: "c", Amount: "1.00", Updated: time.Now().Add(time.Hour)}})
	if n, err := src.Waiting(ctx, nil, 1); err != nil || n != 1 {
		t.Fatalf("one row: waiting %d, %v", n, err)
	}
	b, err := src.Fetch(ctx, nil, 10)
	if err != nil || len(b.Rows) != 1 {
		t.Fatalf("fetch: %v rows, %v (the row inside the settle lag must wait)", len(b.Rows), err)
	}
	if n, err := src.Waiting(ctx, b.To, 1); err != nil || n != 0 {
		t.Fatalf("after the last row: waiting %d, %v", n, err)
	}
	// Waiting counts the same rows, capped.
	more := make([]order, 0, 5)
	for i := int64(3); i <= 7; i++ {
		more = append(more, order{ID: i, Customer: "c", Amount: "1.00", Updated: time.Now().Add(-time.Hour)})
	}
	h.insert(t, h.DB.Exec, table, more)
	for _, c := range []struct {
		after *state.Cursor
		limit int
		want  int64
	}{{nil, 100, 6}, {nil, 4, 4}, {b.To, 100, 5}} {
		if n, err := src.Waiting(ctx, c.after, c.limit); err != nil || n != c.want {
			t.Errorf("waiting after %v, limit %d: %d, %v; want %d", c.after, c.limit, n, err, c.want)
		}
	}
}

// testFetchKeyOf: a row is read again by the key in its cursor, as it is now; a deleted row
// gives an empty batch.
func (h Harness) testFetchKeyOf(t *testing.T) {
	table := h.orders(t)
	src := h.open(t, ordersDef(table, state.KindTimestampPK))
	h.insert(t, h.DB.Exec, table, []order{
		{ID: 1, Customer: "a", Amount: "1.00", Updated: time.Now().Add(-time.Hour)},
		{ID: 2, Customer: "b", Amount: "2.00", Updated: time.Now().Add(-time.Hour)},
	})
	b, err := src.Fetch(ctx, nil, 10)
	if err != nil || len(b.Rows) != 2 {
		t.Fatalf("fetch: %v rows, %v", len(b.Rows), err)
	}
	c, err := b.Rows[1].Cursor()
	if err != nil {
		t.Fatal(err)
	}
	h.exec(t, "UPDATE "+table+" SET customer = 'changed' WHERE id = 2")
	got, err := src.FetchKeyOf(ctx, &c)
	if err != nil || len(got.Rows) != 1 || got.Rows[0].Get("id") != int64(2) || got.Rows[0].Get("customer") != "changed" {
		t.Fatalf("by key: %+v, %v; want row 2 as it is now", got, err)
	}
	h.exec(t, "DELETE FROM "+table+" WHERE id = 2")
	if got, err := src.FetchKeyOf(ctx, &c); err != nil || len(got.Rows) != 0 {
		t.Fatalf("a deleted row: %d rows, %v; want none", len(got.Rows), err)
	}
}

// testIntKeys: an INT (int4) key column, as many real tables have, works as cursor and tiebreaker.
func (h Harness) testIntKeys(t *testing.T) {
	name := testenv.Name("intkeys_")
	h.exec(t, "CREATE TABLE "+name+" (id INT PRIMARY KEY, seq SMALLINT NOT NULL)")
	t.Cleanup(func() { _, _ = h.DB.ExecContext(context.Background(), "DROP TABLE "+name) })
	for i := 1; i <= 9; i++ {
		h.exec(t, fmt.Sprintf("INSERT INTO %s VALUES (%d, %d)", name, i, i%3))
	}
	src := h.open(t, source.Definition{Table: source.Table{Name: name}, Columns: []string{"id", "seq"},
		Cursor: source.Cursor{Kind: state.KindInteger, Column: "id"}, PK: []string{"id"}})
	r := &reader{t: t, src: src}
	if got := r.drain(4); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("INT keys: %v", got)
	}
}

// testUnreachableRows: a row stamped so that the cursor can never reach it is a loud error
// (ErrUnreachableRow) naming the row's key and value and the fix, at Open and from CheckStamps,
// never a silent skip; the UPDATE the error suggests clears it and delivers the row. SQLite: a
// TEXT value not in the fixed-width layout (CURRENT_TIMESTAMP's "2026-11-23 03:40:32" sorts
// before the cursor of its day). PostgreSQL and SQL Server: a timestamp without a time zone more
// than source.FutureTolerance ahead of the database's UTC clock (a local-time stamp east of UTC);
// a future timestamptz is only early, not unreachable.
func (h Harness) testUnreachableRows(t *testing.T) {
	switch h.Driver {
	case sqlite.Name:
		h.unreachableSQLite(t)
	case postgres.Name, sqlserver.Name, mysql.Name:
		h.unreachableFuture(t)
	default:
		t.Skipf("no stamp hazard known for %s", h.Driver)
	}
}

// unreachable checks that err is ErrUnreachableRow naming the row and its value and containing
// each of more, and that Open fails the same way while an integer cursor on the table opens.
func (h Harness) unreachable(t *testing.T, err error, def source.Definition, key, value string, more ...string) {
	t.Helper()
	if !errors.Is(err, source.ErrUnreachableRow) {
		t.Fatalf("CheckStamps with the bad row: %v, want ErrUnreachableRow", err)
	}
	t.Log(err)
	for _, want := range append([]string{key, `"` + value + `"`, `"updated_at"`}, more...) {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not contain %s: %v", want, err)
		}
	}
	if _, err := drivers.Open(ctx, source.Config{Poller: "orders", Driver: h.Driver, DSN: h.DSN, Definition: def}); !errors.Is(err, source.ErrUnreachableRow) {
		t.Fatalf("Open with the bad row: %v, want ErrUnreachableRow", err)
	}
	h.open(t, ordersDef(def.Table.Name, state.KindInteger)).Close() // nothing to check there
}

func (h Harness) unreachableSQLite(t *testing.T) {
	table := h.orders(t)
	day := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	h.insert(t, h.DB.Exec, table, []order{{ID: 1, Customer: "c", Amount: "1.00", Updated: day.Add(time.Hour)}, {ID: 2, Customer: "c", Amount: "1.00", Updated: day.Add(2 * time.Hour)}})
	def := ordersDef(table, state.KindTimestampPK)
	def.SettleLag = source.NoSettleLag
	r := &reader{t: t, src: h.open(t, def)} // a clean table opens
	if err := r.src.CheckStamps(ctx); err != nil {
		t.Fatalf("a clean table: %v", err)
	}
	if got := r.drain(10); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("read %v, want [1 2]", got)
	}

	// RFC 3339 but not fixed width, after the cursor and first of a batch whose last row is
	// fine: the fetch fails naming it, never delivering it out of time order.
	h.exec(t, "INSERT INTO "+table+" (id, customer, amount, updated_at) VALUES (40, 'c', 1, '2026-01-02T02:30:00Z'), (41, 'c', 1, '2026-01-02T02:40:00.000000Z')")
	if err := r.src.CheckStamps(ctx); !errors.Is(err, source.ErrUnreachableRow) || !strings.Contains(err.Error(), `{"id":40}`) {
		t.Fatalf("CheckStamps with a value without fractional seconds: %v", err)
	}
	if _, err := r.src.Fetch(ctx, r.cursor, 10); !errors.Is(err, source.ErrUnreachableRow) || !strings.Contains(err.Error(), `{"id":40}`) || !strings.Contains(err.Error(), "2026-01-02T02:30:00Z") {
		t.Fatalf("fetching a value without fractional seconds: %v", err)
	}
	h.exec(t, "UPDATE "+table+" SET updated_at = '2026-01-02T02:30:00.000000Z' WHERE id = 40")
	if got := r.drain(10); !slices.Equal(got, []int64{40, 41}) {
		t.Fatalf("read %v, want [40 41]", got)
	}

	// What CURRENT_TIMESTAMP writes, later than the cursor in time but before it as text, and a
	// proper row after it: the read delivers the proper row and passes the other by in silence.
	const bad = "2026-01-02 03:40:32"
	h.exec(t, "INSERT INTO "+table+" (id, customer, amount, updated_at) VALUES (42, 'c', 1, '"+bad+"'), (44, 'c', 1, '2026-01-02T04:00:00.000000Z')")
	if got := r.drain(10); !slices.Equal(got, []int64{44}) {
		t.Fatalf("read %v, want [44]", got)
	}
	if n, err := r.src.Waiting(ctx, r.cursor, 1); err != nil || n != 0 {
		t.Fatalf("waiting: %d, %v", n, err)
	}
	q := func(s string) string { return `"` + s + `"` }
	const stamp = "strftime('%Y-%m-%dT%H:%M:%f000Z','now')"
	fix := "UPDATE " + q(table) + " SET " + q("updated_at") + " = " + stamp + " WHERE " + q("updated_at") +
		" NOT GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]Z'"
	h.unreachable(t, r.src.CheckStamps(ctx), def, `{"id":42}`, bad, "DEFAULT ("+stamp+")", "YYYY-MM-DDTHH:MM:SS.ffffffZ", fix)

	// CURRENT_TIMESTAMP itself, found through a definition whose filter leaves only that row.
	h.exec(t, "INSERT INTO "+table+" (id, customer, amount, updated_at) VALUES (43, 'c', 1, CURRENT_TIMESTAMP)")
	var now string
	if err := h.DB.QueryRowContext(ctx, "SELECT updated_at FROM "+table+" WHERE id = 43").Scan(&now); err != nil {
		t.Fatal(err)
	}
	only43 := def
	only43.Filter = "id = 43"
	_, err := drivers.Open(ctx, source.Config{Poller: "orders", Driver: h.Driver, DSN: h.DSN, Definition: only43})
	h.unreachable(t, err, only43, `{"id":43}`, now)

	// The rewrite the error suggests: a fresh stamp in the layout, which the read then delivers.
	// (Row 42's own time, rewritten in the layout, would sort behind the cursor, now at row 44.)
	h.exec(t, fix)
	if err := r.src.CheckStamps(ctx); err != nil {
		t.Fatalf("after the suggested UPDATE: %v", err)
	}
	var got []int64
	for deadline := time.Now().Add(5 * time.Second); len(got) < 2 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		got = append(got, r.drain(10)...)
	}
	if !slices.Equal(got, []int64{42, 43}) {
		t.Fatalf("after the suggested UPDATE the read delivered %v, want [42 43]", got)
	}
	var v string
	if err := h.DB.QueryRowContext(ctx, "SELECT "+stamp).Scan(&v); err != nil || len(v) != len(state.TimeLayout) {
		t.Fatalf("%s gives %q (%v), not the fixed-width layout", stamp, v, err)
	}
}

// unreachableFuture: PostgreSQL timestamp and SQL Server datetime2 rows more than
// source.FutureTolerance ahead of the database's UTC clock.
func (h Harness) unreachableFuture(t *testing.T) {
	table := h.orders(t) // updated_at is timestamptz on PostgreSQL, datetime2 on SQL Server
	plus := func(n int, unit string) string {
		return "DATEADD(" + unit + ", " + fmt.Sprint(n) + ", SYSUTCDATETIME())"
	}
	if h.Driver == mysql.Name {
		plus = func(n int, unit string) string {
			return fmt.Sprintf("UTC_TIMESTAMP(6) + INTERVAL %d %s", n, strings.ToUpper(unit))
		}
	}
	if h.Driver == postgres.Name {
		// timestamptz ahead of now is only early (clock skew, read late): not an error.
		h.exec(t, "INSERT INTO "+table+" (id, customer, amount, updated_at) VALUES (40, 'c', 1, now() + interval '2 hours')")
		if err := h.open(t, ordersDef(table, state.KindTimestampPK)).CheckStamps(ctx); err != nil {
			t.Fatalf("a future timestamptz: %v", err)
		}
		table = testenv.Name("naive_")
		h.exec(t, "CREATE TABLE "+table+" (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL, updated_at TIMESTAMP(6) NOT NULL)")
		h.exec(t, "CREATE INDEX ON "+table+" (updated_at, id)")
		t.Cleanup(func() { _, _ = h.DB.ExecContext(context.Background(), "DROP TABLE "+table) })
		plus = func(n int, unit string) string {
			return fmt.Sprintf("(now() AT TIME ZONE 'UTC') + interval '%d %ss'", n, unit)
		}
	}
	h.exec(t, "INSERT INTO "+table+" (id, customer, amount, updated_at) VALUES (1, 'c', 1, "+plus(-1, "hour")+")")
	// Within the tolerance: clock skew between writers, not a time zone.
	h.exec(t, "INSERT INTO "+table+" (id, customer, amount, updated_at) VALUES (2, 'c', 1, "+plus(5, "minute")+")")
	def := ordersDef(table, state.KindTimestampPK)
	def.SettleLag = source.NoSettleLag
	r := &reader{t: t, src: h.open(t, def)}
	if err := r.src.CheckStamps(ctx); err != nil {
		t.Fatalf("a clean table: %v", err)
	}
	if got := r.drain(10); !slices.Equal(got, []int64{1}) {
		t.Fatalf("read %v, want [1]", got)
	}

	// Stamped in local time two hours east of UTC.
	h.exec(t, "INSERT INTO "+table+" (id, customer, amount, updated_at) VALUES (42, 'c', 1, "+plus(2, "hour")+")")
	var stamped time.Time
	if err := h.DB.QueryRowContext(ctx, "SELECT updated_at FROM "+table+" WHERE id = 42").Scan(&stamped); err != nil {
		t.Fatal(err)
	}
	var fix string
	switch h.Driver {
	case postgres.Name:
		fix = `UPDATE "` + table + `" SET "updated_at" = now() AT TIME ZONE 'UTC' WHERE "updated_at" > (now() AT TIME ZONE 'UTC') + interval '10 minutes'`
	case mysql.Name:
		fix = "UPDATE `" + table + "` SET `updated_at` = UTC_TIMESTAMP(6) WHERE `updated_at` > UTC_TIMESTAMP(6) + INTERVAL 10 MINUTE"
	default:
		fix = "UPDATE [" + table + "] SET [updated_at] = SYSUTCDATETIME() WHERE [updated_at] > DATEADD(minute, 10, SYSUTCDATETIME())"
	}
	h.unreachable(t, r.src.CheckStamps(ctx), def, `{"id":42}`, stamped.Format("2006-01-02T15:04:05.999999"), "local time", fix)

	// The rewrite the error suggests delivers the row now, not two hours late.
	h.exec(t, fix)
	if err := r.src.CheckStamps(ctx); err != nil {
		t.Fatalf("after the suggested UPDATE: %v", err)
	}
	var got []int64
	for deadline := time.Now().Add(5 * time.Second); len(got) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		got = r.drain(10)
	}
	if !slices.Equal(got, []int64{42}) {
		t.Fatalf("after the suggested UPDATE the read delivered %v, want [42]", got)
	}
}
