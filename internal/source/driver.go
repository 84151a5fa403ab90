package source

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// A Driver is one database and its Go driver: what every database answers its own way. Each
// lives in a package of its own; package drivers lists them, and the portable code asks them
// instead of naming a database. What only some databases have, a driver adds by implementing an
// optional interface too: ChangeStreamer (cursor kinds that read the database's own record of
// changes), ReadBounder (reads kept behind transactions the server says are open), UUIDReader.
// Another database is another package, its entry in package drivers, and a run of the
// conformance suite (package sourcetest) against it.
type Driver interface {
	// Name is what a poller's {P}_DB_DRIVER setting says, and what the fingerprint records.
	Name() string
	// Open returns the connection pool for a DSN, not yet connected.
	Open(dsn string) (*sql.DB, error)
	// Location reads the server and database out of a DSN, without credentials.
	Location(dsn string) (Location, error)
	// Supports says whether a cursor of kind can be read here.
	Supports(kind string) bool
	// Caseless says whether column names match whatever their case.
	Caseless() bool
	// Quote quotes an identifier.
	Quote(ident string) string
	// Placeholder is the i-th (1-based) parameter marker.
	Placeholder(i int) string
	// Limit is "SELECT " + sel + rest, reading at most n rows.
	Limit(sel, rest, n string) string
	// Keyset renders "the keys are after the params" in lexicographic order, for a cursor of
	// kind; order is, when the markers are positional and the predicate repeats them, which key
	// value each marker takes (nil: each its own, in order).
	Keyset(kind string, keys, params []string) (pred string, order []int)
	// UpperBound is what keeps a read of the cursor column col behind rows that may still
	// commit (lag: the settle lag; next gives its argument's marker).
	UpperBound(kind string, fl TSFlavor, col string, lag time.Duration, next func() string) Bound
	// StampCheck renders the predicate that finds a row the cursor column col (of flavor fl)
	// can never reach, its argument (marker param), and how to stamp the column and rewrite
	// such rows; "" when there is nothing to check (see Source.CheckStamps).
	StampCheck(fl TSFlavor, table, col, param string) (pred string, arg any, fix string)
	// Classify maps a column's type (DatabaseTypeName, SQLite: the declared type; upper case,
	// without its size) to a class, and for timestamps how they compare with the database's
	// clock.
	Classify(base string) (Class, TSFlavor)
	// Scalars says whether the Go driver returns integers, floats and text as int64, float64
	// and string (else their values are widened when read).
	Scalars() bool
	// KeyCodec is the driver's own codec for a key column, if it has one (else a generic one
	// serves).
	KeyCodec(c ColumnType) (KeyCodec, bool)
}

// A DefinitionChecker is a Driver with rules of its own for a definition (a logical cursor's slot
// and publication names): Open refuses a definition that breaks them, with the error it gives.
type DefinitionChecker interface {
	CheckDefinition(d Definition) error
}

// A Restarter is a Driver that says where a poller of a cursor kind of its own starts again when
// its state document is deleted (a change stream restarts where the database's record of changes
// is, not at the beginning of the table): the line pollerctl delete warns with, naming the
// poller; "" for the kinds whose poller starts over from the beginning of its table.
type Restarter interface {
	Restart(kind, poller string) string
}

// A UUIDReader is a Driver whose UUID columns come as 16 bytes in an order of their own (SQL
// Server's uniqueidentifier): UUID gives their canonical text. Other drivers' bytes are taken
// as the text itself.
type UUIDReader interface {
	UUID(b []byte) (string, error)
}

// A ValueReader is a Driver whose Go driver returns some types' values in a form a Row does not
// hold, or holds wrongly: PostgreSQL's arrays as their text literal, MySQL's dates that no
// calendar has ("0000-00-00") as another date. Its Value turns them into what a Row holds.
type ValueReader interface {
	// Reads says whether values of columns of type c go through Value; asked once per column,
	// when a source opens.
	Reads(c ColumnType) bool
	// Value turns v, a non-NULL value of a column of type c as the Go driver returned it (or as
	// the change stream's decoder did), into what a Row holds: documented in docs/types.md. A
	// value it cannot read is returned as it is.
	Value(c ColumnType, v any) any
}

// A ColumnTyper is a Driver whose Go driver does not name some column types as the database
// holds them (MariaDB's JSON, a LONGTEXT with a json_valid CHECK, reported as TEXT): ColumnTypes
// returns the types of table's columns cols, given what the Go driver reported (types, in the
// same order), as Classify should take them.
type ColumnTyper interface {
	ColumnTypes(ctx context.Context, db *sql.DB, table Table, cols, types []string) ([]string, error)
}

