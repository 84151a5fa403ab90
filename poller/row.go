package poller

import (
	"encoding/json"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Row is one source row as read, before decoding into the poller's row type. Its values are
// normalized: integers int64 (a MySQL BIGINT UNSIGNED above the largest int64: uint64), exact
// numerics decimal strings, timestamps time.Time in UTC, binary []byte, UUIDs lower-case
// strings, JSON json.RawMessage, NULL nil. A Row normalizes a value when it is read, so a
// handler pays only for the values it uses; it is safe for concurrent readers. The zero Row is
// no row (Before gives it when there is no before-image): it has no columns to read, and its
// other methods answer as for a keyset row.
type Row struct {
	r *row.Row // the runtime's row (an element of its batch), whose methods Row's delegate to
}

// noRow is what a zero Row's methods ask: the zero runtime row, which answers the methods that
// need no column ("upsert", no before-image, ...) as a zero Row always did.
var noRow row.Row

// row is the runtime's row r stands for.
func (r Row) row() *row.Row {
	if r.r == nil {
		return &noRow
	}
	return r.r
}

// Get returns the value of a column, or nil when there is no such column.
func (r Row) Get(column string) any { return r.row().Get(column) }

// Values returns the values in column order (Columns), in a new slice.
func (r Row) Values() []any { return r.row().Values() }

// Columns returns the names of the row's columns, in the order of Values: its table's (a
// poller of several tables has rows of several).
func (r Row) Columns() []string { return r.row().Columns() }

// Key returns the row's key columns and values: its identity, for deduplication.
func (r Row) Key() map[string]any { return r.row().Key() }

// Op is the change the row stands for: "upsert" for the keyset cursor kinds (TimestampPK,
// Integer, RowVersion, XID), which cannot tell an insert from an update and see no delete;
// "insert", "update" or "delete" for the change-stream kinds (Logical, ChangeTracking); "read"
// for a row a backfill sends again (pollerctl backfill): its current values, not a change.
func (r Row) Op() string { return r.row().Op() }

// HasRow reports whether the row carries its columns' values: false for a delete of which the
// database gave only the key (Key still has it). A delete with the old row has it.
func (r Row) HasRow() bool { return r.row().HasRow() }

// Unchanged lists the columns whose value the change did not carry (PostgreSQL sends an
// unchanged TOAST value of an update as "unchanged" unless the table has REPLICA IDENTITY FULL):
// Get returns nil for them and MarshalJSON leaves them out. Empty for every other row.
func (r Row) Unchanged() []string { return r.row().Unchanged() }

// Table is the row's table, as the poller names it (schema-qualified when it names a schema).
func (r Row) Table() string { return r.row().Table() }

// Before returns the row as it was before the change, and true, for an update or a delete whose
// old row the database sent: a Logical cursor on a table with REPLICA IDENTITY FULL (pollerctl
// check --fix offers it). False for every other row: the keyset kinds and ChangeTracking read
// only the row as it is now, and PostgreSQL's default replica identity sends only the old key.
func (r Row) Before() (Row, bool) {
	b, ok := r.row().Before()
	if !ok {
		return Row{}, false
	}
	before := new(row.Row) // allocated only for a row that has one
	*before = b
	return Row{before}, true
}

// Changed lists the columns an update changed, in column order, and true; false when that is
// not known: every op but "update"; a Logical update without its old row (Before); a
// ChangeTracking update of a table without TRACK_COLUMNS_UPDATED. An update that changed no
// value gives an empty list and true.
func (r Row) Changed() ([]string, bool) { return r.row().Changed() }

// Transaction is what a commit-ordered cursor (Logical, ChangeTracking) says of a change's
// transaction: collect a transaction's changes until Last to apply it at once; CommitTime tells
// how old a change is.
type Transaction struct {
	// ID is the transaction as the database numbers it: PostgreSQL's xid; SQL Server's change
	// version.
	ID uint64
	// CommitLSN is the PostgreSQL commit record's position ("16/B374D848"); "" otherwise.
	CommitLSN string
	// ChangeVersion is SQL Server's change version; 0 otherwise.
	ChangeVersion int64
	// CommitTime is when the transaction committed; zero when the database does not say.
	CommitTime time.Time
	// Index is the change's place among its transaction's changes of the table, from 1 (0: not
	// known); Last marks the last of them.
	Index int
	Last  bool
}

// Transaction returns the row's transaction and true for a change of a Logical or
// ChangeTracking cursor; false for the keyset kinds' rows and a backfill's reads.
func (r Row) Transaction() (Transaction, bool) {
	t, ok := r.row().Transaction()
	return Transaction{ID: t.ID, CommitLSN: t.CommitLSN, ChangeVersion: t.ChangeVersion, CommitTime: t.CommitTime, Index: t.Index, Last: t.Last}, ok
}

// Cursor returns the cursor just after this row: what a checkpoint records.
func (r Row) Cursor() (Cursor, error) {
	c, err := r.row().Cursor()
	return cursorOf(c), err
}

// MarshalJSON renders the row as an object in column order. Timestamps are RFC 3339 in UTC with
// their full fractional precision, exact numerics strings, binary base64, NULL null. Columns
// the change did not carry (Unchanged) are left out.
func (r Row) MarshalJSON() ([]byte, error) { return r.row().MarshalJSON() }

// Decode copies the row into the struct dst points to. A field takes the column named by its
// `db` tag, else the column whose name equals the field's name ignoring case; a field tagged
// `db:"-"` is skipped, and columns without a field are ignored. Values convert as they would in
// database/sql's Scan: numbers and decimal strings to any numeric field, timestamps from
// time.Time or RFC 3339 text, and any field implementing sql.Scanner receives the value.
func (r Row) Decode(dst any) error { return r.row().Decode(dst) }

// rowsOf shows the runtime's rows as Rows, each pointing at its row in rows (which the runtime
// does not reuse): one allocation per batch, a word per row. The result's capacity is its
// length (an append by the handler copies).
func rowsOf(rows []row.Row) []Row {
	out := make([]Row, len(rows))
	for i := range rows {
		out[i] = Row{&rows[i]}
	}
	return out
}

// Cursor is a position in the table: the cursor column's value and, for TimestampPK and Integer,
// the key columns' values as tiebreaker. It is what the checkpoint records, and its JSON is the
// checkpoint's "cursor". Value and the tiebreaker values are raw JSON, so that they keep their
// full precision (a datetime2(7) string, an xid8 beyond 2^53, ...).
type Cursor struct {
	Kind       string                     `json:"kind"`                 // the CursorKind
	Value      json.RawMessage            `json:"value"`                // the cursor column's value, or a change stream's position
	Tiebreaker map[string]json.RawMessage `json:"tiebreaker,omitempty"` // by key column, for TimestampPK and Integer
}

// Time returns a TimestampPK cursor's timestamp; false for the other kinds, which have none.
func (c *Cursor) Time() (time.Time, bool) {
	if c == nil {
		return time.Time{}, false
	}
	sc := c.state()
	return sc.Time()
}

// cursorOf is the runtime's cursor c as a Cursor, field by field (Value and Tiebreaker are
// shared, not copied).
func cursorOf(c state.Cursor) Cursor {
	return Cursor{Kind: c.Kind, Value: c.Value, Tiebreaker: c.Tiebreaker}
}

// cursorRef is cursorOf of *c in a new Cursor; nil for nil (a batch from the beginning).
func cursorRef(c *state.Cursor) *Cursor {
	if c == nil {
		return nil
	}
	out := cursorOf(*c)
	return &out
}

// state is c as the runtime's cursor, field by field.
func (c *Cursor) state() state.Cursor {
	return state.Cursor{Kind: c.Kind, Value: c.Value, Tiebreaker: c.Tiebreaker}
}
