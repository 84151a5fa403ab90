package docs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// command is exec.Command in the repository's root, bounded by the test's deadline.
func command(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
		t.Cleanup(cancel)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = repoRoot
	return cmd
}

// run runs cmd and returns its stdout, stderr and exit code (-1 when it could not start).
func run(cmd *exec.Cmd) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		code = -1
		e.WriteString(err.Error())
	}
	return o.String(), e.String(), code
}

// pollerctlBuild matches the documented build of pollerctl, whose output TestShellRun redirects
// to a temporary folder (the test writes nothing into the checkout).
var pollerctlBuild = regexp.MustCompile(`^go build -o bin/pollerctl ./cmd/pollerctl$`)

var (
	pollerctlOnce sync.Once
	pollerctlPath string
	pollerctlErr  string
)

// pollerctlBinary builds pollerctl once, with the command the docs give, into a folder that
// outlives the tests that share it (removed by TestMain).
func pollerctlBinary(t *testing.T) string {
	t.Helper()
	pollerctlOnce.Do(func() {
		dir, err := os.MkdirTemp("", "docs-pollerctl-")
		if err != nil {
			pollerctlErr = err.Error()
			return
		}
		tempDirs = append(tempDirs, dir)
		pollerctlPath = filepath.Join(dir, "pollerctl")
		cmd := command(t, "go", "build", "-o", pollerctlPath, "./cmd/pollerctl")
		if _, stderr, code := run(cmd); code != 0 {
			pollerctlErr = "go build -o bin/pollerctl ./cmd/pollerctl failed: " + stderr
		}
	})
	if pollerctlErr != "" {
		t.Fatal(pollerctlErr)
	}
	return pollerctlPath
}

// tempDirs are removed when the package's tests end.
var tempDirs []string

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range tempDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// TestShellRun: every line of a ```sh run block runs, from the repository's root, and succeeds.
func TestShellRun(t *testing.T) {
	t.Parallel()
	for _, b := range blocksOf(t, "sh", "run") {
		for _, line := range b.lines() {
			if pollerctlBuild.MatchString(line) {
				pollerctlBinary(t) // the same command, its output in a temporary folder
				continue
			}
			stdout, stderr, code := run(command(t, "bash", "-c", line))
			if code != 0 {
				t.Errorf("%s: %q exited %d\nstdout:\n%s\nstderr:\n%s", b, line, code, stdout, stderr)
			}
		}
	}
}

// TestOutputs: a block shown as a command's output is what the command prints today.
func TestOutputs(t *testing.T) {
	for _, b := range append(blocksOf(t, "sql", "output", "output-head"), blocksOf(t, "text", "output")...) {
		if b.lang == "text" && !strings.HasPrefix(b.comment, "output of: ") {
			continue // an example of output (a tick's line, a table): nothing to compare with
		}
		line := strings.TrimPrefix(b.comment, "output of: ")
		stdout, stderr, code := run(command(t, "bash", "-c", line))
		if code != 0 {
			t.Errorf("%s: %q exited %d: %s", b, line, code, stderr)
			continue
		}
		want := b.body
		if b.class() == "output-head" {
			if !strings.HasPrefix(stdout, want) {
				t.Errorf("%s: %q no longer starts with the block; it prints:\n%s", b, line, stdout)
			}
		} else if stdout != want {
			t.Errorf("%s: %q no longer prints the block; it prints:\n%s", b, line, stdout)
		}
	}
}

// shellCommands splits a line into its simple commands (at &&, ||, ; and |), each as words, with
// leading NAME=value assignments kept apart.
func shellCommands(line string) (cmds [][]string, envs [][]string) {
	for _, part := range regexp.MustCompile(`&&|\|\||;|\|`).Split(line, -1) {
		var env, words []string
		for _, w := range strings.Fields(part) {
			if len(words) == 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(w) {
				env = append(env, strings.SplitN(w, "=", 2)[0])
				continue
			}
			words = append(words, w)
		}
		if len(words) > 0 {
			cmds, envs = append(cmds, words), append(envs, env)
		}
	}
	return cmds, envs
}

// TestShellCheck: commands that cannot run in a test (long-running, or they need Azure) are
// checked as far as they can be here. A scripts/ command: the script exists, is executable,
// parses, and mentions each option and variable it is given. An az, azd or func command: the same
// invocation is one that scripts/ runs or prints (scripts/deploy.sh --dry-run among them),
// azure.yaml or the GitHub workflow runs, or the Bicep tests pin. go test: the package has the
// test. curl: the URL's function exists.
func TestShellCheck(t *testing.T) {
	t.Parallel()
	corpus := toolCorpus(t)
	for _, b := range blocksOf(t, "sh", "check") {
		bashSyntax(t, b)
		for _, line := range b.lines() {
			cmds, envs := shellCommands(line)
			for i, words := range cmds {
				where := b.String() + ": " + strings.Join(words, " ")
				switch {
				case strings.HasPrefix(words[0], "scripts/"):
					checkScript(t, where, words, envs[i])
				case slices.Contains([]string{"az", "azd", "func"}, words[0]):
					checkPinned(t, where, words, corpus)
				case words[0] == "go" && len(words) > 1 && words[1] == "test":
					checkGoTest(t, where, words)
				case words[0] == "curl":
					checkCurl(t, where, words)
				default:
					t.Errorf("%s: the docs test does not know how to check %q: run it (```sh run) or teach TestShellCheck", where, words[0])
				}
			}
		}
	}
}

