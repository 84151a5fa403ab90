// Package scaffold is `pollerctl new NAME`: it writes a new poller into the repository, ready to
// edit and to run. A Go poller is pollers/NAME/ (a working poller and its first test, package
// pollertest) and NAME/function.json, added to All in pollers/pollers.go; with --sink TYPE, a
// declared poller is NAME/function.json and NAME/poller.json sending to a sink of that type.
// Either way the poller gets an entry in the pollers array of infra/bicep/main.bicepparam, and
// the command prints what to edit and the settings to add. It writes everything or nothing.
package scaffold

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"unicode"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/bicep"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// modulePath is the Go module the scaffold imports from.
const modulePath = "github.com/pseudotrigger/pseudotrigger"

// paramsFile is the Bicep parameters file whose pollers array gets an entry per poller
// (infra/bicep's TestEveryPollerHasSettings checks it).
var paramsFile = filepath.Join("infra", "bicep", "main.bicepparam")

// Env is what the command runs with.
type Env struct {
	Out        io.Writer // what it wrote and what to do next
	Root       string    // the repository's root ("": not found)
	Registered []string  // the names of the app's pollers, which a new one may not take
}

// UsageError is bad usage or input (pollerctl exits 2 on it). Run's other errors are a refusal
// (the name is reserved or taken, a file is in the way) or a failure: nothing was written.
type UsageError struct{ msg string }

func (u *UsageError) Error() string { return u.msg }

func usagef(format string, args ...any) error { return &UsageError{fmt.Sprintf(format, args...)} }

// Run runs `pollerctl new` with its arguments (NAME [--sink TYPE]): it writes pollers/NAME/ (a
// working poller and its test) and NAME/function.json, adds the poller to All in
// pollers/pollers.go and an entry to the pollers array of main.bicepparam, then prints what to
// edit and the settings to add. With --sink TYPE it writes a declared poller instead:
// NAME/function.json and NAME/poller.json sending to a sink of that type. It writes everything
// or nothing.
func Run(args []string, env Env) error {
	sinkType := ""
	var rest []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--sink" && i+1 < len(args):
			sinkType = args[i+1]
			i++
		case strings.HasPrefix(a, "--sink="):
			sinkType = strings.TrimPrefix(a, "--sink=")
		case a == "-h" || a == "--help":
			return usagef("new NAME [--sink %s]: a Go poller (pollers/NAME/, NAME/function.json), or with --sink a declared one (NAME/function.json and NAME/poller.json)", strings.Join(sink.Types, "|"))
		case strings.HasPrefix(a, "-"):
			return usagef("new NAME [--sink %s]: unknown flag %s", strings.Join(sink.Types, "|"), a)
		default:
			rest = append(rest, a)
		}
	}
	if len(rest) != 1 {
		return usagef("new NAME [--sink %s]", strings.Join(sink.Types, "|"))
	}
	if sinkType != "" && !slices.Contains(sink.Types, sinkType) {
		return usagef("--sink %q is not one of %s", sinkType, strings.Join(sink.Types, ", "))
	}
	name := rest[0]
	if err := pollerdef.CheckName(name); errors.Is(err, pollerdef.ErrReservedName) {
		return err
	} else if err != nil {
		return usagef("%v", err)
	}
	if slices.Contains(env.Registered, name) {
		return fmt.Errorf("a poller %q is already registered", name)
	}
	root := env.Root
	if root == "" {
		return usagef("run pollerctl new from inside the repository (no go.mod for %s found)", modulePath)
	}
	pkgDir := filepath.Join(root, "pollers", name)
	fnDir := filepath.Join(root, name)
	if sinkType != "" {
		return scaffoldDeclared(env, root, name, sinkType)
	}
	for _, p := range []string{pkgDir, fnDir} {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%s already exists: not overwritten", p)
		}
	}
	const schedule = "*/30 * * * * *"
	data := struct{ Name, Pkg, Prefix, Module, Schedule string }{
		Name: name, Pkg: strings.ToLower(strings.ReplaceAll(name, "-", "_")), Prefix: appsettings.Prefix(name), Module: modulePath,
		Schedule: schedule,
	}

	// Everything is computed before anything is written.
	allPath := filepath.Join(root, "pollers", "pollers.go")
	all, err := os.ReadFile(allPath)
	if err != nil {
		return fmt.Errorf("reading %s: %w", allPath, err)
	}
	newAll, err := addToAll(all, modulePath+"/pollers/"+name, data.Pkg)
	if err != nil {
		return fmt.Errorf("%s: %w", allPath, err)
	}
	paramsPath, params, newParams, added, err := paramsWithEntry(root, name, schedule)
	if err != nil {
		return err
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
		changed[paramsPath] = [2][]byte{params, newParams}
	}
	example, err := exampleChange(root, data.Prefix, schedule, nil, changed)
	if err != nil {
		return err
	}

	if err := writeAll([]string{pkgDir, fnDir}, rendered, changed); err != nil {
		return err
	}
	entry := "added its entry to infra/bicep/main.bicepparam"
	if !added {
		entry = "infra/bicep/main.bicepparam already had an entry for it: check it"
	}
	fmt.Fprintf(env.Out, `created pollers/%[1]s/%[2]s.go, pollers/%[1]s/%[2]s_test.go and %[1]s/function.json;
added %[2]s.New() to All in pollers/pollers.go; %[4]s.
Next:
  1. Edit the row type (its columns, key and cursor), the table and the handler in
     pollers/%[1]s/%[2]s.go, then run its test, which builds an SQLite table from the row type and
     runs a tick over it:
       go test ./pollers/%[1]s/
  2. Edit the %[1]s entry of the pollers array in infra/bicep/main.bicepparam (the deployment's
     %[3]s_DB_DRIVER, %[3]s_DB_CONNECTION and %[3]s_SCHEDULE app settings): its driver, server and
     database are placeholders (EDIT-ME); for postgres, mysql or sqlite give connection instead of server
     and database (a Key Vault reference, never a literal secret).
  3. For local runs, %[6]s
     Its settings (docs/contract.md: App settings; %[3]s_SCHEDULE is read by the host, e.g. %[5]q):
`, name, data.Pkg, data.Prefix, entry, schedule, example)
	printSettings(env, data.Prefix, state.KindTimestampPK)
	return nil
}

