package sink_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/panictb"
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/pollers/orders"
	"github.com/pseudotrigger/pseudotrigger/pollertest"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// The examples that need rows read them with package pollertest (an SQLite table, an in-memory
// state store); panictb.New stands in for the *testing.T an Example lacks.

// A poller whose handler is a sink: every change of orders goes to a webhook, one POST per row,
// the change as JSON. Idempotency-Key is the message id (the same for the same change, however
// often it is sent) and X-Fencing-Token the lease's token; the URL and any header value may name
// an app setting as %NAME%, which Setup (run by poller.WithSetup) resolves.
func ExampleHandler() {
	var (
		mu       sync.Mutex
		received []string
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var c sink.Change
		if err := json.Unmarshal(body, &c); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest) // any non-2xx fails the batch
			return
		}
		mu.Lock()
		defer mu.Unlock()
		received = append(received, fmt.Sprintf("%s %s\n  Content-Type: %s\n  Idempotency-Key: %s\n  X-Fencing-Token: %s\n  X-Api-Key: %s\n  %s",
			r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Idempotency-Key"), r.Header.Get("X-Fencing-Token"),
			r.Header.Get("X-Api-Key"), strings.Replace(string(body), c.BatchID, "<batch id>", 1)))
	}))
	defer hook.Close()

	s := sink.MustNew(sink.Config{Type: sink.Webhook, URL: "%ORDERS_HOOK_URL%/changes",
		Headers: map[string]string{"X-Api-Key": "%ORDERS_HOOK_KEY%"}})
	p := poller.New("orders-hook", "orders", poller.TimestampPK, sink.Handler[orders.Order](s),
		poller.WithSetup(s.Setup), poller.WithTarget(s.String))

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p, "ORDERS_HOOK_URL="+hook.URL, "ORDERS_HOOK_KEY=k1")
	h.Insert(
		orders.Order{ID: 1, Customer: "ada", Amount: "9.50", UpdatedAt: time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)},
		orders.Order{ID: 2, Customer: "grace", Amount: "1.00", UpdatedAt: time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)},
	)
	h.Tick()
	slices.Sort(received) // a batch's rows are POSTed concurrently
	for _, r := range received {
		fmt.Println(r)
	}
	// Output:
	// POST /changes
	//   Content-Type: application/json
	//   Idempotency-Key: 72a68517e55e936786772be8be485d06
	//   X-Fencing-Token: 1
	//   X-Api-Key: k1
	//   {"id":"72a68517e55e936786772be8be485d06","poller":"orders-hook","table":"orders","op":"upsert","key":{"id":1},"row":{"id":1,"customer":"ada","amount":"9.50","updated_at":"2025-01-01T09:00:00.000000Z"},"cursor":{"kind":"timestamp+pk","value":"2025-01-01T09:00:00.000000Z","tiebreaker":{"id":1}},"batch_id":"<batch id>","fencing_token":1,"attempt":1}
	// POST /changes
	//   Content-Type: application/json
	//   Idempotency-Key: b3982d05f7c7241e8515f16f8a420721
	//   X-Fencing-Token: 1
	//   X-Api-Key: k1
	//   {"id":"b3982d05f7c7241e8515f16f8a420721","poller":"orders-hook","table":"orders","op":"upsert","key":{"id":2},"row":{"id":2,"customer":"grace","amount":"1.00","updated_at":"2025-01-01T10:00:00.000000Z"},"cursor":{"kind":"timestamp+pk","value":"2025-01-01T10:00:00.000000Z","tiebreaker":{"id":2}},"batch_id":"<batch id>","fencing_token":1,"attempt":1}
}

