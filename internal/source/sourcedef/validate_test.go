package sourcedef_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// keyset is a valid definition of one table read by an integer cursor.
func keyset() sourcedef.Definition {
	return sourcedef.Definition{Table: sourcedef.Table{Name: "orders"}, Columns: []string{"id", "v"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "seq"}}
}

// several is a valid definition of two tables read by a logical cursor.
func several() sourcedef.Definition {
	return sourcedef.Definition{Table: sourcedef.Table{Name: "a"}, Columns: []string{"id"}, PK: []string{"id"}, Cursor: sourcedef.Cursor{Kind: state.KindLogical},
		More: []sourcedef.TableDef{{Table: sourcedef.Table{Name: "b"}, Columns: []string{"id"}, PK: []string{"id"}}}}
}

// TestCheckFields: each rule of a definition that Check checks names the field at fault (the
// table's, "tables[1].key", in a definition of several), says a missing part is missing, and
// wraps ErrDefinition; the valid definitions pass.
func TestCheckFields(t *testing.T) {
	for _, d := range []sourcedef.Definition{keyset(), several()} {
		if err := d.Check(); err != nil {
			t.Fatalf("%+v: %v", d, err)
		}
	}
	cases := []struct {
		name  string
		base  func() sourcedef.Definition
		edit  func(d *sourcedef.Definition)
		field string
		want  string // in Err; "" for ErrMissing
	}{
		{"unknown kind", keyset, func(d *sourcedef.Definition) { d.Cursor.Kind = "timestamp" }, "cursor.kind", `"timestamp" is not one of timestamp+pk, integer`},
		{"no table", keyset, func(d *sourcedef.Definition) { d.Table.Name = "" }, "table", ""},
		{"table injection", keyset, func(d *sourcedef.Definition) { d.Table.Name = "orders; DROP TABLE x" }, "table", `contains ';'`},
		{"schema injection", keyset, func(d *sourcedef.Definition) { d.Table.Schema = "dbo--" }, "schema", "comment marker"},
		{"column injection", keyset, func(d *sourcedef.Definition) { d.Columns = append(d.Columns, "v /* x") }, "columns", "comment marker"},
		{"column twice", keyset, func(d *sourcedef.Definition) { d.Columns = append(d.Columns, "v") }, "columns", `"v" is listed twice`},
		{"every column of a keyset", keyset, func(d *sourcedef.Definition) { d.Columns = []string{"*"} }, "columns", "for the logical cursor only"},
		{"every column and more", several, func(d *sourcedef.Definition) { d.Columns = []string{"*", "id"} }, "tables[0].columns", `["*"] alone`},
		{"no key", keyset, func(d *sourcedef.Definition) { d.PK = nil }, "key", ""},
		{"key injection", keyset, func(d *sourcedef.Definition) { d.PK = []string{"id;"} }, "key", `"id;"`},
		{"filter of two statements", keyset, func(d *sourcedef.Definition) { d.Filter = "v > 1; DELETE FROM orders" }, "filter", "one predicate"},
		{"no cursor column", keyset, func(d *sourcedef.Definition) { d.Cursor.Column = "" }, "cursor.column", ""},
		{"a change stream's cursor column", several, func(d *sourcedef.Definition) { d.Cursor.Column = "seq" }, "cursor.column", `a logical cursor reads the database's record of changes and takes no column ("seq")`},
		{"cursor column injection", keyset, func(d *sourcedef.Definition) { d.Cursor.Column = "seq--" }, "cursor.column", "comment marker"},
		{"no tiebreaker", keyset, func(d *sourcedef.Definition) {
			d.Cursor = sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "id"}
		}, "key", "needs a key column other than its cursor column"},
		{"unknown start", keyset, func(d *sourcedef.Definition) { d.Initial = "all" }, "initial", `"all" is not "now"`},
		{"snapshot of a keyset", keyset, func(d *sourcedef.Definition) { d.Initial = sourcedef.InitialSnapshot }, "initial", `"snapshot" is for the logical and changetracking cursors: the integer cursor's first tick`},
		{"skip writer of a keyset", keyset, func(d *sourcedef.Definition) { d.SkipWriter = "app" }, "skip_writer", "is for the logical and changetracking cursors"},
		{"skip writer's name", several, func(d *sourcedef.Definition) { d.SkipWriter = "my app" }, "skip_writer", `"my app": a writer's name`},
		{"several tables of a keyset", several, func(d *sourcedef.Definition) { d.Cursor = sourcedef.Cursor{Kind: state.KindInteger, Column: "id"} }, "tables", "several tables are for the logical and changetracking cursors"},
		{"snapshot of several tables", several, func(d *sourcedef.Definition) { d.Initial = sourcedef.InitialSnapshot }, "initial", `starts "now"`},
		{"a table twice", several, func(d *sourcedef.Definition) { d.More[0].Table.Name = "A" }, "tables[1].table", "A is listed twice"},
		{"no key of a more table", several, func(d *sourcedef.Definition) { d.More[0].PK = nil }, "tables[1].key", ""},
		{"every column of a more table", several, func(d *sourcedef.Definition) {
			d.Cursor.Kind = state.KindChangeTracking
			d.More[0].Columns = []string{"*"}
		}, "tables[1].columns", "for the logical cursor only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := c.base()
			d.More = slices.Clone(d.More)
			c.edit(&d)
			err := d.Check()
			var fe *sourcedef.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, sourcedef.ErrDefinition) {
				t.Fatalf("got %v, want a *FieldError wrapping ErrDefinition", err)
			}
			if fe.Field != c.field {
				t.Errorf("field %q (%v), want %q", fe.Field, err, c.field)
			}
			if c.want == "" && (!fe.Missing() || !errors.Is(err, sourcedef.ErrMissing)) {
				t.Errorf("%v: want ErrMissing", err)
			}
			if c.want != "" && (fe.Missing() || !strings.Contains(fe.Err.Error(), c.want)) {
				t.Errorf("%v: want %q", err, c.want)
			}
		})
	}
}