// printSettings lists the settings that apply to a poller whose cursor is of kind, with their
// defaults (a keyset poller is not shown the change-stream settings, which it would refuse).
func printSettings(env Env, prefix, kind string) {
	for _, st := range appsettings.Table {
		if st.AppliesTo(kind) {
			fmt.Fprintf(env.Out, "       %-*s default: %s\n", len(prefix)+20, prefix+"_"+st.Suffix, plain(st.Default))
		}
	}
}

// exampleFile is the settings file's example, which dev.sh copies to local.settings.json and
// whose keys devhost takes when local.settings.json lacks them.
const exampleFile = "local.settings.json.example"

// exampleChange adds the new poller's required settings to local.settings.json.example (its
// schedule, and an empty driver, DSN and each of extra to fill in) in changed, and returns what
// to tell the user about local.settings.json.
func exampleChange(root, prefix, schedule string, extra []string, changed map[string][2][]byte) (string, error) {
	path := filepath.Join(root, exampleFile)
	old, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Sprintf("add %[1]s_DB_DRIVER, %[1]s_DB_CONNECTION and %[1]s_SCHEDULE to local.settings.json \"Values\" (there is no %[2]s here to add them to).", prefix, exampleFile), nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	kv := [][2]string{{prefix + "_DB_DRIVER", ""}, {prefix + "_DB_CONNECTION", ""}, {prefix + "_SCHEDULE", schedule}}
	for _, k := range extra {
		kv = append(kv, [2]string{k, ""})
	}
	updated, keys, err := addValues(old, kv)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if len(keys) == 0 {
		return fmt.Sprintf("%s already sets the %s_ settings: copy them into local.settings.json \"Values\".", exampleFile, prefix), nil
	}
	changed[path] = [2][]byte{old, updated}
	return fmt.Sprintf("copy the keys added to %s (%s) into local.settings.json \"Values\" and fill in the empty ones (devhost and dev.sh use the example's values for keys your file lacks, and the poller then fails naming the empty setting).", exampleFile, strings.Join(keys, ", ")), nil
}

// addValues adds the key/value pairs a local.settings.json(.example) does not have to its
// "Values" object, as the file's last members, keeping the rest of the file as it is; it returns
// the file and the keys added.
func addValues(file []byte, kv [][2]string) ([]byte, []string, error) {
	var parsed struct {
		Values map[string]string
	}
	if err := json.Unmarshal(file, &parsed); err != nil {
		return nil, nil, fmt.Errorf("not JSON: %w", err)
	}
	i := bytes.Index(file, []byte(`"Values"`))
	if i < 0 || parsed.Values == nil {
		return nil, nil, errors.New(`no "Values" object`)
	}
	open := bytes.IndexByte(file[i:], '{')
	if open < 0 {
		return nil, nil, errors.New(`no "Values" object`)
	}
	end := closing(file, i+open)
	if end < 0 {
		return nil, nil, errors.New(`"Values" is not closed`)
	}
	// After the object's last member: the last non-space byte before its closing brace.
	last := bytes.LastIndexFunc(file[:end], func(r rune) bool { return !unicode.IsSpace(r) })
	var add bytes.Buffer
	var keys []string
	for _, p := range kv {
		if _, ok := parsed.Values[p[0]]; ok {
			continue
		}
		k, _ := json.Marshal(p[0])
		v, _ := json.Marshal(p[1])
		if file[last] != '{' || add.Len() > 0 {
			add.WriteString(",")
		}
		fmt.Fprintf(&add, "\n    %s: %s", k, v)
		keys = append(keys, p[0])
	}
	if len(keys) == 0 {
		return file, nil, nil
	}
	out := slices.Concat(file[:last+1], add.Bytes(), file[last+1:])
	if err := json.Unmarshal(out, &parsed); err != nil {
		return nil, nil, fmt.Errorf("adding %v would break it: %w", keys, err)
	}
	return out, keys, nil
}

