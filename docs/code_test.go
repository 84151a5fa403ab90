package docs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/messaging"

	"github.com/pseudotrigger/pseudotrigger/internal/declared"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// TestGoCompiles: each ```go compile block is a whole file that compiles (and passes go vet)
// against this checkout, in a module of its own with a replace to the checkout, as a user's
// module would; a compile-test block is a test file.
func TestGoCompiles(t *testing.T) {
	t.Parallel()
	bs := blocksOf(t, "go", "compile", "compile-test")
	if len(bs) == 0 {
		t.Fatal("no ```go compile blocks: the README's poller must be one")
	}
	dir := t.TempDir()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The checkout's go version, which a workspace must not be below.
	goVersion := "1.26"
	for _, l := range readLines(t, "go.mod") {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			goVersion = v
		}
	}
	write("go.mod", "module docsexamples\n\ngo "+goVersion+"\n\nrequire github.com/pseudotrigger/pseudotrigger v0.0.0\n\n"+
		"replace github.com/pseudotrigger/pseudotrigger => "+root+"\n")
	sum, err := os.ReadFile(filepath.Join(repoRoot, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum))
	for i, b := range bs {
		name := "main.go"
		if b.class() == "compile-test" {
			name = "example_test.go"
		}
		write(fmt.Sprintf("example%d/%s", i, name), b.body)
	}
	cmd := command(t, "go", "vet", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false")
	if _, stderr, code := run(cmd); code != 0 {
		var where []string
		for i, b := range bs {
			where = append(where, fmt.Sprintf("example%d: %s", i, b))
		}
		t.Errorf("the Go examples do not compile:\n%s\n(%s)", stderr, strings.Join(where, "; "))
	}
}

// TestJSON: each JSON block decodes, strictly, as what it says it is.
func TestJSON(t *testing.T) {
	// A message's fields that are absent where not known: each example has the others, and the
	// examples together show every one.
	optional := []string{"before", "changed", "unchanged", "tx"}
	var changes []string
	defer func() {
		for _, f := range jsonFields(reflect.TypeFor[sink.Change]()) {
			if !slices.Contains(changes, f) {
				t.Errorf("no ```json change example shows the field %q", f)
			}
		}
	}()
	for _, b := range blocksOf(t, "json", "poller", "state", "change", "function", "cloudevents") {
		data := []byte(b.body)
		if file, ok := strings.CutPrefix(b.comment, "file: "); ok {
			if want, err := os.ReadFile(filepath.Join(repoRoot, file)); err != nil || string(want) != b.body {
				t.Errorf("%s: the block is not %s as it is (%v)", b, file, err)
			}
		}
		switch b.class() {
		case "poller":
			if _, err := declared.Parse(data); err != nil {
				t.Errorf("%s: not a valid poller.json: %v", b, err)
			}
		case "state":
			var head struct {
				PollerName string `json:"poller_name"`
			}
			_ = json.Unmarshal(data, &head)
			if _, err := state.Decode("docs", head.PollerName, data); err != nil {
				t.Errorf("%s: not a valid state document: %v", b, err)
			}
		case "change":
			var c sink.Change
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&c); err != nil {
				t.Errorf("%s: not a sink message: %v", b, err)
			}
			var fields map[string]any
			_ = json.Unmarshal(data, &fields)
			got := sortedKeys(fields)
			for _, f := range jsonFields(reflect.TypeFor[sink.Change]()) {
				if !slices.Contains(got, f) && !slices.Contains(optional, f) {
					t.Errorf("%s: the example lacks %q, which every message has (it has %v)", b, f, got)
				}
			}
			changes = append(changes, got...)
		case "cloudevents": // a CloudEvents JSON batch, read as the Azure SDK reads one (id, source, specversion, type required)
			var evs []messaging.CloudEvent
			if err := json.Unmarshal(data, &evs); err != nil || len(evs) == 0 {
				t.Errorf("%s: not a CloudEvents batch: %v", b, err)
			}
		case "function":
			var f struct {
				Bindings []map[string]any `json:"bindings"`
			}
			if err := json.Unmarshal(data, &f); err != nil || len(f.Bindings) == 0 {
				t.Errorf("%s: not a function.json with bindings: %v", b, err)
			}
		}
	}
}

