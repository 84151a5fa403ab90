package docs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
)

// repoRoot is the checkout, the parent of this package's folder.
const repoRoot = ".."

// page is one Markdown file of the documentation.
type page struct {
	path  string // relative to the repository root: README.md, docs/sources.md
	lines []string
}

// block is one fenced code block of a page.
type block struct {
	page    string
	line    int      // the fence's line, from 1
	lang    string   // sql, sh, go, ...
	words   []string // the info string's words after the language
	comment string   // the HTML comment on the line before the fence, without <!-- -->
	body    string
}

func (b block) String() string {
	return fmt.Sprintf("%s:%d (```%s %s)", b.page, b.line, b.lang, strings.Join(b.words, " "))
}

// class is the block's first word after the language ("" when none).
func (b block) class() string {
	if len(b.words) == 0 {
		return ""
	}
	return b.words[0]
}

// arg returns the value of a key=value word of the info string.
func (b block) arg(key string) string {
	for _, w := range b.words {
		if k, v, ok := strings.Cut(w, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// lines are the block's non-empty lines, trimmed.
func (b block) lines() []string {
	var out []string
	for _, l := range strings.Split(b.body, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// pages reads README.md and every docs/*.md.
func pages(t *testing.T) []page {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths = append([]string{filepath.Join(repoRoot, "README.md")}, paths...)
	var out []page
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, p)
		out = append(out, page{path: filepath.ToSlash(rel), lines: strings.Split(string(data), "\n")})
	}
	return out
}

var fence = regexp.MustCompile("^(\\s*)```(.*)$")

// blocks returns every fenced block of the pages.
func blocks(t *testing.T) []block {
	t.Helper()
	var out []block
	for _, p := range pages(t) {
		for i := 0; i < len(p.lines); i++ {
			m := fence.FindStringSubmatch(p.lines[i])
			if m == nil {
				continue
			}
			indent, info := m[1], strings.Fields(m[2])
			b := block{page: p.path, line: i + 1}
			if len(info) > 0 {
				b.lang, b.words = info[0], info[1:]
			}
			if i > 0 {
				if c := strings.TrimSpace(p.lines[i-1]); strings.HasPrefix(c, "<!--") && strings.HasSuffix(c, "-->") {
					b.comment = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(c, "<!--"), "-->"))
				}
			}
			var body []string
			for i++; i < len(p.lines) && strings.TrimSpace(p.lines[i]) != "```"; i++ {
				body = append(body, strings.TrimPrefix(p.lines[i], indent))
			}
			if i == len(p.lines) {
				t.Fatalf("%s:%d: a fenced block that never closes", p.path, b.line)
			}
			b.body = strings.Join(body, "\n") + "\n"
			out = append(out, b)
		}
	}
	return out
}

// blocksOf returns the blocks of one language whose class is one of classes.
func blocksOf(t *testing.T, lang string, classes ...string) []block {
	t.Helper()
	var out []block
	for _, b := range blocks(t) {
		if b.lang == lang && slices.Contains(classes, b.class()) {
			out = append(out, b)
		}
	}
	return out
}

// classes are the info strings a block may have: language, then the class that says how the
// block is checked (docs/README.md's table), and the test that checks it.
var classes = map[string]map[string]string{
	"sh": {
		"run":       "TestShellRun",
		"pollerctl": "TestPollerctl",
		"check":     "TestShellCheck",
		"manual":    "TestShellManual",
		"local":     "TestDevShOwnPoller (package scripts), which walks a section's blocks in a copy of the checkout",
	},
	"sql": {
		"postgres":    "TestSQLPostgres",
		"mysql":       "TestSQLMySQL",
		"sqlite":      "TestSQLSQLite",
		"sqlserver":   "TestSQLSQLServer",
		"output":      "TestOutputs",
		"output-head": "TestOutputs",
	},
	"go":      {"compile": "TestGoCompiles", "compile-test": "TestGoCompiles", "receiver": "TestWebhookReceivers"},
	"python":  {"receiver": "TestWebhookReceivers", "syntax": "TestPythonSyntax"},
	"csharp":  {"review": "nothing to run here (no .NET): checked by review against the specification (TestWebhookReceivers says so)", "reviewed": "nothing to run: reviewed (no .NET SDK here)"},
	"json":    {"poller": "TestJSON", "state": "TestJSON", "change": "TestJSON", "function": "TestJSON", "cloudevents": "TestJSON"},
	"kusto":   {"fields": "TestKustoFields"},
	"bicep":   {"params": "TestBicepParams"},
	"js":      {"syntax": "TestJSSyntax"},
	"text":    {"output": "nothing to run: output shown", "example": "nothing to run: example values"},
	"yaml":    {"collector": "TestCollectorConfig"},
	"mermaid": {"": "nothing to run: a diagram"},
}

// sqlKinds are what follows the database in a ```sql DATABASE block.
var sqlKinds = []string{"recipe", "outbox", "insert", "grants", "query"}

// TestBlocksClassified: every block says what it is, so that no page can slip in a command or a
// recipe that no test runs.
func TestBlocksClassified(t *testing.T) {
	bs := blocks(t)
	if len(bs) == 0 {
		t.Fatal("no fenced blocks found")
	}
	for _, b := range bs {
		byClass, ok := classes[b.lang]
		if !ok {
			t.Errorf("%s: language %q is not one the docs test knows: give it one of %s", b, b.lang, keys(classes))
			continue
		}
		if _, ok := byClass[b.class()]; !ok {
			t.Errorf("%s: class %q is not one of %s (docs/README.md says how each is checked)", b, b.class(), keys(byClass))
			continue
		}
		if b.lang == "sql" && slices.Contains(databases, b.class()) {
			kind, _, _ := strings.Cut(b.words[min(1, len(b.words)-1)], "=")
			if len(b.words) < 2 || !slices.Contains(sqlKinds, kind) {
				t.Errorf("%s: a %s block is one of %s (recipe=KIND)", b, b.class(), strings.Join(sqlKinds, ", "))
			}
		}
		if (b.class() == "output" || b.class() == "output-head") && b.lang == "sql" && !strings.HasPrefix(b.comment, "output of: ") {
			t.Errorf("%s: an output block needs the command before it: <!-- output of: COMMAND -->", b)
		}
		if (b.class() == "manual" || b.class() == "check" || b.class() == "local" || b.class() == "review") && b.comment == "" {
			t.Errorf("%s: a %s block needs an HTML comment before it saying why no test runs it and what checks it", b, b.class())
		}
	}
}

func keys[V any](m map[string]V) string {
	var ks []string
	for k := range m {
		ks = append(ks, fmt.Sprintf("%q", k))
	}
	slices.Sort(ks)
	return strings.Join(ks, ", ")
}

// TestShellManual: commands no script runs (Azure administration) parse as shell.
func TestShellManual(t *testing.T) {
	for _, b := range blocksOf(t, "sh", "manual") {
		bashSyntax(t, b)
		for _, l := range b.lines() {
			if !strings.HasPrefix(l, "az ") {
				t.Errorf("%s: %q: a manual block holds only az commands; others can be run or checked", b, l)
			}
		}
	}
}

// bashSyntax fails when the block is not valid shell.
func bashSyntax(t *testing.T, b block) {
	t.Helper()
	if out, err := command(t, "bash", "-n", "-c", b.body).CombinedOutput(); err != nil {
		t.Errorf("%s: not valid shell: %v\n%s", b, err, out)
	}
}

var (
	mdLink  = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`^#{1,6}\s+(.*)$`)
)

