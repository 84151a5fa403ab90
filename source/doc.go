// Package source reads a SQL table in keyset order for a poller: SQL Server / Azure SQL
// (go-mssqldb, with Entra ID through its azuread driver), PostgreSQL (pgx) and SQLite (modernc,
// no cgo).
//
// A poller declares a Definition: the table, the columns each row carries, the cursor kind and
// column, the key columns, and optionally a fixed filter written in its Go code. Identifiers are
// validated (';', comment markers and control characters are refused) and quoted per dialect;
// every value is a bound parameter.
//
// # Cursor kinds
//
// The keyset is (cursor column, key columns...), read with "after the last position" and
// ORDER BY the same columns, LIMIT the batch size. Each kind bounds the read so that a row still
// being written cannot be skipped:
//
//	kind          column                                  upper bound                          driver
//	rowversion    rowversion                              rv < MIN_ACTIVE_ROWVERSION()           sqlserver
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
// lag, the row it loses. integer cursors suit append-only tables written in key order.
//
// On SQLite a timestamp cursor column is TEXT in the fixed-width UTC layout
// YYYY-MM-DDTHH:MM:SS.ffffffZ, so that text order is time order. On SQL Server datetime2 columns
// are taken as UTC and compared with SYSUTCDATETIME(); their cursor arguments are sent as
// datetime2 (civil.DateTime), not datetimeoffset, so the index still seeks.
//
// # Updates and deletes
//
// An update that changes the cursor column moves the row to the end: it is delivered again. For
// xid the column must be set on update too (a trigger, or SET x = pg_current_xact_id()); for
// rowversion SQL Server does it. An update that leaves the cursor column alone is not seen, and
// deletes are never seen: a keyset reader sees only rows that exist. Use soft deletes (a flag
// column plus an updated cursor) where deletes matter.
//
// # Rows
//
// A Row carries every column, its key (Key, the dedup identity) and its cursor (Cursor, what a
// checkpoint records). Values are normalized when read: exact numerics as decimal strings,
// timestamps as time.Time in UTC at full precision, binary as []byte (base64 in JSON), UUIDs and
// SQL Server uniqueidentifiers in canonical lower-case text (go-mssqldb's mixed-endian bytes are
// reordered), JSON columns as raw JSON, NULL as nil. Row.MarshalJSON and Row.Decode (into the
// poller's own struct) build on that.
//
// # Fingerprint
//
// Fingerprint hashes what is read: driver, server, database, table, columns, cursor, key and
// filter, never credentials. The state document records it; a change refuses to run until the
// poller is reset or renamed.
package source
