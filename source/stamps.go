package source

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/state"
)

// ErrUnreachableRow: a row sits where the cursor can never reach it, so a keyset read would skip
// it forever while reporting nothing to do.
var ErrUnreachableRow = errors.New("a row the cursor can never reach")

// FutureTolerance is how far ahead of the database's UTC clock a timestamp in a column without a
// time zone (timestamp, datetime2) may be before CheckStamps calls it stamped in local time: more
// than clock skew, less than the smallest zone offset in use (15 minutes).
const FutureTolerance = 10 * time.Minute

// stampPattern is the GLOB every SQLite TEXT cursor value must match (state.TimeLayout).
const stampPattern = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]Z"

// sqliteStampFix says how to stamp an SQLite TEXT cursor column so that its text order is its
// time order.
const sqliteStampFix = "write it as strftime('%Y-%m-%dT%H:%M:%f000Z','now') (DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000Z','now')) on the column), never CURRENT_TIMESTAMP or datetime('now'), " +
	"and rewrite such rows with UPDATE ... SET col = strftime('%Y-%m-%dT%H:%M:%f000Z', col), which also delivers them"

// CheckStamps looks for a row that the cursor could never reach, and returns an error wrapping
// ErrUnreachableRow that names it (its key and value), the required form and the fix:
//
//   - SQLite TEXT timestamps compare as text, which is time order only in the fixed-width layout
//     YYYY-MM-DDTHH:MM:SS.ffffffZ: a value such as CURRENT_TIMESTAMP's "2026-11-23 03:40:32"
//     sorts before the cursor of its day and would be skipped forever. A scan of the table.
//   - A timestamp without a time zone (PostgreSQL timestamp, SQL Server datetime2, datetime,
//     smalldatetime) is compared with the database's UTC clock: a row more than FutureTolerance
//     ahead of it was stamped in local time east of UTC (GETDATE(), now() into a timestamp
//     column), and its writers' rows interleave wrongly with UTC-stamped ones. One index seek.
//     Local time west of UTC cannot be told from old rows and is not detected.
//
// Zone-aware timestamps, integer, xid and rowversion cursors have nothing to check. Open runs it;
// ticks run it at most once a minute and the status probe on every look.
func (s *Source) CheckStamps(ctx context.Context) error {
	if s.def.Cursor.Kind != state.KindTimestampPK {
		return nil
	}
	col := quoteIdent(s.driver, s.keyCols[0])
	table := quoteTable(s.driver, s.def.Table)
	var where, fix string
	switch {
	case s.driver == SQLite && s.flavor == tsText:
		where = "NOT (" + col + " GLOB '" + stampPattern + "')"
		fix = "the cursor column compares as text, which is time order only in the fixed-width UTC layout YYYY-MM-DDTHH:MM:SS.ffffffZ: " + sqliteStampFix
	case s.driver == Postgres && s.flavor == tsUTC:
		where = col + " > (now() AT TIME ZONE 'UTC') + make_interval(mins => " + fmt.Sprint(int(FutureTolerance.Minutes())) + ")"
		fix = "it is ahead of the database's UTC clock, as a local-time stamp east of UTC would be (now() into a timestamp without time zone in a non-UTC session): " +
			"use timestamptz, or stamp with now() AT TIME ZONE 'UTC'"
	case s.driver == SQLServer && s.flavor == tsUTC:
		where = col + " > DATEADD(minute, " + fmt.Sprint(int(FutureTolerance.Minutes())) + ", SYSUTCDATETIME())"
		fix = "it is ahead of the database's UTC clock, as a local-time stamp east of UTC would be (GETDATE() or SYSDATETIME() on a server not in UTC): " +
			"stamp with SYSUTCDATETIME(), or use datetimeoffset"
	default:
		return nil
	}
	if f := strings.TrimSpace(s.def.Filter); f != "" {
		where += " AND (" + f + ")"
	}
	cols := make([]string, len(s.keyCols))
	for i, k := range s.keyCols {
		cols[i] = quoteIdent(s.driver, k)
	}
	q := "SELECT " + strings.Join(cols, ", ") + " FROM " + table + " WHERE " + where
	if s.driver == SQLServer {
		q = "SELECT TOP (1) " + strings.Join(cols, ", ") + " FROM " + table + " WHERE " + where
	} else {
		q += " LIMIT 1"
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	err := s.db.QueryRowContext(ctx, q).Scan(ptrs...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("source: poller %q, table %s: looking for rows the cursor cannot reach: %w", s.poller, s.def.Table, err)
	}
	key := map[string]any{}
	for i, k := range s.keyCols[1:] {
		key[k] = normalize(&s.cols[s.keyIdx[i+1]], vals[i+1])
	}
	keyJSON, _ := json.Marshal(key)
	value := normalize(&s.cols[s.keyIdx[0]], vals[0])
	if t, ok := value.(time.Time); ok {
		value = t.Format("2006-01-02 15:04:05.999999")
	}
	return fmt.Errorf("source: poller %q, table %s, column %q: %w: the row with key %s has %q: %s",
		s.poller, s.def.Table, s.keyCols[0], ErrUnreachableRow, keyJSON, fmt.Sprint(value), fix)
}
