package source_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlserver"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// outboxDatabase is a database of the outbox tests: its drivers, its DSN, and its outbox's DDL
// (%s its name): seq, id, agg_type, agg_id, body (JSON), text_body, bin_body, h (JSON), n (an
// integer), f (a float); insert is a row of it (%s the table), its bytes 0x00ff.
type outboxDatabase struct {
	driver, sqlDriver, dsn string
	table, insert          string
}

// outboxDatabases are PostgreSQL's, MariaDB's and SQLite's.
func outboxDatabases() map[string]func(t *testing.T) outboxDatabase {
	return map[string]func(t *testing.T) outboxDatabase{
		"sqlite": func(t *testing.T) outboxDatabase {
			return outboxDatabase{sqlite.Name, "sqlite", filepath.Join(t.TempDir(), "o.db"), `CREATE TABLE %s (seq INTEGER PRIMARY KEY, id TEXT NOT NULL,
				agg_type TEXT, agg_id INTEGER, body JSON, text_body TEXT, bin_body BLOB, h JSON, n INTEGER, f REAL)`,
				`INSERT INTO %s VALUES (1, 'e-1', 'order', 42, '{"a": [1, 2], "b": "x"}', 'hello', x'00ff', '{"tenant": "t1", "n": 2}', 7, 1.5)`}
		},
		"postgres": func(t *testing.T) outboxDatabase {
			return outboxDatabase{postgres.Name, "pgx", testenv.Postgres(t), `CREATE TABLE %s (seq bigint PRIMARY KEY, id uuid NOT NULL, agg_type text,
				agg_id bigint, body jsonb, text_body text, bin_body bytea, h json, n integer, f double precision)`,
				`INSERT INTO %s VALUES (1, 'a3c1b6c2-6f1e-4a47-9d0e-3f1c2b4a5d6e', 'order', 42, '{"a": [1, 2], "b": "x"}', 'hello', '\x00ff', '{"tenant": "t1", "n": 2}', 7, 1.5)`}
		},
		"mariadb": func(t *testing.T) outboxDatabase {
			return outboxDatabase{mysql.Name, "mysql", testenv.MySQL(t), `CREATE TABLE %s (seq bigint PRIMARY KEY, id char(36) NOT NULL, agg_type varchar(64),
				agg_id bigint, body json, text_body longtext, bin_body blob, h json, n int, f double)`,
				`INSERT INTO %s VALUES (1, 'a3c1b6c2-6f1e-4a47-9d0e-3f1c2b4a5d6e', 'order', 42, '{"a": [1, 2], "b": "x"}', 'hello', x'00ff', '{"tenant": "t1", "n": 2}', 7, 1.5)`}
		},
	}
}

// TestReplayEvent: on PostgreSQL, MariaDB and SQLite, an outbox's event read back from its dead
// letter (the row as JSON, as the quarantine writes it) has the values the source gave, of the
// same Go types (which decide what a sink sends: JSON, text or bytes), after its row is deleted.
func TestReplayEvent(t *testing.T) {
	for name, open := range outboxDatabases() {
		t.Run(name, func(t *testing.T) {
			d := open(t)
			table := testenv.Name("outbox")
			db := testenv.DB(t, d.sqlDriver, d.dsn, fmt.Sprintf(d.table, table), fmt.Sprintf(d.insert, table))
			t.Cleanup(func() { _, _ = db.Exec("DROP TABLE " + table) })
			o := sourcedef.Outbox{ID: "id", AggregateType: "agg_type", AggregateID: "agg_id", Payload: "body", Headers: "h"}
			def := sourcedef.Definition{Table: sourcedef.Table{Name: table}, Columns: []string{"seq", "id", "agg_type", "agg_id", "body", "text_body", "bin_body", "h", "n", "f"},
				PK: []string{"seq"}, Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "seq"}, Outbox: &o}
			src, err := drivers.Open(context.Background(), source.Config{Poller: "obx", Driver: d.driver, DSN: d.dsn, Definition: def})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			b, err := src.Fetch(context.Background(), nil, 10)
			if err != nil || len(b.Rows) != 1 {
				t.Fatalf("%d rows, %v", len(b.Rows), err)
			}
			r := b.Rows[0]
			data, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec("DELETE FROM " + table); err != nil {
				t.Fatal(err)
			}
			cur, _ := r.Cursor()
			back, err := src.ReplayEvent(r.Table(), r.Op(), data, cur)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range def.Columns {
				want, got := r.Get(c), back.Get(c)
				if fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) || !sameValue(want, got) {
					t.Errorf("column %s: read back as %T %v; the source gave %T %v", c, got, got, want, want)
				}
			}
			if again, _ := json.Marshal(back); string(again) != string(data) {
				t.Errorf("read back, the row renders as\n%s\nnot as\n%s", again, data)
			}
			if _, err := src.ReplayEvent(r.Table(), r.Op(), json.RawMessage(`[1]`), cur); err == nil || !strings.Contains(err.Error(), "not a JSON object of the event's columns") {
				t.Errorf("a letter's data that is no object: %v", err)
			}
		})
	}
}

// sameValue: JSON equal for JSON values, else equal.
func sameValue(a, b any) bool {
	ja, okA := a.(json.RawMessage)
	jb, okB := b.(json.RawMessage)
	if okA && okB {
		var x, y any
		return json.Unmarshal(ja, &x) == nil && json.Unmarshal(jb, &y) == nil && reflect.DeepEqual(x, y)
	}
	return reflect.DeepEqual(a, b)
}

