// Package source reads a SQL table for a poller, in keyset order or from the database's change
// stream. It is the portable part: Source, the keyset queries, backfill chunks, the set-up check
// and the errors; the definition and its validation are package sourcedef, the rows, their
// batches, values and key codecs package row. It names no database and imports no database
// driver: each database is a package of its own that implements the Driver interface of package
// driver, and package drivers is the one place that lists them and opens a source with the one a
// poller's settings name:
//
//	postgres   PostgreSQL, Azure Database for PostgreSQL (pgx; Entra ID: package entra): the xid
//	           and logical cursors, the slot and publication pollerctl cdc administers
//	mysql      MySQL, MariaDB, Azure Database for MySQL (go-sql-driver/mysql; Entra ID: package
//	           entra): the bound behind open write transactions (ReadBound)
//	sqlserver  SQL Server, Azure SQL (go-mssqldb, Entra ID through its azuread driver): the
//	           rowversion and changetracking cursors
//	sqlite     SQLite (modernc, no cgo): TEXT timestamps in one fixed-width layout
//
// What every database must answer (quoting, placeholders, LIMIT, the keyset predicate, the upper
// bound, the stamp check, type classes, key codecs, opening a pool, reading a DSN's location) is
// the Driver interface; so is what only some have (a change stream, read through a Layout of
// the source; a read bound; rules of their own for a definition; a set-up pollerctl cdc
// administers; status details), which the others answer through Defaults with ErrNotSupported
// or a neutral answer (package driver). Nothing outside these packages asks a driver what it
// is. The conformance suite every driver passes is package sourcetest.
//
// A poller declares a Definition: the table, the columns each row carries, the cursor kind and
// column, the key columns, and optionally a fixed filter written in its Go code. Identifiers are
// validated (';', comment markers and control characters are refused) and quoted per database;
// every value is a bound parameter.
//
// # Cursor kinds
//
// The keyset is (cursor column, key columns...), read with "after the last position" and
// ORDER BY the same columns, LIMIT the batch size. Each kind bounds the read so that a row still
// being written cannot be skipped:
//
//	kind          column                                  upper bound                          driver
//	rowversion    rowversion                              rv < MIN_ACTIVE_ROWVERSION(), read first sqlserver
//	xid           xid8 DEFAULT pg_current_xact_id()       x < pg_snapshot_xmin(current snapshot) postgres
//	timestamp+pk  datetime2/timestamptz/TEXT + key        ts < database now - settle lag         all
//	integer       increasing key                          none                                   all
//
// The late-commit problem: a transaction that takes its timestamp (or identity value) and commits
// later than other writers can put a row behind a cursor that has already moved past it, and a
// timestamp cursor never looks back. rowversion and xid are immune: rows of transactions still
// open are above the bound, and stay unread until they commit. timestamp+pk is safe only when its
// settle lag (DefaultSettleLag, 10 s, measured on the database's clock) is longer than any write
// transaction on the table; the conformance suite shows both the case it covers and, with no
// lag, the row it loses. On MySQL a timestamp+pk read is also kept behind the oldest open write
// transaction, from information_schema.innodb_trx when the role has PROCESS (package mysql's
// ReadBound), so it is safe whatever the longest transaction; Stats.LateCommits says whether it
// was. integer cursors suit append-only tables written in key order.
//
// On SQLite a timestamp cursor column is TEXT in the fixed-width UTC layout
// YYYY-MM-DDTHH:MM:SS.ffffffZ, so that text order is time order. On SQL Server datetime2 columns
// are taken as UTC and compared with SYSUTCDATETIME(); their cursor arguments are sent as
// datetime2 (civil.DateTime), not datetimeoffset, so the index still seeks.
//
// # Change streams: logical and changetracking
//
// Two cursor kinds read the database's own record of changes instead of the table: logical
// (PostgreSQL logical decoding through a replication slot and a publication, package postgres)
// and changetracking (SQL Server Change Tracking, package sqlserver). They have no cursor column;
// the key columns are the rows' identity. Their rows carry their op (Row.Op: insert, update,
// delete; the keyset kinds say upsert), a delete carries its key and, where the database gives
// it, the old row (Row.HasRow), and they arrive in commit order, deletes included. Each reader is
// its driver's ChangeStream; the tick calls Source.Committed after each commit, which advances a
// logical cursor's slot up to the checkpoint. How Change Tracking is read is package
// sqlserver's doc.
//
// # Rows the cursor cannot reach
//
// A keyset read never looks back, so a row whose cursor value sorts behind rows already read is
// skipped for good while the poller reports nothing waiting. Source.CheckStamps looks for such
// rows and returns an error wrapping ErrUnreachableRow that names the row (its key as JSON and
// its value), the form the column needs and an UPDATE that rewrites the rows to a fresh stamp,
// which delivers them. Open runs it (a new process fails at once); the tick and the status probe
// run it again. It looks only at the rows the definition's filter selects.
//
//   - SQLite TEXT: any value not in the fixed-width layout (GLOB '[0-9]...Z'), such as
//     CURRENT_TIMESTAMP's or datetime('now')'s "2026-11-23 03:40:32", which sorts before the
//     cursor of its day. Stamp with DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000Z','now')): %f has
//     milliseconds, the "000" pads them to six digits. A scan of the whole table (about 0.3 s
//     per million rows). A fetched row out of that layout fails the fetch and is named too,
//     wherever it falls in the batch.
//   - PostgreSQL timestamp and SQL Server datetime2/datetime/smalldatetime (no time zone, read
//     as UTC): a value more than FutureTolerance (10 minutes) ahead of the database's UTC clock,
//     which is what a writer stamping local time east of UTC leaves (GETDATE(), SYSDATETIME(),
//     now() into a timestamp column in a non-UTC session). One index seek. Such a row is only
//     read late, when the UTC clock reaches it; it is reported because the same writer west of
//     UTC loses rows. Use timestamptz/datetimeoffset or SYSUTCDATETIME() / now() AT TIME ZONE
//     'UTC'.
//
// What cannot be detected: local time west of UTC (the stamps are in the past, like those of a
// slow UTC writer, and land behind the cursor: lost), a local-time writer east of UTC by less
// than the tolerance, a writer whose clock lags the database's, and on SQLite a value in the
// layout that is not UTC (strftime(..., 'localtime') with a Z appended). Stamp in UTC on the
// database (its clock, not the client's). Zone-aware columns (timestamptz, datetimeoffset) are
// not checked: a future value there is clock skew, read late, not lost. Integer, xid and
// rowversion cursors have nothing to check.
//
// # Updates and deletes
//
// An update that changes the cursor column moves the row to the end: it is delivered again. For
// xid the column must be set on update too (a trigger, or SET x = pg_current_xact_id()); for
// rowversion SQL Server does it. An update that leaves the cursor column alone is not seen, and
// deletes are never seen: a keyset reader sees only rows that exist. Use soft deletes (a flag
// column plus an updated cursor) where deletes matter.
//
// # Fingerprint
//
// Fingerprint hashes what decides which rows come next and what a saved cursor means: driver,
// server, database, table, cursor kind and column, key, filter and a logical cursor's slot; never
// the payload columns (adding or removing one is accepted and logged) nor credentials. The state
// document records it beside those parts (Identify), so that a change that stops the poller is
// named; `pollerctl reset --keep-cursor` accepts a change that keeps the saved cursor's meaning.
package source
