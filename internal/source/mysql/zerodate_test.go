package mysql_test

import (
	"context"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// TestZeroDateCursorMySQL: a timestamp+pk cursor over a DATETIME(6) column holding a zero date
// (allowed by a permissive sql_mode; it sorts first) delivers that row, its cursor MySQL's text,
// and goes on to the next rows from it. Before, the zero date arrived as 0001-01-01; read as its
// text, the generic time codec refused it and every fetch failed.
func TestZeroDateCursorMySQL(t *testing.T) {
	db, dsn := mysqlDB(t)
	table := mysqlTable(t, db, "zd_", "(id BIGINT PRIMARY KEY, ts DATETIME(6) NOT NULL, KEY (ts, id))")
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"SET SESSION sql_mode = ''",
		"INSERT INTO " + table + " VALUES (1, '0000-00-00 00:00:00'), (2, '0000-00-00 00:00:00'), (3, '2020-01-01 00:00:00'), (4, '2020-01-01 00:00:01')"} {
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	src, err := drivers.Open(context.Background(), source.Config{Poller: "zd", Driver: mysql.Name, DSN: dsn, Definition: sourcedef.Definition{
		Table: sourcedef.Table{Name: table}, Columns: []string{"id", "ts"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "ts"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var got []int64
	var c *state.Cursor
	for range 10 {
		b, err := src.Fetch(context.Background(), c, 1)
		if err != nil {
			t.Fatalf("fetch after %v: %v", c, err)
		}
		if len(b.Rows) == 0 {
			break
		}
		got = append(got, b.Rows[0].Get("id").(int64))
		if len(got) == 1 && string(b.To.Value) != `"0000-00-00 00:00:00.000000"` {
			t.Fatalf("the zero date's cursor: %s", b.To.Value)
		}
		c = b.To
	}
	if len(got) != 4 || got[0] != 1 || got[1] != 2 || got[2] != 3 || got[3] != 4 {
		t.Fatalf("read %v, want [1 2 3 4]", got)
	}
}
