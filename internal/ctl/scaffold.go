package ctl

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"github.com/pseudotrigger/pseudotrigger/internal/bicep"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// modulePath is the Go module the scaffold imports from.
const modulePath = "github.com/pseudotrigger/pseudotrigger"

// paramsFile is the Bicep parameters file whose pollers array gets an entry per poller
// (infra/bicep's TestEveryPollerHasSettings checks it).
var paramsFile = filepath.Join("infra", "bicep", "main.bicepparam")

// scaffold writes pollers/NAME/ (a working poller and its test) and NAME/function.json, adds the
// import line to pollers/all/all.go and an entry to the pollers array of main.bicepparam, then
// prints what to edit and the settings to add. It writes everything or nothing.
func scaffold(args []string, env Env) error {
	if len(args) != 1 {
		return usagef("new NAME")
	}
	name := args[0]
	if err := poller.CheckNewName(name); err != nil {
		if !poller.ValidName(name) {
			return usagef("%v", err)
		}
		for _, r := range poller.ReservedNames {
			if strings.EqualFold(name, r) {
				return refusedf("%v (the %s function is not a poller)", err, r)
			}
		}
		return refusedf("%v", err)
	}
	if _, ok := env.definition(name); ok {
		return refusedf("a poller %q is already registered", name)
	}
	root := env.Root
	if root == "" {
		return usagef("run pollerctl new from inside the repository (no go.mod for %s found)", modulePath)
	}
	pkgDir := filepath.Join(root, "pollers", name)
	fnDir := filepath.Join(root, name)
	for _, p := range []string{pkgDir, fnDir} {
		if _, err := os.Stat(p); err == nil {
			return refusedf("%s already exists: not overwritten", p)
		}
	}
	const schedule = "*/30 * * * * *"
	data := struct{ Name, Pkg, Prefix, Module, Schedule string }{
		Name: name, Pkg: strings.ToLower(strings.ReplaceAll(name, "-", "_")), Prefix: poller.Prefix(name), Module: modulePath,
		Schedule: schedule,
	}

	// Everything is computed before anything is written.
	allPath := filepath.Join(root, "pollers", "all", "all.go")
	all, err := os.ReadFile(allPath)
	if err != nil {
		return fmt.Errorf("reading %s: %w", allPath, err)
	}
	newAll, err := addImport(all, modulePath+"/pollers/"+name)
	if err != nil {
		return fmt.Errorf("%s: %w", allPath, err)
	}
	paramsPath := filepath.Join(root, paramsFile)
	params, err := os.ReadFile(paramsPath)
	if err != nil {
		return fmt.Errorf("reading %s (the scaffold adds the poller's entry to its pollers array): %w", paramsPath, err)
	}
	newParams, added, err := addPollerEntry(string(params), name, schedule)
	if err != nil {
		return fmt.Errorf("%s: %w", paramsPath, err)
	}
	files := map[string]*template.Template{
		filepath.Join(pkgDir, data.Pkg+".go"):      pollerTemplate,
		filepath.Join(pkgDir, data.Pkg+"_test.go"): testTemplate,
		filepath.Join(fnDir, "function.json"):      functionTemplate,
	}
	rendered := map[string][]byte{}
	for path, tmpl := range files {
		var b bytes.Buffer
		if err := tmpl.Execute(&b, data); err != nil {
			return err
		}
		out := b.Bytes()
		if strings.HasSuffix(path, ".go") {
			if out, err = format.Source(out); err != nil {
				return fmt.Errorf("formatting %s: %w", path, err)
			}
		}
		rendered[path] = out
	}
	changed := map[string][2][]byte{allPath: {all, newAll}} // path: old, new content
	if added {
		changed[paramsPath] = [2][]byte{params, []byte(newParams)}
	}

	// Write everything, or nothing: on a failure, remove what was written and restore what was
	// changed.
	var written, rewritten []string
	undo := func() {
		for _, p := range written {
			os.Remove(p)
		}
		os.Remove(pkgDir)
		os.Remove(fnDir)
		for _, p := range rewritten {
			os.WriteFile(p, changed[p][0], 0o644)
		}
	}
	for _, dir := range []string{pkgDir, fnDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			undo()
			return err
		}
	}
	for path, content := range rendered {
		if err := os.WriteFile(path, content, 0o644); err != nil {
			undo()
			return err
		}
		written = append(written, path)
	}
	for path, c := range changed {
		rewritten = append(rewritten, path)
		if err := os.WriteFile(path, c[1], 0o644); err != nil {
			undo()
			return err
		}
	}
	entry := "added its entry to infra/bicep/main.bicepparam"
	if !added {
		entry = "infra/bicep/main.bicepparam already had an entry for it: check it"
	}
	fmt.Fprintf(env.Out, `created pollers/%[1]s/%[2]s.go, pollers/%[1]s/%[2]s_test.go and %[1]s/function.json;
registered the poller in pollers/all/all.go; %[4]s.
Next:
  1. Edit the source definition (table, columns, cursor, key) and the handler in
     pollers/%[1]s/%[2]s.go, then run its test, which builds an SQLite table from that definition
     and runs a tick over it:
       go test ./pollers/%[1]s/
  2. Edit the %[1]s entry of the pollers array in infra/bicep/main.bicepparam (the deployment's
     %[3]s_DB_DRIVER, %[3]s_DB_CONNECTION and %[3]s_SCHEDULE app settings): its driver, server and
     database are placeholders (EDIT-ME); for postgres or sqlite give connection instead of server
     and database (a Key Vault reference, never a literal secret).
  3. For local runs, add to local.settings.json "Values":
       %[3]s_DB_DRIVER       sqlserver | postgres | sqlite
       %[3]s_DB_CONNECTION   the source database's connection string
       %[3]s_SCHEDULE        NCRONTAB with seconds (default %[5]s)
     optional: %[3]s_BATCH_SIZE, %[3]s_LEASE_TTL, %[3]s_HEARTBEAT_INTERVAL, %[3]s_TICK_BUDGET, %[3]s_CHECKPOINT_INTERVAL, %[3]s_SETTLE_LAG,
               %[3]s_MAX_ATTEMPTS, %[3]s_ON_POISON, %[3]s_LIVENESS_INTERVAL, %[3]s_MAX_LAG (README: Poller settings)
`, name, data.Pkg, data.Prefix, entry, schedule)
	return nil
}

