package poller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// CursorKind is how a poller finds the rows after its checkpoint.
type CursorKind string

// The cursor kinds (the package doc of internal/source compares them).
const (
	// TimestampPK reads in (timestamp column, key) order, only rows older than the database's
	// clock minus the settle lag ({P}_SETTLE_LAG). Every driver.
	TimestampPK CursorKind = state.KindTimestampPK
	// Integer reads in (increasing integer column, key) order; for append-only tables written in
	// key order. Every driver.
	Integer CursorKind = state.KindInteger
	// RowVersion reads a SQL Server rowversion column, safe against late commits.
	RowVersion CursorKind = state.KindRowversion
	// XID reads a PostgreSQL xid8 column (DEFAULT pg_current_xact_id()), safe against late
	// commits.
	XID CursorKind = state.KindXID
	// Logical reads PostgreSQL's logical decoding of the table (a replication slot and a
	// publication, which `pollerctl cdc enable` creates): inserts, updates and deletes in commit
	// order, nothing running between ticks. No cursor column.
	Logical CursorKind = state.KindLogical
	// ChangeTracking reads SQL Server Change Tracking of the table: inserts, updates and deletes
	// by change version. No cursor column.
	ChangeTracking CursorKind = state.KindChangeTracking
)

// changes reports whether kind reads a change stream, which has no cursor column.
func (k CursorKind) changes() bool { return k == Logical || k == ChangeTracking }

// Row is one source row as read, before decoding into the poller's row type. Its values are
// normalized: integers int64, exact numerics decimal strings, timestamps time.Time in UTC, binary
// []byte, UUIDs lower-case strings, JSON json.RawMessage, NULL nil. Get reads a column, Key the
// key columns, MarshalJSON renders it in column order, Decode copies it into a struct.
type Row = source.Row

// Cursor is a position in the table: the cursor column's value and, for TimestampPK and Integer,
// the key columns' values as tiebreaker. It is what the checkpoint records.
type Cursor = state.Cursor

// Batch is what a poller's handler receives: rows in cursor order and the facts a sink needs to
// deduplicate and to fence out stale writers.
type Batch[T any] struct {
	Poller string
	// ID is deterministic: the same poller, source and cursor range always give the same ID, so
	// a redelivered batch has the ID it had the first time. Use it as an idempotency key.
	ID string
	// FencingToken is the lease's token; pass it to sinks that can refuse older tokens.
	FencingToken int64
	// Attempt counts deliveries of the batch after this checkpoint: 1, then 2 after a failure...
	Attempt int64
	From    *Cursor // the checkpoint the batch follows (nil: the beginning)
	To      *Cursor // the checkpoint after its last row
	// Rows are the rows decoded into the poller's row type, in cursor order.
	Rows []T
	// Raw are the same rows as read, for untyped use (Raw[i] is Rows[i]).
	Raw []Row
}

// Poller is one table trigger: its name, its table and the handler its batches go to. Build it
// with New and list it in package pollers.
type Poller struct {
	name      string
	source    source.Definition
	batchSize int
	setup     func(getenv func(string) string) error
	deliver   func(ctx context.Context, b *Batch[Row]) error
	err       error // Failed: the definition could not be read
	target    func() string
}

// Option sets a poller's default or setup.
type Option func(*Poller)

// WithBatchSize is the default for {P}_BATCH_SIZE (otherwise 500).
func WithBatchSize(n int) Option { return func(p *Poller) { p.batchSize = n } }

// WithSettleLag is the default for {P}_SETTLE_LAG, for TimestampPK cursors (otherwise 10s):
// longer than any write transaction on the table stays open. 0 reads up to the database's
// clock, which loses rows of transactions that commit after they take their timestamp.
func WithSettleLag(d time.Duration) Option {
	return func(p *Poller) {
		if p.source.SettleLag = d; d <= 0 {
			p.source.SettleLag = source.NoSettleLag
		}
	}
}

// WithSchema names the table's schema (dbo, public, ...) when it is not the connection's
// default.
func WithSchema(schema string) Option { return func(p *Poller) { p.source.Table.Schema = schema } }

