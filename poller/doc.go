// Package poller is what a poller author writes against: a poller turns a SQL table into a
// trigger, handing the rows changed since its checkpoint to your handler a batch at a time, in
// cursor order, at least once.
//
// A poller is a table, the row type its rows decode into, a [CursorKind] and a handler. This page
// goes from nothing to a poller that runs and is tested; the guide is docs/pollers.md
// ([Writing pollers]), and the examples below run with `go test`.
//
// # The row type
//
// A struct whose exported fields carry `db` tags naming their columns; the tag options key and
// cursor mark the key columns (the rows' identity) and the cursor column (what orders them):
//
//	type Order struct {
//		ID        int64     `db:"id,key"`
//		Customer  string    `db:"customer"`
//		UpdatedAt time.Time `db:"updated_at,cursor"`
//	}
//
// Values convert as database/sql's Scan would convert them. A handler may also take [Row], the
// rows untyped, naming the columns with [WithColumns], [WithKey] and [WithCursorColumn].
//
// # The handler
//
//	func deliver(ctx context.Context, b *poller.Batch[Order]) error {
//		for _, o := range b.Rows { // in (updated_at, id) order
//			// ... send o on, idempotent on its key and cursor (o.ID, o.UpdatedAt)
//		}
//		return nil // commits: the checkpoint moves past these rows
//	}
//
// An error (or a panic) leaves the batch uncommitted: it comes again on the next tick with the
// same [Batch.ID] and [Batch.Attempt] + 1. [Batch.FencingToken] grows with each lease, for sinks
// that refuse stale writers; ctx is cancelled when the lease is lost.
//
// # The poller
//
//	func New() *poller.Poller {
//		return poller.New("orders", "orders", poller.TimestampPK, deliver, poller.WithSettleLag(5*time.Second))
//	}
//
// [New] takes the poller's name, its table, the cursor kind and the handler; options set its
// defaults ([WithBatchSize], [WithSettleLag]), a fixed SQL filter ([WithFilter]), a schema
// ([WithSchema]) and a setup that reads its own app settings ([WithSetup]). A sink is a handler
// too: sink.Handler(s) sends every row to a queue, topic, event hub or webhook (package sink).
//
// Each poller lives in pollers/<name>/, is listed in pollers.All (pollers/pollers.go) and has a
// Functions folder <name>/function.json with a timer on %{P}_SCHEDULE%; `pollerctl new NAME`
// writes all three and a first test.
//
// # Its settings
//
// Its app settings are {P}_..., {P} being the name in upper case with '-' as '_': the driver and
// DSN of its database ({P}_DB_DRIVER: postgres, mysql, sqlserver or sqlite; {P}_DB_CONNECTION),
// the schedule ({P}_SCHEDULE, six-field NCRONTAB), and the tuning that docs/contract.md lists
// with its defaults ({P}_BATCH_SIZE, {P}_SETTLE_LAG, ...), for which the options give the
// poller's own defaults. A bad value is an error naming the setting.
//
// # Its test
//
// Package pollertest runs real ticks (lease, keyset read, checkpoint) over an SQLite table, an
// in-memory state store and a fake clock:
//
//	func TestOrders(t *testing.T) {
//		h := pollertest.New(t, orders.New())
//		h.Insert(orders.Order{ID: 1, Customer: "ada", Amount: "9.50", UpdatedAt: time.Now().Add(-time.Hour)})
//		h.Tick()
//		if got := pollertest.Rows[orders.Order](h); len(got) != 1 || got[0].Customer != "ada" {
//			t.Fatalf("delivered %+v", got)
//		}
//	}
//
// # Delivery
//
// Delivery is at least once, in cursor order, one batch at a time per poller: the runtime takes
// the poller's lease in the state store, reads a batch after the checkpoint, hands it to the
// handler while it keeps the lease alive, and commits the checkpoint after the handler returns
// nil. A crash or a failed batch delivers the same rows again (with the same Batch.ID and
// Attempt + 1); a stale process can never commit (its fencing token is older).
//
// # Cursor kinds
//
// The cursor kinds differ in what a late commit does: a transaction that takes its timestamp
// and commits after other writers. [RowVersion] (SQL Server) and [XID] (PostgreSQL) never skip
// such a row; [TimestampPK] skips it only when it commits later than the settle lag
// ({P}_SETTLE_LAG, [WithSettleLag]); [Integer] suits append-only tables written in key order.
// [Logical] (PostgreSQL) and [ChangeTracking] (SQL Server) read the database's change stream and
// deliver deletes too. docs/sources.md ([Sources and cursors]) has each database's recipe.
//
// # Examples
//
// The examples (example_test.go; pkg.go.dev shows each beside its name) run real ticks with
// pollertest: [New] (a first poller; a failed batch comes again), [Batch], [Row] and its [Row.Decode] and [Row.MarshalJSON], [Cursor], [CursorKind],
// [WithBatchSize], [WithSettleLag], [WithFilter] and [WithSetup]. Package pollertest has a
// poller's test and a declared poller's (a poller.json, no Go); package sink, a poller whose
// handler is a webhook sink, and the messages sinks send.
//
// [Writing pollers]: https://github.com/pseudotrigger/pseudotrigger/blob/main/docs/pollers.md
// [Sources and cursors]: https://github.com/pseudotrigger/pseudotrigger/blob/main/docs/sources.md
package poller
