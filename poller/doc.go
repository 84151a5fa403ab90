// Package poller is what a poller author writes against: a poller is a table, the row type its
// rows decode into, a cursor kind, and a handler that receives the rows a batch at a time.
//
//	type Order struct {
//		ID        int64     `db:"id,key"`
//		Customer  string    `db:"customer"`
//		UpdatedAt time.Time `db:"updated_at,cursor"`
//	}
//
//	func New() *poller.Poller {
//		return poller.New("orders", "orders", poller.TimestampPK, deliver, poller.WithSettleLag(5*time.Second))
//	}
//
//	func deliver(ctx context.Context, b *poller.Batch[Order]) error {
//		// b.Rows in (updated_at, id) order; b.ID is an idempotency key, b.FencingToken fences
//		// out a stale writer. An error leaves the batch uncommitted: it comes again.
//		return nil
//	}
//
// Each poller lives in pollers/<name>/, is listed in pollers.All (pollers/pollers.go) and has a
// Functions folder <name>/function.json with a timer on %{P}_SCHEDULE%; `pollerctl new NAME`
// writes all three and a first test (package pollertest). Its app settings are {P}_..., {P}
// being the name in upper case with '-' as '_': the driver and DSN of its database
// ({P}_DB_DRIVER, {P}_DB_CONNECTION), the schedule, and the tuning the README's settings table
// lists; options give a poller's own defaults for some of them.
//
// Delivery is at least once, in cursor order, one batch at a time per poller: the runtime takes
// the poller's lease in the state store, reads a batch after the checkpoint, hands it to the
// handler while it keeps the lease alive, and commits the checkpoint after the handler returns
// nil. A crash or a failed batch delivers the same rows again (with the same Batch.ID and
// Attempt + 1); a stale process can never commit (its fencing token is older).
//
// The cursor kinds differ in what a late commit does: a transaction that takes its timestamp
// and commits after other writers. RowVersion (SQL Server) and XID (PostgreSQL) never skip such
// a row; TimestampPK skips it only when it commits later than the settle lag
// ({P}_SETTLE_LAG, WithSettleLag); Integer suits append-only tables written in key order.
package poller