// WithFilter adds a fixed predicate, ANDed with the cursor's, e.g. `status <> 'draft'`. It is SQL
// written by the app's developer (in the poller's code or its poller.json, deployed with the
// app), never taken from app settings or input.
func WithFilter(sql string) Option { return func(p *Poller) { p.source.Filter = sql } }

// WithSetup runs setup once per process, with the app settings, before the poller's first tick:
// read the poller's own settings there (a webhook URL, a client). An error fails the poller's
// invocations and names the problem.
func WithSetup(setup func(getenv func(string) string) error) Option {
	return func(p *Poller) { p.setup = setup }
}

// WithTarget says where the handler delivers, for the handler's start-up log line (after setup),
// e.g. a sink's String: "queue orders-changes (ChangesQueue: ...)". It must show no secret.
func WithTarget(describe func() string) Option { return func(p *Poller) { p.target = describe } }

// WithColumns, WithKey and WithCursorColumn name the columns explicitly, for a poller of Row
// (untyped) or when the row type has no `db` tags for them.
func WithColumns(columns ...string) Option {
	return func(p *Poller) { p.source.Columns = columns }
}

// WithKey names the key columns: the rows' identity and the cursor's tiebreaker.
func WithKey(columns ...string) Option { return func(p *Poller) { p.source.PK = columns } }

// WithCursorColumn names the cursor column.
func WithCursorColumn(column string) Option {
	return func(p *Poller) { p.source.Cursor.Column = column }
}

// New returns the poller name of table, whose rows are decoded into T and handed, a batch at a
// time, to handle.
//
// T is a struct whose exported fields carry `db` tags naming their columns; the tag options key
// and cursor mark the key columns and the cursor column:
//
//	type Order struct {
//		ID        int64     `db:"id,key"`
//		Customer  string    `db:"customer"`
//		UpdatedAt time.Time `db:"updated_at,cursor"`
//	}
//
// The columns read are the tagged fields' (and those WithColumns names). T may also be Row, with
// WithColumns, WithKey and WithCursorColumn. Values convert as database/sql's Scan would convert
// them; a row that does not fit its field fails the batch, naming the row and the column.
//
// handle returning an error (or panicking) leaves the batch uncommitted: it comes again, with
// Attempt + 1, and ctx is cancelled when the lease is lost. New panics on a definition that can
// never work (a bad name, no key or cursor column): a programming error, found by the first test
// that lists the pollers.
func New[T any](name, table string, kind CursorKind, handle func(ctx context.Context, b *Batch[T]) error, opts ...Option) *Poller {
	if err := CheckNewName(name); err != nil {
		panic("poller.New: " + err.Error())
	}
	p := &Poller{name: name, source: source.Definition{Table: source.Table{Name: table}, Cursor: source.Cursor{Kind: string(kind)}}}
	if err := p.columnsOf(reflect.TypeFor[T]()); err != nil {
		panic(fmt.Sprintf("poller.New(%q): %v", name, err))
	}
	for _, o := range opts {
		o(p)
	}
	switch {
	case handle == nil:
		panic(fmt.Sprintf("poller.New(%q): no handler", name))
	case table == "":
		panic(fmt.Sprintf("poller.New(%q): no table", name))
	case p.source.Cursor.Column == "" && !kind.changes():
		panic(fmt.Sprintf("poller.New(%q): no cursor column: tag a field `db:\"column,cursor\"` or use WithCursorColumn", name))
	case p.source.Cursor.Column != "" && kind.changes():
		panic(fmt.Sprintf("poller.New(%q): a %s cursor reads the database's change stream: it takes no cursor column (%s)", name, kind, p.source.Cursor.Column))
	case len(p.source.PK) == 0:
		panic(fmt.Sprintf("poller.New(%q): no key column: tag a field `db:\"column,key\"` or use WithKey", name))
	}
	p.deliver = func(ctx context.Context, b *Batch[Row]) error {
		typed := &Batch[T]{Poller: b.Poller, ID: b.ID, FencingToken: b.FencingToken, Attempt: b.Attempt, From: b.From, To: b.To, Raw: b.Raw}
		if rows, ok := any(b.Raw).([]T); ok { // T is Row
			typed.Rows = rows
		} else {
			typed.Rows = make([]T, len(b.Raw))
			for i, r := range b.Raw {
				if err := r.Decode(&typed.Rows[i]); err != nil {
					return fmt.Errorf("row %d of the batch (key %v): %w", i+1, r.Key(), err)
				}
			}
		}
		return handle(ctx, typed)
	}
	return p
}

