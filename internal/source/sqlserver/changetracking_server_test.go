package sqlserver_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlserver"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

var ctx = context.Background()

// changeTrackingSuite is the conformance suite of the changetracking cursor kind against the SQL
// Server at dsn (a sqlserver:// URL whose login may create databases). It makes a database of
// its own, with Change Tracking on, and drops it at the end. It checks that the set-up check
// names the fixes; that inserts, updates and deletes arrive with their op, deletes with their
// key, never a rolled-back change; that a transaction changing more rows than a batch holds is
// read over several batches and resumed inside its version, by a new source too; that applying
// the changes in order to a map gives the table; and that an expired checkpoint is ErrExpired.
func changeTrackingSuite(t *testing.T, dsn string) {
	admin, db, ctDSN, name := ctDatabase(t, dsn)
	exec := func(db *sql.DB, q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(db, `CREATE TABLE orders (id BIGINT PRIMARY KEY, customer NVARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL,
	  updated_at DATETIME2(7) NOT NULL DEFAULT SYSUTCDATETIME())`)

	def := sourcedef.Definition{
		Table:   sourcedef.Table{Schema: "dbo", Name: "orders"},
		Columns: []string{"id", "customer", "amount", "updated_at"},
		Cursor:  sourcedef.Cursor{Kind: state.KindChangeTracking},
		PK:      []string{"id"},
	}
	open := func(d sourcedef.Definition) (*source.Source, error) {
		s, err := drivers.Open(ctx, source.Config{Poller: "orders", Driver: sqlserver.Name, DSN: ctDSN, Definition: d})
		if err == nil {
			t.Cleanup(func() { s.Close() })
		}
		return s, err
	}

	// The check names each fix and creates nothing.
	_, err := open(def)
	if !errors.Is(err, sqlserver.ErrNotTracked) {
		t.Fatalf("open without Change Tracking on the table: %v, want ErrNotTracked", err)
	}
	for _, want := range []string{"ALTER TABLE [dbo].[orders] ENABLE CHANGE_TRACKING", "ALTER DATABASE [" + name + "] SET ALLOW_SNAPSHOT_ISOLATION ON", `poller "orders"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the check's error lacks %q: %v", want, err)
		}
	}
	var tracked int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM sys.change_tracking_tables").Scan(&tracked); err != nil || tracked != 0 {
		t.Fatalf("the check changed the set-up: %d tracked tables, %v", tracked, err)
	}
	exec(db, "ALTER TABLE [dbo].[orders] ENABLE CHANGE_TRACKING")
	exec(admin, "ALTER DATABASE ["+name+"] SET ALLOW_SNAPSHOT_ISOLATION ON")
	wrongKey := def
	wrongKey.PK = []string{"customer"}
	if _, err := open(wrongKey); !errors.Is(err, sqlserver.ErrNotTracked) || !strings.Contains(err.Error(), "not the table's primary key (id)") {
		t.Errorf("a key other than the primary key: %v", err)
	}
	src, err := open(def)
	if err != nil {
		t.Fatalf("open: %v", err)
	}

	tx := func(commit bool, stmts ...string) {
		t.Helper()
		inTx(t, db, commit, stmts...)
	}
	insert := func(ids ...int) string {
		var v []string
		for _, id := range ids {
			v = append(v, fmt.Sprintf("(%d, 'customer %d', %d.25)", id, id, id))
		}
		return "INSERT INTO orders (id, customer, amount) VALUES " + strings.Join(v, ", ")
	}
	r := &ctReader{t: t, src: src, model: map[int64][2]any{}}

	// 1. Inserts: one transaction larger than a batch, one rolled back, one more.
	tx(true, insert(1, 2, 3, 4, 5, 6, 7, 8, 9, 10))
	tx(false, insert(11, 12))
	tx(true, insert(13))
	if n, err := src.Waiting(ctx, nil, 100); err != nil || n != 11 {
		t.Fatalf("waiting from the beginning: %d, %v, want 11", n, err)
	}
	got := r.drain(4)
	r.expect(got, []want{{1, row.OpInsert}, {2, row.OpInsert}, {3, row.OpInsert}, {4, row.OpInsert}, {5, row.OpInsert},
		{6, row.OpInsert}, {7, row.OpInsert}, {8, row.OpInsert}, {9, row.OpInsert}, {10, row.OpInsert}, {13, row.OpInsert}})
	if got[0].value == got[10].value || got[0].value != got[9].value {
		t.Errorf("versions: the first transaction's rows share one version, the next has another: %s %s %s", got[0].value, got[9].value, got[10].value)
	}
	phase1 := r.cursor
	if n, err := src.Waiting(ctx, phase1, 100); err != nil || n != 0 {
		t.Fatalf("waiting after everything was read: %d, %v", n, err)
	}

	// 2. Updates, deletes, a rolled-back transaction, a delete and insert of one key (an update),
	// an insert then an update (an insert), an insert then a delete (a delete, or nothing).
	tx(true, "UPDATE orders SET amount = amount + 1 WHERE id IN (1, 2, 3)", "DELETE FROM orders WHERE id IN (4, 5)")
	tx(false, "DELETE FROM orders WHERE id = 6", "UPDATE orders SET customer = 'never' WHERE id = 7")
	tx(true, "DELETE FROM orders WHERE id = 8", "INSERT INTO orders (id, customer, amount) VALUES (8, 'again', 8.5)")
	tx(true, insert(20))
	tx(true, "UPDATE orders SET customer = 'twenty' WHERE id = 20")
	tx(true, insert(21))
	tx(true, "DELETE FROM orders WHERE id = 21")
	got = r.drain(3)
	var without21 []ctChange
	for _, c := range got {
		if c.id == 21 {
			if c.op != row.OpDelete {
				t.Errorf("a row inserted and deleted since the checkpoint came as %s", c.op)
			}
			continue
		}
		without21 = append(without21, c)
	}
	r.expect(without21, []want{{1, row.OpUpdate}, {2, row.OpUpdate}, {3, row.OpUpdate}, {4, row.OpDelete}, {5, row.OpDelete},
		{8, row.OpUpdate}, {20, row.OpInsert}})
	for _, c := range got {
		if c.id == 20 && c.customer != "twenty" {
			t.Errorf("the insert of 20 carries %q, not its current values", c.customer)
		}
		if c.id == 8 && c.customer != "again" {
			t.Errorf("the update of 8 carries %q", c.customer)
		}
	}

	// 3. A transaction of more rows than a batch, read one batch, then changed again while the
	// rest waits; a new source (a new process) goes on from the stored cursor.
	var ids []int64
	rows, err := db.QueryContext(ctx, "SELECT id FROM orders ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if len(ids) < 8 {
		t.Fatalf("only %d rows left", len(ids))
	}
	tx(true, "UPDATE orders SET amount = amount + 100")
	first := r.batch(4)
	if len(first) != 4 || first[3].cursor.Tiebreaker == nil {
		t.Fatalf("the first batch of a large version: %d rows, cursor %+v (want a position inside the version)", len(first), r.cursor)
	}
	done, pending, gone := first[0].id, ids[len(ids)-1], ids[len(ids)-2]
	tx(true, fmt.Sprintf("UPDATE orders SET customer = 'later' WHERE id IN (%d, %d)", done, pending), fmt.Sprintf("DELETE FROM orders WHERE id = %d", gone))
	src2, err := open(def)
	if err != nil {
		t.Fatal(err)
	}
	r.src = src2
	rest := r.drain(4)
	all := append(slices.Clone(first), rest...)
	count := map[int64]int{}
	for _, c := range all {
		count[c.id]++
	}
	for _, id := range ids {
		wantN := 1
		if id == done {
			wantN = 2 // the update of the large version, then the later one
		}
		if count[id] != wantN {
			t.Errorf("key %d came %d times after the large update, want %d (%v)", id, count[id], wantN, all)
		}
	}
	for _, c := range rest {
		switch c.id {
		case pending, done:
			if c.op != row.OpUpdate || c.customer != "later" {
				t.Errorf("key %d: %s %q, want its later update", c.id, c.op, c.customer)
			}
		case gone:
			if c.op != row.OpDelete {
				t.Errorf("key %d: %s, want its delete", c.id, c.op)
			}
		}
	}

	// The changes applied in order give the table.
	table := map[int64][2]any{}
	rows, err = db.QueryContext(ctx, "SELECT id, customer, CAST(amount AS NVARCHAR(40)) FROM orders")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var customer, amount string
		if err := rows.Scan(&id, &customer, &amount); err != nil {
			t.Fatal(err)
		}
		table[id] = [2]any{customer, amount}
	}
	rows.Close()
	if fmt.Sprint(r.model) != fmt.Sprint(table) {
		t.Errorf("the changes applied in order give\n%v\nthe table is\n%v", r.model, table)
	}

	// 4. An expired checkpoint: TRUNCATE TABLE resets Change Tracking's information of the table,
	// which raises its minimum valid version past the checkpoints taken before.
	exec(db, "TRUNCATE TABLE orders")
	var minValid int64
	if err := db.QueryRowContext(ctx, "SELECT CHANGE_TRACKING_MIN_VALID_VERSION(OBJECT_ID('dbo.orders'))").Scan(&minValid); err != nil {
		t.Fatal(err)
	}
	v1, _ := strconv.ParseInt(string(phase1.Value), 10, 64)
	if minValid <= v1 {
		t.Fatalf("TRUNCATE TABLE left the minimum valid version at %d, not past the checkpoint's %d: the expiry cannot be shown this way", minValid, v1)
	}
	zero, err := src.CursorFromText("0", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*state.Cursor{phase1, zero} {
		_, err := src.Fetch(ctx, c, 10)
		if !errors.Is(err, sqlserver.ErrExpired) || !strings.Contains(err.Error(), "pollerctl reset orders --to-beginning") ||
			!strings.Contains(err.Error(), fmt.Sprintf("CHANGE_TRACKING_MIN_VALID_VERSION is %d", minValid)) {
			t.Errorf("fetch after the expired checkpoint %s: %v, want ErrExpired naming the reset and the versions", c.Value, err)
		}
		if _, err := src.Waiting(ctx, c, 10); !errors.Is(err, sqlserver.ErrExpired) {
			t.Errorf("waiting after the expired checkpoint %s: %v, want ErrExpired", c.Value, err)
		}
	}
	if b, err := src.Fetch(ctx, nil, 10); err != nil || len(b.Rows) != 0 {
		t.Errorf("from the beginning after the truncate: %v, %v", b, err)
	}
	exec(db, insert(30))
	b, err := src.Fetch(ctx, nil, 10)
	if err != nil || len(b.Rows) != 1 || b.Rows[0].Op() != row.OpInsert || b.To == nil || b.To.Tiebreaker != nil {
		t.Fatalf("from the beginning after the truncate and an insert: %v, %v", b, err)
	}

	// 5. A quiet table in a busy database: once the checkpoint is closer to the minimum valid
	// version than to the current one, a read that finds nothing moves it to the current version
	// (no rows, a To), and the read after that is idle.
	quiet := b.To
	exec(db, "CREATE TABLE other (id INT PRIMARY KEY)")
	exec(db, "ALTER TABLE other ENABLE CHANGE_TRACKING")
	for i := range 20 {
		exec(db, fmt.Sprintf("INSERT INTO other (id) VALUES (%d)", i))
	}
	var current int64
	if err := db.QueryRowContext(ctx, "SELECT CHANGE_TRACKING_CURRENT_VERSION()").Scan(&current); err != nil {
		t.Fatal(err)
	}
	b, err = src.Fetch(ctx, quiet, 10)
	if err != nil || len(b.Rows) != 0 || b.To == nil || string(b.To.Value) != strconv.FormatInt(current, 10) || b.To.Tiebreaker != nil {
		t.Fatalf("keep-up after %s: %+v, %v, want no rows and a To at version %d", quiet.Value, b, err, current)
	}
	kept := b.To
	if b, err = src.Fetch(ctx, b.To, 10); err != nil || len(b.Rows) != 0 || b.To != nil {
		t.Fatalf("after the keep-up: %+v, %v, want idle", b, err)
	}
	ahead := state.Cursor{Kind: state.KindChangeTracking, Value: json.RawMessage("999999999")}
	if _, err := src.Fetch(ctx, &ahead, 10); !errors.Is(err, source.ErrCursor) || errors.Is(err, sqlserver.ErrExpired) {
		t.Errorf("a checkpoint ahead of the database: %v, want ErrCursor", err)
	}
	ctWatermark(t, db, src, kept)
	ctImages(t, db, ctDSN)
	ctTables(t, db, ctDSN)
}

// ctImages: on a table with TRACK_COLUMNS_UPDATED, an update says the columns it changed (all
// but the key when one statement set them all); every change carries its transaction: the
// change version as its id, the commit time, its place (unknown inside a version a read resumed
// in) and the last mark, known across a batch's end; and changes made WITH
// CHANGE_TRACKING_CONTEXT of the skipped writer never arrive.
func ctImages(t *testing.T, db *sql.DB, dsn string) {
	for _, q := range []string{
		"CREATE TABLE items (id BIGINT PRIMARY KEY, customer NVARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL)",
		"ALTER TABLE items ENABLE CHANGE_TRACKING WITH (TRACK_COLUMNS_UPDATED = ON)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	src, err := drivers.Open(ctx, source.Config{Poller: "items", Driver: sqlserver.Name, DSN: dsn, Definition: sourcedef.Definition{
		Table: sourcedef.Table{Schema: "dbo", Name: "items"}, Columns: []string{"id", "customer", "amount"},
		Cursor: sourcedef.Cursor{Kind: state.KindChangeTracking}, PK: []string{"id"}, SkipWriter: "orders-app",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var at *state.Cursor
	if b, err := src.Fetch(ctx, nil, 10); err != nil || len(b.Rows) != 0 {
		t.Fatalf("a new table: %v, %v", b, err)
	}
	if cur, err := src.CursorFromText(fmt.Sprint(currentVersion(t, db)), nil); err == nil {
		at = cur
	} else {
		t.Fatal(err)
	}
	start := time.Now()
	read := func(limit int) []string {
		t.Helper()
		var out []string
		for {
			b, err := src.Fetch(ctx, at, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Rows) == 0 {
				return out
			}
			for _, r := range b.Rows {
				tx, ok := r.Transaction()
				if !ok || tx.ChangeVersion == 0 || tx.ID != uint64(tx.ChangeVersion) || tx.CommitLSN != "" {
					t.Errorf("%s %v: transaction %+v, %v", r.Op(), r.Key(), tx, ok)
				}
				if tx.CommitTime.Before(start.Add(-2*time.Minute)) || tx.CommitTime.After(time.Now().Add(2*time.Minute)) {
					t.Errorf("%s %v: committed at %v, the test began at %v", r.Op(), r.Key(), tx.CommitTime, start.UTC())
				}
				line := fmt.Sprintf("%s %v #%d", r.Op(), r.Key()["id"], tx.Index)
				if changed, ok := r.Changed(); ok {
					line += fmt.Sprintf(" changed %q", changed)
				}
				if tx.Last {
					line += " last"
				}
				if _, ok := r.Before(); ok {
					t.Errorf("%s: a before image from Change Tracking", line)
				}
				out = append(out, line)
			}
			at = b.To
		}
	}
	run := func(stmts ...string) {
		t.Helper()
		inTx(t, db, true, stmts...)
	}
	run("INSERT INTO items VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)")
	if got, want := strings.Join(read(2), ", "), "insert 1 #1, insert 2 #2, insert 3 #0 last"; got != want {
		t.Errorf("a transaction over two batches: %s\nwant %s", got, want)
	}
	// A transaction of exactly a batch: its last change is marked, and the batch ends on the
	// version's boundary.
	run("INSERT INTO items VALUES (4, 'd', 4), (5, 'e', 5)")
	if got, want := strings.Join(read(2), ", "), "insert 4 #1, insert 5 #2 last"; got != want {
		t.Errorf("a transaction of exactly a batch: %s\nwant %s", got, want)
	}
	if at.Tiebreaker != nil {
		t.Errorf("after a whole version the cursor is inside it: %+v", at)
	}
	run("UPDATE items SET customer = 'a2' WHERE id = 1", "UPDATE items SET amount = 5 WHERE id = 2")
	run("DECLARE @ctx varbinary(128) = CAST('orders-app' AS varbinary(128)); WITH CHANGE_TRACKING_CONTEXT (@ctx) UPDATE items SET amount = 0 WHERE id = 3")
	run("UPDATE items SET customer = 'all', amount = 9 WHERE id = 1")
	if got, want := strings.Join(read(10), ", "), `update 2 #1 changed ["amount"] last, update 1 #1 changed ["customer" "amount"] last`; got != want {
		t.Errorf("updates, one by the skipped writer:\n%s\nwant %s", got, want)
	}
}

// ctTables: a poller of two tables (orders2 and its lines) reads both in (version, table, key)
// order, a transaction's changes numbered across both; a batch that ends inside a version
// resumes there exactly, from a new source too (as after a crash); the count covers both tables.
func ctTables(t *testing.T, db *sql.DB, dsn string) {
	for _, q := range []string{
		"CREATE TABLE orders2 (id BIGINT PRIMARY KEY, amount INT NOT NULL)",
		"CREATE TABLE lines2 (order_id BIGINT, line INT, qty INT NOT NULL, PRIMARY KEY (order_id, line))",
		"ALTER TABLE orders2 ENABLE CHANGE_TRACKING",
		"ALTER TABLE lines2 ENABLE CHANGE_TRACKING",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cfg := source.Config{Poller: "orders2", Driver: sqlserver.Name, DSN: dsn, Definition: sourcedef.Definition{
		Table: sourcedef.Table{Schema: "dbo", Name: "orders2"}, Columns: []string{"id", "amount"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindChangeTracking},
		More:   []sourcedef.TableDef{{Table: sourcedef.Table{Schema: "dbo", Name: "lines2"}, Columns: []string{"qty"}, PK: []string{"order_id", "line"}}},
	}}
	src, err := drivers.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { src.Close() }() // the source open last
	at, err := src.CursorFromText(fmt.Sprint(currentVersion(t, db)), nil)
	if err != nil {
		t.Fatal(err)
	}
	inTx(t, db, true, "INSERT INTO lines2 VALUES (1, 1, 5), (1, 2, 7)", "INSERT INTO orders2 VALUES (1, 10)")
	inTx(t, db, true, "UPDATE lines2 SET qty = 6 WHERE order_id = 1 AND line = 1")
	inTx(t, db, true, "INSERT INTO orders2 VALUES (2, 20)", "INSERT INTO lines2 VALUES (2, 1, 1)")
	if n, err := src.Waiting(ctx, at, 100); err != nil || n != 5 {
		t.Errorf("waiting: %d, %v; want 5 (2 orders, 3 lines)", n, err)
	}
	var got []string
	for i := 0; ; i++ {
		if i == 1 { // a new source resumes from the checkpoint, inside the first version
			src.Close()
			if src, err = drivers.Open(ctx, cfg); err != nil {
				t.Fatal(err)
			}
		}
		b, err := src.Fetch(ctx, at, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Rows) == 0 {
			break
		}
		for _, r := range b.Rows {
			tx, _ := r.Transaction()
			line := fmt.Sprintf("%s %s %v #%d", r.Table(), r.Op(), r.Key(), tx.Index)
			if tx.Last {
				line += " last"
			}
			got = append(got, line)
		}
		at = b.To
	}
	// Change Tracking keeps a key's latest change: lines2 (1, 1), changed at the first version and
	// the second, comes once, at the second, as an insert (it did not exist at the checkpoint).
	// The third batch resumes inside the third version: its change there has no index.
	want := []string{
		"dbo.orders2 insert map[id:1] #1", "dbo.lines2 insert map[line:2 order_id:1] #2 last",
		"dbo.lines2 insert map[line:1 order_id:1] #1 last", "dbo.orders2 insert map[id:2] #1",
		"dbo.lines2 insert map[line:1 order_id:2] #0 last",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("two tables:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if at == nil || at.Tiebreaker != nil {
		t.Errorf("after the last whole version the cursor is %+v, not a boundary", at)
	}
}

// inTx runs stmts in one transaction, committed or rolled back.
// ctDatabase makes a database of the test's own on the SQL Server at dsn (a sqlserver:// URL
// whose login may create databases), with Change Tracking on, and drops it when the test ends:
// the server's connection, the database's and its DSN, and its name.
func ctDatabase(t *testing.T, dsn string) (admin, db *sql.DB, ctDSN, name string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != "sqlserver" {
		t.Skipf("%s is not a sqlserver:// URL: the Change Tracking tests make a database of their own and need the URL form to point at it", testenv.SQLServerVar)
	}
	admin, err = sql.Open("sqlserver", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	name = testenv.Name("ct_")
	for _, q := range []string{"CREATE DATABASE [" + name + "]", "ALTER DATABASE [" + name + "] SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 2 DAYS, AUTO_CLEANUP = ON)"} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if strings.HasPrefix(q, "CREATE") {
			t.Cleanup(func() {
				bg := context.Background()
				_, _ = admin.ExecContext(bg, "ALTER DATABASE ["+name+"] SET SINGLE_USER WITH ROLLBACK IMMEDIATE")
				_, _ = admin.ExecContext(bg, "DROP DATABASE ["+name+"]")
			})
		}
	}
	q := u.Query()
	q.Set("database", name)
	u.RawQuery = q.Encode()
	ctDSN = u.String()
	db, err = sql.Open("sqlserver", ctDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return admin, db, ctDSN, name
}

func inTx(t *testing.T, db *sql.DB, commit bool, stmts ...string) {
	t.Helper()
	x, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if _, err := x.ExecContext(ctx, s); err != nil {
			x.Rollback()
			t.Fatalf("%s: %v", s, err)
		}
	}
	if commit {
		err = x.Commit()
	} else {
		err = x.Rollback()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func currentVersion(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var v int64
	if err := db.QueryRowContext(ctx, "SELECT CHANGE_TRACKING_CURRENT_VERSION()").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// ctWatermark: a changetracking poller's backfill chunk is read in a snapshot its watermark
// judges the stream against: a change committed before the chunk is not newer; one of a
// transaction open while the chunk was read (committed after) and one committed after are; the
// stream is not past the watermark inside the version before the chunk's, and is at the first
// change above it.
func ctWatermark(t *testing.T, db *sql.DB, src *source.Source, at *state.Cursor) {
	t.Helper()
	exec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := src.Backfills(); err != nil {
		t.Fatalf("Backfills: %v", err)
	}
	exec("INSERT INTO orders (id, customer, amount) VALUES (9001, 'a', 1), (9002, 'b', 2), (9003, 'c', 3)")
	for {
		b, err := src.Fetch(ctx, at, 100)
		if err != nil {
			t.Fatal(err)
		}
		if b.To == nil {
			break
		}
		at = b.To
	}
	open, err := db.BeginTx(ctx, nil) // in progress while the chunk is read
	if err != nil {
		t.Fatal(err)
	}
	defer open.Rollback()
	if _, err := open.ExecContext(ctx, "UPDATE orders SET customer = 'open' WHERE id = 9002"); err != nil {
		t.Fatal(err)
	}
	exec("INSERT INTO orders (id, customer, amount) VALUES (9004, 'd', 4)")
	c, err := src.ReadChunk(ctx, map[string]json.RawMessage{"id": json.RawMessage("9000")}, "", nil, 10)
	if err != nil || c.Watermark == nil || len(c.Rows) != 4 || c.Rows[1].Get("customer") != "b" || c.Full {
		t.Fatalf("chunk: %+v, %v", c, err)
	}
	if err := open.Commit(); err != nil {
		t.Fatal(err)
	}
	exec("INSERT INTO orders (id, customer, amount) VALUES (9005, 'e', 5)")
	sourcetest.CheckWatermark(t, src, c, at, []sourcetest.WatermarkWant{{ID: 9004}, {ID: 9002, Newer: true, Reached: true}, {ID: 9005, Newer: true, Reached: true}})
}

type want struct {
	id int64
	op string
}

// ctChange is a delivered change, as a consumer sees it.
type ctChange struct {
	id       int64
	op       string
	customer string
	value    string // the cursor's Value: the change's version
	cursor   state.Cursor
}

func (c ctChange) String() string { return fmt.Sprintf("%s %d@%s", c.op, c.id, c.value) }

// ctReader reads a changetracking source as the poller does (each batch's cursor through the
// state document) and applies the changes to model.
type ctReader struct {
	t      *testing.T
	src    *source.Source
	cursor *state.Cursor
	model  map[int64][2]any // id -> customer, amount
}

// batch reads one batch of up to limit changes after the cursor and moves the cursor past it.
func (r *ctReader) batch(limit int) []ctChange {
	t := r.t
	t.Helper()
	b, err := r.src.Fetch(ctx, r.cursor, limit)
	if err != nil {
		t.Fatalf("fetch after %+v: %v", r.cursor, err)
	}
	if len(b.Rows) > limit {
		t.Fatalf("%d rows in a batch of %d", len(b.Rows), limit)
	}
	var out []ctChange
	for i, rw := range b.Rows {
		c, err := rw.Cursor()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := rw.Key()["id"].(int64)
		ch := ctChange{id: id, op: rw.Op(), value: string(c.Value), cursor: c}
		if _, err := strconv.ParseInt(ch.value, 10, 64); err != nil {
			t.Fatalf("cursor value %s is not a version", c.Value)
		}
		if i > 0 && version(out[i-1].value) > version(ch.value) {
			t.Fatalf("versions out of order in a batch: %v then %v", out[i-1], ch)
		}
		switch rw.Op() {
		case row.OpDelete:
			if rw.HasRow() || rw.Get("customer") != nil || id == 0 {
				t.Errorf("delete of %v: has rw %v, customer %v", rw.Key(), rw.HasRow(), rw.Get("customer"))
			}
			delete(r.model, id)
		case row.OpInsert, row.OpUpdate:
			customer, _ := rw.Get("customer").(string)
			ch.customer = customer
			r.model[id] = [2]any{customer, fmt.Sprint(rw.Get("amount"))}
		default:
			t.Errorf("op %q", rw.Op())
		}
		out = append(out, ch)
	}
	if len(b.Rows) > 0 {
		enc, err := json.Marshal(b.To)
		if err != nil {
			t.Fatal(err)
		}
		var next state.Cursor
		if err := json.Unmarshal(enc, &next); err != nil {
			t.Fatal(err)
		}
		if err := r.src.CheckCursor(&next); err != nil {
			t.Fatal(err)
		}
		r.cursor = &next
	}
	return out
}

func version(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }

// drain reads batches of limit until one comes back empty, checking no change repeats.
func (r *ctReader) drain(limit int) []ctChange {
	r.t.Helper()
	var all []ctChange
	seen := map[string]bool{}
	for range 1000 {
		b := r.batch(limit)
		if len(b) == 0 {
			return all
		}
		for _, c := range b {
			id := fmt.Sprintf("%d@%s", c.id, c.value) // what a sink's message id derives from
			if seen[id] {
				r.t.Fatalf("change %v delivered twice", c)
			}
			seen[id] = true
		}
		all = append(all, b...)
	}
	r.t.Fatal("the reader never reached the end of the changes")
	return nil
}

// expect compares the changes with the wanted keys and ops, in order.
func (r *ctReader) expect(got []ctChange, w []want) {
	r.t.Helper()
	ok := len(got) == len(w)
	for i := 0; ok && i < len(w); i++ {
		ok = got[i].id == w[i].id && got[i].op == w[i].op
	}
	if !ok {
		r.t.Errorf("changes %v, want %v", got, w)
	}
}
