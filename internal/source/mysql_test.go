package source_test

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

func mysqlDB(t *testing.T) (*sql.DB, string) {
	t.Helper()
	dsn := testenv.MySQL(t)
	db, err := sql.Open("mysql", dsn+"?parseTime=true&loc=UTC&time_zone=%27%2B00%3A00%27")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, dsn
}

// TestMySQLUnsignedAndSeconds: BIGINT UNSIGNED near its maximum comes back exact (JSON and a
// uint64 field); a DATETIME without fractional seconds, many rows to a second, read in small
// batches, delivers every row once: the key breaks the ties.
func TestMySQLUnsignedAndSeconds(t *testing.T) {
	db, dsn := mysqlDB(t)
	ctx := context.Background()
	table := testenv.Name("secs_")
	for _, q := range []string{
		"CREATE TABLE " + table + " (id BIGINT PRIMARY KEY, big BIGINT UNSIGNED, ts DATETIME NOT NULL, KEY (ts, id))",
		"INSERT INTO " + table + " SELECT seq, 18446744073709551610, '2026-01-02 03:04:05' + INTERVAL (seq DIV 40) SECOND FROM seq_1_to_200",
	} {
		if _, err := db.Exec(q); err != nil {
			if strings.Contains(q, "seq_1_to") { // MySQL 8 has no sequence engine
				t.Skipf("no seq_1_to_200 table here (MariaDB's sequence engine): %v", err)
			}
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + table) })
	src, err := source.Open(ctx, source.Config{Poller: "secs", Driver: source.MySQL, DSN: dsn, Definition: source.Definition{
		Table: source.Table{Name: table}, Columns: []string{"id", "big", "ts"}, PK: []string{"id"},
		Cursor: source.Cursor{Kind: state.KindTimestampPK, Column: "ts"}, SettleLag: time.Second,
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var c *state.Cursor
	var ids []int64
	for {
		b, err := src.Fetch(ctx, c, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Rows) == 0 {
			break
		}
		for _, r := range b.Rows {
			ids = append(ids, r.Key()["id"].(int64))
		}
		if len(ids) == 7 {
			j, _ := b.Rows[0].MarshalJSON()
			if !strings.Contains(string(j), `"big":18446744073709551610`) {
				t.Errorf("JSON %s", j)
			}
			var dst struct {
				Big uint64 `db:"big"`
			}
			if err := b.Rows[0].Decode(&dst); err != nil || dst.Big != 18446744073709551610 {
				t.Errorf("decoded %d, %v", dst.Big, err)
			}
		}
		c = b.To
	}
	want := make([]int64, 200)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("read %d rows: %v", len(ids), ids)
	}
}

// TestMySQLSecrets: the fingerprint does not change with the password, and a refused password
// is not in the error.
func TestMySQLSecrets(t *testing.T) {
	_, dsn := mysqlDB(t)
	withPass := strings.Replace(dsn, "@tcp(", ":s3cret-pass@tcp(", 1)
	a, err := source.ParseLocation(source.MySQL, dsn)
	if err != nil {
		t.Fatal(err)
	}
	b, err := source.ParseLocation(source.MySQL, strings.Replace(withPass, "s3cret-pass", "other", 1))
	if err != nil {
		t.Fatal(err)
	}
	def := source.Definition{Table: source.Table{Name: "t"}, Columns: []string{"id"}, PK: []string{"id"}, Cursor: source.Cursor{Kind: state.KindInteger, Column: "id"}}
	if source.Fingerprint(source.MySQL, a, def) != source.Fingerprint(source.MySQL, b, def) {
		t.Error("the fingerprint changed with the password")
	}
	_, err = source.Open(context.Background(), source.Config{Poller: "p", Driver: source.MySQL, DSN: withPass, Definition: def})
	if err == nil || strings.Contains(err.Error(), "s3cret-pass") || !strings.Contains(err.Error(), "cannot connect") {
		t.Fatalf("a refused password: %v", err)
	}
}

// TestMySQLKeysetIsARange: the read after a cursor is a range on the (cursor, key) index, not a
// scan of the index from its start, which MariaDB makes of a row comparison.
func TestMySQLKeysetIsARange(t *testing.T) {
	db, dsn := mysqlDB(t)
	table := testenv.Name("rng_")
	if _, err := db.Exec("CREATE TABLE " + table + " (id BIGINT PRIMARY KEY, ts DATETIME(6) NOT NULL, KEY ix (ts, id))"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + table) })
	src, err := source.Open(context.Background(), source.Config{Poller: "p", Driver: source.MySQL, DSN: dsn, Definition: source.Definition{
		Table: source.Table{Name: table}, Columns: []string{"id", "ts"}, PK: []string{"id"},
		Cursor: source.Cursor{Kind: state.KindTimestampPK, Column: "ts"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	_, after := src.Queries()
	var id, selectType, tbl, typ sql.NullString
	rows, err := db.Query("EXPLAIN "+after, time.Now().UTC(), time.Now().UTC(), 5, 5000000, 10)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", after, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	vals := make([]any, len(cols))
	for i := range vals {
		vals[i] = new(sql.NullString)
	}
	if !rows.Next() {
		t.Fatal("no EXPLAIN row")
	}
	if err := rows.Scan(vals...); err != nil {
		t.Fatal(err)
	}
	for i, c := range cols {
		switch c {
		case "id":
			id = *vals[i].(*sql.NullString)
		case "select_type":
			selectType = *vals[i].(*sql.NullString)
		case "table":
			tbl = *vals[i].(*sql.NullString)
		case "type":
			typ = *vals[i].(*sql.NullString)
		}
	}
	if typ.String != "range" {
		t.Errorf("EXPLAIN %s: type %q (id %s, %s %s), want range", after, typ.String, id.String, selectType.String, tbl.String)
	}
}
