// Package declared reads pollers declared as folders: a folder <name>/ of the app's root with
// function.json and poller.json is a poller without Go code. poller.json names the table, its
// columns, key and cursor, and a sink (package sink) that gets the changes; the driver and DSN
// stay app settings ({P}_DB_DRIVER, {P}_DB_CONNECTION) like any poller's. poller.schema.json at
// the repository's root describes the file for editors.
//
// A poller.json that cannot be read makes a pollerdef.Failed: that poller's invocations, status
// and pollerctl commands fail with an error naming the file and the field; the others run.
package declared

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/suggest"
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// File is the name of a declared poller's definition in its folder.
const File = "poller.json"

// SchemaFile is the JSON Schema of File, at the repository's (and the app's) root.
const SchemaFile = "poller.schema.json"

// Spec is poller.json.
type Spec struct {
	Schema    string `json:"$schema,omitempty"`
	Source    Source `json:"source"`
	BatchSize int    `json:"batch_size,omitempty"`
	// Sink is where the changes go; Route instead sends each row to a sink by a column's value.
	Sink  sink.Config `json:"sink,omitzero"`
	Route *Route      `json:"route,omitempty"`
	// Outbox makes the table an outbox of events (docs/outbox.md).
	Outbox *Outbox `json:"outbox,omitempty"`
	// Cleanup deletes delivered rows (keyset cursors).
	Cleanup *Cleanup `json:"cleanup,omitempty"`
}

// Source is poller.json's "source": what to read.
type Source struct {
	// Table, or Tables for a logical or changetracking poller of several tables.
	Table   string   `json:"table,omitempty"`
	Schema  string   `json:"schema,omitempty"`
	Columns []string `json:"columns"`
	Key     []string `json:"key"`
	Cursor  Cursor   `json:"cursor"`
	// Filter is SQL ANDed with the cursor's predicate (poller.WithFilter).
	Filter string `json:"filter,omitempty"`
	// SettleLag is a Go duration (poller.WithSettleLag); "0" reads up to the database's clock.
	SettleLag string `json:"settle_lag,omitempty"`
	// Initial is where a logical or changetracking poller starts: "now" (the default) or
	// "snapshot" (poller.WithInitialSnapshot).
	Initial string `json:"initial,omitempty"`
	// SkipWriter names the application's own writer, whose changes a logical or changetracking
	// poller leaves out (poller.WithSkipWriter).
	SkipWriter string `json:"skip_writer,omitempty"`
	// Tables, instead of Table, Schema, Columns, Key and Filter: the tables a logical or
	// changetracking poller reads through one stream, in commit order (poller.WithTables).
	Tables []Table `json:"tables,omitempty"`
}

// Table is one of poller.json's "source.tables": a table, and the sink its changes go to when
// not the poller's.
type Table struct {
	Table   string   `json:"table"`
	Schema  string   `json:"schema,omitempty"`
	Columns []string `json:"columns"`
	Key     []string `json:"key"`
	Filter  string   `json:"filter,omitempty"`
	// Sink, when set, gets this table's changes instead of the poller's sink.
	Sink *sink.Config `json:"sink,omitempty"`
}

// name is the table as its rows name it (Row.Table).
func (t Table) name() string { return sourcedef.Table{Schema: t.Schema, Name: t.Table}.String() }

// Cursor is poller.json's "source.cursor".
type Cursor struct {
	Kind   string `json:"kind"`
	Column string `json:"column"`
}

// ErrConflict: a name is declared both in Go (package pollers) and as a folder.
var ErrConflict = errors.New("a poller is declared twice")

// Root is the app's root folder: AzureWebJobsScriptRoot (which the Functions host sets) or the
// working directory.
func Root(getenv func(string) string) string {
	if r := strings.TrimSpace(getenv("AzureWebJobsScriptRoot")); r != "" {
		return r
	}
	return "."
}