// TestOutboxColumns: on PostgreSQL, MariaDB and SQLite, an outbox opens over columns of usable
// types, and a missing column or one of a type its field cannot use is refused when the source
// opens, the error naming the field as poller.json spells it, the column and the fix.
func TestOutboxColumns(t *testing.T) {
	for name, open := range outboxDatabases() {
		t.Run(name, func(t *testing.T) {
			d := open(t)
			table := testenv.Name("outbox")
			db := testenv.DB(t, d.sqlDriver, d.dsn, fmt.Sprintf(d.table, table))
			t.Cleanup(func() { _, _ = db.Exec("DROP TABLE " + table) })
			outbox := func(change func(o *sourcedef.Outbox)) error {
				o := sourcedef.Outbox{ID: "id", AggregateType: "agg_type", AggregateID: "agg_id", Payload: "body", Headers: "h"}
				change(&o)
				def := sourcedef.Definition{Table: sourcedef.Table{Name: table}, Columns: append([]string{"seq"}, o.Columns()...), PK: []string{"seq"},
					Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "seq"}, Outbox: &o}
				src, err := drivers.Open(context.Background(), source.Config{Poller: "obx", Driver: d.driver, DSN: d.dsn, Definition: def})
				if err == nil {
					src.Close()
				}
				return err
			}
			for _, ok := range []func(o *sourcedef.Outbox){
				func(*sourcedef.Outbox) {},
				func(o *sourcedef.Outbox) { o.Payload, o.Headers, o.Type = "text_body", "text_body", "agg_type" },
				func(o *sourcedef.Outbox) { o.Payload, o.ID = "bin_body", "n" },
			} {
				if err := outbox(ok); err != nil {
					t.Errorf("an outbox of usable columns: %v", err)
				}
			}
			for _, c := range []struct {
				change func(o *sourcedef.Outbox)
				want   string
			}{
				{func(o *sourcedef.Outbox) { o.Payload = "nope" }, "outbox.payload: column nope is missing from table " + table + " (it has seq, id, "},
				{func(o *sourcedef.Outbox) { o.Type = "nope" }, "outbox.type: column nope is missing from table " + table},
				{func(o *sourcedef.Outbox) { o.Headers = "n" }, "outbox.headers: column n is int"},
				{func(o *sourcedef.Outbox) { o.Payload = "n" }, "outbox.payload: column n is int"},
				{func(o *sourcedef.Outbox) { o.AggregateID = "f" }, "outbox.aggregate_id: column f is "},
				{func(o *sourcedef.Outbox) { o.ID = "bin_body" }, "outbox.id: column bin_body is "},
			} {
				err := outbox(c.change)
				if !errors.Is(err, source.ErrSchema) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("got %v\nwant one saying %q", err, c.want)
				}
			}
		})
	}
}

// TestOutboxTypeFitsSQLServer: SQL Server's column types, as its driver classes them, are
// usable by the outbox fields they should be (no SQL Server here: an offline test).
func TestOutboxTypeFitsSQLServer(t *testing.T) {
	for _, c := range []struct {
		field, dbType string
		fits          bool
	}{
		{"id", "UNIQUEIDENTIFIER", true}, {"id", "BIGINT", true}, {"id", "NVARCHAR", true}, {"id", "VARBINARY", false}, {"id", "FLOAT", false},
		{"aggregate_id", "DECIMAL(20,0)", true}, {"aggregate_type", "VARCHAR", true}, {"type", "DATETIME2", false},
		{"payload", "NVARCHAR", true}, {"payload", "VARCHAR", true}, {"payload", "VARBINARY", true}, {"payload", "INT", false}, {"payload", "SQL_VARIANT", false},
		{"headers", "NVARCHAR", true}, {"headers", "VARBINARY", false}, {"headers", "BIT", false},
	} {
		why := source.OutboxTypeFits(c.field, row.NewColumn(sqlserver.Driver{}, "c", c.dbType))
		if (why == "") != c.fits {
			t.Errorf("outbox.%s of a %s column: fits %v (%q), want %v", c.field, c.dbType, why == "", why, c.fits)
		}
	}
}

// TestLateCommits: which cursors of each database can skip a late-committed event (an outbox's
// pollerctl check refuses them), and that each database that has some names the ones to use.
func TestLateCommits(t *testing.T) {
	skips := map[string][]string{
		postgres.Name:  {state.KindInteger, state.KindTimestampPK},
		sqlserver.Name: {state.KindInteger, state.KindTimestampPK},
		mysql.Name:     {state.KindInteger}, // timestamp+pk: its reads stay behind the open transactions
		sqlite.Name:    nil,                 // one writer at a time
	}
	for _, d := range drivers.All() {
		want, ok := skips[d.Name()]
		if !ok {
			t.Errorf("driver %s: no expectation", d.Name())
			continue
		}
		for _, kind := range []string{state.KindInteger, state.KindTimestampPK, state.KindXID, state.KindRowversion, state.KindLogical, state.KindChangeTracking} {
			if !d.Supports(kind) {
				continue
			}
			got, instead := d.LateCommits(kind)
			if got != slices.Contains(want, kind) {
				t.Errorf("%s %s: skips a late commit %v, want %v", d.Name(), kind, got, !got)
			}
			if got && instead == "" {
				t.Errorf("%s %s: names no cursor to use instead", d.Name(), kind)
			}
		}
	}
}