// closing returns the index of the brace that closes the object opening at open, skipping
// strings; -1 when there is none.
func closing(b []byte, open int) int {
	depth, inString := 0, false
	for i := open; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{':
			depth++
		case c == '}':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

// paramsWithEntry reads main.bicepparam and returns its path, its content and its content with
// an entry for the poller name in its pollers array (added false: it had one already).
func paramsWithEntry(root, name, schedule string) (path string, old, updated []byte, added bool, err error) {
	path = filepath.Join(root, paramsFile)
	old, err = os.ReadFile(path)
	if err != nil {
		return "", nil, nil, false, fmt.Errorf("reading %s (the scaffold adds the poller's entry to its pollers array): %w", path, err)
	}
	text, added, err := addPollerEntry(string(old), name, schedule)
	if err != nil {
		return "", nil, nil, false, fmt.Errorf("%s: %w", path, err)
	}
	return path, old, []byte(text), added, nil
}

// writeAll makes dirs, writes the rendered files and the changed ones (path: old, new content),
// or, on a failure, removes what it wrote and restores what it changed.
func writeAll(dirs []string, rendered map[string][]byte, changed map[string][2][]byte) error {
	var written, rewritten []string
	undo := func() {
		for _, p := range written {
			os.Remove(p)
		}
		for _, d := range dirs {
			os.Remove(d)
		}
		for _, p := range rewritten {
			os.WriteFile(p, changed[p][0], 0o644)
		}
	}
	for _, dir := range dirs {
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
	return nil
}

// plain is a settings table cell (docs/contract.md) as terminal text: without the backquotes.
func plain(cell string) string { return strings.ReplaceAll(cell, "`", "") }

// addToAll adds pkg.New() as the last poller of the list that func All returns, and the import of
// path (package pkg), to a Go file such as pollers/pollers.go; it returns the file formatted as
// gofmt would.
func addToAll(src []byte, path, pkg string) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "pollers.go", src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var imports *ast.GenDecl
	var list *ast.CompositeLit
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			if d.Tok == token.IMPORT && d.Rparen.IsValid() {
				imports = d
			}
		case *ast.FuncDecl:
			if d.Name.Name != "All" || d.Body == nil {
				continue
			}
			for _, st := range d.Body.List {
				if ret, ok := st.(*ast.ReturnStmt); ok && len(ret.Results) == 1 {
					list, _ = ret.Results[0].(*ast.CompositeLit)
				}
			}
		}
	}
	if imports == nil || list == nil {
		return nil, fmt.Errorf("no import ( ... ) block, or no func All returning a []*poller.Poller{...} literal, to add the poller to")
	}
	for _, s := range imports.Specs {
		if p, _ := strconv.Unquote(s.(*ast.ImportSpec).Path.Value); p == path {
			return nil, fmt.Errorf("already imports %s", path)
		}
	}
	spec := strconv.Quote(path)
	if pkg != filepath.Base(path) {
		spec = pkg + " " + spec
	}
	item := pkg + ".New(),\n"
	if n := len(list.Elts); n > 0 && fset.Position(list.Elts[n-1].End()).Line == fset.Position(list.Rbrace).Line {
		item = ",\n" + pkg + ".New(),\n" // the last element shares the closing brace's line
	}
	at, end := fset.Position(imports.Rparen).Offset, fset.Position(list.Rbrace).Offset
	return format.Source(slices.Concat(src[:at], []byte("\t"+spec+"\n"), src[at:end], []byte(item), src[end:]))
}

// addPollerEntry adds name's element to the pollers array of a main.bicepparam text (false: it
// had one already).
func addPollerEntry(text, name, schedule string) (string, bool, error) {
	return addEntry(text, "pollers", "name", name, func(indent, nl string) string { return pollerEntry(name, schedule, indent, nl) })
}

