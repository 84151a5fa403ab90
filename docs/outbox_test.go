package docs

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlserver"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// The outbox of docs/outbox.md: its table, its columns and the cursor column of each kind.
const outboxTable = "outbox"

var (
	outboxColumns = poller.Outbox{ID: "id", AggregateType: "aggregate_type", AggregateID: "aggregate_id",
		Payload: "payload", Type: "type", Headers: "headers"}
	outboxCursors = map[string]string{
		state.KindXID: "txid", state.KindRowversion: "rv", state.KindTimestampPK: "created_at", state.KindInteger: "version",
	}
	uuidText = regexp.MustCompile(`'([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})'`)
)

// insertBlock is the page's one ```sql DATABASE insert=KIND block that goes with an outbox=KIND
// block: the application's transaction on that table.
func insertBlock(t *testing.T, bs []block, table block, kind string) block {
	t.Helper()
	var found []block
	for _, b := range bs {
		if b.page == table.page && b.arg("insert") == kind {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %s needs one ```sql %s insert=%s block, the application's transaction on its table; it has %d", table, table.page, table.class(), kind, len(found))
	}
	return found[0]
}

// outboxBlock is the outbox=KIND block an insert=KIND block goes with (a test of its own runs
// both).
func outboxBlock(t *testing.T, bs []block, insert block, kind string) {
	t.Helper()
	for _, b := range bs {
		if b.page == insert.page && b.arg("outbox") == kind {
			t.Logf("%s runs after %s, in its test", insert, b)
			return
		}
	}
	t.Fatalf("%s: no ```sql %s outbox=%s block on %s makes the table it inserts into", insert, insert.class(), kind, insert.page)
}

// proveOutbox runs an outbox table's block, opens the table as an outbox poller of its cursor
// kind would, runs the application's transaction (insert: an order and its event), counts the
// rows, and shows that the poller reads the event (a change stream: its insert, the table left
// empty when the transaction deleted it). A keyset outbox passes `pollerctl check`.
func proveOutbox(t *testing.T, table block, f *fresh, insert block) {
	t.Helper()
	ctx := context.Background()
	kind := table.arg("outbox")
	m := uuidText.FindStringSubmatch(insert.body)
	if m == nil {
		t.Fatalf("%s: the insert names no event id (a UUID literal)", insert)
	}
	eventID := m[1]
	f.script(t, table)

	o := sourcedef.Outbox(outboxColumns)
	def := sourcedef.Definition{
		Table:   sourcedef.Table{Name: outboxTable},
		Columns: o.Columns(),
		Cursor:  sourcedef.Cursor{Kind: kind, Column: outboxCursors[kind]},
		PK:      []string{outboxColumns.ID},
		Outbox:  &o,
	}
	src, writer := f.open(t, table, def)

	f.scriptOn(t, writer, insert)
	wantEvents := 1
	if strings.Contains(strings.ToUpper(insert.body), "DELETE FROM") {
		wantEvents = 0 // the change-stream outbox that stays empty
	}
	if n := countRows(t, f, "orders"); n != 2 { // the row newDatabase made, and the transaction's
		t.Fatalf("%s: orders holds %d rows after the transaction, want 2", insert, n)
	}
	if n := countRows(t, f, outboxTable); n != wantEvents {
		t.Fatalf("%s: the outbox holds %d rows after the transaction, want %d", insert, n, wantEvents)
	}

	if state.ChangeKind(kind) {
		batch, err := src.Fetch(ctx, nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(batch.Rows) == 0 || batch.Rows[0].Op() != "insert" || fmt.Sprint(batch.Rows[0].Key()[outboxColumns.ID]) != eventID {
			t.Fatalf("%s: the stream's first change is the insert of event %s; got %d changes", insert, eventID, len(batch.Rows))
		}
		return
	}
	got := backlog(t, src, nil, 1)
	if id := strings.Trim(keyOf(got.Oldest), `"`); !strings.EqualFold(id, eventID) {
		t.Fatalf("%s: the poller reads event %s, want %s", insert, id, eventID)
	}
	checkOutbox(t, table, f, kind)
}

// countRows counts a table's rows.
func countRows(t *testing.T, f *fresh, table string) int {
	t.Helper()
	var n int
	if err := f.db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkOutbox: `pollerctl check` finds nothing to fix on the table the block made, for the
// outbox poller docs/outbox.md's poller.json declares.
func checkOutbox(t *testing.T, table block, f *fresh, kind string) {
	t.Helper()
	opts := []poller.Option{poller.WithColumns(outboxColumns.ID), poller.WithKey(outboxColumns.ID),
		poller.WithCursorColumn(outboxCursors[kind]), poller.WithOutbox(outboxColumns), poller.WithCleanup(poller.Cleanup{Delete: true})}
	if f.driver == sqlserver.Name {
		opts = append(opts, poller.WithSchema("dbo"))
	}
	p := poller.New(outboxTable, outboxTable, poller.CursorKind(kind), func(context.Context, *poller.Batch[poller.Row]) error { return nil }, opts...)
	settings := map[string]string{"OUTBOX_DB_DRIVER": f.driver, "OUTBOX_DB_CONNECTION": f.dsn, "OUTBOX_SCHEDULE": "*/30 * * * * *"}
	var out bytes.Buffer
	code := ctl.Run(context.Background(), []string{"check", outboxTable}, ctl.Env{Out: &out, Pollers: []*pollerdef.Def{pollerdef.Of(p)}, App: "docs",
		Getenv: func(k string) string { return settings[k] }})
	if code != ctl.ExitOK {
		t.Fatalf("%s: pollerctl check %s on the table: exit %d:\n%s", table, outboxTable, code, out.String())
	}
}
