package source

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// ErrKeyNotUnique: the key columns do not tell the table's rows apart. A keyset read is strictly
// after (cursor, key...) of the last row read, so rows sharing those values with it are skipped
// when a batch ends between them; they would also share a message id. It is a misconfiguration
// (ErrMisconfigured): the fix is a unique index, or another key.
var ErrKeyNotUnique = Mark(errors.New("the key does not tell the rows apart"), ErrMisconfigured)

// UniqueIndexSQL is the statement that makes cols unique in table t with driver d: the fix an
// ErrKeyNotUnique names. The index is named ux_<table>_<columns>, cut to 60 bytes.
func UniqueIndexSQL(d driver.Driver, t sourcedef.Table, cols []string) string {
	name := "ux_" + t.Name + "_" + strings.Join(cols, "_")
	if len(name) > 60 {
		name = strings.ToValidUTF8(name[:60], "") // not half a character
	}
	if stmt := d.CreateUniqueIndex(t, name, cols); stmt != "" {
		return stmt
	}
	return "CREATE UNIQUE INDEX " + d.Quote(name) + " ON " + driver.QuoteTable(d, t) + " (" + strings.Join(driver.QuoteAll(d, cols), ", ") + ")"
}

// DupScan bounds the rows Open's search for an example of a repeated key reads: the first rows
// in key order (an index range when the keyset's index exists), not the whole table, so that a
// refused poller on a big table costs each open a bounded read.
const DupScan = 100_000

// checkKey asks the driver's catalog whether the key tells the rows apart (keyset kinds only: a
// change stream's rows are positions in the stream, not (cursor, key) values; a logical
// poller's key is the table's replica identity and Change Tracking requires a primary key). Not
// unique: an error wrapping ErrKeyNotUnique. Unknown, or a driver that cannot read keys
// (ErrNotSupported): each fetch checks its rows (dupCheck). Unique: nothing more to do.
func (s *Source) checkKey(ctx context.Context) error {
	u, err := s.dl.UniqueKey(ctx, s.db, s.def.Table, s.shape.KeyCols)
	if errors.Is(err, driver.ErrNotSupported) {
		s.dupCheck, s.dupWhy = true, "the "+s.dl.Name()+" driver cannot read keys from its catalog"
		return nil
	}
	if err != nil {
		return fmt.Errorf("source: poller %q, table %s: reading the table's keys from the catalog: %w", s.poller, s.def.Table, err)
	}
	switch u.Verdict {
	case setup.KeyUnique:
		return nil
	case setup.KeyUnknown:
		s.dupCheck, s.dupWhy = true, u.Why
		return nil
	}
	dup, n, err := s.findDuplicate(ctx)
	if err != nil {
		return err
	}
	example := fmt.Sprintf("no two of the first %d rows in key order share them yet, but the table does not prevent it", DupScan)
	if dup != "" {
		example = fmt.Sprintf("%d rows have %s", n, dup)
	}
	return fmt.Errorf("source: poller %q, table %s: %w: no primary key or unique index covers the key columns (%s), so rows that share them are skipped when a batch ends between them, and get the same message id; %s. %s",
		s.poller, s.def.Table, ErrKeyNotUnique, strings.Join(s.shape.KeyCols, ", "), example, s.keyFix(dup != ""))
}

// keyFix says how to make the key unique: the index over the definition's key columns, or
// another key.
func (s *Source) keyFix(dups bool) string {
	fix := "Fix: " + UniqueIndexSQL(s.dl, s.def.Table, s.def.PK)
	if s.dupCheck {
		fix = "Fix: a unique index over the key's columns in the table (for a view, in the table it reads), e.g. " + UniqueIndexSQL(s.dl, s.def.Table, s.def.PK)
	}
	if dups {
		fix += " (it fails while rows repeat: remove the repeats first)"
	}
	if len(s.shape.KeyCols) > len(s.def.PK) {
		fix += fmt.Sprintf("; any unique index over columns among (%s) will do", strings.Join(s.shape.KeyCols, ", "))
	}
	return fix + "; or choose key columns whose values are unique (poller.WithKey, or \"key\" in poller.json)"
}

