package driver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// A Driver is one database and its Go driver: what every database answers its own way. Each
// lives in a package of its own; package drivers lists them, and the portable code asks them
// instead of naming a database. Every capability is a method here: what only some databases
// have (a change stream, reads bounded by open transactions, a raw row reader, a set-up that
// pollerctl cdc administers, ...) the others answer through Defaults, which every driver
// embeds, with ErrNotSupported or the neutral answer each method documents. Another database is
// another package, its entry in package drivers, and a run of the conformance suite (package
// sourcetest) against it.
type Driver interface {
	// Name is what a poller's {P}_DB_DRIVER setting says, and what the fingerprint records.
	Name() string
	// Open returns the connection pool for a DSN, not yet connected.
	Open(dsn string) (*sql.DB, error)
	// Location reads the server and database out of a DSN, without credentials.
	Location(dsn string) (Location, error)
	// Supports says whether a cursor of kind can be read here.
	Supports(kind string) bool
	// CheckDefinition refuses a definition that breaks the database's own rules (a logical
	// cursor's slot and publication names, a changetracking cursor's filter), each broken rule a
	// *sourcedef.FieldError naming the field (errors.Join of them when several), which source.Open and
	// poller.json (for the one database that reads its kind: drivers.CheckDefinition) word each
	// their own way; run after Definition.Check. Defaults: nil.
	CheckDefinition(d sourcedef.Definition) error

	// SQL.

	// Caseless says whether column names match whatever their case.
	Caseless() bool
	// Quote quotes an identifier (Defaults: double quotes).
	Quote(ident string) string
	// Placeholder is the i-th (1-based) parameter marker.
	Placeholder(i int) string
	// Limit is "SELECT " + sel + rest, reading at most n rows (Defaults: LIMIT n).
	Limit(sel, rest, n string) string
	// Keyset renders "the keys are after the params" (side After) or "at or before them"
	// (Behind) in lexicographic order, for a cursor of kind; order is, when the markers are
	// positional and the predicate repeats them, which key value each marker takes (nil: each
	// its own, in order). Defaults: a row-value comparison.
	Keyset(kind string, keys, params []string, side Side) (pred string, order []int)
	// UpperBound is what keeps a read of the cursor column col behind rows that may still
	// commit (lag: the settle lag; next gives its argument's marker).
	UpperBound(kind string, fl row.TSFlavor, col string, lag time.Duration, next func() string) Bound
	// LateCommits says whether a cursor of kind can skip a row whose transaction commits after
	// a later row was read (a late commit), which an outbox must never do, and if so which
	// cursors cannot ("" when the driver names none). Defaults: integer and timestamp+pk can
	// (an identity or a clock stamp is taken before the commit), the others cannot. A
	// timestamp+pk cursor the driver keeps behind open transactions (ReadBound) says it cannot:
	// the bound's reads then say whether they are.
	LateCommits(kind string) (skips bool, instead string)
	// ReadBound returns the bound of the keyset reads of d by the role of dsn, kept behind
	// transactions the server says are open; false when they take none (Defaults).
	ReadBound(dsn string, d sourcedef.Definition) (ReadBound, bool)
	// DeleteFirst renders a statement that deletes from table (quoted) the first rows in the
	// order of the columns order that match the predicate where renders, at most as many as
	// the marker limit renders: by the key pk (quoted columns) where it selects them in a
	// subquery. where and limit render their markers each time they are called, so the caller
	// passes their arguments in the order of the calls. Defaults: DELETE ... WHERE (pk) IN
	// (SELECT pk ... ORDER BY ... LIMIT n) AND the predicate again, so that a row changed
	// since the subquery read it is deleted only if it still matches (PostgreSQL re-checks the
	// outer WHERE on a row updated concurrently, not the subquery).
	DeleteFirst(table string, pk, order []string, where, limit func() string) string
	// StampCheck renders the predicate that finds a row the cursor column col (of flavor fl)
	// can never reach, its argument (marker param), and how to stamp the column and rewrite
	// such rows; "" when there is nothing to check (see source.Source.CheckStamps).
	StampCheck(fl row.TSFlavor, table, col, param string) (pred string, arg any, fix string)
	// IsNull is the predicate that finds NULL alone in column quoted (MySQL's "col IS NULL"
	// also finds a NOT NULL DATETIME's zero dates). Defaults: quoted IS NULL.
	IsNull(quoted string) string
	// Select is the expression that reads column quoted, of type c, as the database holds it,
	// where the Go driver would read it otherwise (modernc's sqlite turns the text of a column
	// declared DATE, DATETIME or TIMESTAMP into a time.Time, losing its form); "" (Defaults):
	// quoted itself.
	Select(c row.ColumnType, quoted string) string

	// Column types and values.

	// Classify maps a column's type (DatabaseTypeName, SQLite: the declared type; upper case,
	// without its size) to a class, and for timestamps how they compare with the database's
	// clock.
	Classify(base string) (row.Class, row.TSFlavor)
	// ColumnTypes returns the types of table's columns cols as Classify should take them,
	// given what the Go driver reported (types, in the same order), where the Go driver does
	// not name some as the database holds them (MariaDB's JSON, a LONGTEXT with a json_valid
	// CHECK, reported as TEXT). Defaults: types.
	ColumnTypes(ctx context.Context, db *sql.DB, table sourcedef.Table, cols, types []string) ([]string, error)
	// Refuse says why a column of type c cannot be read, and what to do: a type whose values
	// JSON cannot carry without loss and that has no lossless form of its own (SQL Server's
	// sql_variant). "" when it can; ErrNotSupported (Defaults) when the database refuses no
	// type. source.Open, and so pollerctl check, refuses a poller reading such a column, naming it,
	// before any tick stalls on one of its values.
	Refuse(c row.ColumnType) (string, error)
	// Scalars says whether the Go driver returns integers, floats and text as int64, float64
	// and string (else their values are widened when read). Defaults: true.
	Scalars() bool
	// Reads says whether values of columns of type c go through Value; asked once per column,
	// when a source opens. Defaults: false.
	Reads(c row.ColumnType) bool
	// Value turns v, a non-NULL value of a column of type c as the Go driver returned it (or as
	// the change stream's decoder did), into what a Row holds (documented in docs/types.md),
	// where the Go driver returns a form a Row does not hold, or holds wrongly (PostgreSQL's
	// arrays as their text literal, MySQL's dates that no calendar has). A value it cannot read
	// is returned as it is. Asked only when Reads says so.
	Value(c row.ColumnType, v any) any
	// Elem is the type of an array's elements (Classify's ClassArray), as Classify takes it;
	// "" (Defaults) for a database without arrays.
	Elem(c row.ColumnType) string
	// UUID gives the canonical text of a UUID column's bytes (SQL Server's uniqueidentifier
	// comes as 16 bytes in an order of its own). Defaults: the bytes are the text itself.
	UUID(b []byte) (string, error)
	// KeyCodec is the driver's own codec for a key column, if it has one (else a generic one
	// serves).
	KeyCodec(c row.ColumnType) (row.KeyCodec, bool)
	// ReadRaw runs query with args on a connection of db and calls read with its rows, as the
	// database sent them, for a keyset fetch that normalizes only the values a handler reads;
	// handled is false when it cannot on this pool (Defaults: never), and the fetch then reads
	// through database/sql.
	ReadRaw(ctx context.Context, db *sql.DB, query string, args []any, read func(row.RawRows) error) (handled bool, err error)

	// The table's set-up (pollerctl check).

	// CheckSetup returns the findings on d's table in db, in the order of package setup's
	// Check constants (setup.CheckTable, CheckColumns, CheckIndex, CheckStamped,
	// CheckPrivileges; the portable checks, such as the unique key's, go at their place); an
	// error only when the catalog cannot be read at all.
	CheckSetup(ctx context.Context, db *sql.DB, d sourcedef.Definition) ([]setup.Finding, error)
	// Script renders fix statements as the database's own client runs them (a file of SQL).
	Script(stmts []string) string
	// DDLInTransaction says whether DDL runs in a transaction (else each statement commits).
	DDLInTransaction() bool
	// UniqueKey asks the catalog whether cols tell t's rows apart; ErrNotSupported (Defaults)
	// when it cannot say, and each fetch then checks its rows.
	UniqueKey(ctx context.Context, db *sql.DB, t sourcedef.Table, cols []string) (setup.Uniqueness, error)
	// ErrorDetail is what the database said of a failed statement beyond the Go driver's error
	// text (PostgreSQL's DETAIL and HINT: "Key (id)=(1) is duplicated."), so that pollerctl
	// check --fix keeps it; "" (Defaults) where the error text says it all.
	ErrorDetail(err error) string
	// CreateUniqueIndex is the statement that makes cols unique in t under the name index,
	// where the database writes it its own way (SQLite names the schema on the index, not on
	// the table); "" (Defaults): the standard CREATE UNIQUE INDEX (UniqueIndexSQL).
	CreateUniqueIndex(t sourcedef.Table, index string, cols []string) string

	// Change streams: cursor kinds that read the database's own record of changes.

	// ChangeStream returns the reader of a change-stream cursor kind for the source l lays out;
	// ErrNotSupported (Defaults) when the driver has none for kind.
	ChangeStream(kind string, l Layout) (ChangeStream, error)
	// CDCKind is the cursor kind whose set-up (made on purpose, outside the tick: the logical
	// cursor's replication slot and publication, which `pollerctl cdc enable` makes) the
	// driver administers, and what that set-up is, for people ("logical", "PostgreSQL logical
	// decoding"); "" (Defaults) when none.
	CDCKind() (kind, what string)
	// OpenCDC administers a poller's set-up on its database c (package source's OpenCDC
	// connects to it; nothing of the table is checked): pollerctl cdc, reset and clone
	// administer it through here. The CDCSetup closes c.DB. ErrNotSupported (Defaults) when
	// CDCKind is "".
	OpenCDC(ctx context.Context, c Conn) (CDCSetup, error)
	// Restart says where a poller of a cursor kind of the driver's own starts again when its
	// state document is deleted (a change stream restarts where the database's record of
	// changes is, not at the beginning of the table): the line pollerctl delete warns with,
	// naming the poller; "" (Defaults) for the kinds whose poller starts over from the
	// beginning of its table.
	Restart(kind, poller string) string
	// CheckProbe says what is wrong with the details a probe of a poller of a kind only this
	// driver reads found (ChangeStream.Inspect), given the checkpoint of a state document read
	// after the probe: an error wrapping source.ErrMisconfigured that names poller in its fix, or nil
	// (Defaults).
	CheckProbe(details []Detail, checkpoint *state.Cursor, poller string) error
	// StatusDetails are the details of the status row of a poller of a kind only this driver
	// reads, made from the probe's and the ticks' history; none (Defaults) when it has nothing
	// to show.
	StatusDetails(in StatusInput) []Detail
}

