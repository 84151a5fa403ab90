package ctl_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestCheckOutbox, on SQLite, PostgreSQL and MariaDB: pollerctl check's outbox line refuses a
// cursor that can skip a late-committed event (integer but on SQLite, timestamp+pk on
// PostgreSQL, and on MariaDB timestamp+pk whose reads cannot stay behind the open transactions
// for want of PROCESS), naming the cursor to use; passes a safe one; and names an outbox column
// of a type its field cannot use.
func TestCheckOutbox(t *testing.T) {
	type want struct {
		kind    poller.CursorKind
		column  string // the cursor column ("" for xid's default and the logical cursor)
		user    string // MariaDB: the grants of a user of its own ("": the test's)
		headers string // the headers column
		line    string // what the outbox line says
		refused bool
		cleanup bool // a poller that deletes its delivered rows, not an outbox
	}
	for _, db := range []struct {
		driver, ddl string
		cases       []want
	}{
		{"sqlite", "CREATE TABLE @ (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, agg_type TEXT NOT NULL, agg_id TEXT NOT NULL, payload TEXT NOT NULL, h TEXT, n INTEGER, " +
			"at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000Z','now')))", []want{
			{kind: poller.Integer, column: "seq", headers: "h", line: "  ok           outbox: the integer cursor cannot skip a late commit\n"},
			{kind: poller.Integer, column: "seq", headers: "n", line: "  problem      outbox: outbox.headers: column n is integer; the headers are a JSON object of names and values: make it a JSON or text column\n", refused: true},
		}},
		{"postgres", "CREATE TABLE @ (seq bigint PRIMARY KEY, id uuid NOT NULL, agg_type text NOT NULL, agg_id text NOT NULL, payload jsonb NOT NULL, h jsonb, n int, " +
			"at timestamptz NOT NULL DEFAULT now(), tx xid8 NOT NULL DEFAULT pg_current_xact_id())", []want{
			{kind: poller.Integer, column: "seq", headers: "h", line: "  problem      outbox: the integer cursor can skip an event: its value is taken before the transaction commits, " +
				"so an event committed after a later one was read stays behind the cursor, never sent; use xid (an xid8 column DEFAULT pg_current_xact_id()) or logical (docs/outbox.md)\n", refused: true},
			{kind: poller.TimestampPK, column: "at", headers: "h", line: "  problem      outbox: the timestamp+pk cursor can skip an event", refused: true},
			{kind: poller.XID, column: "tx", headers: "h", line: "  ok           outbox: the xid cursor cannot skip a late commit\n"},
			{kind: poller.Integer, column: "seq", cleanup: true, line: "  problem      cleanup: the integer cursor can skip a row: its value is taken before the transaction commits, " +
				"so a row committed after a later one was read stays behind the cursor, never sent, then deleted by the cleanup; use xid", refused: true},
			{kind: poller.XID, column: "tx", cleanup: true, line: "  ok           cleanup: the xid cursor cannot skip a late commit\n"},
		}},
		{"mysql", "CREATE TABLE @ (seq bigint PRIMARY KEY, id char(36) NOT NULL, agg_type varchar(64) NOT NULL, agg_id varchar(64) NOT NULL, payload json NOT NULL, h json, n int, " +
			"at datetime(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6))", []want{
			{kind: poller.Integer, column: "seq", headers: "h", line: "  problem      outbox: the integer cursor can skip an event: its value is taken before the transaction commits, " +
				"so an event committed after a later one was read stays behind the cursor, never sent; use timestamp+pk, whose reads stay behind the transactions still open (the role needs the PROCESS privilege) (docs/outbox.md)\n", refused: true},
			{kind: poller.TimestampPK, column: "at", user: "SELECT", headers: "h", line: "  problem      outbox: the timestamp+pk cursor is safe for an outbox only while its reads stay behind the open transactions, and they cannot: " +
				"settle lag only: the role cannot read information_schema.innodb_trx (MySQL error 1227), so transactions longer than the settle lag can commit rows behind the cursor; GRANT PROCESS ON *.* TO", refused: true},
			{kind: poller.TimestampPK, column: "at", headers: "h", line: "  ok           outbox: reads behind the open transactions: "},
		}},
	} {
		t.Run(db.driver, func(t *testing.T) {
			dsn, _, conn, table := checkDB(t, db.driver, filepath.Join(t.TempDir(), "o.db"), db.ddl)
			for _, c := range db.cases {
				opts := []poller.Option{poller.WithColumns("seq"), poller.WithKey("seq"), poller.WithCursorColumn(c.column),
					poller.WithOutbox(poller.Outbox{ID: "id", AggregateType: "agg_type", AggregateID: "agg_id", Payload: "payload", Headers: c.headers})}
				if c.cleanup {
					opts[3] = poller.WithCleanup(poller.Cleanup{Delete: true})
				}
				p := pollerdef.Of(poller.New("obx", table, c.kind, func(context.Context, *poller.Batch[poller.Row]) error { return nil }, opts...))
				userDSN := dsn
				if c.user != "" {
					userDSN = testenv.MySQLUser(t, conn, dsn, c.user)
				}
				env := map[string]string{"OBX_DB_DRIVER": db.driver, "OBX_DB_CONNECTION": userDSN}
				var out bytes.Buffer
				code := ctl.Run(context.Background(), []string{"check", "obx"}, ctl.Env{Getenv: func(k string) string { return env[k] }, Pollers: []*pollerdef.Def{p}, Out: &out})
				if !strings.Contains(out.String(), c.line) {
					t.Errorf("%s cursor, headers %s: the output lacks %q:\n%s", c.kind, c.headers, c.line, out.String())
				}
				if c.refused && code != ctl.ExitRefused {
					t.Errorf("%s cursor: exit %d, want %d", c.kind, code, ctl.ExitRefused)
				}
			}
		})
	}
}
