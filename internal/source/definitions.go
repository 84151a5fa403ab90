package source

import (
	"fmt"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// validate checks the definition d for the driver of ds named driver, which it returns: the rules
// of every definition (Check), the driver's support of its cursor kind and the driver's own
// rules (Driver.CheckDefinition). Errors wrap ErrDefinition and name the poller and the part at
// fault; a broken rule's wraps its *FieldError.
func validate(d sourcedef.Definition, poller string, ds driver.Drivers, name string) (driver.Driver, error) {
	fail := func(format string, args ...any) (driver.Driver, error) {
		return nil, fmt.Errorf("source: poller %q: %w: %s", poller, sourcedef.ErrDefinition, fmt.Sprintf(format, args...))
	}
	dl, ok := ds.Lookup(name)
	if !ok {
		return fail("driver %q is not one of %s", name, strings.Join(ds.Names(), ", "))
	}
	if err := d.Check(); err != nil {
		return nil, openError(d, poller, err)
	}
	if !dl.Supports(d.Cursor.Kind) {
		return fail("%s: cursor kind %s needs %s, not %s", d.Label(), d.Cursor.Kind, strings.Join(ds.Reading(d.Cursor.Kind), " or "), name)
	}
	if err := dl.CheckDefinition(d); err != nil {
		return nil, openError(d, poller, err)
	}
	return dl, nil
}

// openWords word a definition's fields in the source's errors: what a missing one is, and how
// what is wrong with it reads (%s: the FieldError's Err).
var openWords = map[string]struct{ missing, format string }{
	sourcedef.FieldTable:        {"no table name", "table %s"},
	sourcedef.FieldSchema:       {"no schema", "schema %s"},
	sourcedef.FieldColumns:      {"no columns", "columns: %s"},
	sourcedef.FieldKey:          {"no key (PK) columns", "key: %s"},
	sourcedef.FieldFilter:       {"no filter", "filter: %s"},
	sourcedef.FieldCursorKind:   {"no cursor kind", "cursor kind %s"},
	sourcedef.FieldCursorColumn: {"no cursor column", "cursor column: %s"},
	sourcedef.FieldInitial:      {"no initial position", "initial %s"},
	sourcedef.FieldSkipWriter:   {"no skip_writer", "skip_writer %s"},
	sourcedef.FieldSettleLag:    {"no settle lag", "settle lag %s"},
	sourcedef.FieldTables:       {"no tables", "%s"},
	sourcedef.FieldSlot:         {"no slot", "%s"}, // the driver's error names it
	sourcedef.FieldPublication:  {"no publication", "%s"},
}

// definitionError is a broken rule of a definition as the source words it, with the FieldError
// it words (errors.As finds it; errors.Is finds sourcedef.ErrDefinition through it).
type definitionError struct {
	text string
	fe   *sourcedef.FieldError
}

func (e *definitionError) Error() string { return e.text }
func (e *definitionError) Unwrap() error { return e.fe }

// openError words err, the rules d breaks (Check's, or its driver's CheckDefinition's), as the
// source's error: the poller, sourcedef.ErrDefinition, the table and the first broken rule, "source:
// poller "p": invalid source definition: table b: no key (PK) columns".
func openError(d sourcedef.Definition, poller string, err error) error {
	fes := sourcedef.FieldErrors(err)
	if len(fes) == 0 { // a driver's error without a field
		return fmt.Errorf("source: poller %q: %w: %s: %v", poller, sourcedef.ErrDefinition, d.Label(), err)
	}
	fe := fes[0]
	i, name := fe.Part()
	where := d.Label() + ": "
	switch {
	case name == sourcedef.FieldTable && (!fe.Missing() || len(d.More) == 0): // the words name the table
		where = ""
	case i >= 0 && i < len(d.Tables()):
		where = "table " + d.Tables()[i].Table.String() + ": "
	}
	w, ok := openWords[name]
	if !ok {
		w.missing, w.format = "no "+name, name+": %s"
	}
	what := fmt.Sprintf(w.format, fe.Err)
	if fe.Missing() {
		what = w.missing
	}
	return &definitionError{text: fmt.Sprintf("source: poller %q: %v: %s%s", poller, sourcedef.ErrDefinition, where, what), fe: fe}
}
