package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/pollertest"
)

// outboxTable is the SQLite outbox the tests of this file read: TEXT and BLOB payloads, a
// headers column of JSON text.
const outboxTable = `CREATE TABLE outbox (seq INTEGER PRIMARY KEY, event_id TEXT, agg_type TEXT, agg_id TEXT,
	body TEXT, bin BLOB, etype TEXT, hdrs TEXT)`

// testOutbox is the outbox of outboxTable, its payload column payload.
func testOutbox(payload, contentType string) poller.Outbox {
	return poller.Outbox{ID: "event_id", AggregateType: "agg_type", AggregateID: "agg_id", Payload: payload,
		Type: "etype", Headers: "hdrs", ContentType: contentType}
}

// outboxBatches runs a poller over outboxTable, after the statements in sql, and returns the
// batches its handler got.
func outboxBatches(t *testing.T, o poller.Outbox, sql string) []*poller.Batch[poller.Row] {
	t.Helper()
	var batches []*poller.Batch[poller.Row]
	p := poller.New("obx", "outbox", poller.Integer, func(_ context.Context, b *poller.Batch[poller.Row]) error {
		batches = append(batches, b)
		return nil
	}, poller.WithColumns("seq"), poller.WithKey("seq"), poller.WithCursorColumn("seq"), poller.WithOutbox(o))
	h := pollertest.New(t, p)
	if _, err := h.DB.Exec(outboxTable + ";" + sql); err != nil {
		t.Fatal(err)
	}
	h.Tick()
	if len(batches) != 1 {
		t.Fatalf("%d batches", len(batches))
	}
	return batches
}

// TestOutboxMessages: each outbox row is sent as its event: its id the message id, its
// aggregate id the key (hashed past 128 characters), its payload the body byte for byte, its
// content type the outbox's or its column's, its headers and type among the properties.
func TestOutboxMessages(t *testing.T) {
	long := strings.Repeat("a", 200)
	b := outboxBatches(t, testOutbox("body", ""), `INSERT INTO outbox VALUES
		(1, 'e-1', 'order', 'o-7', 'plain text ☃', NULL, 'order.created', '{"tenant":"t1","n":3,"flag":true}'),
		(2, 'e-2', 'order', '`+long+`', 'x', NULL, NULL, NULL)`)[0]
	msgs, err := Messages(b, ModeRow)
	if err != nil {
		t.Fatal(err)
	}
	m := msgs[0]
	if m.ID != "e-1" || m.Key != "o-7" || string(m.Body) != "plain text ☃" || m.ContentType() != "text/plain; charset=utf-8" ||
		m.About() != "event e-1 (aggregate order o-7)" {
		t.Errorf("message %q key %q body %q type %q about %q", m.ID, m.Key, m.Body, m.ContentType(), m.About())
	}
	want := map[string]any{"poller": "obx", "aggregate_type": "order", "aggregate_id": "o-7", "type": "order.created",
		"tenant": "t1", "n": "3", "flag": "true"}
	if got := fmt.Sprint(m.Properties()); got != fmt.Sprint(want) {
		t.Errorf("properties %s, want %s", got, want)
	}
	m = msgs[1]
	if !strings.HasPrefix(m.Key, "sha256:") || len(m.Key) > maxKey || m.Properties()["aggregate_id"] != long {
		t.Errorf("a 200-character aggregate id: key %q, properties %v", m.Key, m.Properties())
	}
	if _, ok := m.Properties()["type"]; ok {
		t.Errorf("an event without a type has one: %v", m.Properties())
	}

	b = outboxBatches(t, testOutbox("bin", ""), `INSERT INTO outbox VALUES (1, 'e-1', 'order', 'o-7', NULL, x'00ff', NULL, NULL)`)[0]
	if msgs, err = Messages(b, ModeRow); err != nil || string(msgs[0].Body) != "\x00\xff" || msgs[0].ContentType() != "application/octet-stream" {
		t.Errorf("a BLOB payload: %q %q %v", msgs[0].Body, msgs[0].ContentType(), err)
	}
	b = outboxBatches(t, testOutbox("body", "application/vnd.acme+json"), `INSERT INTO outbox VALUES (1, 7, 'order', 9, ' {"a": [1, 2]} ', NULL, NULL, NULL)`)[0]
	if msgs, err = Messages(b, ModeRow); err != nil || string(msgs[0].Body) != ` {"a": [1, 2]} ` || msgs[0].ContentType() != "application/vnd.acme+json" ||
		msgs[0].ID != "7" || msgs[0].Key != "9" {
		t.Errorf("JSON text under a +json type, integer ids: %+v %v", msgs[0], err)
	}
	if batch, err := Messages(b, ModeBatch); err != nil || len(batch) != 1 || string(batch[0].Body) != string(msgs[0].Body) || batch[0].ID != "7" {
		t.Errorf("mode batch with an outbox renders the events as mode row does: %+v %v", batch, err)
	}
}

