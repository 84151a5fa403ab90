package pollertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/panictb"
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/pollers/orders"
	"github.com/pseudotrigger/pseudotrigger/pollertest"
)

// An Example has no *testing.T: panictb.New stands in for it (a failure panics). In a test,
// pass the test's own t: pollertest.New(t, orders.New()).

// A poller's test: seed rows, run a tick as the timer would, and check what the handler
// accepted. The rows come back in cursor order, (updated_at, id); a second tick finds nothing.
func Example() {
	t := panictb.New()
	defer t.Close()

	h := pollertest.New(t, orders.New())
	h.Insert(
		orders.Order{ID: 2, Customer: "grace", Amount: "1.00", UpdatedAt: time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)},
		orders.Order{ID: 1, Customer: "ada", Amount: "9.50", UpdatedAt: time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)},
	)
	r := h.Tick()
	fmt.Println(r.Outcome, r.Rows, "rows")
	for _, o := range pollertest.Rows[orders.Order](h) {
		fmt.Println(o.ID, o.Customer, o.Amount)
	}
	fmt.Println(h.Tick().Outcome)
	// Output:
	// committed 2 rows
	// 1 ada 9.50
	// 2 grace 1.00
	// idle
}

// New's settings are the app settings the poller runs with: its own (ORDERS_WEBHOOK_URL) and the
// tuning every poller reads ({P}_BATCH_SIZE, ...). Here the orders poller POSTs each batch of one
// row to a webhook in the test.
func ExampleNew() {
	var posts []orders.Payload
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p orders.Payload
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil || r.Header.Get("Idempotency-Key") != p.BatchID {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		posts = append(posts, p)
	}))
	defer hook.Close()

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, orders.New(), "ORDERS_WEBHOOK_URL="+hook.URL, "ORDERS_BATCH_SIZE=1")
	h.Insert(
		orders.Order{ID: 1, Customer: "ada", Amount: "9.50", UpdatedAt: time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)},
		orders.Order{ID: 2, Customer: "grace", Amount: "1.00", UpdatedAt: time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)},
	)
	h.Tick()
	for _, p := range posts {
		fmt.Printf("attempt %d, token %d: %+v\n", p.Attempt, p.FencingToken, p.Rows)
	}
	// Output:
	// attempt 1, token 1: [{ID:1 Customer:ada Amount:9.50 UpdatedAt:2025-01-01 09:00:00 +0000 UTC}]
	// attempt 1, token 1: [{ID:2 Customer:grace Amount:1.00 UpdatedAt:2025-01-01 10:00:00 +0000 UTC}]
}

// A handler that fails leaves its batch uncommitted. TickErr returns the error instead of failing
// the test; Deliveries records every batch handed over, with what the handler returned: the next
// tick delivers the same batch (same ID) as attempt 2.
func ExampleHarness_TickErr() {
	type Event struct {
		Seq int64 `db:"seq,key,cursor"`
	}
	errDown := errors.New("sink down")
	down := true
	p := poller.New("events", "events", poller.Integer, func(ctx context.Context, b *poller.Batch[Event]) error {
		if down {
			return errDown
		}
		return nil
	})

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p)
	h.Insert(Event{1}, Event{2})
	_, err := h.TickErr()
	fmt.Println("tick 1 failed with the handler's error:", errors.Is(err, errDown))
	down = false
	fmt.Println("tick 2:", h.Tick().Outcome)
	deliveries := h.Deliveries()
	for _, d := range deliveries {
		fmt.Printf("attempt %d: %d rows, error %v\n", d.Batch.Attempt, len(d.Batch.Rows), d.Err)
	}
	fmt.Println("same batch:", deliveries[0].Batch.ID == deliveries[1].Batch.ID)
	// Output:
	// tick 1 failed with the handler's error: true
	// tick 2: committed
	// attempt 1: 2 rows, error sink down
	// attempt 2: 2 rows, error <nil>
	// same batch: true
}

// Each tick's Result says what it did and where the checkpoint is after it: the cursor of the
// last row committed. An idle tick leaves it where it was.
func ExampleHarness_Tick() {
	type Event struct {
		Seq  int64     `db:"seq,key"`
		When time.Time `db:"at,cursor"`
	}
	p := poller.New("events", "events", poller.TimestampPK, func(ctx context.Context, b *poller.Batch[Event]) error { return nil })

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p)
	checkpoint := func(r pollertest.Result) {
		c, _ := json.Marshal(r.Cursor)
		fmt.Printf("%s, %d rows: %s\n", r.Outcome, r.Rows, c)
	}
	h.Insert(Event{1, time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)}, Event{2, time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)})
	checkpoint(h.Tick())
	h.Insert(Event{3, time.Date(2025, 1, 1, 9, 5, 0, 0, time.UTC)})
	checkpoint(h.Tick())
	checkpoint(h.Tick())
	// Output:
	// committed, 2 rows: {"kind":"timestamp+pk","value":"2025-01-01T09:00:00.000000Z","tiebreaker":{"seq":2}}
	// committed, 1 rows: {"kind":"timestamp+pk","value":"2025-01-01T09:05:00.000000Z","tiebreaker":{"seq":3}}
	// idle, 0 rows: {"kind":"timestamp+pk","value":"2025-01-01T09:05:00.000000Z","tiebreaker":{"seq":3}}
}

// Sample makes a row of any type from a number, its values increasing with it: a test that
// inserts samples out of order and expects them back in order keeps passing when the row type's
// columns change (the test `pollerctl new` writes does this).
func ExampleSample() {
	type Shipment struct {
		ID        int64     `db:"id,key"`
		Carrier   string    `db:"carrier"`
		Weight    float64   `db:"weight"`
		UpdatedAt time.Time `db:"updated_at,cursor"`
	}
	p := poller.New("shipments", "shipments", poller.TimestampPK, func(ctx context.Context, b *poller.Batch[Shipment]) error { return nil })

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p)
	h.Insert(pollertest.Sample[Shipment](3), pollertest.Sample[Shipment](1), pollertest.Sample[Shipment](2))
	h.Tick()
	for _, s := range pollertest.Rows[Shipment](h) {
		fmt.Printf("%+v\n", s)
	}
	// Output:
	// {ID:1 Carrier:1 Weight:1 UpdatedAt:2025-01-01 00:00:01 +0000 UTC}
	// {ID:2 Carrier:2 Weight:2 UpdatedAt:2025-01-01 00:00:02 +0000 UTC}
	// {ID:3 Carrier:3 Weight:3 UpdatedAt:2025-01-01 00:00:03 +0000 UTC}
}

// Setup runs a poller's setup with the given app settings and returns its error: a test of the
// poller's own settings, without a database.
func ExampleSetup() {
	fmt.Println(pollertest.Setup(orders.New(), "ORDERS_WEBHOOK_URL=ftp://example.com"))
	fmt.Println(pollertest.Setup(orders.New(), "ORDERS_WEBHOOK_URL=https://example.com/orders"))
	// Output:
	// ORDERS_WEBHOOK_URL: "ftp://example.com" is not an http(s) URL
	// <nil>
}
