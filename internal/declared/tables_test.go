package declared

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/pollertest"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// hook is a webhook receiver that keeps each message's table, op, key and transaction index (and
// id), and fails while fail is set. Its first request closes arrived; with await set, each
// request waits for await to close (at most 10s: then the test fails) before answering.
type hook struct {
	mu      sync.Mutex
	got     []string
	ids     []string
	fail    bool
	srv     *httptest.Server
	arrived chan struct{}
	await   chan struct{}
}

func newHook(t *testing.T) *hook {
	h := &hook{arrived: make(chan struct{})}
	var first sync.Once
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var c sink.Change
		if err := json.Unmarshal(body, &c); err != nil {
			t.Errorf("body %s: %v", body, err)
		}
		first.Do(func() { close(h.arrived) })
		h.mu.Lock()
		await := h.await
		h.mu.Unlock()
		if await != nil {
			select {
			case <-await:
			case <-time.After(10 * time.Second):
				t.Errorf("%s: still waiting for another sink's request after 10s", h.srv.URL)
			}
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.fail {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		k, _ := json.Marshal(c.Key)
		var index int
		if c.Tx != nil { // a change stream's
			index = c.Tx.Index
		}
		h.got = append(h.got, fmt.Sprintf("%s %s %s #%d", c.Table, c.Op, k, index))
		h.ids = append(h.ids, c.ID)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) messages() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

// TestTablesRouted: a poller.json of two tables (source.tables) whose second table has a sink of
// its own: each webhook gets its table's changes alone, in commit order, numbered in their
// transactions across both tables; while the second sink fails, the batch is not committed and
// comes again whole, the first sink's messages repeated with the same ids.
func TestTablesRouted(t *testing.T) {
	db, dsn, orders, slot := testenv.PostgresLogical(t, "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL)")
	lines := testenv.Name("lines")
	testenv.ExecFlushed(t, db, "CREATE TABLE "+lines+" (order_id bigint, line int, qty int NOT NULL, PRIMARY KEY (order_id, line))",
		"ALTER PUBLICATION "+slot+" ADD TABLE "+lines)
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + lines) })
	p := parsed(t, "orders-cdc", `{
  "source": {
    "cursor": {"kind": "logical"},
    "tables": [
      {"table": "`+orders+`", "columns": ["name"], "key": ["id"]},
      {"table": "`+lines+`", "columns": ["qty"], "key": ["order_id", "line"], "sink": {"type": "webhook", "url": "%LINES_HOOK%", "concurrency": 1}}
    ]
  },
  "sink": {"type": "webhook", "url": "%ORDERS_HOOK%", "concurrency": 1}
}`)
	oh, lh := newHook(t), newHook(t)
	if err := pollertest.Setup(p, "ORDERS_HOOK="+oh.srv.URL, "LINES_HOOK="+lh.srv.URL); err != nil {
		t.Fatal(err)
	}
	if target := pollerdef.Of(p).Target(); !strings.Contains(target, lines+" to ") {
		t.Errorf("target %q does not name the second table's sink", target)
	}
	r, err := tick.Open(context.Background(), tick.Config{Poller: pollerdef.Of(p), Store: &lease.Counting{Store: memstore.New(nil)}, App: "test", Owner: "test/1",
		Settings: appsettings.Settings{Driver: postgres.Name, DSN: dsn, BatchSize: 10, LeaseTTL: lease.DefaultTTL,
			HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: time.Hour, Slot: slot, Publication: slot}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	testenv.ExecFlushed(t, db, "INSERT INTO "+orders+" VALUES (1, 'a')", "INSERT INTO "+lines+" VALUES (1, 1, 5), (1, 2, 7)",
		"UPDATE "+orders+" SET name = 'b' WHERE id = 1")
	testenv.ExecFlushed(t, db, "DELETE FROM "+lines+" WHERE line = 2")

	lh.mu.Lock()
	lh.fail = true
	lh.mu.Unlock()
	if sum, err := r.Tick(context.Background(), ""); err == nil || sum.Rows != 0 {
		t.Fatalf("tick with the second sink down: %+v %v", sum, err)
	}
	lh.mu.Lock()
	lh.fail = false
	lh.mu.Unlock()
	sum, err := r.Tick(context.Background(), "")
	if err != nil || sum.Rows != 5 {
		t.Fatalf("tick: %+v %v", sum, err)
	}
	o := []string{orders + ` insert {"id":1} #1`, orders + ` update {"id":1} #4`}
	wantOrders := append(append([]string{}, o...), o...) // sent before the second sink failed, and again
	wantLines := []string{lines + ` insert {"line":1,"order_id":1} #2`, lines + ` insert {"line":2,"order_id":1} #3`, lines + ` delete {"line":2,"order_id":1} #1`}
	if got := oh.messages(); strings.Join(got, "\n") != strings.Join(wantOrders, "\n") {
		t.Errorf("the poller's sink got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantOrders, "\n"))
	}
	if got := lh.messages(); strings.Join(got, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("the second table's sink got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantLines, "\n"))
	}
}

// TestTablesChecked: poller.json's source.tables is for the change-stream cursors, replaces table, and
// needs each entry's table, columns and key; an entry's sink is checked as the poller's.
func TestTablesChecked(t *testing.T) {
	const hook = `"sink": {"type": "webhook", "url": "https://example.com"}`
	for _, c := range []struct{ src, want string }{
		{`"cursor": {"kind": "integer", "column": "id"}, "tables": [{"table": "a", "columns": ["x"], "key": ["id"]}]`, "source.tables: several tables are for the logical and changetracking cursors"},
		{`"cursor": {"kind": "logical"}, "table": "a", "tables": [{"table": "a", "columns": ["x"], "key": ["id"]}]`, "source.tables: replaces source.table"},
		{`"cursor": {"kind": "logical"}, "tables": [{"table": "a", "columns": ["x"]}]`, "source.tables[0].key: required"},
		{`"cursor": {"kind": "logical"}, "tables": [{"table": "a", "columns": ["x"], "key": ["id"]}, {"table": "A", "columns": ["x"], "key": ["id"]}]`, "source.tables[1].table: A is listed twice"},
		{`"cursor": {"kind": "logical"}, "tables": [{"table": "a", "columns": ["x"], "key": ["id"], "sink": {"type": "webhook"}}]`, "source.tables[0].sink.url"},
		{`"cursor": {"kind": "logical"}, "tables": [{"table": "a", "columns": ["x"], "key": ["id"], "colums": ["y"]}]`, "did you mean source.tables[].columns?"},
		{`"cursor": {"kind": "changetracking"}, "tables": [{"table": "a", "columns": ["x"], "key": ["id"], "filter": "x > 1"}]`, "source.tables[0].filter: a changetracking cursor"},
		{`"cursor": {"kind": "changetracking"}, "tables": [{"table": "a", "columns": ["*"], "key": ["id"]}]`, "for the logical cursor only"},
		{`"cursor": {"kind": "logical"}, "initial": "snapshot", "tables": [{"table": "a", "columns": ["x"], "key": ["id"]}]`, "source.initial"},
	} {
		_, err := Parse([]byte(`{"source": {` + c.src + `}, ` + hook + `}`))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.src, err, c.want)
		}
	}
}

// TestDefinitionWorded: the rules of a definition (sourcedef.Definition.Check) and of the database
// its cursor kind pins (SQL Server's filter) name their field by its path in poller.json; a rule
// of the app settings' part (a logical cursor's slot name) is the source's to check when it
// opens, not the file's.
func TestDefinitionWorded(t *testing.T) {
	const hook = `"sink": {"type": "webhook", "url": "https://example.com"}`
	two := func(kind, second string) string {
		return `"cursor": {"kind": "` + kind + `"}, "tables": [{"table": "a", "columns": ["x"], "key": ["id"]}, {"table": "b", ` + second + `}]`
	}
	for _, c := range []struct{ src, want string }{
		{`"table": "t", "columns": ["x"], "key": ["ts"], "cursor": {"kind": "timestamp+pk", "column": "ts"}`,
			`source.key: a timestamp+pk cursor needs a key column other than its cursor column "ts" as its tiebreaker`},
		{`"columns": ["x"], "key": ["id"], "cursor": {"kind": "integer", "column": "id"}`, "source.table: required: the table to read (or source.tables"},
		{`"table": "t", "columns": ["x", "x"], "key": ["id"], "cursor": {"kind": "integer", "column": "id"}`, `source.columns: "x" is listed twice`},
		{`"table": "t", "schema": "s;", "columns": ["x"], "key": ["id"], "cursor": {"kind": "integer", "column": "id"}`, `source.schema: "s;": identifier contains ';'`},
		{`"table": "t", "columns": ["x"], "key": ["id"], "cursor": {"kind": "integer", "column": "id"}, "filter": "x > 1; DROP TABLE t"`, `source.filter: holds ';'`},
		{two("logical", `"columns": ["x--y"], "key": ["id"]`), `source.tables[1].columns: "x--y": identifier contains a comment marker`},
		{two("logical", `"columns": ["x"]`), "source.tables[1].key: required: the key columns"},
		{two("changetracking", `"columns": ["x"], "key": ["id"], "filter": "x > 1"`), "source.tables[1].filter: a changetracking cursor delivers every change of the table and takes no filter"},
		{two("changetracking", `"columns": ["x"], "key": ["id"]`) + `, "initial": "snapshot"`, `source.initial: "snapshot" reads one table's rows`},
	} {
		_, err := Parse([]byte(`{"source": {` + c.src + `}, ` + hook + `}`))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.src, err, c.want)
		}
	}
	if _, err := Parse([]byte(`{"source": {` + two("logical", `"columns": ["*"], "key": ["id"]`) + `}, ` + hook + `}`)); err != nil {
		t.Errorf("a logical poller of two tables, without its slot (an app setting): %v", err)
	}
}

