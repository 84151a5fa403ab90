package source

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
)

// FutureTolerance is how far ahead of the database's UTC clock a timestamp in a column without a
// time zone (timestamp, datetime2) may be before CheckStamps calls it stamped in local time: more
// than clock skew, less than the smallest zone offset in use (15 minutes).
const FutureTolerance = 10 * time.Minute

// CheckStamps looks for a row that the cursor could never reach, and returns an error wrapping
// ErrUnreachableRow that names it (its key and value), the required form and the fix:
//
//   - SQLite TEXT timestamps compare as text, which is time order only in the fixed-width layout
//     YYYY-MM-DDTHH:MM:SS.ffffffZ: a value such as CURRENT_TIMESTAMP's "2026-11-23 03:40:32"
//     sorts before the cursor of its day and would be skipped forever. A scan of the table.
//   - A timestamp without a time zone (PostgreSQL timestamp, SQL Server datetime2, datetime,
//     smalldatetime) is compared with the database's UTC clock: a row more than FutureTolerance
//     ahead of it was stamped in local time east of UTC (GETDATE(), now() into a timestamp
//     column in a non-UTC session). It is read only once that clock passes it, hours late, and
//     the same writer west of UTC would put its rows behind the cursor, where nothing can see
//     them. One index seek.
//
// Zone-aware timestamps (a future row there is clock skew: read late, not lost), integer, xid
// and rowversion cursors have nothing to check. The rows a definition's filter excludes are not
// looked at. Open runs it; the tick and the status probe run it too.
func (s *Source) CheckStamps(ctx context.Context) error {
	if s.q.StampCheck == "" {
		return nil
	}
	n := len(s.shape.KeyCols)
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	err := s.db.QueryRowContext(ctx, s.q.StampCheck, s.q.stampArg).Scan(ptrs...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("source: poller %q, table %s: looking for rows the cursor cannot reach: %w", s.poller, s.def.Table, err)
	}
	key := make(map[string]any, n-1)
	for i, k := range s.shape.KeyCols[1:] {
		key[k] = s.shape.Cols[s.shape.KeyIdx[i+1]].Normalize(vals[i+1])
	}
	keyJSON, _ := json.Marshal(key)
	var value string
	switch v := s.shape.Cols[s.shape.KeyIdx[0]].Normalize(vals[0]).(type) {
	case time.Time:
		value = v.Format("2006-01-02T15:04:05.999999") // as stored: no zone
	case []byte:
		value = string(v)
	default:
		value = fmt.Sprint(v)
	}
	var why string
	if s.flavor == row.TSText {
		why = "which is not in the fixed-width UTC layout YYYY-MM-DDTHH:MM:SS.ffffffZ (like 2026-11-23T03:40:32.287000Z) that the column needs: " +
			"the cursor compares it as text, and only that layout sorts in time order, so the read passes it by"
	} else {
		why = fmt.Sprintf("more than %d minutes ahead of the database's UTC clock: the column has no time zone and is read as UTC, and this row looks stamped in local time east of UTC; "+
			"it is read only once the UTC clock passes it, and the same writer west of UTC puts its rows behind the cursor, unseen", int(FutureTolerance.Minutes()))
	}
	return fmt.Errorf("source: poller %q, table %s, column %q: %w: the row with key %s has %q, %s. %s",
		s.poller, s.def.Table, s.shape.KeyCols[0], row.ErrUnreachableRow, keyJSON, value, why, s.q.stampFix)
}