// addImport adds a blank import of path to the parenthesized import block of a Go file and
// returns the file formatted as gofmt would.
func addImport(src []byte, path string) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "all.go", src, parser.ImportsOnly|parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var block *ast.GenDecl
	for _, d := range f.Decls {
		if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.IMPORT && gd.Rparen.IsValid() {
			block = gd
		}
	}
	if block == nil {
		return nil, fmt.Errorf("no import ( ... ) block to add the poller to")
	}
	for _, s := range block.Specs {
		if p, _ := strconv.Unquote(s.(*ast.ImportSpec).Path.Value); p == path {
			return nil, fmt.Errorf("already imports %s", path)
		}
	}
	at := fset.Position(block.Rparen).Offset
	return format.Source(slices.Concat(src[:at], []byte("\t_ "+strconv.Quote(path)+"\n"), src[at:]))
}

// pollersParam finds `param pollers = [` at the start of a line of the masked text.
var pollersParam = regexp.MustCompile(`(?m)^[ \t]*param[ \t]+pollers[ \t]*=[ \t]*\[`)

// addPollerEntry adds an entry for the poller to the `param pollers = [ ... ]` array of a Bicep
// parameters file, written one element per line, as its last element. It reports false, and
// leaves the text alone, when the array already has an entry named name.
func addPollerEntry(text, name, schedule string) (string, bool, error) {
	masked := bicep.Mask(text)
	loc := pollersParam.FindStringIndex(masked)
	if loc == nil {
		return "", false, fmt.Errorf("no `param pollers = [ ... ]` array to add the poller's entry to")
	}
	open := loc[1] - 1
	end := -1
	depth := 0
	for i := open; i < len(masked) && end < 0; i++ {
		switch masked[i] {
		case '[', '{', '(':
			depth++
		case ']', '}', ')':
			if depth--; depth == 0 {
				end = i
			}
		}
	}
	if end < 0 {
		return "", false, fmt.Errorf("the `param pollers = [` array is not closed")
	}
	if regexp.MustCompile(`(?m)^\s*name:\s*'` + regexp.QuoteMeta(name) + `'`).MatchString(text[open:end]) {
		return text, false, nil
	}
	nl := "\n"
	if strings.Contains(text, "\r\n") {
		nl = "\r\n"
	}
	inner := masked[open+1 : end]
	if strings.TrimSpace(inner) == "" { // [] or [ and ] on lines of their own
		paramLine := text[strings.LastIndexByte(text[:open], '\n')+1 : open]
		indent := paramLine[:len(paramLine)-len(strings.TrimLeft(paramLine, " \t"))]
		return text[:open+1] + nl + pollerEntry(name, schedule, indent, nl) + indent + text[end:], true, nil
	}
	firstLine, _, _ := strings.Cut(inner, "\n")
	lineStart := strings.LastIndexByte(text[:end], '\n') + 1
	if strings.TrimSpace(firstLine) != "" || strings.TrimSpace(masked[lineStart:end]) != "" {
		return "", false, fmt.Errorf("write the `param pollers = [ ... ]` array one element per line, with [ and ] ending and starting lines of their own, for the scaffold to add the poller's entry")
	}
	return text[:lineStart] + pollerEntry(name, schedule, text[lineStart:end], nl) + text[lineStart:], true, nil
}