// findDuplicate looks for one repeated (cursor, key...) among the first DupScan rows in key
// order: one query, GROUP BY the key columns HAVING COUNT(*) > 1, over an ordered read bounded
// at DupScan rows (an index range with the keyset's index, a sort of the table without one: it
// runs only for a poller it is about to refuse). It returns the values as the error shows them
// ("" when none) and how many rows share them.
func (s *Source) findDuplicate(ctx context.Context) (string, int64, error) {
	vals, n, err := duplicateKey(ctx, s.db, s.dl, s.def.Table, s.shape.KeyCols)
	switch {
	case err != nil:
		return "", 0, fmt.Errorf("source: poller %q, table %s: looking for a repeated key: %w", s.poller, s.def.Table, err)
	case vals == nil:
		return "", 0, nil
	}
	return s.keyText(vals), n, nil
}

// duplicateKey is findDuplicate's query for driver d: the values of one repeated (keyCols...)
// among the first DupScan rows of t in key order (nil when none), and how many rows share them.
func duplicateKey(ctx context.Context, db *sql.DB, d driver.Driver, t sourcedef.Table, keyCols []string) ([]any, int64, error) {
	keys := strings.Join(driver.QuoteAll(d, keyCols), ", ")
	inner := d.Limit(keys, " FROM "+driver.QuoteTable(d, t)+" ORDER BY "+keys, fmt.Sprint(DupScan))
	q := d.Limit(keys+", COUNT(*)", " FROM ("+inner+") d GROUP BY "+keys+" HAVING COUNT(*) > 1", "1")
	vals := make([]any, len(keyCols)+1)
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var n int64
	ptrs[len(vals)-1] = &n
	err := db.QueryRowContext(ctx, q).Scan(ptrs...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, 0, nil
	case err != nil:
		return nil, 0, err
	}
	return vals[:len(keyCols)], n, nil
}

// keyText renders the key columns' values, as read, for people: {"updated_at":"...","id":7}.
func (s *Source) keyText(vals []any) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range s.shape.KeyCols {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(k)
		v := s.shape.Cols[s.shape.KeyIdx[i]].Normalize(vals[i])
		if bs, ok := v.([]byte); ok {
			v = fmt.Sprintf("0x%X", bs)
		}
		val, err := json.Marshal(v)
		if err != nil {
			val = []byte(fmt.Sprintf("%q", fmt.Sprint(v)))
		}
		b.Write(name)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.String()
}

// Fetch-time detection, for a key the catalog cannot confirm (dupCheck). The rows come in key
// order, so rows sharing (cursor, key...) are adjacent: a batch is read with one row more than
// asked for, each row is compared with the one before it, and the extra row, compared with the
// batch's last, is dropped. What it catches, before anything past the repeat is committed:
//
//   - repeats inside a batch, and a repeat straddling the batch's end (the extra row);
//   - a row that repeats the checkpoint's values (it is behind the checkpoint, which a keyset
//     read never returns): one more query, an index seek on the key, made only when the fetch
//     returns rows, that is when something past the checkpoint would be committed. A repeat
//     of the checkpoint that arrives while nothing else does is found with the next row.
//
// What it cannot catch: a repeat of a row delivered before the checkpoint's, and a repeat of the
// checkpoint's row once that row is gone (one row left, nothing to compare): those sit behind
// the cursor, as a late commit does; only a unique index rules them out, which is why Open asks
// the catalog first. Values are compared as the Go driver returns them, so values a collation
// calls equal but whose bytes differ ('a' and 'A' in a case-insensitive MySQL collation) are not
// seen as repeats.

// fetchChecked is fetch with the detection on. The source remembers the repeat it finds, with
// the cursor it read after, until a fetch after that cursor finds none: Backlog after that
// cursor fails with it, so that the status probe (which reads the backlog after the checkpoint)
// says the poller is misconfigured, as its ticks find it.
func (k *keyset) fetchChecked(ctx context.Context, after *state.Cursor, limit int) (*row.Batch, error) {
	at := cursorKey(after)
	b, err := k.fetchRepeats(ctx, after, limit)
	switch {
	case errors.Is(err, ErrKeyNotUnique):
		k.s.repeat.Store(&repeatSeen{after: at, err: err})
	case err == nil:
		if seen := k.s.repeat.Load(); seen != nil && seen.after == at {
			k.s.repeat.CompareAndSwap(seen, nil)
		}
	}
	return b, err
}

// repeatSeen is the repeat a fetch found (fetchChecked) and the cursor it read after.
type repeatSeen struct {
	after string // cursorKey
	err   error
}