// TestFieldPart: a field names its table by its place in Definition.Tables; a table's field of
// a definition of one table is table 0's, the poller's own no table's.
func TestFieldPart(t *testing.T) {
	for field, want := range map[string]struct {
		i    int
		name string
	}{
		"tables[2].key": {2, "key"}, "tables[0].filter": {0, "filter"}, "key": {0, "key"}, "schema": {0, "schema"},
		"cursor.column": {-1, "cursor.column"}, "tables": {-1, "tables"}, "slot": {-1, "slot"},
	} {
		if i, name := (&sourcedef.FieldError{Field: field}).Part(); i != want.i || name != want.name {
			t.Errorf("%s: %d %q, want %d %q", field, i, name, want.i, want.name)
		}
	}
	if f := keyset().TableField(0, sourcedef.FieldKey); f != "key" {
		t.Errorf("one table's key: %q", f)
	}
	if f := several().TableField(1, sourcedef.FieldKey); f != "tables[1].key" {
		t.Errorf("a more table's key: %q", f)
	}
	a, b := &sourcedef.FieldError{Field: "slot", Err: errors.New("x")}, &sourcedef.FieldError{Field: "publication", Err: errors.New("y")}
	if got := sourcedef.FieldErrors(errors.Join(a, errors.New("no field"), b)); !slices.Equal(got, []*sourcedef.FieldError{a, b}) {
		t.Errorf("FieldErrors of a joined error: %v", got)
	}
}

// TestOpenWordsFields: the source's open error words a broken rule for its user, naming the
// poller and the table, and wraps ErrDefinition and the rule's *FieldError.
func TestOpenWordsFields(t *testing.T) {
	for _, c := range []struct {
		name  string
		d     sourcedef.Definition
		field string
		want  string
	}{
		{"no key", func() sourcedef.Definition { d := keyset(); d.PK = nil; return d }(), "key",
			`source: poller "p": invalid source definition: table orders: no key (PK) columns`},
		{"no cursor column", func() sourcedef.Definition { d := keyset(); d.Cursor.Column = ""; return d }(), "cursor.column",
			`source: poller "p": invalid source definition: table orders: no cursor column`},
		{"table injection", func() sourcedef.Definition { d := keyset(); d.Table.Name = "o;"; return d }(), "table",
			`source: poller "p": invalid source definition: table "o;": identifier contains ';', which is not allowed`},
		{"a more table's key", func() sourcedef.Definition { d := several(); d.More[0].PK = nil; return d }(), "tables[1].key",
			`source: poller "p": invalid source definition: table b: no key (PK) columns`},
		{"several tables of a keyset", func() sourcedef.Definition {
			d := several()
			d.Cursor = sourcedef.Cursor{Kind: state.KindInteger, Column: "id"}
			return d
		}(), "tables", `source: poller "p": invalid source definition: tables a, b: several tables are for the logical and changetracking cursors`},
		{"skip writer", func() sourcedef.Definition { d := keyset(); d.SkipWriter = "app"; return d }(), "skip_writer",
			`source: poller "p": invalid source definition: table orders: skip_writer is for the logical and changetracking cursors`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := source.Offline(sqlite.Driver{}, source.Config{Poller: "p", Driver: sqlite.Name, Definition: c.d}, nil)
			var fe *sourcedef.FieldError
			if !errors.Is(err, sourcedef.ErrDefinition) || !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("got %v (%+v), want ErrDefinition and a FieldError of %s", err, fe, c.field)
			}
			if !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("got %q, want it to start %q", err, c.want)
			}
		})
	}
}
