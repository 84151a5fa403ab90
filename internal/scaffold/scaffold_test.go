package scaffold_test

import (
	"bytes"
	"errors"
	"go/format"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/scaffold"
)

// outcome is how the command ended: as pollerctl exits 0, 2 and 1 on them.
type outcome string

const (
	done    outcome = "done"
	usage   outcome = "usage"   // a *scaffold.UsageError
	refused outcome = "refused" // any other error: refused or failed
)

// run runs the command in the repository root and returns how it ended and what it printed,
// followed by its error.
func run(root string, args ...string) (outcome, string) {
	var out bytes.Buffer
	err := scaffold.Run(args, scaffold.Env{Out: &out, Root: root})
	var u *scaffold.UsageError
	switch {
	case err == nil:
		return done, out.String()
	case errors.As(err, &u):
		return usage, out.String() + err.Error()
	}
	return refused, out.String() + err.Error()
}

// TestScaffoldProcess: `pollerctl new zzscaffoldtest`, run as a process in a copy of the repository
// (its tracked files as they are on disk), leaves a tree that passes what scripts/test.sh checks:
// gofmt, go vet, go build, the pollers' tests (the scaffold's own among them) and the Bicep
// content tests, which want a main.bicepparam entry per poller. The generated test then still
// passes after the poller's row type is edited: other columns and types, other key and cursor
// column names, a composite key, an integer cursor. It takes about 10 s (the copy's packages are compiled afresh)
// and needs no network: GOPROXY=off, the module cache serves the dependencies.
func TestScaffoldProcess(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is needed to list the repository's files")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "repo")
	copyTracked(t, root, dir)
	// The Bicep syntax check (infra/bicep's TestSyntaxCheckerCatchesErrors) runs when the
	// checker is installed; otherwise that test skips, as long as CI is not set.
	env := append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOPROXY=off")
	if _, err := os.Stat(filepath.Join(root, "node_modules", "tree-sitter-bicep")); err == nil {
		if err := os.Symlink(filepath.Join(root, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
			t.Fatal(err)
		}
	} else {
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "CI=") })
	}
	run := func(dir, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	bin := filepath.Join(tmp, "pollerctl")
	run(root, "go", "build", "-o", bin, "./cmd/pollerctl")
	unformattedBefore := unformatted(t, dir)
	out := run(dir, bin, "new", "zzscaffoldtest")
	if !strings.Contains(out, "main.bicepparam") || !strings.Contains(out, "ZZSCAFFOLDTEST_DB_CONNECTION") {
		t.Errorf("the next steps do not mention main.bicepparam and the settings:\n%s", out)
	}
	// gofmt: no file fails it that did not before (scripts/test.sh runs gofmt -l over every file).
	var introduced []string
	for _, f := range unformatted(t, dir) {
		if !slices.Contains(unformattedBefore, f) {
			introduced = append(introduced, f)
		}
	}
	if len(introduced) > 0 {
		t.Errorf("after pollerctl new, gofmt -l lists %s", strings.Join(introduced, ", "))
	}
	if len(unformattedBefore) > 0 {
		t.Logf("not the scaffold's doing: the repository's %s already fail gofmt", strings.Join(unformattedBefore, ", "))
	}
	run(dir, "go", "vet", "./...")
	run(dir, "go", "build", "./...")
	test := exec.Command("go", "test", "-count=1", "./pollers/...", "./infra/bicep/...")
	test.Dir, test.Env = dir, env
	if out, err := test.CombinedOutput(); err != nil || !strings.Contains(string(out), "ok  \tgithub.com/pseudotrigger/pseudotrigger/pollers/zzscaffoldtest") {
		t.Errorf("go test ./pollers/... ./infra/bicep/... (the scaffold's test among them): %v\n%s", err, out)
	}

	// The author edits the row type: the generated test follows it.
	path := filepath.Join(dir, "pollers", "zzscaffoldtest", "zzscaffoldtest.go")
	generated, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const def = "\tID        int64     `db:\"id,key\"`\n\tUpdatedAt time.Time `db:\"updated_at,cursor\"`\n"
	const kind = "poller.TimestampPK"
	if !bytes.Contains(generated, []byte(def)) || !bytes.Contains(generated, []byte(kind)) {
		t.Fatalf("pollers/zzscaffoldtest/zzscaffoldtest.go has no row type or cursor kind to edit:\n%s", generated)
	}
	for _, edited := range []struct{ row, kind string }{
		{"WidgetID int64 `db:\"widget_id,key\"`\nName string `db:\"name\"`\nPrice float64 `db:\"price\"`\nChangedAt time.Time `db:\"changed_at,cursor\"`\nNote *string `db:\"note\"`\n", kind},
		{"Seq int64 `db:\"seq,key,cursor\"`\nName string `db:\"name\"`\nAt *time.Time `db:\"at\"`\n", "poller.Integer"},
		{"Region string `db:\"region,key\"`\nWidgetID int64 `db:\"widget_id,key\"`\nLabel string `db:\"label\"`\nModified time.Time `db:\"modified,cursor\"`\n", kind},
	} {
		src := bytes.Replace(bytes.Replace(generated, []byte(def), []byte(edited.row), 1), []byte(kind), []byte(edited.kind), 1)
		if err := os.WriteFile(path, src, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("go", "test", "-count=1", "./pollers/zzscaffoldtest/")
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("the generated test fails after the row type became\n%s(%s)\n%v\n%s", edited.row, edited.kind, err, out)
		}
	}
	t.Logf("took %v", time.Since(start).Round(time.Second))
}

