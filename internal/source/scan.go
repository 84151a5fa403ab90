package source

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// selectCols is the select list that reads the source's columns names as a Row holds them: each
// quoted, or as the driver's Select reads it.
func (s *Source) selectCols(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = s.dl.Quote(n)
		if j := slices.Index(s.shape.Names, n); j >= 0 {
			if e := s.dl.Select(s.shape.Cols[j].ColumnType, out[i]); e != "" {
				out[i] = e
			}
		}
	}
	return strings.Join(out, ", ")
}

// readRaw is keyset.read through the driver's ReadRaw: false when the driver has none or
// cannot on this pool.
func (k *keyset) readRaw(ctx context.Context, q string, args []any, after *state.Cursor, limit int) (*row.Batch, bool, error) {
	s := k.s
	if s.dupCheck { // the repeat check compares the scanned values (keys.go)
		return nil, false, nil
	}
	var b *row.Batch
	var scanErr error
	handled, err := s.dl.ReadRaw(ctx, s.db, q, args, func(rows row.RawRows) error {
		b, scanErr = s.scanRaw(rows, after, limit)
		return scanErr
	})
	switch {
	case !handled:
		return nil, false, nil
	case err != nil && scanErr != nil:
		return nil, true, scanErr
	case err != nil:
		return nil, true, fmt.Errorf("source: poller %q, table %s: fetch: %w", s.poller, s.def.Table, err)
	}
	return b, true, nil
}

// scanRaw is scan for rows as the database sent them: each row's values are copied into blocks
// shared by the batch's rows, and decoded when read.
func (s *Source) scanRaw(rows row.RawRows, after *state.Cursor, limit int) (*row.Batch, error) {
	b := s.shape.Batch(after, min(limit, 1024))
	n := len(s.shape.Cols)
	cols := rows.Columns()
	if len(cols) != n {
		return nil, fmt.Errorf("source: poller %q, table %s: fetch: the query returned %d columns, want %d", s.poller, s.def.Table, len(cols), n)
	}
	cp := row.NewRawCopier(n, min(limit, 256))
	for rows.Next() {
		r := cp.Row(s.shape, rows.Values(), cols)
		if err := s.checkKeys(r); err != nil {
			return nil, err
		}
		if s.flavor == row.TSText {
			if err := s.checkTextStamp(r, r.Sent(s.shape.KeyIdx[0])); err != nil {
				return nil, err
			}
		}
		b.Rows = append(b.Rows, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("source: poller %q, table %s: fetch: %w", s.poller, s.def.Table, err)
	}
	return b, s.endBatch(b)
}
