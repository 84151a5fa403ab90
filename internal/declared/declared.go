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
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// File is the name of a declared poller's definition in its folder.
const File = "poller.json"

// SchemaFile is the JSON Schema of File, at the repository's (and the app's) root.
const SchemaFile = "poller.schema.json"

// Spec is poller.json.
type Spec struct {
	Schema    string      `json:"$schema,omitempty"`
	Source    Source      `json:"source"`
	BatchSize int         `json:"batch_size,omitempty"`
	Sink      sink.Config `json:"sink"`
}

// Source is poller.json's "source": what to read.
type Source struct {
	Table   string   `json:"table"`
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
}

// Cursor is poller.json's "source.cursor".
type Cursor struct {
	Kind   string `json:"kind"`
	Column string `json:"column"`
}

// Kinds are the cursor kinds a poller.json may name. The change-stream kinds (logical,
// changetracking) read the database's own record of changes and take no column.
var Kinds = []poller.CursorKind{poller.TimestampPK, poller.Integer, poller.RowVersion, poller.XID, poller.Logical, poller.ChangeTracking}

// changeStream reports whether kind reads a change stream (and so takes no cursor column).
func changeStream(kind string) bool {
	return kind == string(poller.Logical) || kind == string(poller.ChangeTracking)
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
			return Spec{}, fmt.Errorf("%s: a JSON %s where %s is expected", te.Field, te.Value, expected(te.Type))
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
}

// unknownField names an unknown field by its path ("source.tabel") and the closest field that
// object has ("did you mean table?").
func unknownField(data []byte, name string) error {
	var doc map[string]any
	_ = json.Unmarshal(data, &doc)
	for _, o := range objects {
		obj := doc
		for _, part := range strings.Split(strings.TrimSuffix(o.path, "."), ".") {
			if part == "" {
				break
			}
			obj, _ = obj[part].(map[string]any)
		}
		if _, ok := obj[name]; !ok {
			continue
		}
		best, dist := "", 3 // suggest only a close name
		for i := range o.t.NumField() {
			f, _, _ := strings.Cut(o.t.Field(i).Tag.Get("json"), ",")
			if d := distance(name, f); d < dist {
				best, dist = f, d
			}
		}
		msg := fmt.Sprintf("%s%s is not a field of poller.json", o.path, name)
		if best != "" {
			msg += fmt.Sprintf(" (did you mean %s%s?)", o.path, best)
		}
		return fmt.Errorf("%s; %s describes the fields", msg, SchemaFile)
	}
	return fmt.Errorf("%q is not a field of poller.json; %s describes the fields", name, SchemaFile)
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
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

func (s Spec) check() error {
	src := s.Source
	var writerErr error
	if src.SkipWriter != "" {
		writerErr = source.CheckWriter(src.SkipWriter)
	}
	switch {
	case src.Table == "":
		return field("source.table", "required: the table to read")
	case len(src.Columns) == 0:
		return field("source.columns", "required: the columns each change carries")
	case len(src.Key) == 0:
		return field("source.key", "required: the key columns (the rows' identity and the cursor's tiebreaker)")
	case !slices.Contains(Kinds, poller.CursorKind(src.Cursor.Kind)):
		return field("source.cursor.kind", "%q is not one of %s", src.Cursor.Kind, kindList())
	case changeStream(src.Cursor.Kind) && src.Cursor.Column != "":
		return field("source.cursor.column", "a %s cursor reads the database's record of changes and takes no column (%q): remove the field", src.Cursor.Kind, src.Cursor.Column)
	case src.Cursor.Kind == string(poller.ChangeTracking) && src.Filter != "":
		return field("source.filter", "a %s cursor delivers every change of the table and takes no filter (CHANGETABLE has none): filter in the sink's consumer", src.Cursor.Kind)
	case changeStream(src.Cursor.Kind) && src.SettleLag != "":
		return field("source.settle_lag", "a %s cursor reads committed changes in commit order and takes no settle lag", src.Cursor.Kind)
	case src.Initial != "" && src.Initial != "now" && src.Initial != "snapshot":
		return field("source.initial", "%q is not \"now\" (the default: the changes from the first tick on) or \"snapshot\" (the rows there are first, then the changes)", src.Initial)
	case src.Initial == "snapshot" && !changeStream(src.Cursor.Kind):
		return field("source.initial", "\"snapshot\" is for the logical and changetracking cursors: the %s cursor's first tick reads every row there is already", src.Cursor.Kind)
	case slices.Contains(src.Columns, source.AllColumns) && (len(src.Columns) > 1 || src.Cursor.Kind != string(poller.Logical)):
		return field("source.columns", "[\"*\"] alone reads every column, for the logical cursor only (its stream describes the table as it changes); list the columns")
	case src.SkipWriter != "" && !changeStream(src.Cursor.Kind):
		return field("source.skip_writer", "is for the logical and changetracking cursors, which know who wrote a change; a %s cursor reads rows, not their writers", src.Cursor.Kind)
	case writerErr != nil:
		return field("source.skip_writer", "%q: %v", src.SkipWriter, writerErr)
	case src.Cursor.Column == "" && !changeStream(src.Cursor.Kind):
		return field("source.cursor.column", "required: the column the cursor follows")
	case s.BatchSize < 0:
		return field("batch_size", "%d is not a positive number", s.BatchSize)
	}
	for i, c := range src.Columns {
		if strings.TrimSpace(c) == "" || slices.Contains(src.Columns[:i], c) {
			return field("source.columns", "%q is empty or listed twice", c)
		}
	}
	if src.SettleLag != "" {
		if _, err := time.ParseDuration(src.SettleLag); err != nil {
			return field("source.settle_lag", "%q is not a Go duration like 10s", src.SettleLag)
		}
	}
	if _, err := sink.New(s.Sink); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), sink.ErrConfig.Error()+": ")) // it names "sink.<field>"
	}
	return nil
}