// Folders returns the names of the poller folders under root, sorted: each <name>/ whose
// function.json has a timer trigger (a poller's function), and each pollers/<name>/ (a Go
// poller's package). pollerctl lists them beside the pollers its build has, so that a poller it
// predates is seen as one, not as a leftover. Unreadable folders are skipped: this only lists.
func Folders(root string) []string {
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) && pollerdef.CheckName(n) == nil {
			names = append(names, n)
		}
	}
	fns, _ := filepath.Glob(filepath.Join(root, "*", "function.json"))
	for _, path := range fns {
		type binding struct {
			Type string `json:"type"`
		}
		var f struct {
			Bindings []binding `json:"bindings"`
		}
		data, err := os.ReadFile(path)
		if err != nil || json.Unmarshal(data, &f) != nil {
			continue
		}
		if slices.ContainsFunc(f.Bindings, func(b binding) bool { return strings.EqualFold(b.Type, "timerTrigger") }) {
			add(filepath.Base(filepath.Dir(path)))
		}
	}
	pkgs, _ := os.ReadDir(filepath.Join(root, "pollers"))
	for _, e := range pkgs {
		if e.IsDir() {
			add(e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// Load returns the app's pollers as the runtime reads them: the Go pollers followed by the
// pollers declared under root, in name order. A folder whose poller.json cannot be read gives a
// pollerdef.Failed. A name that is both a Go poller and a folder with poller.json is an error
// (ErrConflict): the app refuses to start.
func Load(root string, goPollers []*poller.Poller) ([]*pollerdef.Def, error) {
	matches, err := filepath.Glob(filepath.Join(root, "*", File))
	if err != nil {
		return nil, err
	}
	sort.Strings(matches)
	out := pollerdef.OfAll(goPollers)
	for _, path := range matches {
		name := filepath.Base(filepath.Dir(path))
		if slices.ContainsFunc(goPollers, func(p *poller.Poller) bool { return strings.EqualFold(p.Name(), name) }) {
			return nil, fmt.Errorf("%w: %s is a Go poller (listed in pollers.All) and %s/%s declares it again; remove one of them",
				ErrConflict, name, name, File)
		}
		out = append(out, Read(root, name))
	}
	return out, nil
}

// Read reads root/name/poller.json into a poller, or a pollerdef.Failed naming what is wrong.
func Read(root, name string) *pollerdef.Def {
	rel := filepath.ToSlash(filepath.Join(name, File))
	fail := func(format string, args ...any) *pollerdef.Def {
		return pollerdef.Failed(name, fmt.Errorf("%s: %s", rel, fmt.Sprintf(format, args...)))
	}
	if err := pollerdef.CheckName(name); err != nil {
		return fail("the folder's name: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, name, "function.json")); errors.Is(err, fs.ErrNotExist) {
		return fail("%s/function.json is missing: the host runs no timer for this poller (pollerctl new %s --sink TYPE writes both)", name, name)
	}
	data, err := os.ReadFile(filepath.Join(root, name, File))
	if err != nil {
		return fail("%v", err)
	}
	spec, err := Parse(data)
	if err != nil {
		return fail("%v", err)
	}
	p, err := spec.Poller(name)
	if err != nil {
		return fail("%v", err)
	}
	return pollerdef.Of(p)
}

// Parse decodes a poller.json strictly (an unknown field is an error) and checks it; errors
// name the field as the file spells it ("source.cursor.kind").
func Parse(data []byte) (Spec, error) {
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			return Spec{}, fmt.Errorf("%s: a JSON %s where %s is expected", sinkField(data, te.Field), te.Value, expected(te.Type))
		case errors.As(err, &se):
			line := bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n")) + 1
			return Spec{}, fmt.Errorf("line %d: %v", line, err)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
			return Spec{}, unknownField(data, name)
		}
		return Spec{}, err
	}
	if dec.More() {
		return Spec{}, errors.New("more than one JSON value")
	}
	return s, s.check()
}

// objects are poller.json's objects, by path, with the types that decode them.
var objects = []struct {
	path string
	t    reflect.Type
}{
	{"", reflect.TypeFor[Spec]()}, {"source.", reflect.TypeFor[Source]()},
	{"source.cursor.", reflect.TypeFor[Cursor]()}, {"sink.", reflect.TypeFor[sink.Config]()},
	{"source.tables[].", reflect.TypeFor[Table]()}, {"source.tables[].sink.", reflect.TypeFor[sink.Config]()},
	{"outbox.", reflect.TypeFor[Outbox]()}, {"cleanup.", reflect.TypeFor[Cleanup]()},
	{"route.", reflect.TypeFor[Route]()}, {"route.sinks{}.", reflect.TypeFor[sink.Config]()},
	{"route.default.", reflect.TypeFor[sink.Config]()},
}

// unknownField names an unknown field by its path ("source.tabel", "source.tables[].colums",
// "route.sinks.order.urll") and the closest field that object has ("did you mean table?").
func unknownField(data []byte, name string) error {
	type object struct {
		path string // as the error names it: a list's items by [], a map's values by their key
		m    map[string]any
	}
	var doc map[string]any
	_ = json.Unmarshal(data, &doc)
	for _, o := range objects {
		objs := []object{{"", doc}}
		for _, part := range strings.Split(strings.TrimSuffix(o.path, "."), ".") {
			if part == "" {
				break
			}
			var next []object
			for _, obj := range objs {
				if list, ok := strings.CutSuffix(part, "[]"); ok { // a list of objects: each of them
					items, _ := obj.m[list].([]any)
					for _, it := range items {
						if m, ok := it.(map[string]any); ok {
							next = append(next, object{obj.path + part + ".", m})
						}
					}
				} else if values, ok := strings.CutSuffix(part, "{}"); ok { // a map of objects: each value
					entries, _ := obj.m[values].(map[string]any)
					for _, k := range slices.Sorted(maps.Keys(entries)) {
						if m, ok := entries[k].(map[string]any); ok {
							next = append(next, object{obj.path + values + "." + k + ".", m})
						}
					}
				} else if m, ok := obj.m[part].(map[string]any); ok {
					next = append(next, object{obj.path + part + ".", m})
				}
			}
			objs = next
		}
		i := slices.IndexFunc(objs, func(obj object) bool { _, ok := obj.m[name]; return ok })
		if i < 0 {
			continue
		}
		at := objs[i].path
		best, dist := "", 3 // suggest only a close name
		for i := range o.t.NumField() {
			f, _, _ := strings.Cut(o.t.Field(i).Tag.Get("json"), ",")
			if d := suggest.Distance(name, f); d < dist {
				best, dist = f, d
			}
		}
		msg := fmt.Sprintf("%s%s is not a field of poller.json", at, name)
		if best != "" {
			msg += fmt.Sprintf(" (did you mean %s%s?)", at, best)
		}
		return fmt.Errorf("%s; %s describes the fields", msg, SchemaFile)
	}
	return fmt.Errorf("%q is not a field of poller.json; %s describes the fields", name, SchemaFile)
}

// expected names a Go type as JSON spells it.
func expected(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "a whole number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "a list"
	}
	return "an object"
}

func field(name, format string, args ...any) error {
	return fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
}

// check checks the spec: poller.json's own rules (the form of source.tables, the fields it
// requires, settle_lag, batch_size, the sinks), then the definition it declares by the rules of
// every definition (sourcedef.Definition.Check) and of the database its cursor kind pins
// (drivers.CheckDefinition), worded by the fields of the file (fieldError).
func (s Spec) check() error {
	src := s.Source
	def := s.definition()
	if len(src.Tables) > 0 {
		if src.Table != "" || src.Schema != "" || len(src.Columns) > 0 || len(src.Key) > 0 || src.Filter != "" {
			return field("source.tables", "replaces source.table, schema, columns, key and filter, which each entry of it has: move them into the entries")
		}
		if err := def.CheckSeveralTables(); err != nil { // a list of one table too
			return s.fieldError(err)
		}
	}
	for i, t := range s.tables() {
		if len(t.Columns) == 0 && !def.ReadsMessages() { // a messages outbox's columns are fixed
			return field(s.tablePath(i, "columns"), "required: the columns each change carries ([\"*\"]: every column, for a logical cursor)")
		}
	}
	if src.SettleLag != "" { // the cursor kinds it applies to: Definition.Check
		if _, err := time.ParseDuration(src.SettleLag); err != nil {
			return field("source.settle_lag", "%q is not a Go duration like 10s", src.SettleLag)
		}
	}
	if s.BatchSize < 0 {
		return field("batch_size", "%d is not a positive number", s.BatchSize)
	}
	if s.Cleanup != nil && s.Cleanup.OlderThan != "" {
		if _, err := ParseAge(s.Cleanup.OlderThan); err != nil {
			return field("cleanup.older_than", "%v", err)
		}
	}
	if err := s.fieldError(def.Check()); err != nil {
		return err
	}
	if err := s.fieldError(drivers.CheckDefinition(def)); err != nil {
		return err
	}
	if s.Route != nil {
		if err := s.checkRoute(); err != nil {
			return err
		}
	} else if !sinkSet(s.Sink) {
		return field("sink", "required: where the changes go (or route, which sends each row to a sink by a column's value)")
	}
	for _, p := range s.Sinks() {
		if err := s.checkSink(p.Path, p.Config); err != nil {
			return err
		}
	}
	return nil
}

// A PlacedSink is one of poller.json's sinks and its path in the file ("sink",
// "source.tables[1].sink", "route.sinks.order", "route.default").
type PlacedSink struct {
	Path   string
	Config sink.Config
}

// Sinks are every sink the spec sends to, in the file's order (a route's by value, sorted):
// "sink", each of source.tables' own, route.sinks' and route.default. Tools that act on the
// sinks (the dev host's queue depths, the deployment's checks) read them here, so that none
// misses a routed one.
func (s Spec) Sinks() []PlacedSink {
	var out []PlacedSink
	if sinkSet(s.Sink) {
		out = append(out, PlacedSink{"sink", s.Sink})
	}
	for i, t := range s.Source.Tables {
		if t.Sink != nil {
			out = append(out, PlacedSink{fmt.Sprintf("source.tables[%d].sink", i), *t.Sink})
		}
	}
	if r := s.Route; r != nil {
		for _, v := range slices.Sorted(maps.Keys(r.Sinks)) {
			out = append(out, PlacedSink{"route.sinks." + v, r.Sinks[v]})
		}
		if r.Default != nil {
			out = append(out, PlacedSink{"route.default", *r.Default})
		}
	}
	return out
}

// required says what each field of a definition that poller.json requires is, for the error
// that says it is missing.
var required = map[string]string{
	sourcedef.FieldTable:        "the table to read",
	sourcedef.FieldKey:          "the key columns (the rows' identity and the cursor's tiebreaker)",
	sourcedef.FieldCursorColumn: "the column the cursor follows",
}

// settingsFields are the fields of a definition that are not poller.json's but the app
// settings' ({P}_CDC_SLOT, {P}_CDC_PUBLICATION): the source checks them when it opens.
var settingsFields = []string{sourcedef.FieldSlot, sourcedef.FieldPublication}

// fieldError words the first rule err says the spec's definition breaks (a sourcedef.FieldError)
// by its field in poller.json: "source.cursor.column: required: ...", "source.tables[1].key:
// ...". Nil when err is, or holds only rules of the settings' fields.
func (s Spec) fieldError(err error) error {
	fes := sourcedef.FieldErrors(err)
	if len(fes) == 0 {
		return err
	}
	for _, fe := range fes {
		i, name := fe.Part()
		if slices.Contains(settingsFields, name) {
			continue
		}
		path := "source." + fe.Field
		if top, _, _ := strings.Cut(fe.Field, "."); top == sourcedef.FieldOutbox || top == sourcedef.FieldCleanup {
			path = fe.Field // poller.json's own objects, beside source
		} else if i >= 0 {
			path = s.tablePath(i, name)
		}
		if fe.Missing() {
			what := required[name]
			if name == sourcedef.FieldTable && len(s.Source.Tables) == 0 {
				what += " (or source.tables, the tables of a logical or changetracking poller)"
			}
			return field(path, "required: %s", what)
		}
		return field(path, "%v", fe.Err)
	}
	return nil
}

// tables are the spec's tables: source.tables, or source's own table.
func (s Spec) tables() []Table {
	src := s.Source
	if len(src.Tables) > 0 {
		return src.Tables
	}
	return []Table{{Table: src.Table, Schema: src.Schema, Columns: src.Columns, Key: src.Key, Filter: src.Filter}}
}

// tablePath is the path in poller.json of field of table i (tables): "source.tables[1].key", or
// "source.key" for a spec of one table without source.tables.
func (s Spec) tablePath(i int, field string) string {
	if len(s.Source.Tables) == 0 {
		return "source." + field
	}
	return fmt.Sprintf("source.tables[%d].%s", i, field)
}

// checkSink checks a sink's definition, and that it can send the outbox's events when the spec
// has one; its errors name the field by its path, at being the sink's own ("sink",
// "source.tables[1].sink", "route.sinks.order"): "route.sinks.order.url".
func (s Spec) checkSink(at string, cfg sink.Config) error {
	_, err := sink.New(cfg)
	if err == nil && s.Outbox != nil {
		err = cfg.CheckOutbox()
	}
	if err != nil {
		return errors.New(at + "." + strings.TrimPrefix(err.Error(), sink.ErrConfig.Error()+": sink.")) // it names "sink.<field>"
	}
	return nil
}

// withKey is columns with the key columns and the cursor column added where missing (every
// column, "*", has them).
func withKey(columns, key []string, cursor string) []string {
	columns = slices.Clone(columns)
	for _, c := range append(slices.Clone(key), cursor) {
		if c != "" && !slices.Contains(columns, c) && !slices.Equal(columns, []string{sourcedef.AllColumns}) {
			columns = append(columns, c)
		}
	}
	return columns
}

// definition is the source definition the spec declares, as Poller builds it: each table's
// columns with its key (and the first's with the cursor column, the outbox's columns), then the
// route's column, added where missing, source's
// fields or source.tables' first entry as its table and the others as More.
func (s Spec) definition() sourcedef.Definition {
	src := s.Source
	d := sourcedef.Definition{Cursor: sourcedef.Cursor{Kind: src.Cursor.Kind, Column: src.Cursor.Column}, SkipWriter: src.SkipWriter,
		Outbox: s.Outbox.definition(), Cleanup: s.Cleanup.definition()}
	if src.Initial != sourcedef.InitialNow { // the default
		d.Initial = src.Initial
	}
	if lag, err := time.ParseDuration(src.SettleLag); err == nil {
		if d.SettleLag = lag; lag <= 0 { // "0": up to the database's clock (poller.WithSettleLag)
			d.SettleLag = sourcedef.NoSettleLag
		}
	}
	for i, t := range s.tables() {
		td := sourcedef.TableDef{Table: sourcedef.Table{Schema: t.Schema, Name: t.Table}, Columns: withKey(withKey(t.Columns, t.Key, ""), s.Route.columns(), ""), PK: t.Key, Filter: t.Filter}
		if i > 0 {
			d.More = append(d.More, td)
			continue
		}
		d.Table, d.Columns, d.PK, d.Filter = td.Table, withKey(t.Columns, t.Key, src.Cursor.Column), td.PK, td.Filter
		if d.Outbox != nil && !d.ReadsAllColumns() {
			d.Columns = withKey(d.Columns, d.Outbox.Columns(), "")
		}
		d.Columns = withKey(d.Columns, s.Route.columns(), "")
	}
	return d
}

// Poller builds the poller the spec declares (definition), named name.
func (s Spec) Poller(name string) (p *poller.Poller, err error) {
	handle, setup, target, err := s.handler()
	if err != nil {
		return nil, err
	}
	def := s.definition()
	opts := []poller.Option{
		poller.WithColumns(def.Columns...), poller.WithKey(def.PK...),
		poller.WithSetup(setup), poller.WithTarget(target),
	}
	var more []poller.Table
	for _, t := range def.More {
		more = append(more, poller.Table{Schema: t.Table.Schema, Name: t.Table.Name, Columns: t.Columns, Key: t.PK, Filter: t.Filter})
	}
	if len(more) > 0 {
		opts = append(opts, poller.WithTables(more...))
	}
	if def.Cursor.Column != "" {
		opts = append(opts, poller.WithCursorColumn(def.Cursor.Column))
	}
	if def.Table.Schema != "" {
		opts = append(opts, poller.WithSchema(def.Table.Schema))
	}
	if def.Filter != "" {
		opts = append(opts, poller.WithFilter(def.Filter))
	}
	if def.SettleLag != 0 {
		opts = append(opts, poller.WithSettleLag(def.SettleLag))
	}
	if def.Initial == sourcedef.InitialSnapshot {
		opts = append(opts, poller.WithInitialSnapshot())
	}
	if def.SkipWriter != "" {
		opts = append(opts, poller.WithSkipWriter(def.SkipWriter))
	}
	if s.BatchSize > 0 {
		opts = append(opts, poller.WithBatchSize(s.BatchSize))
	}
	if def.Outbox != nil {
		opts = append(opts, poller.WithOutbox(poller.Outbox(*def.Outbox)))
	}
	if def.Cleanup != nil {
		opts = append(opts, poller.WithCleanup(poller.Cleanup(*def.Cleanup)))
	}
	defer func() { // poller.New panics on what check should have caught
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return poller.New(name, def.Table.Name, poller.CursorKind(def.Cursor.Kind), handle, opts...), nil
}

// handler is what the poller's batches go to, with its setup and target: its sink, or a router
// sending each row to its own sink (route, or source.tables' sinks).
func (s Spec) handler() (handle func(context.Context, *poller.Batch[poller.Row]) error, setup func(func(string) string) error, target func() string, err error) {
	var r *router
	if s.Route != nil {
		if r, err = valueRouter(s.Route); err != nil {
			return nil, nil, nil, err
		}
		return r.send, r.setup, r.String, nil
	}
	snk, err := sink.New(s.Sink)
	if err != nil {
		return nil, nil, nil, err
	}
	if r, err = tableRouter(s, snk); err != nil {
		return nil, nil, nil, err
	}
	if r == nil { // one sink: no router on the rows' path
		return sink.Handler[poller.Row](snk), snk.Setup, snk.String, nil
	}
	return r.send, r.setup, r.String, nil
}
