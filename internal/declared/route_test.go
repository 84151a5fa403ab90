package declared

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/pollertest"
)

// routed is a poller.json of an events table routed by aggregate_type, which it does not list in
// its columns; extra is added to its route.
func routed(extra string) string {
	return `{"source": {"table": "events", "columns": ["body"], "key": ["id"], "cursor": {"kind": "integer", "column": "id"}},
 "route": {"column": "aggregate_type", "sinks": {
   "order": {"type": "webhook", "url": "%ORDER_HOOK%", "concurrency": 1},
   "payment": {"type": "webhook", "url": "%PAYMENT_HOOK%", "concurrency": 1}}` + extra + `}}`
}

// TestRouteChecked: poller.json's route replaces sink, excludes the tables' sinks, needs its
// column and sinks; its sinks are checked as the poller's, named by their path, and its unknown
// fields get the usual did-you-mean.
func TestRouteChecked(t *testing.T) {
	const src = `"source": {"table": "t", "columns": ["v"], "key": ["id"], "cursor": {"kind": "integer", "column": "id"}}`
	const hook = `{"type": "webhook", "url": "https://example.com"}`
	tables := `"source": {"cursor": {"kind": "logical"}, "tables": [{"table": "a", "columns": ["x"], "key": ["id"], "sink": ` + hook + `}]}`
	for _, c := range []struct{ json, want string }{
		{`{` + src + `, "sink": ` + hook + `, "route": {"column": "k", "sinks": {"a": ` + hook + `}}}`, "route: replaces sink: a poller.json has one of them"},
		{`{` + tables + `, "route": {"column": "k", "sinks": {"a": ` + hook + `}}}`, "route: and source.tables[0].sink both say where rows go"},
		{`{` + src + `}`, "sink: required: where the changes go (or route"},
		{`{` + src + `, "route": {"sinks": {"a": ` + hook + `}}}`, "route.column: required"},
		{`{` + src + `, "route": {"column": "k"}}`, "route.sinks: required"},
		{`{` + src + `, "route": {"column": "k", "sinks": {"order": {"type": "webhook"}}}}`, "route.sinks.order.url: required"},
		{`{` + src + `, "route": {"column": "k", "sinks": {"a": ` + hook + `}, "default": {"type": "kafka"}}}`, `route.default.type: "kafka" is not one of`},
		{`{` + src + `, "route": {"colum": "k", "sinks": {"a": ` + hook + `}}}`, "route.colum is not a field of poller.json (did you mean route.column?)"},
		{`{` + src + `, "route": {"column": "k", "sinks": {"a": ` + hook + `, "order": {"type": "webhook", "urll": "x"}}}}`, "route.sinks.order.urll is not a field of poller.json (did you mean route.sinks.order.url?)"},
		{`{` + src + `, "route": {"column": "k", "sinks": {"a": ` + hook + `}, "default": {"type": "webhook", "ur": "x"}}}`, "route.default.ur is not a field of poller.json (did you mean route.default.url?)"},
		{`{` + src + `, "route": {"column": "k", "sinks": {"a": {"type": "webhook", "url": "https://example.com", "concurrency": "2"}}}}`, "route.sinks.a.concurrency: a JSON string where a whole number is expected"},
	} {
		_, err := Parse([]byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\ngot  %v\nwant %q", c.json, err, c.want)
		}
	}
}

// TestRouteColumnRead: the poller reads the route's column although its columns do not list it,
// in every table of a poller of several; ["*"] has it already.
func TestRouteColumnRead(t *testing.T) {
	const route = `"route": {"column": "kind", "sinks": {"a": {"type": "webhook", "url": "https://example.com"}}}`
	for src, want := range map[string][][]string{
		`"table": "t", "columns": ["v"], "key": ["id"], "cursor": {"kind": "integer", "column": "n"}`:                                                 {{"v", "id", "n", "kind"}},
		`"table": "t", "columns": ["v", "kind"], "key": ["id"], "cursor": {"kind": "integer", "column": "id"}`:                                        {{"v", "kind", "id"}},
		`"table": "t", "columns": ["*"], "key": ["id"], "cursor": {"kind": "logical"}`:                                                                {{"*"}},
		`"cursor": {"kind": "logical"}, "tables": [{"table": "a", "columns": ["x"], "key": ["id"]}, {"table": "b", "columns": ["y"], "key": ["id"]}]`: {{"x", "id", "kind"}, {"y", "id", "kind"}},
	} {
		p := parsed(t, "p", `{"source": {`+src+`}, `+route+`}`)
		var got [][]string
		for _, td := range pollerdef.Of(p).Source().Tables() {
			got = append(got, td.Columns)
		}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("%s: the poller reads %v, want %v", src, got, want)
		}
	}
}