// TestDefinitionIsThePollers: the definition check checks is the one the poller it builds
// reads, for each form of poller.json.
func TestDefinitionIsThePollers(t *testing.T) {
	for _, src := range []string{
		`"table": "t", "schema": "s", "columns": ["v"], "key": ["id"], "cursor": {"kind": "timestamp+pk", "column": "ts"}, "filter": "v > 0", "settle_lag": "0"`,
		`"table": "t", "columns": ["id", "v"], "key": ["id"], "cursor": {"kind": "integer", "column": "id"}`,
		`"table": "t", "columns": ["v"], "key": ["id"], "cursor": {"kind": "timestamp+pk", "column": "ts"}, "settle_lag": "3s"`,
		`"table": "t", "columns": ["*"], "key": ["id"], "cursor": {"kind": "logical"}, "initial": "snapshot", "skip_writer": "app"`,
		`"table": "t", "columns": ["v"], "key": ["id"], "cursor": {"kind": "changetracking"}, "initial": "now"`,
		`"cursor": {"kind": "logical"}, "tables": [{"table": "a", "columns": ["x"], "key": ["id"], "filter": "x > 0"},
		  {"table": "b", "schema": "s", "columns": ["y"], "key": ["k1", "k2"], "sink": {"type": "webhook", "url": "https://example.com/b"}}]`,
	} {
		spec, err := Parse([]byte(`{"source": {` + src + `}, "sink": {"type": "webhook", "url": "https://example.com"}}`))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		p, err := spec.Poller("p")
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got, want := pollerdef.Of(p).Source(), spec.definition(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\nthe poller reads %+v\ncheck checked    %+v", src, got, want)
		}
	}
}
