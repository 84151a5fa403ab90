package poller_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/panictb"
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/pollertest"
)

// The examples run real ticks with package pollertest (an SQLite table in a temporary folder, an
// in-memory state store, a fake clock), as a poller's own test does. An Example has no
// *testing.T: panictb.New stands in for it; in a test, pass the test's t.

// A poller is a table, a row type, a cursor kind and a handler. The row type's db tags name the
// columns; the options key and cursor mark the key and the cursor column. The handler gets the
// rows in cursor order, here (updated_at, id): id breaks the tie between 2 and 3.
func ExampleNew() {
	type Order struct {
		ID        int64     `db:"id,key"`
		Customer  string    `db:"customer"`
		UpdatedAt time.Time `db:"updated_at,cursor"`
	}
	p := poller.New("orders", "orders", poller.TimestampPK,
		func(ctx context.Context, b *poller.Batch[Order]) error {
			for _, o := range b.Rows {
				fmt.Println(o.ID, o.Customer, o.UpdatedAt.Format(time.DateTime))
			}
			return nil // committed: the checkpoint moves past these rows
		})

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p)
	at := func(hour int) time.Time { return time.Date(2025, 1, 1, hour, 0, 0, 0, time.UTC) }
	h.Insert(
		Order{ID: 3, Customer: "alan", UpdatedAt: at(10)},
		Order{ID: 1, Customer: "ada", UpdatedAt: at(9)},
		Order{ID: 2, Customer: "grace", UpdatedAt: at(10)},
	)
	h.Tick()
	// Output:
	// 1 ada 2025-01-01 09:00:00
	// 2 grace 2025-01-01 10:00:00
	// 3 alan 2025-01-01 10:00:00
}

// A handler that returns an error (or panics) leaves its batch uncommitted: the next tick hands
// over the same rows again, with the same ID and Attempt + 1. Make what the handler does
// idempotent, keyed on each row's key and cursor value (the batch ID is only a first check: a
// row changed in between makes the retry another batch).
func ExampleNew_failedBatch() {
	type Event struct {
		Seq  int64  `db:"seq,key,cursor"`
		What string `db:"what"`
	}
	var firstID string
	p := poller.New("events", "events", poller.Integer,
		func(ctx context.Context, b *poller.Batch[Event]) error {
			if b.Attempt == 1 {
				firstID = b.ID
				return errors.New("the downstream service is down")
			}
			fmt.Printf("attempt %d, same batch: %v, %d rows\n", b.Attempt, b.ID == firstID, len(b.Rows))
			return nil
		})

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p)
	h.Insert(Event{Seq: 1, What: "created"}, Event{Seq: 2, What: "paid"})
	_, err := h.TickErr()
	fmt.Println("first tick:", err != nil)
	h.Tick()
	// Output:
	// first tick: true
	// attempt 2, same batch: true, 2 rows
}

// A Batch carries, beside the rows, what a sink needs: an ID that stays the same on every
// redelivery, the lease's fencing token, the attempt, and the cursor range (From, To). Rows are
// decoded into the poller's row type; Raw are the same rows untyped.
func ExampleBatch() {
	type Event struct {
		Seq  int64  `db:"seq,key,cursor"`
		What string `db:"what"`
	}
	p := poller.New("events", "events", poller.Integer,
		func(ctx context.Context, b *poller.Batch[Event]) error {
			from, _ := json.Marshal(b.From)
			to, _ := json.Marshal(b.To)
			fmt.Println("poller:", b.Poller)
			fmt.Println("id:", strings.HasPrefix(b.ID, "batch_"), "fencing token:", b.FencingToken, "attempt:", b.Attempt)
			fmt.Printf("from %s to %s\n", from, to)
			fmt.Println("rows:", len(b.Rows), "first:", b.Rows[0].What, b.Raw[0].Get("what"))
			return nil
		}, poller.WithBatchSize(2))

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p)
	h.Insert(Event{Seq: 1, What: "created"}, Event{Seq: 2, What: "paid"}, Event{Seq: 3, What: "shipped"})
	h.Tick() // two batches: 1-2, then 3 (From is the first batch's To)
	// Output:
	// poller: events
	// id: true fencing token: 1 attempt: 1
	// from null to {"kind":"integer","value":2}
	// rows: 2 first: created created
	// poller: events
	// id: true fencing token: 1 attempt: 1
	// from {"kind":"integer","value":2} to {"kind":"integer","value":3}
	// rows: 1 first: shipped shipped
}