// TestLinks: every relative link between the pages, and to files of the repository, resolves;
// so does every #anchor.
func TestLinks(t *testing.T) {
	ps := pages(t)
	anchors := map[string][]string{}
	for _, p := range ps {
		anchors[p.path] = anchorsOf(p)
	}
	for _, p := range ps {
		inFence := false
		for i, line := range p.lines {
			if fence.MatchString(line) {
				inFence = !inFence
			}
			if inFence {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(stripCode(line), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				where := fmt.Sprintf("%s:%d: link %q", p.path, i+1, target)
				resolved := p.path
				if file != "" {
					resolved = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(p.path), file)))
					if _, err := os.Stat(filepath.Join(repoRoot, resolved)); err != nil {
						t.Errorf("%s: %s does not exist", where, resolved)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				as, ok := anchors[resolved]
				if !ok {
					t.Errorf("%s: an anchor into %s, which is not a page", where, resolved)
				} else if !slices.Contains(as, anchor) {
					t.Errorf("%s: %s has no heading #%s (it has %s)", where, resolved, anchor, strings.Join(as, ", "))
				}
			}
		}
	}
}

var inlineCode = regexp.MustCompile("`[^`]*`")

// stripCode removes inline code, where brackets are not links.
func stripCode(line string) string { return inlineCode.ReplaceAllString(line, "") }

