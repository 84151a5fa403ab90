package row

import (
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// A Change is what a change-stream row carries besides its values; a driver's ChangeStream
// makes them, and its rows with driver.Layout.Row.
type Change struct {
	Op string // OpInsert, OpUpdate or OpDelete
	// Cursor is the position just after this change, unless Pos gives it.
	Cursor state.Cursor
	// Pos, when not nil, makes the cursor just after this change when it is asked for (a
	// stream whose positions cost to render, rows that are never asked).
	Pos interface{ Cursor() state.Cursor }
	// KeyOnly: a delete whose old row the database gave as its key columns only (the other
	// values are nil): it has no row. A delete that is not KeyOnly holds its old row: its
	// Row.Before too.
	KeyOnly bool
	// Last marks the last change of its transaction (of the table), Index its place there from
	// 1 (0: not known); Commit is the transaction, shared by its changes, nil when the stream
	// does not say.
	Last   bool
	Index  int32
	Commit *Commit
	// Unchanged marks the columns whose value the database did not send (PostgreSQL's unchanged
	// TOAST values without REPLICA IDENTITY FULL); nil when none.
	Unchanged []bool
	// Images, when not nil, is what an update says besides its row (kept apart: most changes
	// carry neither, and a catch-up holds hundreds of thousands of changes).
	Images *Images
	// Text and Decode, when Text is not nil, hold the values as the database sent them (nil:
	// NULL) and their decoders, by column: a value is decoded when it is read, so that a
	// handler pays only for the values it uses (the row's raw values are then unused).
	Text   [][]byte
	Decode []func([]byte) (any, error)
}

// Images are what an update carries besides its new row (Change.Images).
type Images struct {
	// Old, when not nil, is the row before the update as the database sent it, in Text's form
	// and decoded by the change's Decode (PostgreSQL under REPLICA IDENTITY FULL): Row.Before.
	Old [][]byte
	// Changed, when not nil, marks the columns the update changed as the database records them
	// (SQL Server's column mask); without it Row.Changed compares Old with the new values.
	Changed []bool
}

// A Commit is what a change stream says of a change's transaction (Row.Transaction).
type Commit struct {
	// ID is the transaction as the database numbers it: PostgreSQL's top-level xid; SQL
	// Server's change version, which numbers the committed transactions that changed tracked
	// tables.
	ID uint64
	// LSN is the PostgreSQL commit record's log sequence number; 0 for other databases.
	LSN uint64
	// Version is SQL Server's change version; 0 for other databases.
	Version int64
	// Time is the commit's time; zero when the database does not give it.
	Time time.Time
}

// decode returns column i's value as the Go driver would have returned it; text that does not
// decode (which the database never sends) is returned as a string.
func (c *Change) decode(i int) any {
	t := c.Text[i]
	if t == nil {
		return nil
	}
	v, err := c.Decode[i](t)
	if err != nil {
		return string(t)
	}
	return v
}
