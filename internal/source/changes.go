package source

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// layout is the driver.Layout of a source (of one of its tables, for a poller of several).
type layout struct{ s *Source }

func (l *layout) DB() *sql.DB                           { return l.s.db }
func (l *layout) Poller() string                        { return l.s.poller }
func (l *layout) Definition() sourcedef.Definition      { return l.s.def }
func (l *layout) Driver() driver.Driver                 { return l.s.dl }
func (l *layout) Table() string                         { return driver.QuoteTable(l.s.dl, l.s.def.Table) }
func (l *layout) AllColumns() bool                      { return l.s.all }
func (l *layout) Columns() []string                     { return l.s.shape.Names }
func (l *layout) KeyColumns() []string                  { return l.s.shape.KeyCols }
func (l *layout) KeyIndex() []int                       { return l.s.shape.KeyIdx }
func (l *layout) Label() string                         { return l.s.label }
func (l *layout) Row(raw []any, ch *row.Change) row.Row { return l.s.shape.Row(raw, ch) }
func (l *layout) Batch(from *state.Cursor) *row.Batch   { return l.s.shape.Batch(from, 0) }

func (l *layout) DecodeKey(j int, raw json.RawMessage) (any, error) {
	return l.s.shape.Codecs[j].Decode(raw)
}

func (l *layout) KeyMarker(j int, marker string) string { return l.s.shape.Codecs[j].Mark(marker) }

func (l *layout) EncodeKey(j int, v any) (json.RawMessage, error) {
	return l.s.shape.Codecs[j].Encode(l.s.shape.Cols[l.s.shape.KeyIdx[j]].Normalize(v))
}

func (l *layout) Errorf(format string, args ...any) error {
	return fmt.Errorf("source: poller %q, %s: %s", l.s.poller, l.s.label, fmt.Sprintf(format, args...))
}

func (l *layout) Tables() []driver.Layout {
	out := []driver.Layout{l}
	for _, p := range l.s.parts {
		out = append(out, &layout{p})
	}
	return out
}

func (l *layout) SchemaErr(column, format string, args ...any) error {
	return l.s.schemaErr(column, format, args...)
}

// streamReader reads a source through its driver's change stream.
type streamReader struct{ driver.ChangeStream }

func (r streamReader) fetch(ctx context.Context, after *state.Cursor, limit int) (*row.Batch, error) {
	return r.Fetch(ctx, after, limit)
}

func (r streamReader) waiting(ctx context.Context, after *state.Cursor, limit int) (int64, error) {
	return r.Waiting(ctx, after, limit)
}

func (r streamReader) oldest(ctx context.Context, after *state.Cursor) (*row.Batch, error) {
	return r.Fetch(ctx, after, 1)
}

func (r streamReader) refresh(context.Context) error     { return nil }
func (r streamReader) checkCursor(c *state.Cursor) error { return r.CheckCursor(c) }

func (r streamReader) committed(ctx context.Context, c *state.Cursor) error {
	return r.Committed(ctx, c)
}

func (r streamReader) stats() driver.Stats { return r.Stats() }

// Replaying a dead-lettered change of a change-stream cursor (logical, changetracking). Its
// cursor is a position in the stream, not the row's key, so FetchKeyOf cannot find the row; the
// letter's key does. What is delivered brings the consumer to the row's current state, in the
// op the stream would use:
//   - an insert or update whose row still exists: the row as it is now, as an update;
//   - a delete whose row is still gone: a delete built from the key (key only: the old row, if
//     the letter has it, stays in the letter);
//   - otherwise the change was superseded by a later one in the stream (a delete after the
//     insert, an insert after the delete), which the poller delivers, or has delivered, after
//     it: replaying the old change would undo the newer one, so nothing is delivered for it.

// ReplayChange returns the row a dead-lettered change (op, key as the letter holds it, cursor)
// is replayed as, or nil and why when it was superseded. It only reads.
// table is the change's table (Row.Table; "" for a letter written before it was recorded: the
// first table).
func (s *Source) ReplayChange(ctx context.Context, table, op string, key map[string]json.RawMessage, cursor state.Cursor) (*row.Row, string, error) {
	if _, ok := s.reader.(streamReader); !ok {
		return nil, "", fmt.Errorf("source: poller %q: ReplayChange is for change-stream cursors (logical, changetracking); this one is %s: use FetchKeyOf", s.poller, s.def.Cursor.Kind)
	}
	s, err := s.partOf(table)
	if err != nil {
		return nil, "", err
	}
	args := make([]any, len(s.def.PK))
	var preds []string
	for i, k := range s.def.PK {
		raw, ok := key[k]
		if !ok {
			return nil, "", fmt.Errorf("source: poller %q: the dead letter's key lacks column %q (it has %s)", s.poller, k, keyNames(key))
		}
		v, err := s.shape.Codecs[i].Decode(raw)
		if err != nil {
			return nil, "", fmt.Errorf("source: poller %q: the dead letter's key column %q: value %s: %v", s.poller, k, raw, err)
		}
		args[i] = v
		preds = append(preds, s.dl.Quote(k)+" = "+s.dl.Placeholder(i+1))
	}
	q := "SELECT " + s.sel + " FROM " + driver.QuoteTable(s.dl, s.def.Table) + " WHERE " + strings.Join(preds, " AND ")
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("source: poller %q, table %s: reading a row by key: %w", s.poller, s.def.Table, err)
	}
	b, err := s.scan(rows, nil, 1)
	if err != nil {
		return nil, "", err
	}
	exists := len(b.Rows) > 0
	switch op {
	case row.OpInsert, row.OpUpdate:
		if !exists {
			return nil, "the row is gone: a later delete supersedes this " + op, nil
		}
		r := s.shape.Row(b.Rows[0].Raw(), &row.Change{Op: row.OpUpdate, Cursor: cursor})
		return &r, "", nil
	case row.OpDelete:
		if exists {
			return nil, "the row exists again: a later insert supersedes this delete", nil
		}
		raw := make([]any, len(s.shape.Cols))
		for i := range s.def.PK {
			raw[s.shape.KeyIdx[i]] = args[i]
		}
		r := s.shape.Row(raw, &row.Change{Op: row.OpDelete, Cursor: cursor, KeyOnly: true})
		return &r, "", nil
	}
	return nil, "", fmt.Errorf("source: poller %q: a dead-lettered change of a %s cursor has op %q, not insert, update or delete", s.poller, s.def.Cursor.Kind, op)
}

func keyNames(key map[string]json.RawMessage) string {
	names := make([]string, 0, len(key))
	for k := range key {
		names = append(names, k)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Follower is the source's change stream as a driver.Follower, when it can stream its changes
// to a tick that follows (a logical cursor); nil otherwise.
func (s *Source) Follower() driver.Follower {
	if r, ok := s.reader.(streamReader); ok {
		if f, ok := r.ChangeStream.(driver.Follower); ok {
			return f
		}
	}
	return nil
}