// Messages renders a batch as a sink sends it: one JSON message per row, a Change. Its id comes
// from the poller's name, the row's key and its cursor value only, so a batch sent again sends
// the same ids; Key is the row's key as text (the Service Bus session id with sessions: true,
// the Event Hubs partition key).
func ExampleMessages() {
	p := poller.New("orders", "orders", poller.TimestampPK,
		func(ctx context.Context, b *poller.Batch[poller.Row]) error {
			msgs, err := sink.Messages(b, sink.ModeRow)
			if err != nil {
				return err
			}
			for _, m := range msgs {
				fmt.Println("id:", m.ID, "key:", m.Key, "op:", m.Op)
				fmt.Println(strings.Replace(string(m.Body), b.ID, "<b.ID>", 1))
			}
			return nil
		}, poller.WithColumns("id", "customer", "amount", "updated_at"), poller.WithKey("id"), poller.WithCursorColumn("updated_at"))

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p)
	h.Insert(orders.Order{ID: 1, Customer: "ada", Amount: "9.50", UpdatedAt: time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)})
	h.Tick()
	// Output:
	// id: a64b1ad95059eccc9cd07fb139fd1848 key: 1 op: upsert
	// {"id":"a64b1ad95059eccc9cd07fb139fd1848","poller":"orders","table":"orders","op":"upsert","key":{"id":1},"row":{"id":1,"customer":"ada","amount":"9.50","updated_at":"2025-01-01T09:00:00.000000Z"},"cursor":{"kind":"timestamp+pk","value":"2025-01-01T09:00:00.000000Z","tiebreaker":{"id":1}},"batch_id":"<b.ID>","fencing_token":1,"attempt":1}
}

// In batch mode (Config.Mode "batch") a batch is one message, a Batch holding the rows' Changes;
// its id is the batch's ID.
func ExampleMessages_batch() {
	p := poller.New("events", "events", poller.Integer,
		func(ctx context.Context, b *poller.Batch[poller.Row]) error {
			msgs, err := sink.Messages(b, sink.ModeBatch)
			if err != nil {
				return err
			}
			m := msgs[0]
			fmt.Println(len(msgs), "message, id is the batch's:", m.ID == b.ID, "op:", m.Op)
			fmt.Println(strings.ReplaceAll(string(m.Body), b.ID, "<b.ID>"))
			return nil
		}, poller.WithColumns("seq", "what"), poller.WithKey("seq"), poller.WithCursorColumn("seq"))

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p)
	type Event struct {
		Seq  int64  `db:"seq"`
		What string `db:"what"`
	}
	h.Insert(Event{1, "created"}, Event{2, "paid"})
	h.Tick()
	// Output:
	// 1 message, id is the batch's: true op: batch
	// {"poller":"events","batch_id":"<b.ID>","fencing_token":1,"attempt":1,"changes":[{"id":"df50e0b5145df514512100c8a5339ee3","poller":"events","table":"events","op":"upsert","key":{"seq":1},"row":{"seq":1,"what":"created"},"cursor":{"kind":"integer","value":1},"batch_id":"<b.ID>","fencing_token":1,"attempt":1},{"id":"f0a063df645f9c3c3037f12113db393f","poller":"events","table":"events","op":"upsert","key":{"seq":2},"row":{"seq":2,"what":"paid"},"cursor":{"kind":"integer","value":2},"batch_id":"<b.ID>","fencing_token":1,"attempt":1}]}
}

// ChangeID is a change's message id: 32 hex digits of SHA-256 over the poller's name, the row's
// key as JSON and its cursor value as the checkpoint records it. Another change of the same row
// has another cursor value, hence another id. A consumer deduplicates on it. The first id is the
// one ExampleMessages's row gets.
func ExampleChangeID() {
	fmt.Println(sink.ChangeID("orders", []byte(`{"id":1}`), []byte(`"2025-01-01T09:00:00.000000Z"`)))
	fmt.Println(sink.ChangeID("orders", []byte(`{"id":1}`), []byte(`"2025-01-01T09:30:00.000000Z"`)))
	// Output:
	// a64b1ad95059eccc9cd07fb139fd1848
	// 2a0981b35e4072bca6733ad8a1aa1067
}

// A Config is poller.json's "sink" object, field for field: the same sink in Go and as a
// declared poller writes it.
func ExampleConfig() {
	cfg := sink.Config{Type: sink.ServiceBus, Connection: "Bus", Topic: "orders", Sessions: true}
	j, _ := json.Marshal(cfg)
	fmt.Println(string(j))

	var fromJSON sink.Config
	_ = json.Unmarshal([]byte(`{"type": "storagequeue", "connection": "ChangesQueue", "queue": "orders-changes"}`), &fromJSON)
	_, err := sink.New(fromJSON)
	fmt.Println(fromJSON.Type, fromJSON.Connection, fromJSON.Queue, err)
	// Output:
	// {"type":"servicebus","connection":"Bus","topic":"orders","sessions":true}
	// storagequeue ChangesQueue orders-changes <nil>
}

