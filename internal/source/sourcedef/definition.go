// Package sourcedef is what a poller declares about its source (a Definition: its tables,
// columns, key, cursor kind and column, filter) and the one validator of it (Definition.Check),
// whose field-tagged errors (FieldError) poller.New, poller.json and the source each word their
// own way. The rules of one database are its driver's (driver.Driver.CheckDefinition).
package sourcedef

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// DefaultSettleLag is how far behind the database's clock a timestamp+pk cursor reads unless
// the poller says otherwise: longer than any write transaction on the table should stay open.
const DefaultSettleLag = 10 * time.Second

// SettleLagRefused says why a cursor of kind, which is not one state.SettleLagKind says has an
// age, takes no settle lag: the one wording of the refusal (Check's, and {P}_SETTLE_LAG's).
func SettleLagRefused(kind string) error {
	if state.ChangeKind(kind) {
		return fmt.Errorf("applies to timestamp+pk cursors only; this poller's cursor is %s, which reads committed changes in commit order", kind)
	}
	return fmt.Errorf("applies to timestamp+pk cursors only; this poller's cursor is %s (xid and rowversion are bounded by the database's open transactions, integer by nothing: use it on append-only tables)", kind)
}

// NoSettleLag reads up to the database's clock itself. It is unsafe for tables written by
// transactions that commit after they take their timestamp (see package source's doc).
const NoSettleLag time.Duration = -1

// Definition is what a poller declares about its source.
type Definition struct {
	// Table is the source table, schema-qualified or not.
	Table Table
	// Columns are the columns each row carries. The cursor and key columns are added when missing.
	// A logical cursor's may be AllColumns alone: every column the table has when the source
	// opens, and the columns added later as they come (the reader opens again).
	Columns []string
	// Cursor is the cursor kind and its column.
	Cursor Cursor
	// PK are the key columns: the rows' identity, and the tiebreaker after the cursor column.
	PK []string
	// Filter is an optional fixed predicate, written in the poller's Go code (never from
	// configuration or input), e.g. `status <> 'draft'`. It is ANDed with the keyset predicate;
	// a logical cursor's is its publication's row filter (PostgreSQL 15 or later), which
	// PostgreSQL applies as it decodes. The changetracking cursor takes none.
	Filter string
	// SettleLag applies to timestamp+pk cursors: only rows whose cursor is older than the
	// database's clock minus the lag are read. Zero means DefaultSettleLag; NoSettleLag means none.
	SettleLag time.Duration
	// Slot and Publication are the logical replication slot and the publication a logical cursor
	// reads (pollerctl cdc enable creates them); unused by the other kinds.
	Slot        string
	Publication string
	// KeepUp is how far, in WAL bytes, a logical cursor's slot may fall behind the end of the WAL
	// while the table is quiet before an idle tick moves it on; 0 means DefaultKeepUp.
	KeepUp int64
	// Initial is where a change-stream cursor starts: InitialNow ("" too) at the stream's
	// current position, InitialSnapshot with the table's current rows first, as reads, beside
	// the changes (a backfill the first tick starts). Keyset cursors start with every row anyway.
	Initial string
	// SkipWriter names a writer whose changes a change-stream cursor leaves out (the
	// application's own writes): PostgreSQL transactions whose replication origin is SkipWriter
	// or starts with SkipWriter and a dot; SQL Server changes made WITH CHANGE_TRACKING_CONTEXT
	// of SkipWriter's bytes. "" leaves out nothing.
	SkipWriter string
	// More are the tables a change-stream cursor reads besides Table, through the same stream
	// (logical: one slot and publication; changetracking: one change version): their changes
	// come in commit order with Table's, each row naming its table (Row.Table). Each has its own
	// columns, key and filter; the cursor, slot, publication, keep-up, start and skipped writer
	// are the poller's.
	More []TableDef
	// Outbox, when set, makes the table an outbox whose rows are events (Outbox).
	Outbox *Outbox
	// Cleanup, when set, deletes delivered rows behind the committed checkpoint (keyset cursors).
	Cleanup *Cleanup
}

// A TableDef is one more table of a poller that reads several (Definition.More).
type TableDef struct {
	Table   Table
	Columns []string // as Definition.Columns: AllColumns alone reads every column
	PK      []string
	Filter  string
}

// Tables are the poller's tables, Table first, each as a TableDef.
func (d Definition) Tables() []TableDef {
	return append([]TableDef{{Table: d.Table, Columns: d.Columns, PK: d.PK, Filter: d.Filter}}, d.More...)
}

// Part is d reading t alone: what each table of a poller of several is checked, laid out and
// set up as.
func (d Definition) Part(t TableDef) Definition {
	d.Table, d.Columns, d.PK, d.Filter, d.More = t.Table, t.Columns, t.PK, t.Filter, nil
	return d
}