// TestOutboxPayloadKinds: a JSON column's value is application/json, and so is a payload given
// as JSON.
func TestOutboxPayloadKinds(t *testing.T) {
	for _, c := range []struct {
		v        any
		ct, want string
	}{
		{json.RawMessage(`{"a":1}`), "", "application/json"},
		{"x", "", "text/plain; charset=utf-8"},
		{[]byte{1}, "", "application/octet-stream"},
		{[]byte(`[1]`), "application/json; charset=utf-8", "application/json; charset=utf-8"},
	} {
		if _, ct, err := payload(c.v, c.ct); err != nil || ct != c.want {
			t.Errorf("payload(%#v, %q): %q, %v; want %q", c.v, c.ct, ct, err, c.want)
		}
	}
}

// TestOutboxBadEvents: a row that cannot be sent as its event fails the batch with
// ErrBadPayload, naming the event (or the row's key when its id is NULL) and the column, and
// quoting none of the payload.
func TestOutboxBadEvents(t *testing.T) {
	for _, c := range []struct {
		name, payload, contentType, row string
		want                            []string
	}{
		{"invalid JSON", "body", "application/json", `(1, 'e-1', 'order', 'o-1', '{"secret": "s3cr3t"', NULL, NULL, NULL)`,
			[]string{"event e-1 (aggregate order o-1)", "column body", "not valid JSON", "outbox.content_type"}},
		{"NULL payload", "body", "", `(1, 'e-1', 'order', 'o-1', NULL, NULL, NULL, NULL)`, []string{"event e-1", "column body", "NULL"}},
		{"NULL id", "body", "", `(1, NULL, 'order', 'o-1', 'x', NULL, NULL, NULL)`, []string{`the outbox row with key {"seq":1}`, "column event_id", "NULL"}},
		{"NULL aggregate id", "body", "", `(1, 'e-1', 'order', NULL, 'x', NULL, NULL, NULL)`, []string{"event e-1", "column agg_id", "NULL"}},
		{"headers an array", "body", "", `(1, 'e-1', 'order', 'o-1', 'x', NULL, NULL, '["s3cr3t"]')`, []string{"event e-1", "column hdrs", "not a JSON object"}},
		{"headers not JSON", "body", "", `(1, 'e-1', 'order', 'o-1', 'x', NULL, NULL, 's3cr3t')`, []string{"event e-1", "column hdrs", "not a JSON object"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := outboxBatches(t, testOutbox(c.payload, c.contentType), "INSERT INTO outbox VALUES "+c.row)[0]
			_, err := Messages(b, ModeRow)
			if !errors.Is(err, ErrBadPayload) {
				t.Fatalf("got %v, want ErrBadPayload", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("%q quotes the row", err)
			}
		})
	}
}

// TestOutboxServiceMessages: Service Bus and Event Hubs carry an event's id, session or
// partition key, content type, subject (its type) and properties, as their SDK messages.
func TestOutboxServiceMessages(t *testing.T) {
	b := outboxBatches(t, testOutbox("body", "application/json"), `INSERT INTO outbox VALUES
		(1, 'e-1', 'order', 'o-7', '{"total":3}', NULL, 'order.created', '{"tenant":"t1"}')`)[0]
	msgs, err := Messages(b, ModeRow)
	if err != nil {
		t.Fatal(err)
	}
	sb := sbMessage(msgs[0], true)
	if *sb.MessageID != "e-1" || *sb.SessionID != "o-7" || *sb.ContentType != "application/json" || *sb.Subject != "order.created" ||
		string(sb.Body) != `{"total":3}` || sb.ApplicationProperties["tenant"] != "t1" || sb.ApplicationProperties["aggregate_id"] != "o-7" {
		t.Errorf("Service Bus message %+v", sb)
	}
	eh := ehEvent(msgs[0])
	if *eh.MessageID != "e-1" || *eh.ContentType != "application/json" || string(eh.Body) != `{"total":3}` || eh.Properties["type"] != "order.created" {
		t.Errorf("event %+v", eh)
	}
	if n := 4; byPartition(msgs, n)[0][0].Key != "o-7" || partitionOf(msgs[0].Key, n) != partitionOf("o-7", n) {
		t.Error("the event's partition is not its aggregate's")
	}
}

// TestOutboxWebhook: the webhook POSTs an event's payload with its content type, its id as the
// Idempotency-Key, its headers as HTTP headers (the sink's own winning) and X-Fencing-Token.
func TestOutboxWebhook(t *testing.T) {
	var (
		mu  sync.Mutex
		got []*http.Request
		bod []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bod = append(got, r), append(bod, string(b))
		mu.Unlock()
	}))
	defer srv.Close()
	s := MustNew(Config{Type: Webhook, URL: srv.URL, Headers: map[string]string{"X-Api-Key": "k"}})
	if err := s.Setup(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	b := outboxBatches(t, testOutbox("body", ""), `INSERT INTO outbox VALUES
		(1, 'e-1', 'order', 'o-7', 'hello', NULL, NULL, '{"X-Tenant":"t1","X-Api-Key":"theirs","X-Count":2}')`)[0]
	if err := s.Send(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d requests", len(got))
	}
	for _, hs := range []string{`{"X Tenant":"t1"}`, `{"X-Tenant":"a\r\nX-Admin: 1"}`} {
		b := outboxBatches(t, testOutbox("body", ""), `INSERT INTO outbox VALUES (1, 'e-2', 'order', 'o-7', 'hello', NULL, NULL, '`+hs+`')`)[0]
		if err := s.Send(context.Background(), b); !errors.Is(err, ErrBadPayload) || !strings.Contains(err.Error(), "event e-2") || len(got) != 1 {
			t.Errorf("headers %s: %v (%d requests)", hs, err, len(got))
		}
	}
	h := got[0].Header
	if bod[0] != "hello" || h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("Idempotency-Key") != "e-1" ||
		h.Get("X-Tenant") != "t1" || h.Get("X-Count") != "2" || h.Get("X-Api-Key") != "k" || h.Get("X-Fencing-Token") == "" {
		t.Errorf("body %q headers %v", bod[0], h)
	}
}

