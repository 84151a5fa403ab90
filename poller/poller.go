package poller

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// CursorKind is how a poller finds the rows after its checkpoint.
type CursorKind string

// The cursor kinds; docs/sources.md compares them and gives each database's recipe.
const (
	// TimestampPK reads in (timestamp column, key) order, only rows older than the database's
	// clock minus the settle lag ({P}_SETTLE_LAG). Every driver.
	TimestampPK CursorKind = "timestamp+pk"
	// Integer reads in (increasing integer column, key) order; for tables whose writers take
	// their numbers in commit order (an append-only table written in key order, or a counter
	// row). Every driver.
	Integer CursorKind = "integer"
	// RowVersion reads a SQL Server rowversion column, safe against late commits.
	RowVersion CursorKind = "rowversion"
	// XID reads a PostgreSQL xid8 column stamped with pg_current_xact_id() on INSERT and UPDATE
	// (a trigger), safe against late commits.
	XID CursorKind = "xid"
	// Logical reads PostgreSQL's logical decoding of the table (a replication slot and a
	// publication, which `pollerctl cdc enable` creates): inserts, updates and deletes in commit
	// order, nothing running between ticks. No cursor column.
	Logical CursorKind = "logical"
	// ChangeTracking reads SQL Server Change Tracking of the table: inserts, updates and deletes
	// by change version. No cursor column.
	ChangeTracking CursorKind = "changetracking"
)

// Batch is what a poller's handler receives: rows in cursor order and the facts a sink needs to
// deduplicate and to fence out stale writers.
type Batch[T any] struct {
	Poller string
	// ID is deterministic: the same poller, source and cursor range always give the same ID, so
	// a retry of the same rows carries the ID it had the first time. A row updated, deleted or
	// inserted inside the range in between makes the retry end elsewhere, under another ID:
	// deduplicate on each row's key and cursor value (Row.Key, Row.Cursor; a sink message's id),
	// with ID as a cheap first check.
	ID string
	// FencingToken is the lease's token; pass it to sinks that can refuse older tokens.
	FencingToken int64
	// Attempt counts deliveries of the batch after this checkpoint: 1, then 2 after a failure...
	Attempt int64
	From    *Cursor // the checkpoint the batch follows (nil: the beginning)
	To      *Cursor // the checkpoint after its last row
	// Tables are the tables the poller reads, as Row.Table names them: New's table, then those
	// of WithTables. Several tables share one stream, so a row's position is not its own: a
	// sink's message id then mixes in the row's table. A Batch made by hand for sink.Send
	// carries its poller's Tables.
	Tables []string
	// Rows are the rows decoded into the poller's row type, in cursor order.
	Rows []T
	// Raw are the same rows as read, for untyped use (Raw[i] is Rows[i]).
	Raw []Row
	// Outbox is the poller's outbox (WithOutbox), nil when its table is not one: a sink sends
	// each row as the event it holds.
	Outbox *Outbox
}

// Poller is one table trigger: its name, its table and the handler its batches go to. Build it
// with New and list it in package pollers.
type Poller struct {
	spec pollerdef.Spec // what New and the options build; the runtime reads it (pollerdef.Of)
}

// Option sets a poller's default or setup.
type Option func(*Poller)

// WithBatchSize is the default for {P}_BATCH_SIZE (otherwise 500).
func WithBatchSize(n int) Option { return func(p *Poller) { p.spec.BatchSize = n } }

// WithSettleLag is the default for {P}_SETTLE_LAG, for TimestampPK cursors (otherwise 10s):
// longer than any write transaction on the table stays open. 0 reads up to the database's
// clock, which loses rows of transactions that commit after they take their timestamp. New
// panics when the cursor kind is not TimestampPK, whose rows have no age to lag behind.
func WithSettleLag(d time.Duration) Option {
	return func(p *Poller) {
		if p.spec.Source.SettleLag = d; d <= 0 {
			p.spec.Source.SettleLag = sourcedef.NoSettleLag
		}
	}
}

