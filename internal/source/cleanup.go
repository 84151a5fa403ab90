package source

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// cleanupQueries are the SQL texts of a source's cleanup (Definition.Cleanup): the rows behind a
// committed checkpoint (at or before it in the cursor's order, as the keyset reads compare), of
// the poller's filter, and older than the cleanup's OlderThan by its time column on the
// database's clock when it has one.
type cleanupQueries struct {
	// Delete deletes up to n of them by key, in one statement (Driver.DeleteFirst); Count counts
	// up to n of them.
	Delete, Count string
	// deleteArgs says what each of Delete's arguments is, in its markers' order: the
	// predicate's (true: the key values, then the age's) or the limit (false).
	deleteArgs []bool
	keyOrder   []int // the key values' order in the predicate's markers (nil: as the keys)
	ageArg     any   // the age's argument; nil without OlderThan
}

// buildCleanup renders the cleanup's SQL for d's cleanup with dl; codecs are the key columns'
// (their markers), ageFlavor how the time column OlderThan measures by (ageCol, unquoted)
// compares with the database's clock. The predicate reuses the keyset reads' builders: the
// keyset's, on the other side of the cursor, and the settle lag's bound, at the age.
func buildCleanup(dl driver.Driver, d sourcedef.Definition, codecs []row.KeyCodec, ageCol string, ageFlavor row.TSFlavor) cleanupQueries {
	c := d.Cleanup
	table := driver.QuoteTable(dl, d.Table)
	qkeys := driver.QuoteAll(dl, d.KeyColumns())
	var cq cleanupQueries
	where := func(next func() string) string {
		pred, order := dl.Keyset(d.Cursor.Kind, qkeys, keyMarkers(codecs, next), driver.Behind)
		cq.keyOrder = order
		preds := []string{pred}
		if c.OlderThan > 0 {
			b := dl.UpperBound(state.KindTimestampPK, ageFlavor, dl.Quote(ageCol), c.OlderThan, next)
			preds, cq.ageArg = append(preds, b.Pred), b.Arg
		}
		if f := strings.TrimSpace(d.Filter); f != "" {
			preds = append(preds, "("+f+")")
		}
		return strings.Join(preds, " AND ")
	}
	n := 0
	next := func() string { n++; return dl.Placeholder(n) }
	cq.Delete = dl.DeleteFirst(table, driver.QuoteAll(dl, d.PK), qkeys,
		func() string { cq.deleteArgs = append(cq.deleteArgs, true); return where(next) },
		func() string { cq.deleteArgs = append(cq.deleteArgs, false); return next() })
	n = 0
	pred := where(next)
	cq.Count = "SELECT COUNT(*) FROM (" + dl.Limit("1", " FROM "+table+" WHERE "+pred, next()) + ") w"
	return cq
}

// cleanupColumn is the time column the cleanup's OlderThan measures by: its own, else the cursor
// column; "" without an age.
func cleanupColumn(d sourcedef.Definition) string {
	c := d.Cleanup
	if c == nil || c.OlderThan <= 0 {
		return ""
	}
	if c.Column != "" {
		return c.Column
	}
	return d.Cursor.Column
}

// layCleanup renders the cleanup's SQL once the key is laid out; ageType is the database type of
// its time column when the rows do not carry it (else the row's column says).
func (s *Source) layCleanup(ageType string) error {
	if s.def.Cleanup == nil || s.def.Changes() {
		return nil
	}
	col := cleanupColumn(s.def)
	fl := row.TSNone
	if col != "" {
		c := row.NewColumn(s.dl, col, ageType)
		if i := slices.Index(s.shape.Names, col); i >= 0 {
			c = s.shape.Cols[i]
		}
		if err := cursorTypeFits(state.KindTimestampPK, c.Class, c.Flavor); err != nil {
			return s.schemaErr(col, "type %s: cleanup's older_than measures age by this column: %v", c.DBType, err)
		}
		fl = c.Flavor
	}
	s.cq = buildCleanup(s.dl, s.def, s.shape.Codecs, col, fl)
	return nil
}

// ageColumnType reads the type of the cleanup's time column when the rows do not carry it
// (columnTypes), checking that the table has it; "" when there is none to read.
func (s *Source) ageColumnType(ctx context.Context, have []string) (string, error) {
	col := cleanupColumn(s.def)
	if col == "" || slices.Contains(s.def.Selected(), col) {
		return "", nil
	}
	if !slices.Contains(have, col) {
		return "", s.schemaErr(col, "no such column, which cleanup's older_than measures age by (the table has %s)", strings.Join(have, ", "))
	}
	_, types, err := columnTypes(ctx, s.db, s.dl, s.def.Table, []string{col})
	if err != nil {
		return "", s.schemaErr(col, "%v", err)
	}
	return types[0], nil
}

// Cleans says whether the source deletes its delivered rows (Definition.Cleanup).
func (s *Source) Cleans() bool { return s.cq.Delete != "" }

// Cleanup deletes up to limit of the delivered rows behind the checkpoint upTo, in one statement:
// the rows at or before it in the cursor's order, which a committed checkpoint says were
// delivered, of the poller's filter, and with the cleanup's OlderThan only those older than it by
// the database's clock. Call it only with a checkpoint that is committed in the state blob: it is
// what makes the rows delivered. It returns how many it deleted: fewer than limit when no more
// were left then. Without a cleanup, or a checkpoint, it deletes nothing.
func (s *Source) Cleanup(ctx context.Context, upTo *state.Cursor, limit int) (int64, error) {
	if !s.Cleans() || upTo == nil {
		return 0, nil
	}
	pred, err := s.cleanupArgs(upTo)
	if err != nil {
		return 0, err
	}
	var args []any
	for _, isPred := range s.cq.deleteArgs {
		if isPred {
			args = append(args, pred...)
		} else {
			args = append(args, limit)
		}
	}
	res, err := s.db.ExecContext(ctx, s.cq.Delete, args...)
	if err != nil {
		return 0, fmt.Errorf("source: poller %q, table %s: deleting delivered rows (cleanup): %w", s.poller, s.def.Table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("source: poller %q, table %s: deleting delivered rows (cleanup): counting them: %w", s.poller, s.def.Table, err)
	}
	return n, nil
}

// AwaitingCleanup counts, up to limit, the rows Cleanup would delete behind upTo now (1: whether
// there is any); 0 without a cleanup or a checkpoint.
func (s *Source) AwaitingCleanup(ctx context.Context, upTo *state.Cursor, limit int) (int64, error) {
	if !s.Cleans() || upTo == nil {
		return 0, nil
	}
	args, err := s.cleanupArgs(upTo)
	if err != nil {
		return 0, err
	}
	var n int64
	if err := s.db.QueryRowContext(ctx, s.cq.Count, append(args, limit)...).Scan(&n); err != nil {
		return 0, fmt.Errorf("source: poller %q, table %s: counting the delivered rows awaiting cleanup: %w", s.poller, s.def.Table, err)
	}
	return n, nil
}

// cleanupArgs are the cleanup predicate's arguments for the checkpoint upTo.
func (s *Source) cleanupArgs(upTo *state.Cursor) ([]any, error) {
	keys, err := s.keyArgs(upTo)
	if err != nil {
		return nil, err
	}
	args := inMarkerOrder(keys, s.cq.keyOrder)
	if s.cq.ageArg != nil {
		args = append(args, s.cq.ageArg)
	}
	return args, nil
}