func sortedKeys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// jsonFields are a struct's JSON field names (embedded structs' included), sorted.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && name == "":
			out = append(out, jsonFields(f.Type)...)
		case name != "-" && f.IsExported():
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// goFields are a struct's exported Go field names, sorted.
func goFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() {
			out = append(out, f.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestContractFields: the contract page lists exactly the fields the code has: a field added,
// renamed or dropped in the code fails here until docs/contract.md says so.
func TestContractFields(t *testing.T) {
	for _, c := range []struct {
		section string
		want    []string
	}{
		{"Batches (Go)", goFields(reflect.TypeFor[poller.Batch[poller.Row]]())},
		{"Sink messages", jsonFields(reflect.TypeFor[sink.Change]())},
		{"The state document", jsonFields(reflect.TypeFor[state.Doc]())},
		// A Row's driver details are members of its own: the slot of a logical poller.
		{"Status JSON", append(jsonFields(reflect.TypeFor[pollerstatus.Row]()), pgcdc.SlotDetail)},
	} {
		got := tableNames(t, "docs/contract.md", c.section)
		slices.Sort(got)
		slices.Sort(c.want)
		if !slices.Equal(got, c.want) {
			t.Errorf("docs/contract.md, %q lists %v; the code has %v", c.section, got, c.want)
		}
	}
}

var firstCell = regexp.MustCompile(`^\|\s*([^|]*)\|`)

// tableNames returns the backquoted names in the first column of the tables under a page's
// heading (up to the next heading of the same or a higher level).
func tableNames(t *testing.T, path, section string) []string {
	t.Helper()
	var names []string
	in, level := false, 0
	for _, line := range readLines(t, path) {
		if m := heading.FindStringSubmatch(line); m != nil {
			l := len(line) - len(strings.TrimLeft(line, "#"))
			if in && l <= level {
				break
			}
			if m[1] == section {
				in, level = true, l
			}
			continue
		}
		if m := firstCell.FindStringSubmatch(line); in && m != nil {
			for _, n := range inlineCode.FindAllString(m[1], -1) {
				names = append(names, strings.Trim(n, "`"))
			}
		}
	}
	if !in {
		t.Fatalf("%s has no section %q", path, section)
	}
	return names
}

var lineField = regexp.MustCompile(`\bline\.([a-z_]+)`)

// TestKustoFields: every field a query reads from a log line (line.FIELD) is one the handler's
// code logs (a string "FIELD" in its Go source).
func TestKustoFields(t *testing.T) {
	var src bytes.Buffer
	for _, dir := range []string{"handler", "internal"} {
		_ = filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				data, _ := os.ReadFile(path)
				src.Write(data)
			}
			return nil
		})
	}
	for _, b := range blocksOf(t, "kusto", "fields") {
		for _, m := range lineField.FindAllStringSubmatch(b.body, -1) {
			if !bytes.Contains(src.Bytes(), []byte(`"`+m[1]+`"`)) {
				t.Errorf("%s: reads line.%s, which the handler does not log", b, m[1])
			}
		}
	}
}

var (
	bicepParam = regexp.MustCompile(`(?m)^param\s+(\w+)`)
	bicepKey   = regexp.MustCompile(`(?m)(\w+):\s`)
)

// TestBicepParams: every parameter a Bicep snippet sets is one of main.bicep's, and every key in
// it is a name the templates read (a pollers entry's settings keys are poller settings).
func TestBicepParams(t *testing.T) {
	t.Parallel()
	var bicep strings.Builder
	files, _ := filepath.Glob(filepath.Join(repoRoot, "infra", "bicep", "*.bicep"))
	mods, _ := filepath.Glob(filepath.Join(repoRoot, "infra", "bicep", "modules", "*.bicep"))
	for _, f := range append(files, mods...) {
		data, _ := os.ReadFile(f)
		bicep.Write(data)
	}
	main, err := os.ReadFile(filepath.Join(repoRoot, "infra", "bicep", "main.bicep"))
	if err != nil {
		t.Fatal(err)
	}
	goSource := func(name string) bool {
		found := false
		_ = filepath.WalkDir(repoRoot, func(path string, d os.DirEntry, err error) error {
			if err == nil && !found && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.Contains(path, "node_modules") {
				data, _ := os.ReadFile(path)
				found = bytes.Contains(data, []byte(name))
			}
			return nil
		})
		return found
	}
	for _, b := range blocksOf(t, "bicep", "params") {
		for _, m := range bicepParam.FindAllStringSubmatch(b.body, -1) {
			if !regexp.MustCompile(`(?m)^param\s+` + m[1] + `\s`).Match(main) {
				t.Errorf("%s: main.bicep has no parameter %s", b, m[1])
			}
		}
		for _, m := range bicepKey.FindAllStringSubmatch(stripBicepStrings(b.body), -1) {
			key := m[1]
			if strings.ToUpper(key) == key { // an app setting: a poller's suffix or a full name
				if !goSource(`"`+key+`"`) && !goSource("_"+key) {
					t.Errorf("%s: %s is no setting the app reads", b, key)
				}
			} else if !strings.Contains(bicep.String(), key) {
				t.Errorf("%s: the templates read no %s", b, key)
			}
		}
	}
}

// stripBicepStrings drops '...' strings and // comments, whose colons are no keys.
func stripBicepStrings(s string) string {
	return regexp.MustCompile(`'[^']*'|//[^\n]*`).ReplaceAllString(s, "''")
}

// TestJSSyntax: JavaScript examples parse (node --check).
func TestJSSyntax(t *testing.T) {
	for _, b := range blocksOf(t, "js", "syntax") {
		path := filepath.Join(t.TempDir(), "example.js")
		if err := os.WriteFile(path, []byte(b.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := command(t, "node", "--check", path).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", b, err, out)
		}
	}
}

// TestContractHealths: the status JSON's health row in docs/contract.md lists exactly the health
// values the code has, in their order (most urgent first).
func TestContractHealths(t *testing.T) {
	for _, line := range readLines(t, "docs/contract.md") {
		if !strings.HasPrefix(line, "| `health` |") {
			continue
		}
		var got []string
		for _, n := range inlineCode.FindAllString(strings.SplitN(line, "(", 2)[0], -1) {
			got = append(got, strings.Trim(n, "`"))
		}
		if got = got[1:]; !slices.Equal(got, pollerstatus.Healths) {
			t.Errorf("docs/contract.md's health row lists %v; the code has %v", got, pollerstatus.Healths)
		}
		return
	}
	t.Fatal("docs/contract.md has no health row")
}

// TestPythonSyntax: Python examples parse (python3's ast; the libraries they import need not be
// installed).
func TestPythonSyntax(t *testing.T) {
	for _, b := range blocksOf(t, "python", "syntax") {
		cmd := command(t, "python3", "-c", "import ast, sys; ast.parse(sys.stdin.read())")
		cmd.Stdin = strings.NewReader(b.body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", b, err, out)
		}
	}
}
