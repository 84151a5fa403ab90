package driver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// A ChangeStream reads a database's own record of changes: its rows carry their op (Change),
// deletes included, in commit order. Its errors name the poller and the table (Layout.Errorf).
// What only some streams do, the others answer through StreamDefaults, which they embed.
type ChangeStream interface {
	// Check says whether the database is set up for the stream (source.Open runs it after the table's
	// columns are known); its errors name the fix, and nothing is created or written.
	Check(ctx context.Context) error
	// Fetch reads up to limit changes after the cursor (nil: from the stream's start).
	Fetch(ctx context.Context, after *state.Cursor, limit int) (*row.Batch, error)
	// Waiting counts the changes after the cursor, up to limit.
	Waiting(ctx context.Context, after *state.Cursor, limit int) (int64, error)
	// CheckCursor says whether a stored cursor is a position of this stream (an error wrapping
	// source.ErrCursor when not).
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
	// is wrong with it (an error wrapping source.ErrMisconfigured, naming poller in its fixes) when
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

// ErrNoWatermark says the change stream cannot judge its changes against a chunk's snapshot (a
// server or cursor that cannot write a watermark into its stream): no backfill for it.
var ErrNoWatermark = errors.New("the change stream cannot mark a backfill chunk's place in it")

// A Watermark judges a change stream's changes against the snapshot a backfill's chunk was read
// in (source.Chunk.Watermark): the DBLog technique. A read of a key is delivered once the stream has
// been delivered up to the watermark (Reached), unless a change newer than the snapshot touched
// that key meanwhile (Newer): the change was delivered, the read would be older.
type Watermark interface {
	// Newer says r, a change of the stream, is not in the chunk's snapshot: the chunk holds an
	// older version of its row, or none.
	Newer(r row.Row) bool
	// Reached says the stream delivered up to c holds every change in the snapshot.
	Reached(c *state.Cursor) bool
}

// A Querier runs a query: a *sql.DB, or the *sql.Tx a ChangeStream's Watermark reads a chunk in.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// A Layout is a source as package source's Open found it, for its driver's change stream: its
// connection, definition and columns, and what makes its rows, batches and errors. The slices
// it returns are the source's own: read them, never change them.
type Layout interface {
	// DB is the connection pool.
	DB() *sql.DB
	// Poller is the poller's name.
	Poller() string
	// Definition is the source's definition.
	Definition() sourcedef.Definition
	// Driver is the source's driver.
	Driver() Driver
	// Table is the table's name, quoted.
	Table() string
	// AllColumns says the source reads every column of the table (Definition's AllColumns):
	// the stream adds the columns the table gains (source.ErrColumnsChanged), and a change
	// written before one of them was added lacks it.
	AllColumns() bool
	// Columns are the names of the columns a row holds, in order.
	Columns() []string
	// KeyColumns are the key columns, in the order of a cursor's.
	KeyColumns() []string
	// KeyIndex gives the place in a row of each key column (KeyColumns' order).
	KeyIndex() []int
	// DecodeKey reads key column j's value from a cursor into a query argument.
	DecodeKey(j int, raw json.RawMessage) (any, error)
	// KeyMarker is the marker of key column j's argument as its codec writes it in SQL
	// (row.KeyCodec's Mark).
	KeyMarker(j int, marker string) string
	// EncodeKey renders key column j's value, as the Go driver returned it, as a cursor holds
	// it.
	EncodeKey(j int, v any) (json.RawMessage, error)
	// Row makes a row of the source: raw are its values as the Go driver returned them, in
	// Columns' order (nil when ch carries them as Text).
	Row(raw []any, ch *row.Change) row.Row
	// Batch makes an empty batch of the source, read after from.
	Batch(from *state.Cursor) *row.Batch
	// Errorf is an error that names the poller and the table (the first table's layout: its
	// tables).
	Errorf(format string, args ...any) error
	// Label names the table ("table T"), or the first table's layout the poller's tables
	// ("tables T, U"), as errors name them.
	Label() string
	// Tables are the layouts of the poller's tables, this one first (Definition.More: a change
	// stream reads them all; a poller of one table has this one alone). Each makes its own
	// table's rows.
	Tables() []Layout
	// SchemaErr is an error wrapping source.ErrSchema that names the poller, the table and the
	// column ("" for none).
	SchemaErr(column, format string, args ...any) error
}

// A Follower is a ChangeStream that a tick holding the lease can follow ({P}_FOLLOW) by having
// the database send it the changes as they commit, instead of reading the stream again every
// {P}_FOLLOW_INTERVAL (a logical cursor streams its replication slot). While it streams, Fetch,
// Waiting and Committed serve and confirm through the stream. A tick without the lease never
// calls it: it would hold the stream while another process may need it.
type Follower interface {
	// Await waits until a change after the cursor can be fetched without asking the database,
	// for at most d, and says whether one can. It starts the stream when none runs (from the
	// stream's own position, which must not be past the cursor: ErrStreamAhead). It returns
	// false, nil when d passed or ctx ended first; an error when the stream could not start or
	// broke: the caller then pauses d as without a Follower, and Fetch reads as before. With d
	// <= 0 it returns at once, having started the stream only if the source has just read up to
	// the end of its stream (so that a caller may offer it between full batches).
	Await(ctx context.Context, after *state.Cursor, d time.Duration) (bool, error)
	// EndFollow ends the stream, if one runs: what was committed (Committed) is confirmed to
	// the database first, and the stream's reader is free for the next one when it returns.
	// Fetch then reads as before.
	EndFollow(ctx context.Context) error
	// Hold keeps the stream, if one runs, for at most d for the next tick of this process to
	// take over (its Await does; its Fetch reads from it meanwhile), instead of ending it: a
	// stream's start can cost the database more than the pause between two ticks. What is
	// committed meanwhile is confirmed through it; not taken over within d, it ends as EndFollow
	// ends it. Until then the stream is busy for other processes, as while a tick follows.
	Hold(d time.Duration)
}
