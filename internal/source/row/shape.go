package row

import (
	"slices"
	"sync"
	"sync/atomic"
)

// A Shape is what every row of one source (one table of a poller) shares: its table, its columns
// and how their values read, and its key, in the order of the keyset (the cursor column first).
// A source lays it out once, when it opens, and its rows point at it.
type Shape struct {
	Poller  string
	Table   string   // the table as the poller names it: every row's Table, and in errors
	Kind    string   // the cursor kind, which a keyset row's Cursor names
	PK      []string // the key columns (Row.Key)
	Names   []string // the columns' names, in row order
	Cols    []Column
	KeyIdx  []int      // positions in Cols of the keyset columns, cursor first
	KeyCols []string   // their names
	Codecs  []KeyCodec // one per keyset column
	// StampFix says how to stamp the cursor column, in the error of a row the cursor can never
	// reach.
	StampFix string

	plans    sync.Map                   // Row.Decode's plans: reflect.Type -> *decodePlan
	lastPlan atomic.Pointer[decodePlan] // the last of them used
}

// Row is a row of the shape holding the Go driver's values raw (in Cols' order), and, for a
// change-stream row, its change (nil: a keyset row).
func (s *Shape) Row(raw []any, ch *Change) Row { return Row{sh: s, raw: raw, ch: ch} }

// pkCodec returns the position and codec of primary-key column pk (every key column has one).
func (s *Shape) pkCodec(pk string) (int, KeyCodec) {
	i := slices.Index(s.KeyCols, pk)
	return s.KeyIdx[i], s.Codecs[i]
}

// AsRead is r as a backfill's read: its current values, not a change (Op "read").
func (r Row) AsRead() Row {
	r.read = true
	return r
}

// Raw are the row's values as the Go driver returned them (nil for a row read as the database
// sent it, or whose change carries its values as text).
func (r Row) Raw() []any { return r.raw }

// Sent is column i's value as the Go driver (or the database, for a row read raw) gave it, not
// normalized.
func (r Row) Sent(i int) any {
	switch {
	case r.lz != nil:
		return r.lz.value(i)
	case r.ch != nil && r.ch.Text != nil:
		return r.ch.decode(i)
	}
	return r.raw[i]
}