// A Selector is a Driver whose Go driver reads some columns other than as the database holds
// them unless the select list says otherwise (modernc's sqlite turns the text of a column
// declared DATE, DATETIME or TIMESTAMP into a time.Time, losing its form): Select is the
// expression that reads column quoted, of type c, as it is held ("" : quoted itself).
type Selector interface {
	Select(c ColumnType, quoted string) string
}

// A TypeRefuser is a Driver with column types whose values JSON cannot carry without loss and
// that have no lossless form of their own (SQL Server's sql_variant, whose values carry their own
// types): Refuse says why a column of type c cannot be read, and what to do ("": it can). Open,
// and so pollerctl check, refuses a poller reading such a column, naming it, before any tick
// stalls on one of its values.
type TypeRefuser interface {
	Refuse(c ColumnType) string
}

// A NullTester is a Driver whose "col IS NULL" finds more than NULLs (MySQL finds a NOT NULL
// DATETIME's zero dates so): IsNull is the predicate that finds NULL alone in column quoted.
type NullTester interface {
	IsNull(quoted string) string
}

// An ArrayReader is a Driver with array types (Classify's ClassArray; its ValueReader turns their
// values into []any): Elem is the type of an array's elements, as Classify takes it.
type ArrayReader interface {
	Elem(c ColumnType) string
}

// A Bound keeps a read behind rows that may still commit: a predicate on the cursor column.
type Bound struct {
	Pred string // "" when the cursor kind has none
	Arg  any    // its argument; nil when it takes none
	// OpenTrx: the bound is the oldest transaction still open (it takes no argument). A read
	// may then stop short of committed rows behind it, which the backlog counts.
	OpenTrx bool
}

// A ColumnType is what a driver made of a column's database type (Driver.Classify).
type ColumnType struct {
	DBType string   // the type as the Go driver names it (SQLite: as declared)
	Class  Class    // what the type is, as far as encoding its values goes
	Flavor TSFlavor // how a timestamp compares with the database's clock
}

// A KeyCodec encodes a key column's value into the state document's cursor and back into a
// query argument, exactly.
type KeyCodec struct {
	Encode func(v any) (json.RawMessage, error)
	Decode func(raw json.RawMessage) (any, error)
	// Marker, when set, writes the argument's marker in the keyset predicate (e.g. cast to the
	// column's type, where the argument's own type would compare the column by other rules);
	// nil: the marker as it is.
	Marker func(marker string) string
}

// marker is the argument marker m as the codec writes it in SQL.
func (k KeyCodec) marker(m string) string {
	if k.Marker == nil {
		return m
	}
	return k.Marker(m)
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

// reading lists the names of the drivers that read cursor kind, sorted.
func (ds Drivers) reading(kind string) []string {
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
// and plain values from the Go driver.
type Defaults struct{}

// Quote quotes an identifier in double quotes.
func (Defaults) Quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Limit appends LIMIT n.
func (Defaults) Limit(sel, rest, n string) string { return "SELECT " + sel + rest + " LIMIT " + n }

// Keyset compares row values, which PostgreSQL's and SQLite's indexes seek on.
func (Defaults) Keyset(_ string, keys, params []string) (string, []int) {
	if len(keys) == 1 {
		return keys[0] + " > " + params[0], nil
	}
	return "(" + strings.Join(keys, ", ") + ") > (" + strings.Join(params, ", ") + ")", nil
}

// Supports the cursor kinds every database has: timestamp+pk and integer.
func (Defaults) Supports(kind string) bool {
	return kind == state.KindTimestampPK || kind == state.KindInteger
}

// Scalars: integers, floats and text come as int64, float64 and string.
func (Defaults) Scalars() bool { return true }

// ExpandedKeyset is the keyset in the form without row comparison, with a leading range on the
// first key so that an index on the keys is read as a range:
// k0 >= p0 AND (k0 > p0 OR (k1 > p1 OR (k1 = p1 AND k2 > p2))).
func ExpandedKeyset(keys, params []string) string {
	last := len(keys) - 1
	rest := keys[last] + " > " + params[last]
	if last == 0 {
		return rest
	}
	for i := last - 1; i >= 1; i-- {
		rest = "(" + keys[i] + " > " + params[i] + " OR (" + keys[i] + " = " + params[i] + " AND " + rest + "))"
	}
	return keys[0] + " >= " + params[0] + " AND (" + keys[0] + " > " + params[0] + " OR " + rest + ")"
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

// QuoteTable quotes a table name, with its schema when it has one, for d.
func QuoteTable(d Driver, t Table) string {
	if t.Schema == "" {
		return d.Quote(t.Name)
	}
	return d.Quote(t.Schema) + "." + d.Quote(t.Name)
}

// QuoteAll quotes each name for d.
func QuoteAll(d Driver, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = d.Quote(n)
	}
	return out
}
