package sourcedef

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// The parts of a definition as a FieldError names them: a neutral path that each caller words
// its own way (poller.New by its options, poller.json by its fields, the source by its errors).
// A field of one of the tables of a definition of several is that table's, by its place in
// Definition.Tables: "tables[1].key" (Definition.TableField).
const (
	FieldTable        = "table"  // the table's name
	FieldSchema       = "schema" // the table's schema
	FieldColumns      = "columns"
	FieldKey          = "key"
	FieldFilter       = "filter"
	FieldCursorKind   = "cursor.kind"
	FieldCursorColumn = "cursor.column"
	FieldInitial      = "initial"
	FieldSkipWriter   = "skip_writer"
	FieldSettleLag    = "settle_lag"
	FieldTables       = "tables" // the tables of a poller of several, as a whole
	FieldSlot         = "slot"
	FieldPublication  = "publication"
)

// tableFields are the fields each table of a definition has (TableDef's).
var tableFields = []string{FieldTable, FieldSchema, FieldColumns, FieldKey, FieldFilter}

// ErrMissing: a part the definition needs is missing (a FieldError's Err).
var ErrMissing = errors.New("required")

// A FieldError is a rule of a definition that it breaks: Field names the part at fault (one of
// the Field constants, or a table's: "tables[1].key"), Err says what is wrong, ErrMissing when
// the part is missing. Its callers word it their own way; it wraps ErrDefinition and Err.
type FieldError struct {
	Field string
	Err   error
}

// Error is the field and what is wrong with it: "cursor.column: required".
func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap is ErrDefinition and Err.
func (e *FieldError) Unwrap() []error { return []error{ErrDefinition, e.Err} }

// Missing says the part is missing (Err is ErrMissing).
func (e *FieldError) Missing() bool { return errors.Is(e.Err, ErrMissing) }

var tableField = regexp.MustCompile(`^tables\[(\d+)\]\.(.+)$`)

// Part says which of the definition's tables (Definition.Tables) the field is of, and its name
// there: "tables[1].key" is table 1's "key", "key" table 0's (a definition of one table); a
// field of the poller as a whole ("cursor.kind", "tables") is -1's.
func (e *FieldError) Part() (table int, name string) {
	if m := tableField.FindStringSubmatch(e.Field); m != nil {
		i, err := strconv.Atoi(m[1])
		if err == nil {
			return i, m[2]
		}
	}
	if slices.Contains(tableFields, e.Field) {
		return 0, e.Field
	}
	return -1, e.Field
}

// FieldErrors are the FieldErrors err holds, in order: err itself, or those it joins
// (errors.Join), as Check and a driver's CheckDefinition return them. None for an error that is
// not one.
func FieldErrors(err error) []*FieldError {
	if fe, ok := err.(*FieldError); ok {
		return []*FieldError{fe}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*FieldError
		for _, e := range j.Unwrap() {
			out = append(out, FieldErrors(e)...)
		}
		return out
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return []*FieldError{fe}
	}
	return nil
}

// TableField is field of table i of d (Definition.Tables) as a FieldError names it:
// "tables[1].key" when d reads several tables, "key" when it reads one.
func (d Definition) TableField(i int, field string) string {
	if len(d.More) == 0 {
		return field
	}
	return fmt.Sprintf("tables[%d].%s", i, field)
}

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

func missing(field string) *FieldError { return &FieldError{Field: field, Err: ErrMissing} }