// WithInitialSnapshot makes a Logical or ChangeTracking poller start with the table's current
// rows: its first tick begins a snapshot that sends them as reads (Row.Op "read"), a chunk after
// each live batch, beside the changes from then on, none missing and none read after a newer
// change of its row (docs/backfills.md). Without it such a poller starts at the stream's current
// position and sees only later changes. Keyset cursors read every row from the start anyway.
func WithInitialSnapshot() Option {
	return func(p *Poller) { p.spec.Source.Initial = sourcedef.InitialSnapshot }
}

// WithSkipWriter makes a Logical or ChangeTracking poller leave out the changes of the writer
// named writer: the application's own writes, which it need not hear about. The writer marks
// its writes. PostgreSQL: its session runs SELECT pg_replication_origin_session_setup('writer')
// (once per database, SELECT pg_replication_origin_create('writer'); a writer with several
// sessions at once names an origin for each, 'writer.1', 'writer.2', ...). SQL Server: it writes
// WITH CHANGE_TRACKING_CONTEXT (CAST('writer' AS varbinary(128))). See docs/cdc.md.
func WithSkipWriter(writer string) Option {
	return func(p *Poller) { p.spec.Source.SkipWriter = writer }
}

// Table is one more table of a Logical or ChangeTracking poller (WithTables): its name (Schema
// "" for the connection's default), the columns each change carries ("*" alone, Logical: every
// column), its key columns (the replica identity's, the primary key) and an optional filter
// (Logical: the publication's row filter for it).
type Table struct {
	Schema, Name string
	Columns, Key []string
	Filter       string
}

// WithTables makes a Logical or ChangeTracking poller read these tables besides New's, through
// the same stream (Logical: one slot and publication, which pollerctl cdc enable makes of them
// all; ChangeTracking: one change version): their changes come in commit order with the first
// table's, a transaction's changes of every table numbered together, and each row names its
// table (Row.Table). The rows have the shapes of several tables, so the poller's row type is
// Row: switch on Row.Table. docs/changes.md shows it.
func WithTables(tables ...Table) Option {
	return func(p *Poller) {
		for _, t := range tables {
			p.spec.Source.More = append(p.spec.Source.More, sourcedef.TableDef{Table: sourcedef.Table{Schema: t.Schema, Name: t.Name},
				Columns: t.Columns, PK: t.Key, Filter: t.Filter})
		}
	}
}

// WithSchema names the table's schema (dbo, public, ...) when it is not the connection's
// default.
func WithSchema(schema string) Option { return func(p *Poller) { p.spec.Source.Table.Schema = schema } }

// WithFilter adds a fixed predicate, ANDed with the cursor's, e.g. `status <> 'draft'`. It is SQL
// written by the app's developer (in the poller's code or its poller.json, deployed with the
// app), never taken from app settings or input.
func WithFilter(sql string) Option { return func(p *Poller) { p.spec.Source.Filter = sql } }

// WithSetup runs setup once per process, with the app settings, before the poller's first tick:
// read the poller's own settings there (a webhook URL, a client). An error fails the poller's
// invocations and names the problem.
func WithSetup(setup func(getenv func(string) string) error) Option {
	return func(p *Poller) { p.spec.Setup = setup }
}

// WithTarget says where the handler delivers, for the handler's start-up log line (after setup),
// e.g. a sink's String: "queue orders-changes (ChangesQueue: ...)". It must show no secret.
func WithTarget(describe func() string) Option { return func(p *Poller) { p.spec.Target = describe } }

// WithColumns, WithKey and WithCursorColumn name the columns explicitly, for a poller of Row
// (untyped) or when the row type has no `db` tags for them. WithColumns("*") reads every column
// of a Logical poller's table, and the columns the table gains while the poller runs.
func WithColumns(columns ...string) Option {
	return func(p *Poller) { p.spec.Source.Columns = columns }
}

// WithKey names the key columns: the rows' identity and the cursor's tiebreaker.
func WithKey(columns ...string) Option { return func(p *Poller) { p.spec.Source.PK = columns } }