// ErrNotSupported is what a Driver's method answers for a capability the database does not have
// (Defaults answers it so); callers branch on it with errors.Is.
var ErrNotSupported = errors.New("not supported by this database")

// A Bound keeps a read behind rows that may still commit: a predicate on the cursor column.
type Bound struct {
	Pred string // "" when the cursor kind has none
	Arg  any    // its argument; nil when it takes none
	// OpenTrx: the bound is the oldest transaction still open (it takes no argument). A read
	// may then stop short of committed rows behind it, which the backlog counts.
	OpenTrx bool
}

// Drivers are the databases a poller's settings can name ({P}_DB_DRIVER); package drivers
// lists them.
type Drivers []Driver

// Lookup returns the driver of that name.
func (ds Drivers) Lookup(name string) (Driver, bool) {
	for _, d := range ds {
		if d.Name() == name {
			return d, true
		}
	}
	return nil, false
}

// Names lists the drivers' names, sorted.
func (ds Drivers) Names() []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Name())
	}
	slices.Sort(out)
	return out
}

// Location reads the server and database out of a DSN of the named driver.
func (ds Drivers) Location(driver, dsn string) (Location, error) {
	d, ok := ds.Lookup(driver)
	if !ok {
		return Location{}, fmt.Errorf("unknown driver %q", driver)
	}
	return d.Location(dsn)
}