// Failed returns a poller that stands for one whose definition could not be read (a declared
// poller's bad poller.json): it is listed and shown like the others, and every use of it (its
// settings, its ticks, pollerctl) fails with err, which names the file and the field.
func Failed(name string, err error) *Poller {
	p := &Poller{name: name, err: err}
	p.deliver = func(context.Context, *Batch[Row]) error { return err }
	return p
}

// Err is the error of a poller made by Failed, else nil.
func (p *Poller) Err() error { return p.err }

// columnsOf reads the columns, key and cursor column from T's `db` tags.
func (p *Poller) columnsOf(t reflect.Type) error {
	if t == reflect.TypeFor[Row]() {
		return nil
	}
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("the row type %v is not a struct or poller.Row", t)
	}
	for _, f := range source.TaggedFields(t) {
		column := f.Column
		if column == "" {
			return fmt.Errorf("field %s: the db tag names no column", f.Name)
		}
		p.source.Columns = append(p.source.Columns, column)
		for _, o := range f.Options {
			switch o {
			case "":
			case "key":
				p.source.PK = append(p.source.PK, column)
			case "cursor":
				if p.source.Cursor.Column != "" {
					return fmt.Errorf("field %s: a second cursor column (%s is the first)", f.Name, p.source.Cursor.Column)
				}
				p.source.Cursor.Column = column
			default:
				return fmt.Errorf("field %s: db tag option %q is not key or cursor", f.Name, o)
			}
		}
	}
	if len(p.source.Columns) == 0 {
		return fmt.Errorf("the row type %v has no field tagged `db:\"column\"`", t)
	}
	return nil
}

// Name is the poller's name: its pollers/<name> folder, its <name>/function.json function and,
// in upper case with '-' as '_', its settings' prefix {P}.
func (p *Poller) Name() string { return p.name }

// Source is the poller's table definition, as the runtime reads it.
func (p *Poller) Source() source.Definition {
	d := p.source
	d.Columns, d.PK = slices.Clone(d.Columns), slices.Clone(d.PK)
	return d
}

// Target is what WithTarget describes ("" without it).
func (p *Poller) Target() string {
	if p.target == nil {
		return ""
	}
	return p.target()
}

// BatchSize is the poller's default for {P}_BATCH_SIZE (0: the runtime's default).
func (p *Poller) BatchSize() int { return p.batchSize }

// Setup runs the poller's WithSetup function, if any.
func (p *Poller) Setup(getenv func(string) string) error {
	if p.setup == nil {
		return nil
	}
	return p.setup(getenv)
}

// Handle decodes b's rows into the poller's row type and runs its handler; a panic becomes an
// error that carries the stack. The runtime calls it with b.Raw set; tests use package pollertest.
func (p *Poller) Handle(ctx context.Context, b *Batch[Row]) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return p.deliver(ctx, b)
}

var validName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// ReservedNames are the function folders that are not pollers (the status function): no poller,
// scaffold or clone may take them.
var ReservedNames = []string{"status"}

// ErrReservedName is wrapped by CheckNewName's error for a reserved name.
var ErrReservedName = errors.New("reserved name")

// CheckNewName says why name cannot be a poller's name, or nil: it must be a valid function name
// (letters, digits, - and _, starting with a letter, at most 64) and not one of ReservedNames
// (compared without regard to case, as Functions compares function names).
func CheckNewName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("%q is not a valid poller and function name: letters, digits, - and _, starting with a letter, at most 64", name)
	}
	for _, r := range ReservedNames {
		if strings.EqualFold(name, r) {
			return fmt.Errorf("%q is %w: the %s function (%s/function.json) is another function of the app, not a poller; choose another name", name, ErrReservedName, r, r)
		}
	}
	return nil
}