// parsed is the poller a poller.json declares, named name.
func parsed(t *testing.T, name, pollerJSON string) *poller.Poller {
	t.Helper()
	spec, err := Parse([]byte(pollerJSON))
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Poller(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// events makes the events table of routed's poller in db (SQLite), with a row per aggregate type
// (nil: NULL) keyed 1, 2, ...
func events(t *testing.T, db *sql.DB, types ...any) {
	t.Helper()
	if _, err := db.Exec(`CREATE TABLE events (id INTEGER PRIMARY KEY, aggregate_type TEXT, body TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for i, typ := range types {
		if _, err := db.Exec(`INSERT INTO events VALUES (?, ?, 'b')`, i+1, typ); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRouteByValue: each row goes to the webhook its aggregate_type names, NULL and a value with
// no sink to the default; the two sinks of a batch are sent to at the same time (each one's
// first request waits for the other's). While one of them fails, the batch is not committed and
// comes again whole, the other sinks' messages repeated with the same ids.
func TestRouteByValue(t *testing.T) {
	p := parsed(t, "events", routed(`, "default": {"type": "webhook", "url": "%OTHER_HOOK%", "concurrency": 1}`))
	order, payment, other := newHook(t), newHook(t), newHook(t)
	order.await, payment.await = payment.arrived, order.arrived
	payment.fail = true
	h := pollertest.New(t, p, "ORDER_HOOK="+order.srv.URL, "PAYMENT_HOOK="+payment.srv.URL, "OTHER_HOOK="+other.srv.URL)
	if want := "route aggregate_type: order to POST " + order.srv.URL + "; payment to POST " + payment.srv.URL + "; default to POST " + other.srv.URL; pollerdef.Of(p).Target() != want {
		t.Errorf("target:\n%s\nwant\n%s", pollerdef.Of(p).Target(), want)
	}
	events(t, h.DB, "order", "payment", nil, "refund", "order", "payment")
	if r, err := h.TickErr(); err == nil || r.Rows != 0 || !strings.Contains(err.Error(), "route.sinks.payment: sink webhook") {
		t.Fatalf("tick with the payment sink down: %+v %v", r, err)
	}
	orderIDs := slices.Clone(order.ids)
	payment.mu.Lock()
	payment.fail = false
	payment.mu.Unlock()
	if r := h.Tick(); r.Rows != 6 || r.Cursor == nil || string(r.Cursor.Value) != "6" {
		t.Fatalf("tick: %+v", r)
	}
	key := func(ids ...int) []string {
		var out []string
		for _, id := range ids {
			out = append(out, `events upsert {"id":`+string(rune('0'+id))+`} #0`)
		}
		return out
	}
	for _, c := range []struct {
		name string
		h    *hook
		want []string
	}{
		{"order", order, key(1, 5, 1, 5)}, // before the payment sink failed, and again
		{"payment", payment, key(2, 6)},
		{"default", other, key(3, 4, 3, 4)},
	} {
		if got := c.h.messages(); !slices.Equal(got, c.want) {
			t.Errorf("the %s sink got:\n%s\nwant:\n%s", c.name, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
	if len(orderIDs) != 2 || !slices.Equal(order.ids[2:], orderIDs) {
		t.Errorf("the order sink's messages came again under other ids: %v, then %v", orderIDs, order.ids[2:])
	}
}

// TestRouteUnroutable: without a default, a row whose value has no sink (or is NULL) fails its
// batch with nothing sent, under ErrNoRoute; the poison policy blocks it, and the status names
// the column, the value, the row and the fix. Quarantined, the batch goes through but for those
// rows, which a dead letter holds; the checkpoint passes them.
func TestRouteUnroutable(t *testing.T) {
	p := parsed(t, "events", routed(""))
	order, payment := newHook(t), newHook(t)
	if err := pollertest.Setup(p, "ORDER_HOOK="+order.srv.URL, "PAYMENT_HOOK="+payment.srv.URL); err != nil {
		t.Fatal(err)
	}
	dsn := filepath.Join(t.TempDir(), "events.db")
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	events(t, db, "order", "refund", "payment", "order", nil)
	st := memstore.New(nil)
	def := pollerdef.Of(p)
	settings := appsettings.Settings{Driver: sqlite.Name, DSN: dsn, BatchSize: 10, LeaseTTL: lease.DefaultTTL, HeartbeatInterval: lease.DefaultTTL / 4,
		TickBudget: time.Hour, MaxAttempts: 1, OnPoison: appsettings.Block}
	var handled []error // what the handler returned, batch by batch
	run := func(s appsettings.Settings) (tick.Summary, error) {
		r, err := tick.Open(context.Background(), tick.Config{Poller: def, Settings: s, Store: st, App: "test", Owner: "test/1",
			DeadLetters: func(ctx context.Context, l *deadletter.Letter) (string, error) {
				return deadletter.Write(ctx, st, "test", l)
			},
			Observe: func(_ *pollerdef.Batch, err error) { handled = append(handled, err) }})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		return r.Tick(context.Background(), "")
	}
	sum, err := run(settings)
	if err == nil || sum.Outcome != tick.Blocked || len(handled) != 1 || !errors.Is(handled[0], ErrNoRoute) {
		t.Fatalf("tick: %+v %v (the handler returned %v)", sum, err, handled)
	}
	if got := append(order.messages(), payment.messages()...); len(got) != 0 {
		t.Errorf("a batch that cannot be routed sent %v", got)
	}
	cfg := pollerstatus.Config{App: "test", Registered: []pollerstatus.Registered{pollerstatus.RegisteredFrom(def, settings, nil)}}
	status := pollerstatus.Read(context.Background(), st, cfg, "events")
	const named = `route.column aggregate_type is "refund" in the row with key {"id":2} of events, which route.sinks does not name, and the route has no default: add route.sinks."refund" or route.default to poller.json`
	if !status.Blocked || !strings.Contains(status.LastError, named) {
		t.Errorf("status: blocked %v, last error %q; want it to name %q", status.Blocked, status.LastError, named)
	}
	// Where it delivers, as the start-up log line says it: the route's column and each sink.
	if want := "route aggregate_type: order to POST " + order.srv.URL; !strings.HasPrefix(status.DeliversTo, want) || !strings.Contains(status.DeliversTo, "; payment to POST "+payment.srv.URL) {
		t.Errorf("status: delivers to %q, want %q...; payment to POST %s", status.DeliversTo, want, payment.srv.URL)
	}

	settings.OnPoison = appsettings.Quarantine
	if sum, err := run(settings); err != nil || sum.Rows != 3 || sum.DeadLettered != 2 || sum.Cursor == nil || string(sum.Cursor.Value) != "5" {
		t.Fatalf("quarantined tick: %+v %v", sum, err)
	}
	if got, want := append(order.messages(), payment.messages()...), []string{`events upsert {"id":1} #0`, `events upsert {"id":4} #0`, `events upsert {"id":3} #0`}; !slices.Equal(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
	letter, _, err := deadletter.Read(context.Background(), st, "test", "events", sum.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	var dead []string
	for _, r := range letter.Rows {
		dead = append(dead, string(r.Key["id"])+": "+r.Error)
	}
	if len(dead) != 2 || !strings.HasPrefix(dead[0], "2: ") || !strings.Contains(dead[0], named) ||
		!strings.HasPrefix(dead[1], "5: ") || !strings.Contains(dead[1], `route.column aggregate_type is NULL in the row with key {"id":5} of events, and the route has no default: add route.default`) {
		t.Errorf("the dead letter holds:\n%s", strings.Join(dead, "\n"))
	}
	if status := pollerstatus.Read(context.Background(), st, cfg, "events"); status.Blocked || status.DeadLetters.Count != 1 {
		t.Errorf("status after the quarantine: blocked %v, dead letters %+v", status.Blocked, status.DeadLetters)
	}
}

// TestRouteNamed: a route's sink that cannot be set up is named by its path; in an outbox, a row
// no sink takes is named by its event id too.
func TestRouteNamed(t *testing.T) {
	p := parsed(t, "events", routed(""))
	if err := pollertest.Setup(p, "ORDER_HOOK=https://example.com/order"); err == nil || !strings.HasPrefix(err.Error(), "route.sinks.payment: ") {
		t.Errorf("setup without PAYMENT_HOOK: %v", err)
	}
	outbox := strings.Replace(routed(""), `"route"`, `"outbox": {"id": "event_id", "aggregate_type": "aggregate_type", "aggregate_id": "aggregate_id", "payload": "body"}, "route"`, 1)
	order, payment := newHook(t), newHook(t)
	h := pollertest.New(t, parsed(t, "events", outbox), "ORDER_HOOK="+order.srv.URL, "PAYMENT_HOOK="+payment.srv.URL)
	if _, err := h.DB.Exec(`CREATE TABLE events (id INTEGER PRIMARY KEY, event_id TEXT NOT NULL, aggregate_type TEXT, aggregate_id TEXT NOT NULL, body TEXT NOT NULL);
		INSERT INTO events VALUES (1, 'e-1', 'order', 'o1', '{}'), (2, 'e-2', 'refund', 'r1', '{}')`); err != nil {
		t.Fatal(err)
	}
	if _, err := h.TickErr(); !errors.Is(err, ErrNoRoute) || !strings.Contains(err.Error(), `is "refund" in the row with key {"id":2} of events (event id "e-2")`) {
		t.Errorf("tick: %v", err)
	}
}