// CDCAdmin returns the driver that administers the change-stream set-up of cursor kind
// (Driver.CDCKind), when one does.
func (ds Drivers) CDCAdmin(kind string) (Driver, bool) {
	for _, d := range ds {
		if k, _ := d.CDCKind(); k != "" && k == kind {
			return d, true
		}
	}
	return nil, false
}

// Reading lists the names of the drivers that read cursor kind, sorted.
func (ds Drivers) Reading(kind string) []string {
	var out []string
	for _, d := range ds {
		if d.Supports(kind) {
			out = append(out, d.Name())
		}
	}
	slices.Sort(out)
	return out
}

// Defaults is what a Driver does unless it says otherwise (embed it): double-quoted
// identifiers, LIMIT, row-value comparison for the keyset, the cursor kinds every database has,
// plain values from the Go driver, and ErrNotSupported or the neutral answer for each
// capability only some databases have.
type Defaults struct{}

// Quote quotes an identifier in double quotes.
func (Defaults) Quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Limit appends LIMIT n.
func (Defaults) Limit(sel, rest, n string) string { return "SELECT " + sel + rest + " LIMIT " + n }

// Keyset compares row values, which PostgreSQL's and SQLite's indexes seek on.
func (Defaults) Keyset(_ string, keys, params []string, side Side) (string, []int) {
	op := side.ops().last
	if len(keys) == 1 {
		return keys[0] + " " + op + " " + params[0], nil
	}
	return "(" + strings.Join(keys, ", ") + ") " + op + " (" + strings.Join(params, ", ") + ")", nil
}