// WithCursorColumn names the cursor column.
func WithCursorColumn(column string) Option {
	return func(p *Poller) { p.spec.Source.Cursor.Column = column }
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
// never work (a bad name, no key or cursor column, an option its cursor kind does not take),
// naming the option or the tag to fix: a programming error, found by the first test that lists
// the pollers. A database's own rules (SQL Server's changetracking cursor takes no filter) are
// checked when the poller's source opens, with the database its settings name.
func New[T any](name, table string, kind CursorKind, handle func(ctx context.Context, b *Batch[T]) error, opts ...Option) *Poller {
	if err := pollerdef.CheckName(name); err != nil {
		panic("poller.New: " + err.Error())
	}
	pollerdef.Expose(definition)
	p := &Poller{spec: pollerdef.Spec{Name: name, Source: sourcedef.Definition{Table: sourcedef.Table{Name: table}, Cursor: sourcedef.Cursor{Kind: string(kind)}}}}
	if err := p.columnsOf(reflect.TypeFor[T]()); err != nil {
		panic(fmt.Sprintf("poller.New(%q): %v", name, err))
	}
	for _, o := range opts {
		o(p)
	}
	if handle == nil {
		panic(fmt.Sprintf("poller.New(%q): no handler", name))
	}
	if err := p.spec.Source.Check(); err != nil {
		panic(fmt.Sprintf("poller.New(%q): %s", name, optionError(err)))
	}
	if len(p.spec.Source.More) > 0 && reflect.TypeFor[T]() != reflect.TypeFor[Row]() {
		panic(fmt.Sprintf("poller.New(%q): WithTables gives rows of several tables, each of its own shape: the row type is poller.Row (switch on Row.Table), not %v", name, reflect.TypeFor[T]()))
	}
	var tables []string
	for _, t := range p.spec.Source.Tables() {
		tables = append(tables, t.Table.String())
	}
	outbox := outboxOf(p.spec.Source.Outbox)
	events := outbox != nil && state.ChangeKind(p.spec.Source.Cursor.Kind)
	p.spec.Raw = func(b *pollerdef.Batch) any {
		rows := b.Rows
		if events {
			rows = eventRows(rows)
		}
		rb := batchOf[Row](b, tables, rowsOf(rows))
		rb.Rows, rb.Outbox = rb.Raw, outbox
		return rb
	}
	p.spec.Deliver = func(ctx context.Context, b *pollerdef.Batch) error {
		rows := b.Rows
		if events {
			if rows = eventRows(rows); len(rows) == 0 {
				return nil // only deletes: nothing to hand over, and the batch commits
			}
		}
		raw := rowsOf(rows)
		typed := batchOf[T](b, tables, raw)
		typed.Outbox = outbox
		if rows, ok := any(raw).([]T); ok { // T is Row
			typed.Rows = rows
		} else {
			typed.Rows = make([]T, len(raw))
			for i, r := range raw {
				if err := r.Decode(&typed.Rows[i]); err != nil {
					return fmt.Errorf("row %d of the batch (key %v): %w", i+1, r.Key(), err)
				}
			}
		}
		return handle(ctx, typed)
	}
	return p
}

// options word a definition's fields (sourcedef.FieldError) by what sets them, for New's panics:
// what a missing one is and how to set it, and how what is wrong with it reads (%s: the
// FieldError's Err). tableOptions word the fields of a table of WithTables by poller.Table's.
var (
	options = map[string]struct{ missing, format string }{
		sourcedef.FieldTable:        {"no table", "table %s"},
		sourcedef.FieldSchema:       {"no schema", "WithSchema: %s"},
		sourcedef.FieldColumns:      {"no columns: tag the row type's fields `db:\"column\"` or use WithColumns", "columns (the row type's db tags, or WithColumns): %s"},
		sourcedef.FieldKey:          {"no key column: tag a field `db:\"column,key\"` or use WithKey", "key (the db tags' key option, or WithKey): %s"},
		sourcedef.FieldFilter:       {"no filter", "WithFilter: %s"},
		sourcedef.FieldCursorKind:   {"no cursor kind", "cursor kind %s"},
		sourcedef.FieldCursorColumn: {"no cursor column: tag a field `db:\"column,cursor\"` or use WithCursorColumn", "cursor column (the db tags' cursor option, or WithCursorColumn): %s"},
		sourcedef.FieldInitial:      {"no initial position", "WithInitialSnapshot: %s"},
		sourcedef.FieldSkipWriter:   {"no skip writer", "WithSkipWriter: %s"},
		sourcedef.FieldSettleLag:    {"no settle lag", "WithSettleLag: %s"},
		sourcedef.FieldTables:       {"no tables", "WithTables: %s"},
		sourcedef.FieldOutbox:       {"no outbox", "WithOutbox: %s"},
		sourcedef.FieldCleanup:      {"no cleanup", "WithCleanup: %s"},
	}
	tableOptions = map[string]string{sourcedef.FieldTable: "Name", sourcedef.FieldSchema: "Schema", sourcedef.FieldColumns: "Columns",
		sourcedef.FieldKey: "Key", sourcedef.FieldFilter: "Filter"}
)

// optionError words err, the rule a definition breaks (sourcedef.Definition.Check), by the option
// or the tag that sets the part at fault.
func optionError(err error) string {
	fes := sourcedef.FieldErrors(err)
	if len(fes) == 0 {
		return err.Error()
	}
	fe := fes[0]
	i, field := fe.Part()
	if f, ok := tableOptions[field]; ok && i > 0 { // WithTables' table i (New's own is 0)
		if fe.Missing() {
			return fmt.Sprintf("WithTables' table %d: no %s", i, f)
		}
		return fmt.Sprintf("WithTables' table %d: %s: %v", i, f, fe.Err)
	}
	w, ok := options[field]
	if !ok {
		return fe.Error()
	}
	if fe.Missing() {
		return w.missing
	}
	return fmt.Sprintf(w.format, fe.Err)
}

// batchOf is the runtime's batch b as a Batch of T, its rows raw (Rows left to the caller) and
// Tables a copy of tables, so that a handler changing them changes nothing else.
func batchOf[T any](b *pollerdef.Batch, tables []string, raw []Row) *Batch[T] {
	return &Batch[T]{Poller: b.Poller, ID: b.ID, FencingToken: b.FencingToken, Attempt: b.Attempt,
		From: cursorRef(b.From), To: cursorRef(b.To), Tables: slices.Clone(tables), Raw: raw}
}

// definition is what New hands over to package pollerdef (pollerdef.Expose), for the runtime to
// read a Poller's definition without an exported way to.
func definition(v any) (*pollerdef.Def, bool) {
	p, ok := v.(*Poller)
	if !ok || p == nil || p.spec.Deliver == nil {
		return nil, false
	}
	return pollerdef.New(p.spec), true
}

// columnsOf reads the columns, key and cursor column from T's `db` tags.
func (p *Poller) columnsOf(t reflect.Type) error {
	if t == reflect.TypeFor[Row]() {
		return nil
	}
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("the row type %v is not a struct or poller.Row", t)
	}
	for _, f := range row.TaggedFields(t) {
		column := f.Column
		if column == "" {
			return fmt.Errorf("field %s: the db tag names no column", f.Name)
		}
		p.spec.Source.Columns = append(p.spec.Source.Columns, column)
		for _, o := range f.Options {
			switch o {
			case "":
			case "key":
				p.spec.Source.PK = append(p.spec.Source.PK, column)
			case "cursor":
				if p.spec.Source.Cursor.Column != "" {
					return fmt.Errorf("field %s: a second cursor column (%s is the first)", f.Name, p.spec.Source.Cursor.Column)
				}
				p.spec.Source.Cursor.Column = column
			default:
				return fmt.Errorf("field %s: db tag option %q is not key or cursor", f.Name, o)
			}
		}
	}
	if len(p.spec.Source.Columns) == 0 {
		return fmt.Errorf("the row type %v has no field tagged `db:\"column\"`", t)
	}
	return nil
}

// Name is the poller's name: its pollers/<name> folder, its <name>/function.json function and,
// in upper case with '-' as '_', its settings' prefix {P}.
func (p *Poller) Name() string { return p.spec.Name }
