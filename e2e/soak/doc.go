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
// What it shows, on the cursor kinds of docs/sources.md (late commits):
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
// each scenario the cursor kind, the settle lag, the bound, the longest transaction measured, the
// writers, the rows committed and rolled back, the updates, the rows delivered, missed and
// duplicated, and lists the first missed rows.
//
// # The late-commit soak on MySQL and MariaDB
//
// TestLateCommitMySQL runs the same harness on MySQL or MariaDB, each scenario in a table of its
// own in the test database. The table names have a hyphen and spaces (`soak-<hex> ts lag below
// txn PROCESS`), so every statement the source makes has to quote them with backticks. The key is
// a BIGINT AUTO_INCREMENT and the cursor column `updated_at DATETIME(6) DEFAULT
// CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)`, stamped in UTC sessions. Both are taken
// when the statement runs (CURRENT_TIMESTAMP is the statement's start) and committed later,
// which is the same hazard as on PostgreSQL.
//
// On MySQL the poller's role decides what bounds a timestamp+pk read. With the PROCESS privilege
// the source reads the server's open write transactions from information_schema.innodb_trx and
// keeps each read below the oldest one's start minus a second, as well as below the clock minus
// the settle lag. Without PROCESS it has the settle lag alone (Source.OpenTrxBound says which,
// and why). The scenarios, all running at once, are:
//
//   - timestamp+pk, settle lag 3x the longest transaction, a role without PROCESS: misses
//     nothing. The lag alone is enough when it is longer than every transaction.
//   - timestamp+pk, settle lag a tenth of the longest transaction, a role without PROCESS: misses
//     rows, each explained by a late commit (as on PostgreSQL). The source must say that its
//     reads were bounded by the settle lag only, with a reason naming PROCESS.
//   - timestamp+pk, the same short lag, the test's own user (with PROCESS): misses nothing,
//     although transactions stay open ten times longer than the lag. This is the open-transaction
//     bound at work, so the check that the longest hold stays under the lag is turned around: the
//     hold must exceed it. The source must say its last read was bounded by the open
//     transactions. The report's "bound" column names the bound each scenario runs with, and a
//     line per scenario says how many ticks read with it.
//   - integer (AUTO_INCREMENT), append-only, settle lag 3x the longest transaction: misses rows.
//     The source puts no bound on integer cursors, and an AUTO_INCREMENT value is handed out when
//     its statement runs, like a sequence value.
//
// The soak waits for the rows to settle in two ways. Every row must be older than the database's
// clock minus the lag and 2 s (the open-transaction bound's margin of 1 s, plus trx_started's
// whole seconds). For the scenario with PROCESS, the source's own last bound must also be more
// than a second past the newest row. So a write transaction that something else leaves open on
// the server (a test of another package) makes the soak wait as it makes the poller wait. The
// soak never reads innodb_trx itself: InnoDB refreshes that list only after 100 ms without a
// reader, so every extra reader makes it staler for the others.
//
// # Running it
//
//	PG_TEST_DSN=postgres://... go test -race ./e2e/soak/
//	PG_TEST_DSN=postgres://... SOAK_DURATION=2m SOAK_REPORT=/tmp/soak.txt go test -race -timeout 30m ./e2e/soak/
//	MYSQL_TEST_DSN='root@tcp(127.0.0.1:3306)/pseudotrigger' go test -race -run MySQL ./e2e/soak/
//
// or, with throwaway servers (scripts/test.sh starts both the same way):
//
//	bash -c 'source scripts/lib/services.sh; start_mariadb; start_postgres; go test -race -run LateCommit -v ./e2e/soak/'
//
// MYSQL_TEST_DSN's user needs every privilege. The soak creates tables and a user with SELECT
// only, and one scenario's poller runs as MYSQL_TEST_DSN's user because it needs PROCESS.
// Without PG_TEST_DSN (or MYSQL_TEST_DSN) the matching test skips (and fails under CI=true, see
// internal/testenv). The writing phase lasts 6 s by default, 2 s with -short, and SOAK_DURATION
// (a Go duration) sets it for longer runs. Each test takes its writing phase, plus the longest
// settle lag, plus a few seconds (10 to 12 s by default).
package soak