// Check checks the rules of every definition, whatever its database: the first one d breaks,
// as a *FieldError (nil when it breaks none). A database's own rules are its driver's
// (driver.Driver.CheckDefinition); the source checks both when it opens, poller.New and poller.json these
// as soon as the poller is declared.
func (d Definition) Check() error {
	kind := d.Cursor.Kind
	if !slices.Contains(state.Kinds, kind) {
		return fieldErr(FieldCursorKind, "%q is not one of %s", kind, strings.Join(state.Kinds, ", "))
	}
	if len(d.More) > 0 {
		if err := d.CheckSeveralTables(); err != nil {
			return err
		}
	}
	for i, t := range d.Tables() {
		if d.ReadsMessages() {
			break // no table: checkMessages
		}
		if err := d.checkTable(i, t); err != nil {
			return err
		}
	}
	switch {
	case d.Cursor.Column == "" && !state.ChangeKind(kind):
		return missing(FieldCursorColumn)
	case d.Cursor.Column != "" && state.ChangeKind(kind):
		return fieldErr(FieldCursorColumn, "a %s cursor reads the database's record of changes and takes no column (%q)", kind, d.Cursor.Column)
	case d.Cursor.Column != "":
		if err := checkIdent(d.Cursor.Column); err != nil {
			return fieldErr(FieldCursorColumn, "%q: %v", d.Cursor.Column, err)
		}
	}
	if d.SettleLag != 0 && !state.SettleLagKind(kind) {
		return fieldErr(FieldSettleLag, "%v", SettleLagRefused(kind))
	}
	if kind == state.KindTimestampPK && len(d.KeyColumns()) < 2 {
		return fieldErr(FieldKey, "a timestamp+pk cursor needs a key column other than its cursor column %q as its tiebreaker", d.Cursor.Column)
	}
	switch {
	case d.Initial != "" && d.Initial != InitialNow && d.Initial != InitialSnapshot:
		return fieldErr(FieldInitial, "%q is not %q (the default: the changes from the first tick on) or %q (the rows there are first, then the changes)", d.Initial, InitialNow, InitialSnapshot)
	case d.Initial == InitialSnapshot && !state.ChangeKind(kind):
		return fieldErr(FieldInitial, "%q is for %s: the %s cursor's first tick reads every row there is already", InitialSnapshot, cursors(state.ChangeKind), kind)
	}
	if d.SkipWriter != "" {
		if !state.ChangeKind(kind) {
			return fieldErr(FieldSkipWriter, "is for %s, which know who wrote a change; a %s cursor reads rows, not their writers", cursors(state.ChangeKind), kind)
		}
		if err := CheckWriter(d.SkipWriter); err != nil {
			return fieldErr(FieldSkipWriter, "%q: %v", d.SkipWriter, err)
		}
	}
	return d.checkOutbox()
}

// CheckSeveralTables checks the rules of a poller of several tables, which Check checks when d
// has More (poller.json's list of tables is one however many it lists): its cursor kind reads
// several, and it starts at the stream's current position.
func (d Definition) CheckSeveralTables() error {
	switch {
	case !state.SeveralTablesKind(d.Cursor.Kind):
		return fieldErr(FieldTables, "several tables are for %s (one stream for them all), not the %s cursor, which reads one table: give each table a poller of its own", cursors(state.SeveralTablesKind), d.Cursor.Kind)
	case d.Initial == InitialSnapshot:
		return fieldErr(FieldInitial, "%q reads one table's rows: a poller of several tables starts %q (give a table a poller of its own for its snapshot, or start it with its rows already copied)", InitialSnapshot, InitialNow)
	}
	return nil
}

// checkTable checks table i of d (Definition.Tables): its name, columns, key and filter.
func (d Definition) checkTable(i int, t TableDef) error {
	f := func(field string) string { return d.TableField(i, field) }
	if t.Table.Name == "" {
		return missing(f(FieldTable))
	}
	if err := checkIdent(t.Table.Name); err != nil {
		return fieldErr(f(FieldTable), "%q: %v", t.Table.Name, err)
	}
	if t.Table.Schema != "" {
		if err := checkIdent(t.Table.Schema); err != nil {
			return fieldErr(f(FieldSchema), "%q: %v", t.Table.Schema, err)
		}
	}
	if slices.ContainsFunc(d.Tables()[:i], func(u TableDef) bool { return strings.EqualFold(u.Table.String(), t.Table.String()) }) {
		return fieldErr(f(FieldTable), "%s is listed twice", t.Table)
	}
	listed := t.Columns
	if slices.Contains(t.Columns, AllColumns) {
		if len(t.Columns) > 1 || !state.AllColumnsKind(d.Cursor.Kind) {
			return fieldErr(f(FieldColumns), "[%q] alone reads every column, for %s only (its stream describes the table as it changes); list the columns", AllColumns, cursors(state.AllColumnsKind))
		}
		listed = nil
	}
	for j, c := range listed {
		if err := checkIdent(c); err != nil {
			return fieldErr(f(FieldColumns), "%q: %v", c, err)
		}
		if slices.Contains(listed[:j], c) {
			return fieldErr(f(FieldColumns), "%q is listed twice", c)
		}
	}
	if len(t.PK) == 0 {
		return missing(f(FieldKey))
	}
	for _, k := range t.PK {
		if err := checkIdent(k); err != nil {
			return fieldErr(f(FieldKey), "%q: %v", k, err)
		}
	}
	if strings.Contains(t.Filter, ";") {
		return fieldErr(f(FieldFilter), "holds ';': a filter is one predicate")
	}
	return nil
}

// cursors names the cursor kinds that have a property, for messages: "the logical cursor", "the
// logical and changetracking cursors".
func cursors(has func(kind string) bool) string {
	var names []string
	for _, k := range state.Kinds {
		if has(k) {
			names = append(names, k)
		}
	}
	if len(names) == 1 {
		return "the " + names[0] + " cursor"
	}
	return "the " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " cursors"
}
