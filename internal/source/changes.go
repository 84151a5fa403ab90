package source

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// A ChangeStream reads a database's own record of changes: its rows carry their op (Change),
// deletes included, in commit order. Its errors name the poller and the table (Layout.Errorf).
// What only some streams do, the others answer through StreamDefaults, which they embed.
type ChangeStream interface {
	// Check says whether the database is set up for the stream (Open runs it after the table's
	// columns are known); its errors name the fix, and nothing is created or written.
	Check(ctx context.Context) error
	// Fetch reads up to limit changes after the cursor (nil: from the stream's start).
	Fetch(ctx context.Context, after *state.Cursor, limit int) (*row.Batch, error)
	// Waiting counts the changes after the cursor, up to limit.
	Waiting(ctx context.Context, after *state.Cursor, limit int) (int64, error)
	// CheckCursor says whether a stored cursor is a position of this stream (an error wrapping
	// ErrCursor when not).
	CheckCursor(c *state.Cursor) error
	// CursorFromText reads a position an operator typed.
	CursorFromText(value string) (*state.Cursor, error)
	// Committed tells the stream that the checkpoint c is durable (the logical cursor advances
	// its slot to it); it may do nothing.
	Committed(ctx context.Context, c *state.Cursor) error
	// CommitWanted says that committing the checkpoint now would spare the next fetch work (a
	// logical cursor re-reads from its slot's position until a commit moves it); StreamDefaults:
	// false.
	CommitWanted() bool
	// Stats are the stream's measures of its last reads; StreamDefaults: none.
	Stats() Stats
	// Inspect reads what the stream reads from besides the table (a logical cursor's
	// replication slot), for the status, without writing, and returns its details, with what
	// is wrong with it (an error wrapping ErrMisconfigured, naming poller in its fixes) when
	// something is. The details come back even then. StreamDefaults: none.
	Inspect(ctx context.Context, poller string) ([]Detail, error)
	// Watermarks says whether Watermark can work here: nil, or an error wrapping
	// ErrNoWatermark that says why not (StreamDefaults).
	Watermarks() error
	// Watermark reads a backfill chunk (read, in the transaction q) and marks its place in the
	// stream (see Watermark). StreamDefaults: ErrNoWatermark.
	Watermark(ctx context.Context, read func(q Querier) error) (Watermark, error)
}

// StreamDefaults is what a ChangeStream does unless it says otherwise (embed it).
type StreamDefaults struct{}

// CommitWanted: never.
func (StreamDefaults) CommitWanted() bool { return false }

// Stats: none.
func (StreamDefaults) Stats() Stats { return Stats{} }

// Inspect: nothing read besides the table.
func (StreamDefaults) Inspect(context.Context, string) ([]Detail, error) { return nil, nil }

// Watermarks: the stream cannot mark a chunk's place.
func (StreamDefaults) Watermarks() error { return ErrNoWatermark }

// Watermark: the stream cannot mark a chunk's place.
func (StreamDefaults) Watermark(context.Context, func(Querier) error) (Watermark, error) {
	return nil, ErrNoWatermark
}

// ErrBusy: another process is reading the change stream right now (PostgreSQL: the replication
// slot is active for another connection). Nothing was read; the next tick tries again. A stream
// returns it as a *BusyError, which names that reader.
var ErrBusy = errors.New("the change stream is being read by another process")

// A BusyError is ErrBusy (Err wraps it) with the reader that holds the stream, as the tick's
// summary names it ("another reader of the replication slot").
type BusyError struct {
	Holder string
	Err    error
}

// Error is Err's text.
func (e *BusyError) Error() string { return e.Err.Error() }

// Unwrap is Err.
func (e *BusyError) Unwrap() error { return e.Err }

// ErrStreamAhead: a change stream's own position is past the checkpoint, so the changes between
// were consumed by something else and cannot be read again (a driver's error, such as
// PostgreSQL's ErrSlotAhead, says which and what to do).
var ErrStreamAhead = errors.New("the change stream is past the checkpoint")