// checkScript: the script exists, is executable and parses; each option and variable given is
// one it reads (its text, or that of the library it sources, mentions it).
func checkScript(t *testing.T, where string, words, env []string) {
	t.Helper()
	path := filepath.Join(repoRoot, words[0])
	info, err := os.Stat(path)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if info.Mode()&0o111 == 0 {
		t.Errorf("%s: %s is not executable", where, words[0])
	}
	if out, err := command(t, "bash", "-n", words[0]).CombinedOutput(); err != nil {
		t.Errorf("%s: %s does not parse: %s", where, words[0], out)
	}
	text, _ := os.ReadFile(path)
	lib, _ := os.ReadFile(filepath.Join(repoRoot, "scripts", "lib", "services.sh"))
	all := string(text) + string(lib)
	for _, w := range words[1:] {
		if strings.HasPrefix(w, "-") && !strings.Contains(all, strings.SplitN(w, "=", 2)[0]) {
			t.Errorf("%s: %s does not know the option %s", where, words[0], w)
		}
	}
	for _, v := range env {
		if !strings.Contains(all, v) {
			t.Errorf("%s: %s does not read %s", where, words[0], v)
		}
	}
}

var placeholder = regexp.MustCompile(`^<.*>$|^[A-Z][A-Z_]*$`)

// checkPinned: some line of the corpus holds the command's words (but its values: placeholders,
// names and quoted strings) and each of its options.
func checkPinned(t *testing.T, where string, words []string, corpus []string) {
	t.Helper()
	var path, opts []string
	for i, w := range words {
		switch {
		case strings.HasPrefix(w, "-"):
			opts = append(opts, strings.SplitN(w, "=", 2)[0])
		case len(opts) == 0 && !placeholder.MatchString(w) && !strings.ContainsAny(w, `"'$/.<`) && (i == 0 || !strings.HasPrefix(words[i-1], "-")):
			path = append(path, w)
		}
	}
	cmd := strings.Join(path, " ")
	for _, line := range corpus {
		if !strings.Contains(line, cmd+" ") && !strings.HasSuffix(line, cmd) {
			continue
		}
		missing := false
		for _, o := range opts {
			missing = missing || !strings.Contains(line, o)
		}
		if !missing {
			return
		}
	}
	t.Errorf("%s: no script, workflow or Bicep test runs %q with %s: pin it there, or make the block ```sh manual",
		where, cmd, strings.Join(opts, " "))
}

// toolCorpus is every line where the project runs, prints or pins an az, azd or func command.
func toolCorpus(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"scripts/*.sh", "infra/bicep/*_test.go", ".github/workflows/*.yml", "azure.yaml"} {
		m, _ := filepath.Glob(filepath.Join(repoRoot, pattern))
		files = append(files, m...)
	}
	var lines []string
	for _, f := range files {
		rel, _ := filepath.Rel(repoRoot, f)
		lines = append(lines, readLines(t, rel)...)
	}
	// What deploy.sh runs: its dry run prints each command.
	stdout, stderr, code := run(command(t, "scripts/deploy.sh", "-g", "my-resource-group", "-l", "westeurope", "--dry-run"))
	if code != 0 {
		t.Fatalf("scripts/deploy.sh --dry-run exited %d: %s", code, stderr)
	}
	// Lines a script continues with a backslash are one command.
	joined := strings.ReplaceAll(strings.Join(append(lines, strings.Split(stdout, "\n")...), "\n"), "\\\n", " ")
	return strings.Split(joined, "\n")
}

// checkGoTest: go test PKG -run NAME: the package has a test function NAME.
func checkGoTest(t *testing.T, where string, words []string) {
	t.Helper()
	var pkg, name string
	for i, w := range words[2:] {
		switch {
		case w == "-run" && i+3 < len(words):
			name = words[i+3]
		case strings.HasPrefix(w, "./"):
			pkg = w
		}
	}
	files, _ := filepath.Glob(filepath.Join(repoRoot, pkg, "*_test.go"))
	for _, f := range files {
		if data, _ := os.ReadFile(f); bytes.Contains(data, []byte("func "+name+"(")) {
			return
		}
	}
	t.Errorf("%s: no func %s in %s's tests", where, name, pkg)
}

// checkCurl: the URL's /api/NAME is a function of the app with that route.
func checkCurl(t *testing.T, where string, words []string) {
	t.Helper()
	for _, w := range words {
		if _, rest, ok := strings.Cut(w, "/api/"); ok {
			name := strings.SplitN(rest, "?", 2)[0]
			data, err := os.ReadFile(filepath.Join(repoRoot, name, "function.json"))
			if err != nil || !strings.Contains(string(data), `"route": "`+name+`"`) {
				t.Errorf("%s: no function %s/function.json with the route %s", where, name, name)
			}
			return
		}
	}
	t.Errorf("%s: no /api/ URL", where)
}