// copyTracked copies the files of the checkout at root, as they are on disk, to dst: those git
// tracks and those it does not ignore (a poller scaffolded but not committed yet), but
// node_modules, which the test links.
func copyTracked(t *testing.T, root, dst string) {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	list, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		if name == "node_modules" || strings.HasPrefix(name, "node_modules/") {
			continue
		}
		src := filepath.Join(root, name)
		info, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// unformatted lists the .go files under dir that gofmt would change, relative to dir.
func unformatted(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if formatted, err := format.Source(src); err != nil || !bytes.Equal(formatted, src) {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// miniRepo is the part of the repository the scaffold edits: pollers/pollers.go and
// infra/bicep/main.bicepparam, copied from this repository (params, if not nil, replaces the
// latter's content; "-" leaves it out).
func miniRepo(t *testing.T, params *string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"pollers/pollers.go": "", "infra/bicep/main.bicepparam": "", "local.settings.json.example": ""}
	for name := range files {
		b, err := os.ReadFile(filepath.Join("../..", name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
	if params != nil {
		files["infra/bicep/main.bicepparam"] = *params
	}
	for name, content := range files {
		if name == "infra/bicep/main.bicepparam" && content == "-" {
			continue
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tree maps every file and folder under dir to its content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(path)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for name, content := range after {
		if b, ok := before[name]; !ok {
			t.Errorf("%s: %s was written", what, name)
		} else if b != content {
			t.Errorf("%s: %s was changed", what, name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			t.Errorf("%s: %s was removed", what, name)
		}
	}
}

// TestScaffoldRefusesNames: the status function's name, in any case, is refused and an invalid
// name is bad usage; neither writes anything.
func TestScaffoldRefusesNames(t *testing.T) {
	dir := miniRepo(t, nil)
	before := tree(t, dir)
	for name, want := range map[string]outcome{"status": refused, "Status": refused, "STATUS": refused,
		"bad name": usage, "9lives": usage} {
		got, out := run(dir, name)
		if got != want || !strings.Contains(out, `"`+name+`"`) {
			t.Errorf("new %q: %s, want %s, and the name in the message: %s", name, got, want, out)
		}
		sameTree(t, "new "+name, before, tree(t, dir))
	}
}

// TestScaffoldNeedsPollersArray: without main.bicepparam, or without its pollers array, the
// scaffold fails naming the file and writes nothing.
func TestScaffoldNeedsPollersArray(t *testing.T) {
	for what, params := range map[string]string{
		"no main.bicepparam":         "-",
		"no pollers param":           "using 'main.bicep'\n\nparam appName = 'x'\n",
		"pollers not an array":       "using 'main.bicep'\n\nparam pollers = loadJsonContent('pollers.json')\n",
		"pollers array in a comment": "using 'main.bicep'\n\n// param pollers = [\n// ]\n",
		"unclosed pollers array":     "using 'main.bicep'\n\nparam pollers = [\n  {\n    name: 'orders'\n  }\n",
		"one-line pollers array":     "using 'main.bicep'\n\nparam pollers = [{ name: 'orders' }]\n",
	} {
		dir := miniRepo(t, &params)
		before := tree(t, dir)
		got, out := run(dir, "zzscaffoldtest")
		if got == done || !strings.Contains(out, filepath.Join(dir, "infra", "bicep", "main.bicepparam")) {
			t.Errorf("%s: %s, want a failure naming main.bicepparam: %s", what, got, out)
		}
		sameTree(t, what, before, tree(t, dir))
	}
}

// TestScaffoldExistingEntry: a pollers entry already named like the new poller is kept as it
// is, and said so.
func TestScaffoldExistingEntry(t *testing.T) {
	params := "using 'main.bicep'\n\nparam pollers = [\n  {\n    name: 'zzscaffoldtest'\n    driver: 'postgres'\n  }\n]\n"
	dir := miniRepo(t, &params)
	if got, out := run(dir, "zzscaffoldtest"); got != done {
		t.Fatalf("%s: %s", got, out)
	} else if got := tree(t, dir)["infra/bicep/main.bicepparam"]; got != params || !strings.Contains(out, "already had an entry") {
		t.Errorf("main.bicepparam:\n%s\noutput:\n%s", got, out)
	}
}

// TestScaffoldEdits: the scaffold adds the poller to All in pollers.go and an entry to the pollers array of
// main.bicepparam, leaving the rest as it was; every Go file it writes is gofmt-clean.
func TestScaffoldEdits(t *testing.T) {
	empty := "using 'main.bicep'\n\nparam appName = 'x'\n\nparam pollers = []\n"
	for what, params := range map[string]*string{"this repository's": nil, "an empty array": &empty} {
		dir := miniRepo(t, params)
		before := tree(t, dir)
		got, out := run(dir, "zzscaffoldtest")
		if got != done {
			t.Fatalf("%s: %s: %s", what, got, out)
		}
		after := tree(t, dir)
		for name, content := range after {
			if !strings.HasSuffix(name, ".go") {
				continue
			}
			if formatted, err := format.Source([]byte(content)); err != nil || string(formatted) != content {
				t.Errorf("%s: %s is not gofmt-clean (%v):\n%s", what, name, err, content)
			}
		}
		all, old := after["pollers/pollers.go"], before["pollers/pollers.go"]
		if !strings.Contains(all, "\t\"github.com/pseudotrigger/pseudotrigger/pollers/zzscaffoldtest\"\n)") ||
			!strings.Contains(all, "\t\torders.New(),\n\t\tzzscaffoldtest.New(),\n\t}") ||
			len(all) != len(old)+len("\t\"github.com/pseudotrigger/pseudotrigger/pollers/zzscaffoldtest\"\n\t\tzzscaffoldtest.New(),\n") {
			t.Errorf("%s: pollers.go:\n%s", what, all)
		}
		params := after["infra/bicep/main.bicepparam"]
		entry := strings.Index(params, "name: 'zzscaffoldtest'")
		array := strings.Index(params, "param pollers = [")
		if entry < 0 || array < 0 || entry < array || strings.Count(params, "'zzscaffoldtest'") != 1 {
			t.Errorf("%s: main.bicepparam has no entry for zzscaffoldtest in its pollers array:\n%s", what, params)
		}
		for _, field := range []string{"driver: ", "schedule: '*/30 * * * * *'", "server: ", "database: ", "without the ZZSCAFFOLDTEST_ prefix", "// settings: { ON_POISON: "} {
			if !strings.Contains(params[max(entry, 0):], field) {
				t.Errorf("%s: the zzscaffoldtest entry lacks %s:\n%s", what, field, params)
			}
		}
		if what == "this repository's" {
			// The existing entries and everything after the array are kept as they were.
			old := before["infra/bicep/main.bicepparam"]
			end := strings.Index(old, "\n]\n")
			if !strings.HasPrefix(params, old[:end]) || !strings.HasSuffix(params, old[end:]) {
				t.Errorf("%s: main.bicepparam changed outside the new entry:\n%s", what, params)
			}
		}
		if !strings.Contains(out, "infra/bicep/main.bicepparam") {
			t.Errorf("%s: the next steps do not mention main.bicepparam:\n%s", what, out)
		}
	}
}