// A Layout is a source as Open found it, for its driver's change stream: its connection,
// definition and columns, and what makes its rows, batches and errors. The slices it returns
// are the source's own: read them, never change them.
type Layout struct{ s *Source }

// DB is the connection pool.
func (l *Layout) DB() *sql.DB { return l.s.db }

// Poller is the poller's name.
func (l *Layout) Poller() string { return l.s.poller }

// Definition is the source's definition.
func (l *Layout) Definition() sourcedef.Definition { return l.s.def }

// Driver is the source's driver.
func (l *Layout) Driver() Driver { return l.s.dl }

// Table is the table's name, quoted.
func (l *Layout) Table() string { return QuoteTable(l.s.dl, l.s.def.Table) }

// AllColumns says the source reads every column of the table (Definition's AllColumns): the
// stream adds the columns the table gains (ErrColumnsChanged), and a change written before one
// of them was added lacks it.
func (l *Layout) AllColumns() bool { return l.s.all }

// Columns are the names of the columns a row holds, in order.
func (l *Layout) Columns() []string { return l.s.shape.Names }

// KeyColumns are the key columns, in the order of a cursor's, and KeyIndex their places in a
// row.
func (l *Layout) KeyColumns() []string { return l.s.shape.KeyCols }

// KeyIndex gives the place in a row of each key column (KeyColumns' order).
func (l *Layout) KeyIndex() []int { return l.s.shape.KeyIdx }

// DecodeKey reads key column j's value from a cursor into a query argument.
func (l *Layout) DecodeKey(j int, raw json.RawMessage) (any, error) {
	return l.s.shape.Codecs[j].Decode(raw)
}

// KeyMarker is the marker of key column j's argument as its codec writes it in SQL
// (KeyCodec.Marker).
func (l *Layout) KeyMarker(j int, marker string) string { return l.s.shape.Codecs[j].Mark(marker) }

// EncodeKey renders key column j's value, as the Go driver returned it, as a cursor holds it.
func (l *Layout) EncodeKey(j int, v any) (json.RawMessage, error) {
	return l.s.shape.Codecs[j].Encode(l.s.shape.Cols[l.s.shape.KeyIdx[j]].Normalize(v))
}

// Row makes a row of the source: raw are its values as the Go driver returned them, in
// Columns' order (nil when ch carries them as Text).
func (l *Layout) Row(raw []any, ch *row.Change) row.Row { return l.s.shape.Row(raw, ch) }

// Batch makes an empty batch of the source, read after from.
func (l *Layout) Batch(from *state.Cursor) *row.Batch { return l.s.shape.Batch(from, 0) }

// Errorf is an error that names the poller and the table (the first table's layout: its
// tables).
func (l *Layout) Errorf(format string, args ...any) error {
	return fmt.Errorf("source: poller %q, %s: %s", l.s.poller, l.s.label, fmt.Sprintf(format, args...))
}

// Label names the table ("table T"), or the first table's layout the poller's tables ("tables
// T, U"), as errors name them.
func (l *Layout) Label() string { return l.s.label }

// Tables are the layouts of the poller's tables, l's first (Definition.More: a change stream
// reads them all; a poller of one table has l alone). Each makes its own table's rows.
func (l *Layout) Tables() []*Layout {
	out := []*Layout{l}
	for _, p := range l.s.parts {
		out = append(out, &Layout{p})
	}
	return out
}

// SchemaErr is an error wrapping ErrSchema that names the poller, the table and the column
// ("" for none).
func (l *Layout) SchemaErr(column, format string, args ...any) error {
	return l.s.schemaErr(column, format, args...)
}

// streamReader reads a source through its driver's change stream.
type streamReader struct{ ChangeStream }

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

func (r streamReader) stats() Stats { return r.Stats() }

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
	q := "SELECT " + s.sel + " FROM " + QuoteTable(s.dl, s.def.Table) + " WHERE " + strings.Join(preds, " AND ")
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
