package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// recordedHeader is the header of performance.md's "Recorded figures" table, which
// scripts/bench.sh reads (its columns by position).
const recordedHeader = "| path | goal | recorded | what |"

// TestRecordedFigures: performance.md's "Recorded figures" table has its header, a path, a goal
// (an operator and a number) and a recorded figure (a number or -) on every row, each path once;
// and scripts/bench.sh reads the same table (bench.sh goals): every path its summary can name
// has a row, every row is such a path, and the goals and figures it reads are the page's.
func TestRecordedFigures(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "performance.md"))
	if err != nil {
		t.Fatal(err)
	}
	var section []string
	inside := false
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "## ") {
			inside = l == "## Recorded figures"
			continue
		}
		if inside && strings.HasPrefix(l, "|") {
			section = append(section, l)
		}
	}
	if len(section) < 3 || section[0] != recordedHeader || !regexp.MustCompile(`^\|(-+\|){4}$`).MatchString(section[1]) {
		t.Fatalf("docs/performance.md: no table headed %q under \"## Recorded figures\":\n%s", recordedHeader, strings.Join(section, "\n"))
	}
	row := regexp.MustCompile("^\\| `([A-Za-z0-9/-]+)` \\| ((?:>=|>|<=|<|=) [0-9]+(?:\\.[0-9]+)?) \\| ([0-9]+(?:\\.[0-9]+)?|-) \\| [^|]+ \\|$")
	page := map[string]string{} // path -> "goal|recorded"
	for _, l := range section[2:] {
		m := row.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("docs/performance.md: a row of Recorded figures is not | `path` | OP NUMBER | NUMBER or - | what |: %s", l)
			continue
		}
		if _, dup := page[m[1]]; dup {
			t.Errorf("docs/performance.md: %s has two rows", m[1])
		}
		page[m[1]] = m[2] + "|" + m[3]
	}

	cmd := exec.Command("bash", filepath.Join(repoRoot, "scripts", "bench.sh"), "goals")
	cmd.Env = append(os.Environ(), "RUN_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/bench.sh goals: %v\n%s", err, out)
	}
	var script []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, goals, _ := strings.Cut(l, "|")
		script = append(script, path)
		if want, ok := page[path]; ok && want != goals {
			t.Errorf("scripts/bench.sh reads %s as %q, the page says %q", path, goals, want)
		}
	}
	for path := range page {
		if !slices.Contains(script, path) {
			t.Errorf("docs/performance.md records %s, which scripts/bench.sh's summary never names (SUMMARY_PATHS)", path)
		}
	}
	if len(script) != len(page) {
		t.Errorf("scripts/bench.sh names %d paths, the page records %d:\n%s", len(script), len(page), out)
	}
}
