// Package soak holds long-running tests that check the poller's guarantees under realistic load,
// against a real database rather than a scripted interleaving.
//
// # The late-commit soak
//
// TestLateCommit runs one scenario per cursor kind on PostgreSQL, all at the same time, each in a
// schema of its own. In each, several writer goroutines open transactions, insert rows (and in
// the xid and timestamp+pk scenarios also update rows they inserted earlier), hold the
// transaction open for a random time up to a bound, and then commit, or sometimes roll back.
// Values are taken the way applications take them, which is what creates the hazard: the
// timestamp comes from `updated_at DEFAULT clock_timestamp()` (and a BEFORE UPDATE trigger) at
// statement time, the xid from `txid xid8 DEFAULT pg_current_xact_id()` (the same trigger sets it
// on update), and the integer key from a bigserial sequence. All of these are taken when the
// statement runs and become visible only at commit, possibly much later.
//
// Meanwhile a tick.Runner (the real source, lease and tick code, with an in-memory state store)
// ticks in a loop with a small batch size, so it keeps reading at the head of the table. Its
// handler records every row it is given. When the writers stop, the test waits until the
// source's upper bound has passed every row, ticks until a tick finds nothing more, and compares
// what was delivered with the truth: the rows in the table, each at its latest committed version.
// A committed row (or committed update) that was never delivered is missed. A rolled-back row is
// not in the table, so it is never counted as missed, and delivering one would fail the test.
//
// What it shows, on the cursor kinds of DESIGN.md §4:
//
//   - xid misses nothing: the bound pg_snapshot_xmin(pg_current_snapshot()) keeps the reader
//     behind every transaction that is still open, however long it stays open.
//   - timestamp+pk misses nothing when the settle lag is longer than the longest write
//     transaction, and misses rows when the lag is shorter: the reader moves past a timestamp
//     whose transaction commits later, and never looks back. The test requires that every miss
//     is explained this way (its transaction committed more than the lag after its timestamp).
//   - integer misses rows even with a settle lag longer than the longest transaction: the source
//     applies no upper bound to integer cursors, and a sequence value taken early and committed
//     late lands behind the cursor. Integer cursors suit append-only tables whose keys are
//     committed in order; the soak writes them append-only too, since an update that keeps the
//     key is never seen by an integer cursor in the first place.
//
// The report (a table in the test log, also appended to the file named by SOAK_REPORT) gives for
// each scenario the cursor kind, the settle lag, the longest transaction measured, the writers,
// the rows committed and rolled back, the updates, the rows delivered, missed and duplicated, and
// lists the first missed rows.
//
// # Running it
//
//	PG_TEST_DSN=postgres://... go test -race ./e2e/soak/
//	PG_TEST_DSN=postgres://... SOAK_DURATION=2m SOAK_REPORT=/tmp/soak.txt go test -race -timeout 30m ./e2e/soak/
//
// Without PG_TEST_DSN the test skips (and fails under CI=true, see internal/testenv). The
// writing phase lasts 6 s by default, 2 s with -short, and SOAK_DURATION (a Go duration) sets it
// for longer runs.
package soak