// anchorsOf lists a page's heading anchors as GitHub makes them: lower case, punctuation but
// '-' and '_' dropped, spaces as '-', a repeated one suffixed -1, -2, ...
func anchorsOf(p page) []string {
	var out []string
	seen := map[string]int{}
	inFence := false
	for _, line := range p.lines {
		if fence.MatchString(line) {
			inFence = !inFence
		}
		m := heading.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.ReplaceAll(m[1], "`", "")) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			a = fmt.Sprintf("%s-%d", a, n)
		}
		seen[b.String()]++
		out = append(out, a)
	}
	return out
}

// TestPageShape: each page is short enough to read in one sitting and starts with a title and
// one sentence on what it is for; the README stays within 250 lines and links every page.
func TestPageShape(t *testing.T) {
	var readme page
	for _, p := range pages(t) {
		if p.path == "README.md" {
			readme = p
			if len(p.lines) > 251 { // the file's last newline makes one empty element
				t.Errorf("README.md has %d lines: at most 250", len(p.lines)-1)
			}
			continue
		}
		if len(p.lines) > 301 {
			t.Errorf("%s has %d lines: split the subject (at most ~300)", p.path, len(p.lines)-1)
		}
		if !strings.HasPrefix(p.lines[0], "# ") || len(p.lines) < 3 || p.lines[1] != "" || strings.TrimSpace(p.lines[2]) == "" {
			t.Errorf("%s: start with a '# Title', a blank line and a sentence on what the page is for", p.path)
		}
	}
	index := strings.Join(readme.lines, "\n")
	docsIndex, err := os.ReadFile(filepath.Join(repoRoot, "docs", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages(t) {
		name := strings.TrimPrefix(p.path, "docs/")
		if p.path == "README.md" || name == "README.md" {
			continue
		}
		if !strings.Contains(index, "(docs/"+name) {
			t.Errorf("README.md does not link %s", p.path)
		}
		if !strings.Contains(string(docsIndex), "("+name+")") {
			t.Errorf("docs/README.md does not list %s", p.path)
		}
	}
}

// readLines returns a file of the repository as lines.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		out = append(out, s.Text())
	}
	return out
}

// TestTypesPage: docs/types.md's tables parse (each row one `type`, `value` and `json` whose
// JSON is JSON), and each is read by a driver's conformance suite (a fixture's Values names it),
// which runs its rows against the database.
func TestTypesPage(t *testing.T) {
	tables, err := sourcetest.ReadTypesPage(filepath.Join(repoRoot, sourcetest.TypesPage))
	if err != nil {
		t.Fatal(err)
	}
	fixtures, err := filepath.Glob(filepath.Join(repoRoot, "internal", "source", "*", "conformance_test.go"))
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no conformance tests found: %v", err)
	}
	var named string
	for _, f := range fixtures {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		named += string(b)
	}
	for _, db := range []string{"postgres", "mysql", "mariadb", "mysql8", "sqlite", "sqlserver"} {
		if len(tables[db]) == 0 {
			t.Errorf("%s has no table for %s (<!-- types: %s -->)", sourcetest.TypesPage, db, db)
		}
		if !strings.Contains(named, `"`+db+`"`) {
			t.Errorf("no conformance fixture reads %s's table %s", sourcetest.TypesPage, db)
		}
	}
	for db := range tables {
		if !strings.Contains(named, `"`+db+`"`) {
			t.Errorf("%s's table %s is read by no conformance fixture", sourcetest.TypesPage, db)
		}
	}
}