// pollerEntry is the new poller's element of the pollers array (main.bicep's pollers param):
// placeholders to edit, each marked EDIT-ME.
func pollerEntry(name, schedule, indent, nl string) string {
	in := indent + "  "
	lines := []string{
		in + "{",
		in + "  name: '" + name + "'",
		in + "  // EDIT-ME (added by pollerctl new): the source database. For sqlserver, server and database",
		in + "  // (the app's identity signs in); for postgres or sqlite, connection instead (a Key Vault",
		in + "  // reference, never a literal secret).",
		in + "  driver: 'sqlserver'",
		in + "  server: 'EDIT-ME.database.windows.net'",
		in + "  database: 'EDIT-ME'",
		in + "  schedule: '" + schedule + "'",
		in + "  // Its other settings, without the " + poller.Prefix(name) + "_ prefix (the deployment owns the app settings):",
		in + "  // settings: { ON_POISON: 'quarantine', MAX_LAG: '10m' }",
		in + "}",
	}
	return strings.Join(lines, nl) + nl
}

var pollerTemplate = template.Must(template.New("poller").Parse(`// Package {{.Pkg}} is the {{.Name}} poller: edit its source definition and its handler.
package {{.Pkg}}

import (
	"context"
	"log/slog"

	"{{.Module}}/poller"
	"{{.Module}}/source"
	"{{.Module}}/state"
)

// Name is the poller's name: its folder, its function ({{.Name}}/function.json) and the prefix
// of its settings ({{.Prefix}}_...).
const Name = "{{.Name}}"

// Source is the table the poller reads: change the table, columns, cursor and key to yours.
var Source = source.Definition{
	Table:   source.Table{Name: "{{.Pkg}}"},
	Columns: []string{"id", "updated_at"},
	Cursor:  source.Cursor{Kind: state.KindTimestampPK, Column: "updated_at"},
	PK:      []string{"id"},
}

func init() {
	poller.Register(poller.Definition{
		Name:     Name,
		Source:   Source,
		Schedule: "{{.Schedule}}",
		Handler:  Handle,
	})
}

// Row is what the handler decodes each row into.
type Row struct {
	ID int64 ` + "`db:\"id\"`" + `
}

// Handle processes one batch. Delivery is at least once: make the effect idempotent on b.ID (or
// each row's key), and pass b.FencingToken to sinks that can refuse a stale writer. Returning an
// error leaves the batch uncommitted; it comes again with b.Attempt + 1.
func Handle(ctx context.Context, b *poller.Batch) error {
	for _, row := range b.Rows {
		var r Row
		if err := row.Decode(&r); err != nil {
			return err
		}
		_ = r // deliver r here
	}
	slog.Default().Info("{{.Name}} batch", "batch_id", b.ID, "rows", len(b.Rows), "attempt", b.Attempt)
	return nil
}
`))