// DeleteFirst deletes by key the rows a subquery selects in order, checking the predicate
// again on each row it deletes.
func (Defaults) DeleteFirst(table string, pk, order []string, where, limit func() string) string {
	keys := strings.Join(pk, ", ")
	sub := "SELECT " + keys + " FROM " + table + " WHERE " + where() + " ORDER BY " + strings.Join(order, ", ") + " LIMIT " + limit()
	if len(pk) > 1 {
		keys = "(" + keys + ")"
	}
	return "DELETE FROM " + table + " WHERE " + keys + " IN (" + sub + ") AND " + where()
}

// Side is which rows a keyset predicate selects against a cursor (Driver.Keyset).
type Side int

// The sides of a cursor.
const (
	// After: the rows after the cursor, which are still to be read.
	After Side = iota
	// Behind: the rows at or before it, which a committed checkpoint says were delivered (a
	// cleanup deletes them).
	Behind
)

// sideOps are a side's comparisons: strict on a key that decides, wide on the leading range,
// last on the last key.
type sideOps struct{ strict, wide, last string }

func (s Side) ops() sideOps {
	if s == Behind {
		return sideOps{"<", "<=", "<="}
	}
	return sideOps{">", ">=", ">"}
}

// Supports the cursor kinds every database has: timestamp+pk and integer.
func (Defaults) Supports(kind string) bool {
	return kind == state.KindTimestampPK || kind == state.KindInteger
}

// Scalars: integers, floats and text come as int64, float64 and string.
func (Defaults) Scalars() bool { return true }

// CheckDefinition: no rules of the database's own.
func (Defaults) CheckDefinition(sourcedef.Definition) error { return nil }

// LateCommits: integer and timestamp+pk cursors can skip a late commit, the others cannot.
func (Defaults) LateCommits(kind string) (bool, string) {
	return kind == state.KindInteger || kind == state.KindTimestampPK, ""
}

// ReadBound: the keyset reads take no bound but the cursor kind's (UpperBound).
func (Defaults) ReadBound(string, sourcedef.Definition) (ReadBound, bool) { return nil, false }

// IsNull is "quoted IS NULL".
func (Defaults) IsNull(quoted string) string { return quoted + " IS NULL" }

// Select: every column is read as it is quoted.
func (Defaults) Select(row.ColumnType, string) string { return "" }

// ColumnTypes: the Go driver names every type as the database holds it.
func (Defaults) ColumnTypes(_ context.Context, _ *sql.DB, _ sourcedef.Table, _, types []string) ([]string, error) {
	return types, nil
}

// Refuse: the database refuses no type.
func (Defaults) Refuse(row.ColumnType) (string, error) { return "", ErrNotSupported }

// Reads: the Go driver's values need no reading of the driver's own.
func (Defaults) Reads(row.ColumnType) bool { return false }

// Value returns v as it is.
func (Defaults) Value(_ row.ColumnType, v any) any { return v }

// Elem: no arrays.
func (Defaults) Elem(row.ColumnType) string { return "" }

// UUID takes the bytes as the text itself.
func (Defaults) UUID(b []byte) (string, error) { return string(b), nil }

