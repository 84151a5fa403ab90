package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// The MySQL tests run against the MariaDB scripts/test.sh starts and, in the GitHub workflow,
// against a MySQL 8 too (-run MySQL selects them all). They use nothing only one of the two has.

// mysqlDB is the test's own connection, writing and reading times in UTC as the source does.
func mysqlDB(t *testing.T) (*sql.DB, string) {
	t.Helper()
	dsn := testenv.MySQL(t)
	// interpolateParams: no server-side prepare (MySQL does not prepare every statement, EXPLAIN
	// among them), as the source's own connection.
	db, err := sql.Open("mysql", dsn+"?parseTime=true&loc=UTC&time_zone=%27%2B00%3A00%27&interpolateParams=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, dsn
}

func mysqlExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// mysqlTable creates a table (ddl after its name) and drops it after the test.
func mysqlTable(t *testing.T, db *sql.DB, prefix, ddl string) string {
	t.Helper()
	table := testenv.Name(prefix)
	mysqlExec(t, db, "CREATE TABLE "+table+" "+ddl)
	t.Cleanup(func() { db.Exec("DROP TABLE " + table) })
	return table
}

// mysqlInsert inserts rows (each a tuple of values) in one statement, every value bound.
func mysqlInsert(t *testing.T, db *sql.DB, table string, rows [][]any) {
	t.Helper()
	var tuples []string
	var args []any
	for _, r := range rows {
		tuples = append(tuples, "("+strings.TrimSuffix(strings.Repeat("?, ", len(r)), ", ")+")")
		args = append(args, r...)
	}
	mysqlExec(t, db, "INSERT INTO "+table+" VALUES "+strings.Join(tuples, ", "), args...)
}

func mysqlOpen(t *testing.T, dsn string, def sourcedef.Definition) *source.Source {
	t.Helper()
	src, err := drivers.Open(context.Background(), source.Config{Poller: "p", Driver: mysql.Name, DSN: dsn, Definition: def})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// mysqlDrain reads everything in batches of limit, each batch's cursor going through the state
// document (encoded, decoded) as the poller's does, and returns the rows' values of col.
func mysqlDrain(t *testing.T, src *source.Source, limit int, col string) []any {
	t.Helper()
	var c *state.Cursor
	var got []any
	for {
		b, err := src.Fetch(context.Background(), c, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Rows) > limit {
			t.Fatalf("a batch of %d rows for a limit of %d", len(b.Rows), limit)
		}
		if len(b.Rows) == 0 {
			return got
		}
		for _, r := range b.Rows {
			got = append(got, r.Get(col))
		}
		data, err := state.Encode(&state.Doc{Version: 1, PollerName: "p", Checkpoint: state.Checkpoint{Cursor: b.To}})
		if err != nil {
			t.Fatal(err)
		}
		doc, err := state.Decode("state/test/p.json", "p", data)
		if err != nil {
			t.Fatal(err)
		}
		c = doc.Checkpoint.Cursor
	}
}

// TestMySQLWholeSeconds: a DATETIME without fractional seconds (DATETIME(0)) as the cursor
// column, 40 rows to each second inserted in no key order, read 7 at a time: every row comes
// once, in (second, id) order; the key breaks the ties within a second.
func TestMySQLWholeSeconds(t *testing.T) {
	db, dsn := mysqlDB(t)
	table := mysqlTable(t, db, "secs_", "(id BIGINT PRIMARY KEY, ts DATETIME NOT NULL, KEY (ts, id))")
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ids := rand.New(rand.NewPCG(1, 2)).Perm(200)
	var rows [][]any
	for i, id := range ids {
		rows = append(rows, []any{id + 1, base.Add(time.Duration(i/40) * time.Second)})
	}
	mysqlInsert(t, db, table, rows)
	src := mysqlOpen(t, dsn, sourcedef.Definition{Table: sourcedef.Table{Name: table}, Columns: []string{"id", "ts"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "ts"}, SettleLag: time.Second})
	var want []any
	for s := 0; s < 5; s++ {
		second := slices.Clone(ids[s*40 : (s+1)*40])
		slices.Sort(second)
		for _, id := range second {
			want = append(want, int64(id+1))
		}
	}
	if got := mysqlDrain(t, src, 7, "id"); !slices.Equal(got, want) {
		t.Fatalf("read %d rows:\n got %v\nwant %v", len(got), got, want)
	}
}

// TestMySQLUnsignedKeys: BIGINT UNSIGNED keys across the largest int64 up to the type's maximum,
// as an integer cursor and as the tiebreaker of a timestamp+pk cursor (all rows in one second):
// every row once, in order, the values exact in the row (uint64 above the largest int64) and in
// its JSON, and the cursor carries them exactly through the state document.
func TestMySQLUnsignedKeys(t *testing.T) {
	db, dsn := mysqlDB(t)
	table := mysqlTable(t, db, "unsigned_", "(id BIGINT UNSIGNED PRIMARY KEY, ts DATETIME NOT NULL, KEY (ts, id))")
	var keys []uint64
	for _, k := range []uint64{1, math.MaxInt64 - 2, math.MaxUint64 - 6} {
		for i := range uint64(7) {
			keys = append(keys, k+i)
		}
	}
	var rows [][]any
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, i := range rand.New(rand.NewPCG(3, 4)).Perm(len(keys)) {
		rows = append(rows, []any{keys[i], ts})
	}
	mysqlInsert(t, db, table, rows)
	var want []any
	for _, k := range keys {
		if k <= math.MaxInt64 {
			want = append(want, int64(k))
		} else {
			want = append(want, k)
		}
	}
	for _, kind := range []string{state.KindInteger, state.KindTimestampPK} {
		def := sourcedef.Definition{Table: sourcedef.Table{Name: table}, Columns: []string{"id", "ts"}, PK: []string{"id"},
			Cursor: sourcedef.Cursor{Kind: kind, Column: "id"}}
		if kind == state.KindTimestampPK {
			def.Cursor.Column, def.SettleLag = "ts", time.Second
		}
		src := mysqlOpen(t, dsn, def)
		if got := mysqlDrain(t, src, 4, "id"); !slices.Equal(got, want) {
			t.Fatalf("%s: read\n %v\nwant %v", kind, got, want)
		}
		b, err := src.Fetch(context.Background(), nil, len(keys))
		if err != nil {
			t.Fatal(err)
		}
		last := b.Rows[len(b.Rows)-1]
		if j, _ := last.MarshalJSON(); string(j) != `{"id":18446744073709551615,"ts":"2026-01-02T03:04:05Z"}` {
			t.Errorf("%s: JSON of the last row: %s", kind, j)
		}
		c, err := last.Cursor()
		if err != nil {
			t.Fatal(err)
		}
		if raw := string(c.Value) + " " + string(c.Tiebreaker["id"]); !strings.Contains(raw, "18446744073709551615") {
			t.Errorf("%s: cursor of the last row: %s", kind, raw)
		}
	}
}

// TestMySQLTimestampCursor: a TIMESTAMP(6) cursor column at full microsecond precision, with
// rows a microsecond apart written by a session whose time_zone is not UTC (TIMESTAMP is kept
// in UTC, so the writer's zone does not matter): every row once, in order, each value the
// instant that was written, in UTC.
func TestMySQLTimestampCursor(t *testing.T) {
	db, dsn := mysqlDB(t)
	table := mysqlTable(t, db, "tstz_", "(id BIGINT PRIMARY KEY, ts TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), KEY (ts, id))")
	writer := testenv.DB(t, "mysql", testenv.MySQL(t)+"?time_zone=%27%2B05%3A30%27")
	base := time.Date(2026, 3, 4, 5, 6, 7, 999990000, time.UTC) // microseconds across a second
	want := map[int64]time.Time{}
	for i := range 30 {
		at := base.Add(time.Duration(i/2) * time.Microsecond) // two rows to each microsecond
		local := at.In(time.FixedZone("", 5*3600+1800)).Format("2006-01-02 15:04:05.000000")
		mysqlExec(t, writer, "INSERT INTO "+table+" (id, ts) VALUES (?, ?)", 100-i, local) // read in +05:30
		want[int64(100-i)] = at
	}
	src := mysqlOpen(t, dsn, sourcedef.Definition{Table: sourcedef.Table{Name: table}, Columns: []string{"id", "ts"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "ts"}, SettleLag: time.Second})
	var c *state.Cursor
	var prev time.Time
	var prevID int64
	seen := 0
	for {
		b, err := src.Fetch(context.Background(), c, 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Rows) == 0 {
			break
		}
		for _, r := range b.Rows {
			id, ts := r.Get("id").(int64), r.Get("ts").(time.Time)
			if w, ok := want[id]; !ok || !ts.Equal(w) || ts.Location() != time.UTC {
				t.Fatalf("row %d: %v, want %v (in UTC)", id, ts, w)
			}
			if ts.Before(prev) || (ts.Equal(prev) && id <= prevID) {
				t.Fatalf("row %d at %v after row %d at %v", id, ts, prevID, prev)
			}
			prev, prevID = ts, id
			delete(want, id)
			seen++
		}
		c = b.To
	}
	if seen != 30 || len(want) != 0 {
		t.Fatalf("read %d rows; never: %v", seen, want)
	}
}

// TestMySQLSecrets: the fingerprint does not change with the password, and neither a refused
// password nor a DSN that does not parse shows the password in the error.
func TestMySQLSecrets(t *testing.T) {
	_, dsn := mysqlDB(t)
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pass := cfg.Passwd
	withPass := func(p string) string {
		c := cfg.Clone()
		c.Passwd = p
		return c.FormatDSN()
	}
	def := sourcedef.Definition{Table: sourcedef.Table{Name: "t"}, Columns: []string{"id"}, PK: []string{"id"}, Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "id"}}
	var prints []string
	for _, p := range []string{pass, "s3cret-pass", "other-pass"} {
		loc, err := drivers.ParseLocation(mysql.Name, withPass(p))
		if err != nil {
			t.Fatal(err)
		}
		prints = append(prints, source.Fingerprint(mysql.Name, loc, def))
	}
	if prints[0] != prints[1] || prints[1] != prints[2] {
		t.Errorf("the fingerprint changed with the password: %v", prints)
	}

	secret := "s3cret-" + pass + "-pass"
	_, err = drivers.Open(context.Background(), source.Config{Poller: "p", Driver: mysql.Name, DSN: withPass(secret), Definition: def})
	if err == nil || !errors.Is(err, source.ErrConnect) || strings.Contains(err.Error(), secret) || (pass != "" && strings.Contains(err.Error(), pass)) {
		t.Fatalf("a refused password: %v", err)
	}
	t.Logf("a refused password: %v", err)
	for _, bad := range []string{
		"app:" + secret + "@tcp(127.0.0.1:1/db",              // no closing parenthesis
		"app:" + secret + "@tcp(127.0.0.1:1)/db?loc=Nowhere", // an unknown zone
		"app:" + secret + "@tcp(127.0.0.1:1)/db?timeout=x",   // not a duration
	} {
		_, err := drivers.Open(context.Background(), source.Config{Poller: "p", Driver: mysql.Name, DSN: bad, Definition: def})
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("DSN %q: %v", bad, err)
		}
		if _, err := drivers.ParseLocation(mysql.Name, bad); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("ParseLocation(%q): %v", bad, err)
		}
	}
}