// AllColumns, alone in Definition.Columns, reads every column of the table (logical cursors).
const AllColumns = "*"

// ReadsAllColumns says whether d reads every column of the table (Columns is AllColumns alone):
// which they are, the table says when the source opens.
func (d Definition) ReadsAllColumns() bool { return len(d.Columns) == 1 && d.Columns[0] == AllColumns }

// Where a change-stream poller starts (Definition.Initial).
const (
	InitialNow      = "now"
	InitialSnapshot = "snapshot"
)

// Changes reports whether the cursor reads a change stream (state.ChangeKind).
func (d Definition) Changes() bool {
	return state.ChangeKind(d.Cursor.Kind)
}

// Cursor names the cursor kind and column.
type Cursor struct {
	Kind   string // one of state.Kinds
	Column string // the cursor column; none for the change-stream kinds (logical, changetracking)
}

// Table is a table name with an optional schema.
type Table struct {
	Schema string
	Name   string
}

// String is the table's name, schema-qualified when it has a schema.
func (t Table) String() string {
	if t.Schema == "" {
		return t.Name
	}
	return t.Schema + "." + t.Name
}

// ErrDefinition: the poller's source definition is invalid.
var ErrDefinition = errors.New("invalid source definition")

// SettleLagOrDefault is SettleLag with the zero value and NoSettleLag resolved.
func (d Definition) SettleLagOrDefault() time.Duration {
	switch {
	case d.SettleLag == 0:
		return DefaultSettleLag
	case d.SettleLag < 0:
		return 0
	}
	return d.SettleLag
}

// KeyColumns are the keyset's columns in order: the cursor column, then the key columns that are
// not the cursor column. A change-stream cursor has no cursor column: the key columns.
func (d Definition) KeyColumns() []string {
	if d.Changes() {
		return slices.Clone(d.PK)
	}
	keys := []string{d.Cursor.Column}
	for _, k := range d.PK {
		if k != d.Cursor.Column {
			keys = append(keys, k)
		}
	}
	return keys
}

// Selected is Columns with the key columns added where missing: the columns a row holds (the
// key columns alone for AllColumns, which the source replaces by the table's when it opens).
func (d Definition) Selected() []string {
	cols := slices.Clone(d.Columns)
	if d.ReadsAllColumns() {
		cols = nil
	}
	for _, k := range d.KeyColumns() {
		if !slices.Contains(cols, k) {
			cols = append(cols, k)
		}
	}
	return cols
}

// Label names the poller's table ("table T"), or its tables ("tables T, U"), or a messages
// outbox's prefix ("messages of prefix "P"").
func (d Definition) Label() string {
	if d.ReadsMessages() {
		return fmt.Sprintf("messages of prefix %q", d.Outbox.Messages)
	}
	if len(d.More) == 0 {
		return "table " + d.Table.String()
	}
	return "tables " + d.TableNames()
}

// TableNames are the poller's tables, separated by commas.
func (d Definition) TableNames() string {
	names := make([]string, 0, 1+len(d.More))
	for _, t := range d.Tables() {
		names = append(names, t.Table.String())
	}
	return strings.Join(names, ", ")
}

// CheckWriter accepts a writer's name (Definition.SkipWriter) that fits both databases' marks:
// up to 64 letters, digits and "._-:" (a PostgreSQL replication origin's name; SQL Server's
// change tracking context is its bytes, at most 128).
func CheckWriter(s string) error {
	if s == "" || len(s) > 64 {
		return errors.New("a writer's name has 1 to 64 characters")
	}
	for _, r := range s {
		if r > unicode.MaxASCII || !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._-:", r)) {
			return fmt.Errorf("a writer's name has letters, digits and . _ - : only, not %q", r)
		}
	}
	return nil
}

// checkIdent accepts identifiers with letters, digits, spaces and the punctuation real schemas
// use (including quotes and brackets, which are escaped when quoted), and refuses what only an
// injection attempt needs: ';', comment markers, control characters, and edge spaces.
func checkIdent(s string) error {
	switch {
	case s == "":
		return errors.New("empty identifier")
	case len(s) > 128:
		return errors.New("identifier longer than 128 bytes")
	case strings.TrimSpace(s) != s:
		return errors.New("identifier starts or ends with white space")
	case strings.Contains(s, "--") || strings.Contains(s, "/*") || strings.Contains(s, "*/"):
		return errors.New("identifier contains a comment marker")
	}
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
		case strings.ContainsRune(" _-$#@'\"[]`.", r):
		default:
			return fmt.Errorf("identifier contains %q, which is not allowed", r)
		}
	}
	return nil
}