// addEntry adds the element entry writes to the array param NAME of a main.bicepparam text,
// unless an element already has field: 'value' (false). The array is written one element per
// line, [ and ] on lines of their own, or empty.
func addEntry(text, param, field, value string, entry func(indent, nl string) string) (string, bool, error) {
	masked := bicep.Mask(text)
	loc := regexp.MustCompile(`(?m)^[ \t]*param[ \t]+` + param + `[ \t]*=[ \t]*\[`).FindStringIndex(masked)
	if loc == nil {
		return "", false, fmt.Errorf("no `param %s = [ ... ]` array to add the poller's entry to", param)
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
		return "", false, fmt.Errorf("the `param %s = [` array is not closed", param)
	}
	if regexp.MustCompile(`(?m)^\s*` + field + `:\s*'` + regexp.QuoteMeta(value) + `'`).MatchString(text[open:end]) {
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
		return text[:open+1] + nl + entry(indent, nl) + indent + text[end:], true, nil
	}
	firstLine, _, _ := strings.Cut(inner, "\n")
	lineStart := strings.LastIndexByte(text[:end], '\n') + 1
	if strings.TrimSpace(firstLine) != "" || strings.TrimSpace(masked[lineStart:end]) != "" {
		return "", false, fmt.Errorf("write the `param %s = [ ... ]` array one element per line, with [ and ] ending and starting lines of their own, for the scaffold to add the poller's entry", param)
	}
	return text[:lineStart] + entry(text[lineStart:end], nl) + text[lineStart:], true, nil
}

// pollerEntry is the new poller's element of the pollers array (main.bicep's pollers param):
// placeholders to edit, each marked EDIT-ME.
func pollerEntry(name, schedule, indent, nl string) string {
	in := indent + "  "
	lines := []string{
		in + "{",
		in + "  name: '" + name + "'",
		in + "  // EDIT-ME (added by pollerctl new): the source database. For sqlserver, server and database",
		in + "  // (the app's identity signs in); for postgres, mysql or sqlite, connection instead (a Key Vault",
		in + "  // reference, never a literal secret).",
		in + "  driver: 'sqlserver'",
		in + "  server: 'EDIT-ME.database.windows.net'",
		in + "  database: 'EDIT-ME'",
		in + "  schedule: '" + schedule + "'",
		in + "  // Its other settings, without the " + appsettings.Prefix(name) + "_ prefix (the deployment owns the app settings):",
		in + "  // settings: { ON_POISON: 'quarantine', MAX_LAG: '10m' }",
		in + "}",
	}
	return strings.Join(lines, nl) + nl
}

var pollerTemplate = template.Must(template.New("poller").Parse(`// Package {{.Pkg}} is the {{.Name}} poller: edit its row type, its table and its handler.
package {{.Pkg}}

import (
	"context"
	"log/slog"
	"time"

	"{{.Module}}/poller"
)

// Row is a row of the table: a field per column the poller reads, tagged with the column's name;
// key marks the key columns, cursor the column the poller reads the table in the order of.
type Row struct {
	ID        int64     ` + "`db:\"id,key\"`" + `
	UpdatedAt time.Time ` + "`db:\"updated_at,cursor\"`" + `
}

// New returns the {{.Name}} poller: its function is {{.Name}}/function.json, its settings
// {{.Prefix}}_... (docs/contract.md: App settings). Options set its defaults (poller.WithBatchSize,
// poller.WithSettleLag) and its setup (poller.WithSetup).
func New() *poller.Poller {
	return poller.New("{{.Name}}", "{{.Pkg}}", poller.TimestampPK, handle)
}

// handle processes one batch. Delivery is at least once: make the effect idempotent on each
// row's key and cursor value (b.ID is a cheap first check), and pass b.FencingToken to sinks that can refuse a stale writer. Returning an
// error leaves the batch uncommitted; it comes again with b.Attempt + 1.
func handle(ctx context.Context, b *poller.Batch[Row]) error {
	for _, r := range b.Rows {
		_ = r // deliver r here
	}
	slog.Default().Info("{{.Name}} batch", "batch_id", b.ID, "rows", len(b.Rows), "attempt", b.Attempt)
	return nil
}
`))

var testTemplate = template.Must(template.New("test").Parse(`package {{.Pkg}}

import (
	"reflect"
	"testing"

	"{{.Module}}/pollertest"
)

// TestDelivered runs a real tick of the poller over an SQLite table made from Row, holding five
// sample rows inserted out of order: the handler gets them all, in cursor order. It follows Row:
// change its columns, key or cursor, and it still runs.
func TestDelivered(t *testing.T) {
	h := pollertest.New(t, New())
	var want []Row
	for i := 1; i <= 5; i++ {
		want = append(want, pollertest.Sample[Row](i))
	}
	h.Insert(want[4], want[2], want[0], want[3], want[1])
	h.Tick()
	if got := pollertest.Rows[Row](h); !reflect.DeepEqual(got, want) {
		t.Fatalf("delivered %+v\nwant %+v", got, want)
	}
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
      "useMonitor": false
    }
  ]
}
`))