// A poller of poller.Row (untyped) names its columns, key and cursor column with options. A Row
// reads values by column name, normalized (integers int64, text string, NULL nil). A keyset
// cursor cannot tell an insert from an update, nor see a delete: Op is "upsert".
func ExampleRow() {
	p := poller.New("events", "events", poller.Integer,
		func(ctx context.Context, b *poller.Batch[poller.Row]) error {
			for _, r := range b.Rows {
				fmt.Println(r.Op(), r.Key(), r.Get("what"), r.Get("note"), r.Values())
			}
			return nil
		},
		poller.WithColumns("seq", "what", "note"), poller.WithKey("seq"), poller.WithCursorColumn("seq"))

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p)
	if _, err := h.DB.Exec(`CREATE TABLE events (seq INTEGER PRIMARY KEY, what TEXT NOT NULL, note TEXT);
		INSERT INTO events VALUES (1, 'created', NULL), (2, 'paid', 'by card')`); err != nil {
		panic(err)
	}
	h.Tick()
	// Output:
	// upsert map[seq:1] created <nil> [1 created <nil>]
	// upsert map[seq:2] paid by card [2 paid by card]
}

// Decode copies a row into a struct, converting as database/sql's Scan would: a field takes the
// column its db tag names, else the column named like the field (ignoring case); here the
// decimal text "9.50" becomes a float64 and the timestamp text a time.Time.
func ExampleRow_Decode() {
	type Summary struct {
		ID     int64
		Amount float64
		When   time.Time `db:"updated_at"`
	}
	p := poller.New("orders", "orders", poller.TimestampPK,
		func(ctx context.Context, b *poller.Batch[poller.Row]) error {
			for _, r := range b.Raw {
				var s Summary
				if err := r.Decode(&s); err != nil {
					return err // fails the batch: it comes again
				}
				fmt.Printf("%+v\n", s)
			}
			return nil
		},
		poller.WithColumns("id", "customer", "amount", "updated_at"), poller.WithKey("id"), poller.WithCursorColumn("updated_at"))

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p)
	if _, err := h.DB.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, amount TEXT, updated_at TEXT);
		INSERT INTO orders VALUES (1, 'ada', '9.50', '2025-01-01T09:00:00.000000Z')`); err != nil {
		panic(err)
	}
	h.Tick()
	// Output:
	// {ID:1 Amount:9.5 When:2025-01-01 09:00:00 +0000 UTC}
}

// MarshalJSON (json.Marshal of a Row) renders the row as an object in column order: timestamps
// RFC 3339 in UTC at full precision, NULL null, binary base64. It is the "row" of a sink's
// message.
func ExampleRow_MarshalJSON() {
	type Order struct {
		ID        int64     `db:"id,key"`
		Customer  string    `db:"customer"`
		Note      *string   `db:"note"`
		UpdatedAt time.Time `db:"updated_at,cursor"`
	}
	p := poller.New("orders", "orders", poller.TimestampPK,
		func(ctx context.Context, b *poller.Batch[Order]) error {
			for _, r := range b.Raw {
				j, err := json.Marshal(r)
				if err != nil {
					return err
				}
				fmt.Println(string(j))
			}
			return nil
		})

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p)
	h.Insert(Order{ID: 1, Customer: "ada", UpdatedAt: time.Date(2025, 1, 1, 9, 0, 0, 123456000, time.UTC)})
	h.Tick()
	// Output:
	// {"id":1,"customer":"ada","note":null,"updated_at":"2025-01-01T09:00:00.123456Z"}
}

// A Cursor is a position in the table: what the checkpoint records after a batch. A TimestampPK
// cursor holds the timestamp and the key as tiebreaker; Time reads the timestamp, e.g. to see
// how far behind the poller is.
func ExampleCursor() {
	type Order struct {
		ID        int64     `db:"id,key"`
		UpdatedAt time.Time `db:"updated_at,cursor"`
	}
	p := poller.New("orders", "orders", poller.TimestampPK,
		func(ctx context.Context, b *poller.Batch[Order]) error { return nil })

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p)
	h.Insert(Order{ID: 7, UpdatedAt: time.Date(2025, 1, 1, 9, 30, 0, 0, time.UTC)})
	checkpoint := h.Tick().Cursor
	j, _ := json.Marshal(checkpoint)
	fmt.Println(string(j))
	ts, ok := checkpoint.Time()
	fmt.Println(ts, ok)
	// Output:
	// {"kind":"timestamp+pk","value":"2025-01-01T09:30:00.000000Z","tiebreaker":{"id":7}}
	// 2025-01-01 09:30:00 +0000 UTC true
}

// The cursor kinds, as a poller.json's source.cursor.kind spells them. TimestampPK and Integer
// run on every database; RowVersion and ChangeTracking on SQL Server; XID and Logical on
// PostgreSQL. The change streams (Logical, ChangeTracking) also deliver deletes and take no
// cursor column: name the columns and the key instead.
func ExampleCursorKind() {
	for _, k := range []poller.CursorKind{poller.TimestampPK, poller.Integer, poller.RowVersion, poller.XID, poller.Logical, poller.ChangeTracking} {
		fmt.Println(k)
	}
	cdc := poller.New("orders-cdc", "orders", poller.Logical,
		func(ctx context.Context, b *poller.Batch[poller.Row]) error {
			for _, r := range b.Raw {
				fmt.Println(r.Op(), r.Key()) // insert, update or delete
			}
			return nil
		},
		poller.WithColumns("id", "customer", "amount"), poller.WithKey("id"))
	fmt.Println(cdc.Name())
	// Output:
	// timestamp+pk
	// integer
	// rowversion
	// xid
	// logical
	// changetracking
	// orders-cdc
}

// WithBatchSize is the poller's default for {P}_BATCH_SIZE, the rows per batch; one tick takes
// batches until it has caught up (or its budget is spent). The app setting overrides it.
func ExampleWithBatchSize() {
	type Event struct {
		Seq int64 `db:"seq,key,cursor"`
	}
	p := poller.New("events", "events", poller.Integer,
		func(ctx context.Context, b *poller.Batch[Event]) error {
			fmt.Println("batch of", len(b.Rows))
			return nil
		}, poller.WithBatchSize(2))

	t := panictb.New()
	defer t.Close()
	for _, settings := range [][]string{nil, {"EVENTS_BATCH_SIZE=4"}} {
		fmt.Println("settings:", settings)
		h := pollertest.New(t, p, settings...)
		h.Insert(Event{1}, Event{2}, Event{3}, Event{4}, Event{5})
		r := h.Tick()
		fmt.Printf("%s: %d rows in %d batches\n", r.Outcome, r.Rows, r.Batches)
	}
	// Output:
	// settings: []
	// batch of 2
	// batch of 2
	// batch of 1
	// committed: 5 rows in 3 batches
	// settings: [EVENTS_BATCH_SIZE=4]
	// batch of 4
	// batch of 1
	// committed: 5 rows in 2 batches
}

// WithSettleLag (the default for {P}_SETTLE_LAG) makes a TimestampPK poller read only rows older
// than the database's clock minus the lag, so that a transaction that took its timestamp before
// another's but commits after it is not skipped. The row written just now waits.
func ExampleWithSettleLag() {
	type Order struct {
		ID        int64     `db:"id,key"`
		UpdatedAt time.Time `db:"updated_at,cursor"`
	}
	p := poller.New("orders", "orders", poller.TimestampPK,
		func(ctx context.Context, b *poller.Batch[Order]) error {
			for _, o := range b.Rows {
				fmt.Println("order", o.ID)
			}
			return nil
		}, poller.WithSettleLag(time.Minute))

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p)
	h.Insert(Order{ID: 1, UpdatedAt: time.Now().Add(-time.Hour)}, Order{ID: 2, UpdatedAt: time.Now()})
	fmt.Println(h.Tick().Rows, "row delivered")
	// Output:
	// order 1
	// 1 row delivered
}

// WithFilter adds SQL of your own, ANDed with the cursor's predicate: rows it excludes are never
// delivered, and the checkpoint still moves past them.
func ExampleWithFilter() {
	type Order struct {
		ID     int64  `db:"id,key,cursor"`
		Status string `db:"status"`
	}
	p := poller.New("orders", "orders", poller.Integer,
		func(ctx context.Context, b *poller.Batch[Order]) error {
			for _, o := range b.Rows {
				fmt.Println(o.ID, o.Status)
			}
			return nil
		}, poller.WithFilter(`status <> 'draft'`))

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p)
	h.Insert(Order{1, "paid"}, Order{2, "draft"}, Order{3, "shipped"})
	h.Tick()
	// Output:
	// 1 paid
	// 3 shipped
}

// WithSetup runs once per process, before the poller's first tick, with the app settings: read
// the poller's own settings there. Its error fails the poller's invocations and names the
// problem; pollertest.Setup tests it.
func ExampleWithSetup() {
	type Alert struct {
		ID      int64  `db:"id,key,cursor"`
		Message string `db:"message"`
	}
	var channel string
	p := poller.New("alerts", "alerts", poller.Integer,
		func(ctx context.Context, b *poller.Batch[Alert]) error {
			for _, a := range b.Rows {
				fmt.Println(channel+":", a.Message)
			}
			return nil
		},
		poller.WithSetup(func(getenv func(string) string) error {
			if channel = getenv("ALERTS_CHANNEL"); channel == "" {
				return errors.New("ALERTS_CHANNEL is not set: the channel the alerts go to")
			}
			return nil
		}))

	fmt.Println(pollertest.Setup(p))

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p, "ALERTS_CHANNEL=#ops")
	h.Insert(Alert{1, "disk full"})
	h.Tick()
	// Output:
	// ALERTS_CHANNEL is not set: the channel the alerts go to
	// #ops: disk full
}
