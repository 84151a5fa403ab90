package postgres_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// logicalTable makes a table, its publication and a slot and returns the database, the table's
// name and a Config reading it with a logical cursor.
func logicalTable(t *testing.T, ddl string) (*sql.DB, string, source.Config) {
	t.Helper()
	db, dsn, table, slot := testenv.PostgresLogical(t, ddl)
	return db, table, source.Config{Poller: "lg", Driver: postgres.Name, DSN: dsn, Definition: sourcedef.Definition{
		Table: sourcedef.Table{Name: table}, Columns: []string{"id", "name", "note"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindLogical}, Slot: slot, Publication: slot,
	}}
}

const logicalDDL = "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL, note text)"

func exec(t *testing.T, db *sql.DB, qs ...string) {
	t.Helper()
	testenv.ExecFlushed(t, db, qs...)
}

// change is a delivered change as a test sees it.
type change struct {
	op   string
	id   int64
	row  map[string]any // nil without a row
	pos  string
	skip []string // Unchanged
}

// drain fetches batches of size after c until none is left, telling the source each batch is
// committed when commit is set, and returns the changes and the last cursor.
func drain(t *testing.T, src *source.Source, c *state.Cursor, size int, commit bool) ([]change, *state.Cursor) {
	t.Helper()
	ctx := context.Background()
	var out []change
	for {
		b, err := src.Fetch(ctx, c, size)
		if err != nil {
			t.Fatalf("fetch after %v: %v", c, err)
		}
		if len(b.Rows) == 0 {
			return out, c
		}
		if len(b.Rows) > size {
			t.Fatalf("a batch of %d rows, asked for %d", len(b.Rows), size)
		}
		for _, r := range b.Rows {
			cur, _ := r.Cursor()
			ch := change{op: r.Op(), id: r.Key()["id"].(int64), pos: string(cur.Value), skip: r.Unchanged()}
			if r.HasRow() {
				ch.row = map[string]any{}
				for i, col := range b.Columns() {
					ch.row[col] = r.Values()[i]
				}
				for _, u := range r.Unchanged() {
					delete(ch.row, u)
				}
			}
			out = append(out, ch)
		}
		c = b.To
		if commit {
			if err := src.Committed(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// apply applies changes in order to a map keyed by id.
func apply(t *testing.T, m map[int64]map[string]any, changes []change) {
	t.Helper()
	for _, c := range changes {
		switch c.op {
		case row.OpInsert, row.OpUpdate:
			values := c.row
			if old, ok := m[c.id]; ok && len(c.skip) > 0 {
				for _, u := range c.skip {
					values[u] = old[u]
				}
			}
			m[c.id] = values
		case row.OpDelete:
			if _, ok := m[c.id]; !ok {
				t.Errorf("delete of %d, which the replica does not have", c.id)
			}
			delete(m, c.id)
		default:
			t.Errorf("op %q", c.op)
		}
	}
}

// tableMap reads the table as the replica should be.
func tableMap(t *testing.T, db *sql.DB, table string) map[int64]map[string]any {
	t.Helper()
	rows, err := db.Query("SELECT id, name, note FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]map[string]any{}
	for rows.Next() {
		var id int64
		var name string
		var note sql.NullString
		if err := rows.Scan(&id, &name, &note); err != nil {
			t.Fatal(err)
		}
		var n any
		if note.Valid {
			n = note.String
		}
		out[id] = map[string]any{"id": id, "name": name, "note": n}
	}
	return out
}

func sameMaps(t *testing.T, got, want map[int64]map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("replica has %d rows, the table %d", len(got), len(want))
	}
	for id, w := range want {
		g, ok := got[id]
		if !ok {
			t.Errorf("row %d missing from the replica", id)
			continue
		}
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("row %d: replica %v, table %v", id, g, w)
		}
	}
}

// slotPosition reads the slot's confirmed position.
func slotPosition(t *testing.T, db *sql.DB, slot string) pgcdc.Position {
	t.Helper()
	var lsn string
	if err := db.QueryRow("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	p, err := pgcdc.ParsePosition(lsn)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLogicalOps: inserts, updates (one of the key), deletes and a rolled-back transaction, read
// in batches of 2 with the slot advanced after each: the ops are right, a delete carries its key
// and no row, nothing rolled back arrives, and the changes applied in order give the table.
func TestLogicalOps(t *testing.T) {
	db, table, cfg, src := logicalSource(t)
	ctx := context.Background()
	exec(t, db, "INSERT INTO "+table+" VALUES (1,'a',NULL),(2,'b','x'),(3,'c',NULL)")
	exec(t, db, "UPDATE "+table+" SET name='b2' WHERE id=2", "DELETE FROM "+table+" WHERE id=3")
	tx, _ := db.Begin()
	tx.Exec("INSERT INTO " + table + " VALUES (99,'rolled back',NULL)")
	tx.Rollback()
	exec(t, db, "CREATE TEMP TABLE IF NOT EXISTS nothing (x int)") // any flushed commit after the rollback
	exec(t, db, "UPDATE "+table+" SET id=10 WHERE id=1")           // a key change
	changes, last := drain(t, src, nil, 2, true)
	var ops []string
	for _, c := range changes {
		ops = append(ops, fmt.Sprintf("%s %d", c.op, c.id))
	}
	if got, want := strings.Join(ops, ", "), "insert 1, insert 2, insert 3, update 2, delete 3, delete 1, insert 10"; got != want {
		t.Fatalf("changes: %s\nwant:    %s", got, want)
	}
	if changes[4].row != nil {
		t.Errorf("a delete under REPLICA IDENTITY DEFAULT has a row: %v", changes[4].row)
	}
	seen := map[string]bool{}
	for _, c := range changes {
		if seen[c.pos] {
			t.Errorf("two changes at position %s", c.pos)
		}
		seen[c.pos] = true
	}
	m := map[int64]map[string]any{}
	apply(t, m, changes)
	sameMaps(t, m, tableMap(t, db, table))

	// The slot is at the checkpoint, not past it; a new source resumes there with nothing.
	cp, err := pgcdc.CursorPosition(last)
	if err != nil {
		t.Fatal(err)
	}
	if sp := slotPosition(t, db, cfg.Definition.Slot); cp.Before(sp) || sp != cp {
		t.Errorf("slot at %s, checkpoint %s", sp, cp)
	}
	src2, err := drivers.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	if more, _ := drain(t, src2, last, 2, false); len(more) != 0 {
		t.Errorf("after the checkpoint: %v", more)
	}
	if n, err := src2.Waiting(ctx, last, 10); err != nil || n != 0 {
		t.Errorf("waiting %d, %v", n, err)
	}
}

// TestLogicalBigTransaction: a transaction of 10,000 changes read in batches of 100, the process
// "restarting" (a new Source from the checkpoint) in the middle of it: every change once, in
// order, and the slot never past the checkpoint.
func TestLogicalBigTransaction(t *testing.T) {
	db, table, cfg := logicalTable(t, logicalDDL)
	ctx := context.Background()
	exec(t, db, "INSERT INTO "+table+" SELECT g, 'n'||g, NULL FROM generate_series(1, 10000) g")
	src, err := drivers.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var c *state.Cursor
	var got []int64
	for len(got) < 5050 {
		b, err := src.Fetch(ctx, c, 100)
		if err != nil || len(b.Rows) == 0 {
			t.Fatalf("fetch: %d rows, %v", len(b.Rows), err)
		}
		for _, r := range b.Rows {
			got = append(got, r.Key()["id"].(int64))
		}
		c = b.To
		if err := src.Committed(ctx, c); err != nil {
			t.Fatal(err)
		}
		if sp, cp := slotPosition(t, db, cfg.Definition.Slot), mustPos(t, c); cp.Before(sp) {
			t.Fatalf("slot %s past the checkpoint %s", sp, cp)
		}
	}
	if p := mustPos(t, c); p.Changes != len(got) {
		t.Fatalf("mid-transaction checkpoint %s after %d changes", p, len(got))
	}
	src.Close()
	src2, err := drivers.Open(ctx, cfg) // the restart
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	rest, _ := drain(t, src2, c, 100, true)
	for _, r := range rest {
		got = append(got, r.id)
	}
	if len(got) != 10000 {
		t.Fatalf("%d changes, want 10000", len(got))
	}
	for i, id := range got {
		if id != int64(i+1) {
			t.Fatalf("change %d is id %d", i, id)
		}
	}
}

func mustPos(t *testing.T, c *state.Cursor) pgcdc.Position {
	t.Helper()
	p, err := pgcdc.CursorPosition(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLogicalToast: an update that leaves a TOASTed value alone does not carry it: listed as
// unchanged under REPLICA IDENTITY DEFAULT, taken from the old row under FULL.
func TestLogicalToast(t *testing.T) {
	for _, full := range []bool{false, true} {
		t.Run(fmt.Sprintf("full=%v", full), func(t *testing.T) {
			db, table, cfg := logicalTable(t, logicalDDL)
			if full {
				exec(t, db, "ALTER TABLE "+table+" REPLICA IDENTITY FULL")
			}
			// Random text does not compress below the threshold.
			exec(t, db, "INSERT INTO "+table+" SELECT 1, 'a', string_agg(md5(random()::text), '') FROM generate_series(1, 20000)")
			exec(t, db, "UPDATE "+table+" SET name = 'b' WHERE id = 1")
			src, err := drivers.Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			changes, _ := drain(t, src, nil, 10, false)
			if len(changes) != 2 || changes[1].op != row.OpUpdate {
				t.Fatalf("changes %v", changes)
			}
			up := changes[1]
			if full {
				if len(up.skip) != 0 || up.row["note"] != changes[0].row["note"] {
					t.Errorf("FULL: unchanged %v, note carried: %v", up.skip, up.row["note"] == changes[0].row["note"])
				}
			} else if fmt.Sprint(up.skip) != "[note]" || up.row["note"] != nil {
				t.Errorf("DEFAULT: unchanged %v, row %v", up.skip, up.row)
			}
			m := map[int64]map[string]any{}
			apply(t, m, changes)
			sameMaps(t, m, tableMap(t, db, table))
		})
	}
}

// TestLogicalStops: a truncate and a dropped column stop the poller at that change, after the
// changes before it, with errors naming the way on, which works.
func TestLogicalStops(t *testing.T) {
	db, table, _, src := logicalSource(t)
	ctx := context.Background()
	exec(t, db, "INSERT INTO "+table+" VALUES (1,'a',NULL)", "TRUNCATE "+table, "INSERT INTO "+table+" VALUES (2,'b',NULL)")
	b, err := src.Fetch(ctx, nil, 10)
	if err != nil || len(b.Rows) != 1 {
		t.Fatalf("before the truncate: %v, %v", b, err)
	}
	_, err = src.Fetch(ctx, b.To, 10)
	if !errors.Is(err, postgres.ErrTruncate) || !strings.Contains(err.Error(), "pollerctl reset lg --to-cursor ") {
		t.Fatalf("truncate: %v", err)
	}
	skip := strings.Fields(err.Error()[strings.Index(err.Error(), "--to-cursor ")+len("--to-cursor "):])[0]
	c, err := src.CursorFromText(skip, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, err := src.Fetch(ctx, c, 10)
	if err != nil || len(after.Rows) != 1 || after.Rows[0].Key()["id"] != int64(2) {
		t.Fatalf("after skipping the truncate: %v, %v", after, err)
	}

	exec(t, db, "ALTER TABLE "+table+" DROP COLUMN note", "INSERT INTO "+table+" VALUES (3,'c')")
	_, err = src.Fetch(ctx, after.To, 10)
	if !errors.Is(err, source.ErrSchema) || !strings.Contains(err.Error(), `column "note"`) {
		t.Fatalf("dropped column: %v", err)
	}
}

// TestLogicalSetupErrors: each missing piece is an error naming the fix, and Open creates
// nothing.
func TestLogicalSetupErrors(t *testing.T) {
	db, table, cfg := logicalTable(t, logicalDDL)
	ctx := context.Background()
	open := func(c source.Config) error {
		src, err := drivers.Open(ctx, c)
		if err == nil {
			src.Close()
		}
		return err
	}
	// The slots this test's configurations name: other tests create and drop slots of their own
	// on the same server meanwhile.
	slots := func() int {
		var n int
		db.QueryRow("SELECT count(*) FROM pg_replication_slots WHERE slot_name IN ($1, 'no_such_slot')", cfg.Definition.Slot).Scan(&n)
		return n
	}
	before := slots()
	noSlot := cfg
	noSlot.Definition.Slot = "no_such_slot"
	noPub := cfg
	noPub.Definition.Publication = "no_such_pub"
	otherPub := strings.ToLower(table) + "_other"
	exec(t, db, "CREATE PUBLICATION "+otherPub)
	t.Cleanup(func() { db.Exec("DROP PUBLICATION " + otherPub) })
	notIn := cfg
	notIn.Definition.Publication = otherPub
	badKey := cfg
	badKey.Definition.PK = []string{"name"}
	for name, c := range map[string]struct {
		cfg  source.Config
		want string
	}{
		"slot":        {noSlot, `replication slot "no_such_slot" does not exist: run ` + "`pollerctl cdc enable lg --yes`"},
		"publication": {noPub, `publication "no_such_pub" does not exist`},
		"not in":      {notIn, "does not include the table: run `pollerctl cdc enable lg --yes`, which adds it (ALTER PUBLICATION " + otherPub + " ADD TABLE"},
		"key":         {badKey, "the poller's key (name) is not the table's primary key (id)"},
	} {
		err := open(c.cfg)
		if !errors.Is(err, postgres.ErrNotEnabled) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant it to say: %s", name, err, c.want)
		}
	}
	exec(t, db, "ALTER TABLE "+table+" REPLICA IDENTITY NOTHING")
	if err := open(cfg); !errors.Is(err, postgres.ErrNotEnabled) || !strings.Contains(err.Error(), "REPLICA IDENTITY FULL") {
		t.Errorf("identity nothing: %v", err)
	}
	exec(t, db, "ALTER TABLE "+table+" REPLICA IDENTITY DEFAULT")

	role := strings.ToLower(table) + "_r"
	exec(t, db, "CREATE ROLE "+role+" LOGIN", "GRANT SELECT ON "+table+" TO "+role)
	t.Cleanup(func() { db.Exec("DROP OWNED BY " + role); db.Exec("DROP ROLE " + role) })
	noRepl := cfg
	noRepl.DSN = strings.Replace(cfg.DSN, "postgres@", role+"@", 1)
	if err := open(noRepl); !errors.Is(err, postgres.ErrNotEnabled) || !strings.Contains(err.Error(), "ALTER ROLE "+`"`+role+`"`+" WITH REPLICATION") {
		t.Errorf("no REPLICATION: %v", err)
	}
	if slots() != before {
		t.Errorf("Open created a slot: %d, before %d", slots(), before)
	}
}

// TestLogicalValuesAsKeyset: a logical change holds, type for type, the values a keyset read of
// the same row gives (pgoutput sends text; the driver reads binary), NULLs included, and its
// JSON is the same.
func TestLogicalValuesAsKeyset(t *testing.T) {
	db, table, cfg := logicalTable(t, `CREATE TABLE %s (id bigint PRIMARY KEY, i2 smallint, i4 int, f4 real, f8 double precision,
		num numeric(38,10), b bool, t text, vc varchar(20), u uuid, j json, jb jsonb, by bytea, ts timestamp(6), tz timestamptz(6),
		d date, x xid8)`)
	cols := []string{"id", "i2", "i4", "f4", "f8", "num", "b", "t", "vc", "u", "j", "jb", "by", "ts", "tz", "d", "x"}
	exec(t, db, `INSERT INTO `+table+` VALUES
		(1, -32768, 2147483647, 1.1, 2.2250738585072014e-308, 12345678901234567890.0123456789, true, 'emoji 😀 "quoted"', 'vc',
		 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '{"a": [1, 2.50]}', '{"b": null}', '\x00ff10', '2026-11-23 10:00:00.123456',
		 '2026-11-23 10:00:00.654321+02', '2026-11-23', '123456789012'),
		(2, NULL, NULL, 'NaN', '-Infinity', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`)
	cfg.Definition.Columns = cols
	ctx := context.Background()
	lsrc, err := drivers.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer lsrc.Close()
	kcfg := cfg
	kcfg.Definition.Cursor = sourcedef.Cursor{Kind: state.KindInteger, Column: "id"}
	kcfg.Definition.Slot, kcfg.Definition.Publication = "", ""
	ksrc, err := drivers.Open(ctx, kcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ksrc.Close()
	lb, err := lsrc.Fetch(ctx, nil, 10)
	if err != nil || len(lb.Rows) != 2 {
		t.Fatalf("logical: %v %v", lb, err)
	}
	kb, err := ksrc.Fetch(ctx, nil, 10)
	if err != nil || len(kb.Rows) != 2 {
		t.Fatalf("keyset: %v %v", kb, err)
	}
	for r := range 2 {
		lv, kv := lb.Rows[r].Values(), kb.Rows[r].Values()
		for i, c := range cols {
			if l, k := fmt.Sprintf("%T %#v", lv[i], lv[i]), fmt.Sprintf("%T %#v", kv[i], kv[i]); l != k {
				if lt, ok := lv[i].(time.Time); ok && lt.Equal(kv[i].(time.Time)) && lt.Location() == kv[i].(time.Time).Location() {
					continue
				}
				t.Errorf("row %d, column %s: logical %s, keyset %s", r+1, c, l, k)
			}
		}
		lj, _ := lb.Rows[r].MarshalJSON()
		kj, _ := kb.Rows[r].MarshalJSON()
		if string(lj) != string(kj) {
			t.Errorf("row %d JSON:\nlogical %s\nkeyset  %s", r+1, lj, kj)
		}
	}
}

// TestLogicalChunk: a logical poller's backfill chunk returns every row it reads (its caller
// compares them with the change stream's watermarks), and refuses a live position.
func TestLogicalChunk(t *testing.T) {
	db, table, cfg := logicalTable(t, logicalDDL)
	exec(t, db, "INSERT INTO "+table+" SELECT g, 'n' || g, NULL FROM generate_series(1, 5) g")
	src, err := drivers.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	c, err := src.ReadChunk(context.Background(), nil, "id > 1", nil, 3)
	if err != nil || len(c.Rows) != 3 || c.Left != 0 || !c.Full || string(c.Next["id"]) != "4" || c.Rows[0].Get("name") != "n2" {
		t.Fatalf("chunk: %+v, %v", c, err)
	}
	if _, err := src.ReadChunk(context.Background(), nil, "", &state.Cursor{Kind: state.KindLogical}, 3); !errors.Is(err, source.ErrChunkPosition) {
		t.Fatalf("a position: %v", err)
	}
}

// TestLogicalImages: what a change says besides its row. Under REPLICA IDENTITY FULL an update
// and a delete carry the row before them and an update the columns it changed (an empty list
// for one that changed nothing); under DEFAULT neither is known. Every change carries its
// transaction: the xid the writer saw, the commit's LSN and time, its place and the last mark.
func TestLogicalImages(t *testing.T) {
	for _, full := range []bool{false, true} {
		t.Run(fmt.Sprintf("full=%v", full), func(t *testing.T) {
			db, table, cfg := logicalTable(t, logicalDDL)
			if full {
				exec(t, db, "ALTER TABLE "+table+" REPLICA IDENTITY FULL")
			}
			start := time.Now()
			xids := make([]uint64, 3)
			for i, stmts := range [][]string{
				{"INSERT INTO " + table + " VALUES (1,'a',NULL),(2,'b','x')", "UPDATE " + table + " SET name='a2' WHERE id=1", "DELETE FROM " + table + " WHERE id=2"},
				{"UPDATE " + table + " SET note='n' WHERE id=1", "UPDATE " + table + " SET name=name WHERE id=1"},
				{"UPDATE " + table + " SET id=10 WHERE id=1"},
			} {
				tx, err := db.Begin()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Exec("SET LOCAL synchronous_commit = on"); err != nil {
					t.Fatal(err)
				}
				if err := tx.QueryRow("SELECT pg_current_xact_id()::text::bigint").Scan(&xids[i]); err != nil {
					t.Fatal(err)
				}
				for _, q := range stmts {
					if _, err := tx.Exec(q); err != nil {
						t.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			src, err := drivers.Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			// The lag of what waits is measured from the oldest change's commit.
			bl, err := src.Backlog(context.Background(), nil, 100)
			if err != nil {
				t.Fatal(err)
			}
			// (At least its 8 changes: other tests' idle ticks may have written keep-up marks into
			// the WAL meanwhile, which count.)
			if lag := bl.LagSeconds(start.Add(time.Hour)); bl.Rows < 8 || lag == nil || *lag < 3500 || *lag > 3700 {
				t.Errorf("backlog %d rows, oldest committed at %v: lag an hour later %v", bl.Rows, bl.OldestCommit, fmtLag(lag))
			}
			var got []string
			var c *state.Cursor
			lastLSN := ""
			for {
				b, err := src.Fetch(context.Background(), c, 3) // transactions split over batches
				if err != nil {
					t.Fatal(err)
				}
				if len(b.Rows) == 0 {
					break
				}
				for _, r := range b.Rows {
					line := fmt.Sprintf("%s %v", r.Op(), r.Key()["id"])
					if before, ok := r.Before(); ok {
						j, _ := before.MarshalJSON()
						line += " before " + string(j)
					}
					if changed, ok := r.Changed(); ok {
						line += fmt.Sprintf(" changed %q", changed)
					}
					tx, ok := r.Transaction()
					if !ok || r.Table() != table {
						t.Fatalf("%s: no transaction, or table %q", line, r.Table())
					}
					n := slices.Index(xids, tx.ID)
					if n < 0 || tx.CommitTime.Before(start.Add(-time.Minute)) || tx.CommitTime.After(time.Now().Add(time.Minute)) || tx.CommitLSN == "" || tx.ChangeVersion != 0 {
						t.Errorf("%s: transaction %+v, xids %v", line, tx, xids)
					}
					if tx.CommitLSN != lastLSN && lastLSN != "" && mustLSN(t, tx.CommitLSN) <= mustLSN(t, lastLSN) {
						t.Errorf("%s: commit LSN %s after %s", line, tx.CommitLSN, lastLSN)
					}
					lastLSN = tx.CommitLSN
					line += fmt.Sprintf(" tx%d #%d", n+1, tx.Index)
					if tx.Last {
						line += " last"
					}
					got = append(got, line)
				}
				c = b.To
			}
			want := []string{
				"insert 1 tx1 #1", "insert 2 tx1 #2", "update 1 tx1 #3", "delete 2 tx1 #4 last",
				"update 1 tx2 #1", "update 1 tx2 #2 last",
				"delete 1 tx3 #1", "insert 10 tx3 #2 last",
			}
			if full {
				want = []string{
					"insert 1 tx1 #1", "insert 2 tx1 #2",
					`update 1 before {"id":1,"name":"a","note":null} changed ["name"] tx1 #3`,
					`delete 2 before {"id":2,"name":"b","note":"x"} tx1 #4 last`,
					`update 1 before {"id":1,"name":"a2","note":null} changed ["note"] tx2 #1`,
					`update 1 before {"id":1,"name":"a2","note":"n"} changed [] tx2 #2 last`,
					`delete 1 before {"id":1,"name":"a2","note":"n"} tx3 #1`, "insert 10 tx3 #2 last",
				}
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

func mustLSN(t *testing.T, s string) uint64 {
	t.Helper()
	var hi, lo uint64
	if _, err := fmt.Sscanf(s, "%X/%X", &hi, &lo); err != nil {
		t.Fatalf("LSN %q: %v", s, err)
	}
	return hi<<32 | lo
}

// TestLogicalSkipWriter: changes of transactions whose replication origin is the skipped
// writer's (its name, or its name and a dot and more) never arrive; another origin's and
// unmarked ones do, in order, and the cursor moves past the skipped ones.
func TestLogicalSkipWriter(t *testing.T) {
	db, table, cfg := logicalTable(t, logicalDDL)
	cfg.Definition.SkipWriter = "orders-app"
	ctx := context.Background()
	write := func(origin string, q string) {
		t.Helper()
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if origin != "" {
			if _, err := conn.ExecContext(ctx, "SELECT pg_replication_origin_create($1) WHERE pg_replication_origin_oid($1) IS NULL", origin); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Exec("SELECT pg_replication_origin_drop($1)", origin) })
			if _, err := conn.ExecContext(ctx, "SELECT pg_replication_origin_session_setup($1)", origin); err != nil {
				t.Fatal(err)
			}
			defer conn.ExecContext(ctx, "SELECT pg_replication_origin_session_reset()")
		}
		for _, s := range []string{"SET synchronous_commit = on", q} {
			if _, err := conn.ExecContext(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	write("", "INSERT INTO "+table+" VALUES (1,'user',NULL)")
	write("orders-app", "INSERT INTO "+table+" VALUES (2,'app',NULL)")
	write("orders-app.2", "UPDATE "+table+" SET name='app' WHERE id=1")
	write("other", "INSERT INTO "+table+" VALUES (3,'other',NULL)")
	write("orders-apps", "INSERT INTO "+table+" VALUES (4,'not the app: another name',NULL)")
	write("orders-app", "INSERT INTO "+table+" VALUES (5,'app',NULL)")
	src, err := drivers.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	changes, last := drain(t, src, nil, 2, true)
	var got []string
	for _, c := range changes {
		got = append(got, fmt.Sprintf("%s %d", c.op, c.id))
	}
	if strings.Join(got, ", ") != "insert 1, insert 3, insert 4" {
		t.Errorf("changes: %s, want insert 1, insert 3, insert 4", strings.Join(got, ", "))
	}
	write("", "INSERT INTO "+table+" VALUES (6,'user',NULL)")
	if more, _ := drain(t, src, last, 10, true); len(more) != 1 || more[0].id != 6 {
		t.Errorf("after the skipped transactions: %v", more)
	}
}

// TestLogicalAllColumns: a source of every column ("*") opened after a column was added reads the
// changes written before it without it (named unchanged, left out of the row, never null), and
// those after with it.
func TestLogicalAllColumns(t *testing.T) {
	db, table, cfg := logicalTable(t, "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL)")
	exec(t, db, "INSERT INTO "+table+" VALUES (1, 'a')")
	exec(t, db, "ALTER TABLE "+table+" ADD COLUMN note text")
	exec(t, db, "INSERT INTO "+table+" VALUES (2, 'b', NULL)")
	cfg.Definition.Columns = []string{sourcedef.AllColumns}
	src, err := drivers.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	b, err := src.Fetch(context.Background(), nil, 10)
	if err != nil || len(b.Rows) != 2 {
		t.Fatalf("fetch: %v, %v", b, err)
	}
	var got []string
	for _, r := range b.Rows {
		j, _ := r.MarshalJSON()
		got = append(got, fmt.Sprintf("%s %v", j, r.Unchanged()))
	}
	if want := `{"id":1,"name":"a"} [note], {"id":2,"name":"b","note":null} []`; strings.Join(got, ", ") != want {
		t.Errorf("rows: %s\nwant: %s", strings.Join(got, ", "), want)
	}
	if cols := b.Columns(); strings.Join(cols, ",") != "id,name,note" {
		t.Errorf("columns %v", cols)
	}
}

func fmtLag(lag *float64) string {
	if lag == nil {
		return "none"
	}
	return fmt.Sprint(*lag)
}

// TestReplayChange: a dead-lettered change is replayed as the row's current state.
func TestReplayChange(t *testing.T) {
	db, table, cfg := logicalTable(t, "CREATE TABLE %s (id BIGINT PRIMARY KEY, v TEXT NOT NULL)")
	cfg.Definition.Columns = []string{"id", "v"}
	ctx := context.Background()
	exec(t, db, "INSERT INTO "+table+" VALUES (1, 'now'), (3, 'back')")
	src, err := drivers.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cur := pgcdc.Position{LSN: 0x16D3290}.Cursor()
	key := func(id int) map[string]json.RawMessage {
		return map[string]json.RawMessage{"id": json.RawMessage(fmt.Sprint(id))}
	}
	for _, tc := range []struct {
		op      string
		id      int
		wantOp  string
		wantRow string // "" none; the row's JSON
		why     string
	}{
		{row.OpUpdate, 1, row.OpUpdate, `{"id":1,"v":"now"}`, ""},
		{row.OpInsert, 1, row.OpUpdate, `{"id":1,"v":"now"}`, ""},
		{row.OpInsert, 2, "", "", "a later delete supersedes"},
		{row.OpDelete, 2, row.OpDelete, `{"id":2,"v":null}`, ""},
		{row.OpDelete, 3, "", "", "a later insert supersedes"},
	} {
		r, why, err := src.ReplayChange(ctx, "", tc.op, key(tc.id), cur)
		if err != nil {
			t.Fatalf("%s %d: %v", tc.op, tc.id, err)
		}
		if tc.wantOp == "" {
			if r != nil || !strings.Contains(why, tc.why) {
				t.Errorf("%s %d: got %v %q, want superseded (%q)", tc.op, tc.id, r, why, tc.why)
			}
			continue
		}
		if r == nil {
			t.Fatalf("%s %d: superseded (%s), want %s", tc.op, tc.id, why, tc.wantOp)
		}
		j, _ := json.Marshal(r)
		c, _ := r.Cursor()
		if r.Op() != tc.wantOp || string(j) != tc.wantRow || string(c.Value) != `"0/16D3290"` {
			t.Errorf("%s %d: op %s row %s cursor %s, want %s %s", tc.op, tc.id, r.Op(), j, c.Value, tc.wantOp, tc.wantRow)
		}
		if tc.wantOp == row.OpDelete && (r.HasRow() || fmt.Sprint(r.Key()["id"]) != "2") {
			t.Errorf("delete: HasRow %v key %v, want a key-only delete of 2", r.HasRow(), r.Key())
		}
	}
	if _, _, err := src.ReplayChange(ctx, "", row.OpUpdate, map[string]json.RawMessage{"x": json.RawMessage("1")}, cur); err == nil ||
		!strings.Contains(err.Error(), `lacks column "id"`) {
		t.Errorf("a key without id: %v", err)
	}
}