// cursorKey renders a cursor for comparing: its JSON (compact, the tiebreaker's keys sorted).
func cursorKey(c *state.Cursor) string {
	b, _ := json.Marshal(c)
	return string(b)
}

// repeatAt is the repeat the last fetch after cursor c found, if it found one.
func (s *Source) repeatAt(c *state.Cursor) error {
	if seen := s.repeat.Load(); seen != nil && seen.after == cursorKey(c) {
		return seen.err
	}
	return nil
}

// fetchRepeats reads a batch, one row more, and checks it for repeats.
func (k *keyset) fetchRepeats(ctx context.Context, after *state.Cursor, limit int) (*row.Batch, error) {
	s := k.s
	b, err := k.read(ctx, after, limit+1, false)
	if err != nil {
		return nil, err
	}
	for i := 1; i < len(b.Rows); i++ {
		if s.sameKey(b.Rows[i-1].Raw(), b.Rows[i].Raw()) {
			return nil, s.repeated(b.Rows[i].Raw(), "two rows read one after the other")
		}
	}
	if len(b.Rows) > limit {
		b.Rows = b.Rows[:limit]
		c, err := b.Rows[limit-1].Cursor()
		if err != nil {
			return nil, err
		}
		b.To = &c
	}
	if after != nil && len(b.Rows) > 0 {
		if err := k.checkpointRepeated(ctx, after); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// checkpointRepeated looks for two rows with the checkpoint's key values (the filter's rows only).
func (k *keyset) checkpointRepeated(ctx context.Context, after *state.Cursor) error {
	s := k.s
	args, err := s.keyArgs(after)
	if err != nil {
		return err
	}
	preds := make([]string, len(s.shape.KeyCols))
	for i, c := range s.shape.KeyCols {
		preds[i] = s.dl.Quote(c) + " = " + s.dl.Placeholder(i+1)
	}
	if f := strings.TrimSpace(s.def.Filter); f != "" {
		preds = append(preds, "("+f+")")
	}
	sel := s.keySel
	rows, err := s.db.QueryContext(ctx, s.dl.Limit(sel, " FROM "+driver.QuoteTable(s.dl, s.def.Table)+" WHERE "+strings.Join(preds, " AND "), "2"), args...)
	if err != nil {
		return fmt.Errorf("source: poller %q, table %s: looking for a repeat of the checkpoint's key: %w", s.poller, s.def.Table, err)
	}
	defer rows.Close()
	var vals []any
	n := 0
	for rows.Next() {
		vals = make([]any, len(s.shape.KeyCols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("source: poller %q, table %s: looking for a repeat of the checkpoint's key: %w", s.poller, s.def.Table, err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("source: poller %q, table %s: looking for a repeat of the checkpoint's key: %w", s.poller, s.def.Table, err)
	}
	if n < 2 {
		return nil
	}
	// vals are the key columns alone: lay them out as a row's so that keyText reads them.
	raw := make([]any, len(s.shape.Cols))
	for i, idx := range s.shape.KeyIdx {
		raw[idx] = vals[i]
	}
	return s.repeated(raw, "the checkpoint's row and another row at the checkpoint (where no read reaches it)")
}

// repeated is the error of a repeat found at fetch, raw being a row's values.
func (s *Source) repeated(raw []any, what string) error {
	vals := make([]any, len(s.shape.KeyIdx))
	for i, idx := range s.shape.KeyIdx {
		vals[i] = raw[idx]
	}
	why := s.dupWhy
	if why == "" {
		why = "the catalog cannot tell"
	}
	return fmt.Errorf("source: poller %q, table %s: %w: %s share the key columns (%s) = %s. Nothing in the catalog makes them unique (%s), so each fetch checks its rows; the poller stops here instead of skipping a row, and commits nothing past it until the key is unique. %s",
		s.poller, s.def.Table, ErrKeyNotUnique, what, strings.Join(s.shape.KeyCols, ", "), s.keyText(vals), why, s.keyFix(true))
}

// sameKey says whether two rows' values (as scanned) agree on every key column.
func (s *Source) sameKey(a, b []any) bool {
	for _, idx := range s.shape.KeyIdx {
		if !sameValue(a[idx], b[idx]) {
			return false
		}
	}
	return true
}

// sameValue compares two values as a Go driver returns them.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	}
	defer func() { _ = recover() }() // an incomparable value is not a repeat
	return a == b
}