func kindList() string {
	out := make([]string, len(Kinds))
	for i, k := range Kinds {
		out[i] = string(k)
	}
	return strings.Join(out, ", ")
}

// Poller builds the poller the spec declares, named name.
func (s Spec) Poller(name string) (p *poller.Poller, err error) {
	snk, err := sink.New(s.Sink)
	if err != nil {
		return nil, err
	}
	src := s.Source
	columns := slices.Clone(src.Columns)
	for _, c := range append(slices.Clone(src.Key), src.Cursor.Column) {
		if c != "" && !slices.Contains(columns, c) && !slices.Equal(columns, []string{source.AllColumns}) { // every column, the key's too
			columns = append(columns, c)
		}
	}
	opts := []poller.Option{
		poller.WithColumns(columns...), poller.WithKey(src.Key...),
		poller.WithSetup(snk.Setup), poller.WithTarget(snk.String),
	}
	if src.Cursor.Column != "" {
		opts = append(opts, poller.WithCursorColumn(src.Cursor.Column))
	}
	if src.Schema != "" {
		opts = append(opts, poller.WithSchema(src.Schema))
	}
	if src.Filter != "" {
		opts = append(opts, poller.WithFilter(src.Filter))
	}
	if src.SettleLag != "" {
		d, _ := time.ParseDuration(src.SettleLag) // checked
		opts = append(opts, poller.WithSettleLag(d))
	}
	if src.Initial == "snapshot" {
		opts = append(opts, poller.WithInitialSnapshot())
	}
	if src.SkipWriter != "" {
		opts = append(opts, poller.WithSkipWriter(src.SkipWriter))
	}
	if s.BatchSize > 0 {
		opts = append(opts, poller.WithBatchSize(s.BatchSize))
	}
	defer func() { // poller.New panics on what check should have caught
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return poller.New(name, src.Table, poller.CursorKind(src.Cursor.Kind), sink.Handler[poller.Row](snk), opts...), nil
}