// ReadRaw: every fetch reads through database/sql.
func (Defaults) ReadRaw(context.Context, *sql.DB, string, []any, func(row.RawRows) error) (bool, error) {
	return false, nil
}

// UniqueKey cannot read the catalog's keys.
func (Defaults) UniqueKey(context.Context, *sql.DB, sourcedef.Table, []string) (setup.Uniqueness, error) {
	return setup.Uniqueness{}, ErrNotSupported
}

// ErrorDetail: the error's text says it all.
func (Defaults) ErrorDetail(error) string { return "" }

// CreateUniqueIndex: the standard statement.
func (Defaults) CreateUniqueIndex(sourcedef.Table, string, []string) string { return "" }

// ChangeStream: no change-stream cursor kind.
func (Defaults) ChangeStream(kind string, _ Layout) (ChangeStream, error) {
	return nil, fmt.Errorf("a %s cursor: %w", kind, ErrNotSupported)
}

// CDCKind: no set-up to administer.
func (Defaults) CDCKind() (kind, what string) { return "", "" }

// OpenCDC: no set-up to administer.
func (Defaults) OpenCDC(_ context.Context, c Conn) (CDCSetup, error) {
	return nil, fmt.Errorf("a %s cursor's set-up: %w", c.Definition.Cursor.Kind, ErrNotSupported)
}

// Restart: a poller starts over from the beginning of its table.
func (Defaults) Restart(string, string) string { return "" }

// CheckProbe: nothing to judge.
func (Defaults) CheckProbe([]Detail, *state.Cursor, string) error { return nil }

// StatusDetails: nothing to show.
func (Defaults) StatusDetails(StatusInput) []Detail { return nil }

// ExpandedKeyset is the keyset in the form without row comparison, with a leading range on the
// first key so that an index on the keys is read as a range; After:
// k0 >= p0 AND (k0 > p0 OR (k1 > p1 OR (k1 = p1 AND k2 > p2))), Behind the same with <=, < and
// <= on the last key.
func ExpandedKeyset(keys, params []string, side Side) string {
	op := side.ops()
	last := len(keys) - 1
	rest := keys[last] + " " + op.last + " " + params[last]
	if last == 0 {
		return rest
	}
	for i := last - 1; i >= 1; i-- {
		rest = "(" + keys[i] + " " + op.strict + " " + params[i] + " OR (" + keys[i] + " = " + params[i] + " AND " + rest + "))"
	}
	return keys[0] + " " + op.wide + " " + params[0] + " AND (" + keys[0] + " " + op.strict + " " + params[0] + " OR " + rest + ")"
}

// ExpandedKeysetOrder is the order of the n key values in ExpandedKeyset's markers, for a
// driver whose markers are positional: 0, 0, then each middle key twice, then the last once
// (one key: just 0).
func ExpandedKeysetOrder(n int) []int {
	if n == 1 {
		return []int{0}
	}
	out := []int{0, 0}
	for i := 1; i < n-1; i++ {
		out = append(out, i, i)
	}
	return append(out, n-1)
}

// A Quoter quotes an identifier: a Driver, or Defaults for the databases that double-quote.
type Quoter interface {
	Quote(ident string) string
}

// QuoteTable quotes a table name, with its schema when it has one, for d.
func QuoteTable(d Quoter, t sourcedef.Table) string {
	if t.Schema == "" {
		return d.Quote(t.Name)
	}
	return d.Quote(t.Schema) + "." + d.Quote(t.Name)
}

// QuoteAll quotes each name for d.
func QuoteAll(d Quoter, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = d.Quote(n)
	}
	return out
}

// A ReadBound is an upper bound on the cursor column below the transactions still open: each
// read takes it as an argument (cursor < Arg).
type ReadBound interface {
	// Arg is the bound for a read: the rows stamped at or after it wait.
	Arg(ctx context.Context, db *sql.DB) (any, error)
	// Stats says how the last read was bounded (HoldBack, LateCommits, Details); the zero
	// Stats before any read.
	Stats() Stats
}

// Location is where a source lives, without credentials: what the fingerprint covers.
type Location struct {
	Server   string // host[:port][\instance]; empty for SQLite
	Database string // database name; the file path for SQLite
}