var testTemplate = template.Must(template.New("test").Parse(`package {{.Pkg}}

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"{{.Module}}/internal/lease"
	"{{.Module}}/internal/store/memstore"
	"{{.Module}}/internal/tick"
	"{{.Module}}/poller"
	"{{.Module}}/source"
	"{{.Module}}/state"
)

// TestTick runs one real tick of the poller, as the app does, over an SQLite table built from
// its Source and an in-memory state store: every row reaches the handler, in order, and the
// checkpoint ends on the last one. The table follows Source: change the columns, the cursor or
// the key, and the test still runs.
func TestTick(t *testing.T) {
	ctx := context.Background()
	d, _ := poller.Lookup(Name) // what init registered
	def := d.Source
	def.Table = source.Table{Name: def.Table.Name} // SQLite has no schemas
	def.Filter = ""                                // to test a filter, insert rows of your own
	if k := def.Cursor.Kind; k != state.KindTimestampPK && k != state.KindInteger {
		t.Skipf("SQLite has no %s cursor: test against your own database", k)
	}
	const rows = 5
	dsn := filepath.Join(t.TempDir(), "source.db")
	createTestTable(t, dsn, def, rows)

	// The handler sees every batch (and passes it on to Handle).
	var got []source.Row
	handle := d.Handler
	d.Handler = func(ctx context.Context, b *poller.Batch) error {
		got = append(got, b.Rows...)
		return handle(ctx, b)
	}
	p := poller.Prefix(Name)
	env := map[string]string{p + "_DB_DRIVER": source.SQLite, p + "_DB_CONNECTION": dsn, p + "_BATCH_SIZE": "2"}
	settings, err := poller.LoadSettings(d, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	src, err := source.Open(ctx, source.Config{Poller: Name, Driver: settings.Driver, DSN: settings.DSN, Definition: def})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	m, err := lease.New(memstore.New(nil), lease.Config{Poller: Name, Blob: state.Blob("test", Name), Owner: "test/1", Fingerprint: src.Fingerprint()})
	if err != nil {
		t.Fatal(err)
	}
	r := &tick.Runner{Poller: d, Settings: settings, Lease: m, Source: src}
	sum, err := r.Tick(ctx, "test")
	if err != nil || sum.Outcome != tick.Committed || sum.Rows != rows || len(got) != rows {
		t.Fatalf("tick: %+v, %v; the handler got %d rows, want %d", sum, err, len(got), rows)
	}
	for i, row := range got {
		if v, want := fmt.Sprint(row.Get(def.Cursor.Column)), fmt.Sprint(testValue(def, def.Cursor.Column, i+1)); v != want {
			t.Errorf("row %d: %s is %s, want %s", i+1, def.Cursor.Column, v, want)
		}
	}
	snap, err := m.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := got[rows-1].Cursor()
	checkpoint, _ := json.Marshal(snap.Doc.Checkpoint.Cursor)
	if want, _ := json.Marshal(last); string(checkpoint) != string(want) {
		t.Errorf("checkpoint %s, want the last row's %s", checkpoint, want)
	}
}

// createTestTable creates def's table in an SQLite database with rows rows, inserted out of order:
// the cursor column is TEXT holding UTC timestamps in the fixed-width layout SQLite cursors
// need (INTEGER for an integer cursor), the key columns INTEGER, the other columns TEXT.
func createTestTable(t *testing.T, dsn string, def source.Definition, rows int) {
	t.Helper()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	quote := func(s string) string { return "\"" + strings.ReplaceAll(s, "\"", "\"\"") + "\"" }
	var cols, decls, marks []string
	for _, c := range append(append([]string{def.Cursor.Column}, def.PK...), def.Columns...) {
		if slices.Contains(cols, c) {
			continue
		}
		typ := "TEXT"
		if _, ok := testValue(def, c, 1).(int); ok {
			typ = "INTEGER"
		}
		cols, decls, marks = append(cols, c), append(decls, quote(c)+" "+typ+" NOT NULL"), append(marks, "?")
	}
	create := fmt.Sprintf("CREATE TABLE %s (%s)", quote(def.Table.Name), strings.Join(decls, ", "))
	if _, err := db.Exec(create); err != nil {
		t.Fatalf("%s: %v", create, err)
	}
	for i := rows; i >= 1; i-- {
		args := make([]any, len(cols))
		for j, c := range cols {
			args[j] = testValue(def, c, i)
		}
		insert := fmt.Sprintf("INSERT INTO %s VALUES (%s)", quote(def.Table.Name), strings.Join(marks, ", "))
		if _, err := db.Exec(insert, args...); err != nil {
			t.Fatalf("%s: %v", insert, err)
		}
	}
}

// testValue is column's value in row i (1, 2, ...): in cursor order, the first row first.
func testValue(def source.Definition, column string, i int) any {
	switch {
	case column == def.Cursor.Column && def.Cursor.Kind == state.KindTimestampPK:
		return time.Date(2025, 1, 1, 0, 0, i, 0, time.UTC).Format("2006-01-02T15:04:05.000000Z")
	case column == def.Cursor.Column || slices.Contains(def.PK, column):
		return i
	}
	return fmt.Sprint(i) // TEXT that decodes into a string or a number
}
`))

var functionTemplate = template.Must(template.New("function").Parse(`{
  "bindings": [
    {
      "type": "timerTrigger",
      "direction": "in",
      "name": "timer",
      "schedule": "%{{.Prefix}}_SCHEDULE%",
      "runOnStartup": false,
      "useMonitor": true
    }
  ]
}
`))