// TestOutboxEventGrid: an event is a CloudEvent of its id, its type (else the sink's
// event_type), subject aggregate_type/aggregate_id, its payload as data (JSON as JSON, text as a
// string, bytes as data_base64) and its headers as extension attributes; a header no extension
// attribute can be named fails the batch with nothing sent.
func TestOutboxEventGrid(t *testing.T) {
	var events []map[string]any
	rec := newRecorder(t, true, func(r *http.Request, body []byte) []received {
		var evs []map[string]any
		if err := json.Unmarshal(body, &evs); err != nil {
			t.Error(err)
		}
		events = append(events, evs...)
		return nil
	})
	s := MustNew(Config{Type: EventGrid, Connection: "Topic", EventType: "acme.event"})
	s.client = azcore.ClientOptions{Transport: rec.srv.Client()}
	if err := s.Setup(func(k string) string {
		if k == "Topic" {
			return "Endpoint=" + rec.srv.URL + "/api/events;AccessKey=c2VjcmV0"
		}
		return ""
	}); err != nil {
		t.Fatal(err)
	}
	send := func(o poller.Outbox, row string) error {
		return s.Send(context.Background(), outboxBatches(t, o, "INSERT INTO outbox VALUES "+row)[0])
	}
	if err := send(testOutbox("body", "application/json"), `(1, 'e-1', 'order', 'o-7', '{"total":3}', NULL, 'order.created', '{"tenant":"t1"}')`); err != nil {
		t.Fatal(err)
	}
	if err := send(testOutbox("body", ""), `(1, 'e-2', 'order', 'o-7', 'hi', NULL, NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	if err := send(testOutbox("bin", ""), `(1, 'e-3', 'order', 'o-7', NULL, x'00ff', NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`map[data:map[total:3] datacontenttype:application/json id:e-1 source:/pseudotrigger/obx specversion:1.0 subject:order/o-7 tenant:t1 type:order.created]`,
		`map[data:hi datacontenttype:text/plain; charset=utf-8 id:e-2 source:/pseudotrigger/obx specversion:1.0 subject:order/o-7 type:acme.event]`,
		`map[data_base64:AP8= datacontenttype:application/octet-stream id:e-3 source:/pseudotrigger/obx specversion:1.0 subject:order/o-7 type:acme.event]`,
	}
	if len(events) != len(want) {
		t.Fatalf("%d events: %v", len(events), events)
	}
	for i, e := range events {
		delete(e, "time")
		if got := fmt.Sprint(e); got != want[i] {
			t.Errorf("event %d:\n got %s\nwant %s", i, got, want[i])
		}
	}
	for _, name := range []string{"Tenant", "x-tenant", "subject", "averyveryverylongname1"} {
		err := send(testOutbox("body", ""), `(1, 'e-4', 'order', 'o-7', 'hi', NULL, NULL, '{"`+name+`":"v"}')`)
		if !errors.Is(err, ErrBadPayload) || !strings.Contains(err.Error(), fmt.Sprintf("header %q", name)) || !strings.Contains(err.Error(), "event e-4") {
			t.Errorf("header %q: %v", name, err)
		}
	}
	if len(events) != len(want) {
		t.Errorf("events with bad headers were sent: %v", events[len(want):])
	}
}

// TestOutboxAggregateOrder is a consumer's test of the webhook's order per aggregate: a receiver
// that answers at an uneven pace records each aggregate's events as they arrive; 200
// aggregates' events, interleaved, in batches of 250 sent 16 at a time, arrive each aggregate's
// in the order they were written, in each batch and across batches.
func TestOutboxAggregateOrder(t *testing.T) {
	const aggregates, perAggregate = 200, 10
	var (
		mu      sync.Mutex
		arrived = map[string][]int{}
		busy    int // requests in flight
		most    int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Agg string `json:"agg"`
			N   int    `json:"n"`
		}
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		busy++
		most = max(most, busy)
		mu.Unlock()
		for range rand.IntN(200) { // an uneven pace: requests overtake each other
			runtime.Gosched()
		}
		mu.Lock()
		busy--
		arrived[ev.Agg] = append(arrived[ev.Agg], ev.N)
		mu.Unlock()
	}))
	defer srv.Close()
	s := MustNew(Config{Type: Webhook, URL: srv.URL, Concurrency: 16})
	p := poller.New("order-test", "outbox", poller.Integer, Handler[poller.Row](s),
		poller.WithColumns("seq"), poller.WithKey("seq"), poller.WithCursorColumn("seq"), poller.WithSetup(s.Setup),
		poller.WithOutbox(testOutbox("body", "application/json")))
	h := pollertest.New(t, p, "ORDER_TEST_BATCH_SIZE=250")
	if _, err := h.DB.Exec(outboxTable); err != nil {
		t.Fatal(err)
	}
	tx, err := h.DB.Begin()
	if err != nil {
		t.Fatal(err)
	}
	seq := 0
	for n := range perAggregate {
		for _, a := range rand.Perm(aggregates) { // every aggregate's n-th event, the aggregates shuffled
			seq++
			agg := fmt.Sprintf("a%d", a)
			if _, err := tx.Exec(`INSERT INTO outbox (seq, event_id, agg_type, agg_id, body) VALUES (?, ?, 'order', ?, ?)`,
				seq, fmt.Sprintf("e%d", seq), agg, fmt.Sprintf(`{"agg":%q,"n":%d}`, agg, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rows, batches := 0, 0
	for r := h.Tick(); r.Rows > 0; r = h.Tick() {
		rows, batches = rows+r.Rows, batches+r.Batches
	}
	if rows != aggregates*perAggregate || batches < aggregates*perAggregate/250 {
		t.Fatalf("%d rows in %d batches", rows, batches)
	}
	if len(arrived) != aggregates {
		t.Fatalf("events of %d aggregates arrived, want %d", len(arrived), aggregates)
	}
	for agg, ns := range arrived {
		for i, n := range ns {
			if n != i {
				t.Fatalf("aggregate %s: events arrived in the order %v", agg, ns)
			}
		}
		if len(ns) != perAggregate {
			t.Errorf("aggregate %s: %d events, want %d", agg, len(ns), perAggregate)
		}
	}
	if most < 2 {
		t.Errorf("at most %d requests at a time: the aggregates were not sent concurrently", most)
	}
}