// New checks a definition without connecting: its errors wrap ErrConfig and name the field as
// poller.json spells it.
func ExampleNew() {
	for _, cfg := range []sink.Config{
		{Type: sink.StorageQueue, Connection: "ChangesQueue", Queue: "Orders_Changes"},
		{Type: sink.EventHubs, Connection: "Hub", Queue: "orders"},
		{Type: sink.Webhook, URL: "ftp://example.com/orders"},
	} {
		_, err := sink.New(cfg)
		fmt.Println(errors.Is(err, sink.ErrConfig), err)
	}
	// Output:
	// true bad sink definition: sink.queue: "Orders_Changes" is not a storage queue name (3-63 lower-case letters, digits and single hyphens)
	// true bad sink definition: sink.queue: is not an option of a eventhubs sink (its options: connection, hub)
	// true bad sink definition: sink.url: is not an http(s) URL
}

// Setup resolves a sink's connection from the app settings, as a Functions binding's connection
// resolves: X (a connection string) or, identity based, X__fullyQualifiedNamespace,
// X__queueServiceUri or X__topicEndpointUri with X__credential and X__clientId. It creates the
// client and sends nothing; String (poller.WithTarget's line at start-up) shows no secret.
func ExampleSink_Setup() {
	settings := map[string]string{
		"Bus__fullyQualifiedNamespace": "sb-shop.servicebus.windows.net",
		"Bus__credential":              "managedidentity",
		"Bus__clientId":                "00000000-0000-0000-0000-000000000001",
		"Hub__fullyQualifiedNamespace": "evhns-shop.servicebus.windows.net",
		"Hub__credential":              "managedidentity",
		"Grid__topicEndpointUri":       "https://evgt-orders.westeurope-1.eventgrid.azure.net/api/events",
		"Grid__credential":             "managedidentity",
		"ChangesQueue":                 "UseDevelopmentStorage=true",
	}
	for _, cfg := range []sink.Config{
		{Type: sink.ServiceBus, Connection: "Bus", Topic: "orders", Sessions: true},
		{Type: sink.EventHubs, Connection: "Hub", Hub: "orders"},
		{Type: sink.EventGrid, Connection: "Grid"},
		{Type: sink.StorageQueue, Connection: "ChangesQueue", Queue: "orders-changes"},
	} {
		s := sink.MustNew(cfg)
		if err := s.Setup(func(name string) string { return settings[name] }); err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(s)
		_ = s.Close(context.Background())
	}
	// Output:
	// Service Bus topic orders (Bus__fullyQualifiedNamespace: sb-shop.servicebus.windows.net with managed identity 00000000-0000-0000-0000-000000000001)
	// event hub orders (Hub__fullyQualifiedNamespace: evhns-shop.servicebus.windows.net with system-assigned managed identity)
	// Event Grid topic (Grid__topicEndpointUri: https://evgt-orders.westeurope-1.eventgrid.azure.net/api/events with system-assigned managed identity)
	// queue orders-changes (ChangesQueue: connection string UseDevelopmentStorage=true)
}

// A message larger than its service takes fails the batch before anything of it is sent, with
// an error that wraps ErrTooLarge and names the row's key: a storage queue message is at most
// 64 KiB after base64. The batch comes again; the status shows the error.
func ExampleErrTooLarge() {
	type Note struct {
		ID   int64  `db:"id,key,cursor"`
		Text string `db:"text"`
	}
	s := sink.MustNew(sink.Config{Type: sink.StorageQueue, Connection: "ChangesQueue", Queue: "notes"})
	p := poller.New("notes", "notes", poller.Integer, sink.Handler[Note](s), poller.WithSetup(s.Setup))

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p, "ChangesQueue=UseDevelopmentStorage=true")
	h.Insert(Note{ID: 7, Text: strings.Repeat("x", 60<<10)})
	_, err := h.TickErr()
	fmt.Println(errors.Is(err, sink.ErrTooLarge))
	_, why, _ := strings.Cut(err.Error(), "): ") // after "batch failed: batch <id> (attempt 1, ...)"
	fmt.Println(why)
	// Output:
	// true
	// sink storagequeue: message too large: the row with key {"id":7} is 61680 bytes as a message, over the 49152 the service takes; nothing of the batch was sent
}