// TestMySQLKeysetIsARange: the read after a cursor is a range read of the (cursor, key) index,
// not a scan of the whole index from its start (what MariaDB makes of a row comparison,
// (ts, id) > (?, ?), hence the expanded keyset): EXPLAIN's type is range, on the index.
func TestMySQLKeysetIsARange(t *testing.T) {
	db, dsn := mysqlDB(t)
	table := mysqlTable(t, db, "rng_", "(id BIGINT PRIMARY KEY, customer VARCHAR(50) NOT NULL, ts DATETIME(6) NOT NULL, KEY ix (ts, id))")
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for start := 0; start < 5000; start += 500 {
		var rows [][]any
		for i := start; i < start+500; i++ {
			rows = append(rows, []any{i + 1, fmt.Sprintf("customer %d", i), base.Add(time.Duration(i) * time.Second)})
		}
		mysqlInsert(t, db, table, rows)
	}
	mysqlExec(t, db, "ANALYZE TABLE "+table)
	src := mysqlOpen(t, dsn, sourcedef.Definition{Table: sourcedef.Table{Name: table}, Columns: []string{"id", "customer", "ts"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "ts"}})
	after := src.Queries().FetchAfter
	if n := strings.Count(after, "?"); n != 6 { // ts, ts, id, the settle lag, the open-transaction bound, the limit
		t.Fatalf("%d markers in %s", n, after)
	}
	at := base.Add(4000 * time.Second)
	rows, err := db.Query("EXPLAIN "+after, at, at, 4001, 5000000, time.Now().UTC(), 100)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", after, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	if !rows.Next() {
		t.Fatal("no EXPLAIN row")
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	plan := map[string]string{}
	for i, c := range cols {
		plan[c] = vals[i].String
	}
	if plan["type"] != "range" || plan["key"] != "ix" {
		t.Errorf("EXPLAIN %s:\n%v\nwant type range on key ix", after, plan)
	}
}

// TestGoldenSQL pins the exact SQL of each cursor kind (go test -run Golden -update rewrites
// testdata/golden).
func TestGoldenSQL(t *testing.T) {
	types := map[string]string{"id": "BIGINT", "customer": "VARCHAR", "amount": "DECIMAL", "updated_at": "DATETIME"}
	sourcetest.Golden(t, mysql.Driver{}, *update, []sourcetest.GoldenCase{
		{Name: "mysql_timestamp_pk_datetime", Def: sourcetest.Orders("", state.KindTimestampPK, "updated_at", "id"), Types: types},
		{Name: "mysql_integer", Def: sourcetest.Orders("", state.KindInteger, "id", "id"), Types: types},
		{Name: "mysql_cleanup_composite", Def: sourcetest.Cleaned(sourcetest.Orders("", state.KindTimestampPK, "updated_at", "customer", "id"), 0, ""), Types: types},
		{Name: "mysql_cleanup_integer_older_than", Def: sourcetest.Cleaned(sourcetest.Orders("", state.KindInteger, "id", "id"), 7*24*time.Hour, "updated_at"), Types: types},
	})
}

var update = flag.Bool("update", false, "rewrite the golden SQL files")
