// Package scripts_test runs the scripts as a developer does, as processes, and checks what they
// print and that they stop everything they started when they end or are told to stop.
package scripts_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// repoRoot is the checkout these tests are in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// checkout copies the repository's files (tracked and new, not the ignored ones) into a new
// folder inside a mode-700 one, as a fresh clone in root's home, with node_modules linked (no
// second npm ci), and returns it. dev.sh's .dev, lock and local.settings.json there are the
// copy's own.
func checkout(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	private := filepath.Join(t.TempDir(), "home")
	dir := filepath.Join(private, "checkout")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, f)
		info, err := os.Lstat(src)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", ".bin", "azurite-blob")); err == nil {
		if err := os.Symlink(filepath.Join(root, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// script is a script running as a process of its own (its own process group, so that the
// test's signal goes to its pid alone, as a newcomer's kill PID does).
type script struct {
	t    *testing.T
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	done chan struct{}
	eof  chan struct{} // its output is read to the end (every writer, its children too, closed it)
	pipe io.ReadCloser
}

// start runs bash SCRIPT ARGS in dir with env added, collecting stdout and stderr together.
func start(t *testing.T, dir string, env []string, args ...string) *script {
	t.Helper()
	s := &script{t: t, done: make(chan struct{}), eof: make(chan struct{})}
	s.cmd = exec.Command("bash", args...)
	s.cmd.Dir = dir
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = w, w
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	s.pipe = r
	go func() {
		defer close(s.eof)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.out.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
		}
	}()
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	return s
}

// stop ends a script a test left running (it failed midway): SIGTERM first, so that its trap
// stops what it started, then SIGKILL to its group and to every process it had started that is
// left (Azurite runs in a session of its own, which the group's SIGKILL does not reach).
func (s *script) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	procs := descendants(s.cmd.Process.Pid)
	_ = syscall.Kill(s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
	for pid, cmdline := range procs {
		if alive(pid, cmdline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func (s *script) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// waitFor polls the output until re matches, the script exits, or the deadline passes.
func (s *script) waitFor(re *regexp.Regexp, within time.Duration) []string {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if m := re.FindStringSubmatch(s.output()); m != nil {
			return m
		}
		select {
		case <-s.done:
			select { // what it printed last may still be in the pipe
			case <-s.eof:
			case <-time.After(5 * time.Second):
			}
			if m := re.FindStringSubmatch(s.output()); m != nil {
				return m
			}
			s.t.Fatalf("the script ended before printing %q:\n%s", re, s.output())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no %q within %v:\n%s", re, within, s.output())
		}
		time.Sleep(100 * time.Millisecond) // polling with a deadline
	}
}

// exited waits for the script to exit within d and returns its exit code (-1 for a signal).
func (s *script) exited(d time.Duration) int {
	s.t.Helper()
	select {
	case <-s.done:
		// What it printed last may still be in the pipe: read it (unless a child it left running
		// holds the pipe open).
		select {
		case <-s.eof:
		case <-time.After(5 * time.Second):
		}
		return s.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		s.t.Fatalf("the script did not exit within %v of being told to stop:\n%s", d, s.output())
	}
	return 0
}

// descendants lists the processes below pid (by their parent pids in /proc), with their command
// lines.
func descendants(pid int) map[int]string {
	parent := map[int]int{}
	cmdline := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		f := strings.Fields(rest)
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[p] = pp
		c, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		cmdline[p] = strings.TrimSpace(strings.ReplaceAll(string(c), "\x00", " "))
	}
	out := map[int]string{}
	var walk func(int)
	walk = func(p int) {
		for c, pp := range parent {
			if pp == p {
				if _, seen := out[c]; !seen {
					out[c] = cmdline[c]
					walk(c)
				}
			}
		}
	}
	walk(pid)
	return out
}

// alive reports whether pid runs with the same command line (not a zombie, not reused).
func alive(pid int, cmdline string) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	if f := strings.Fields(rest); len(f) > 0 && f[0] == "Z" {
		return false
	}
	c, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(c), "\x00", " ")) == cmdline
}

// allGone waits until none of procs runs and nothing listens on ports, within d.
func allGone(t *testing.T, procs map[int]string, ports []int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var left []string
		for p, c := range procs {
			if alive(p, c) {
				left = append(left, fmt.Sprintf("%d %s", p, c))
			}
		}
		for _, port := range ports {
			if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
				c.Close()
				left = append(left, fmt.Sprintf("something listens on 127.0.0.1:%d", port))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left running %v after the script ended:\n%s", d, strings.Join(left, "\n"))
		}
		time.Sleep(100 * time.Millisecond) // polling with a deadline
	}
}

func needServers(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a script with its servers: not with -short")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("no Node.js: the scripts need it for Azurite")
	}
	if _, err := os.Stat(filepath.Join(repoRoot(t), "node_modules", ".bin", "azurite-blob")); err != nil {
		if testenv.InCI() {
			t.Fatal("node_modules lacks Azurite: scripts/test.sh installs it")
		}
		t.Skip("node_modules lacks Azurite: run npm ci (scripts/test.sh does)")
	}
}

var handlerURL = regexp.MustCompile(`handler on (http://127\.0\.0\.1:\d+)`)

// fixedSetup is what dev.sh prints when its first run sets the example table up as pollerctl
// check asks (the example application stamps updated_at itself, which the check flags).
const fixedSetup = "pollerctl check orders found the orders table's set-up lacking; fixing it with pollerctl check orders --fix --yes:"

// healthy polls the status function of the handler dev.sh started until every one of want
// pollers is ok, and fails with their healths and set-up warnings when the deadline passes
// first: a first run on a fresh copy must not leave the example pollers degraded.
func healthy(t *testing.T, out string, want ...string) {
	t.Helper()
	m := handlerURL.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no handler URL in:\n%s", out)
	}
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for {
		resp, err := http.Get(m[1] + "/api/status")
		if err == nil {
			var st struct {
				Pollers []struct {
					Poller, Health string
					Warnings       json.RawMessage `json:"setup_warnings"`
				}
			}
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			ok := map[string]bool{}
			last = ""
			for _, p := range st.Pollers {
				ok[p.Poller] = p.Health == "ok"
				last += fmt.Sprintf("%s %s %s\n", p.Poller, p.Health, p.Warnings)
			}
			all := err == nil
			for _, p := range want {
				all = all && ok[p]
			}
			if all {
				return
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the example pollers are not all ok on a first run:\n%s", last)
		}
		time.Sleep(500 * time.Millisecond) // polling with a deadline
	}
}

var pgPort = regexp.MustCompile(`PostgreSQL \S+ on 127\.0\.0\.1:(\d+)`)

// TestDevShPostgresLogical: DEV_DRIVER=postgres scripts/dev.sh, from a fresh copy in a mode-700
// folder, shows each step and the build, starts the PostgreSQL it keeps, makes the logical
// poller's slot with pollerctl cdc enable, and delivers rows through orders-changes (logical
// decoding) to its queue. Then kill PID (SIGTERM to dev.sh's pid alone, not its group) stops it
// at once, and with it devhost, the handler, Azurite and PostgreSQL (whose cluster stays), and
// frees its lock.
func TestDevShPostgresLogical(t *testing.T) {
	needServers(t)
	needPostgres(t)
	dir := checkout(t)
	cleanAtEnd(t, dir)
	blob, queue := testenv.FreePort(t), testenv.FreePort(t)
	s := start(t, dir, []string{"DEV_DRIVER=postgres", fmt.Sprintf("DEV_BLOB_PORT=%d", blob), fmt.Sprintf("DEV_QUEUE_PORT=%d", queue)}, "scripts/dev.sh")
	s.waitFor(regexp.MustCompile(`\d\d:\d\d:\d\d orders-changes committed +rows +\d+ +batches +\d+ +token +\d+ +delivered +[1-9]\d*`), 5*time.Minute)
	out := s.output()
	for _, want := range []string{"[1/4] the orders table: a PostgreSQL with wal_level=logical, kept in .dev/postgres between runs", "[2/4] Azurite", "[3/4] building bin/handler, bin/devhost and bin/pollerctl",
		"built bin/handler, bin/devhost, bin/pollerctl", "[4/4] starting the handler", "created replication slot pseudotrigger_local_postgres_",
		"orders-changes sends to queue orders-logical", fixedSetup} {
		if !strings.Contains(out, want) {
			t.Errorf("dev.sh did not print %q:\n%s", want, out)
		}
	}
	if regexp.MustCompile(`FAILED|error:`).MatchString(out) {
		t.Errorf("a failure:\n%s", out)
	}
	if strings.Contains(out, "AccountKey") {
		t.Errorf("the storage account key was printed:\n%s", out)
	}
	if !strings.Contains(out, "pollerctl for this run, from another shell in this folder: (. .dev/pollerctl.env && bin/pollerctl status)") {
		t.Errorf("no pollerctl command for the run:\n%s", out)
	}
	healthy(t, out, "orders", "orders-queue", "orders-changes")
	m := pgPort.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no PostgreSQL port in:\n%s", out)
	}
	port, _ := strconv.Atoi(m[1])
	procs := descendants(s.cmd.Process.Pid)
	if err := syscall.Kill(s.cmd.Process.Pid, syscall.SIGTERM); err != nil { // its pid only
		t.Fatal(err)
	}
	if code := s.exited(45 * time.Second); code != 143 {
		t.Errorf("exit %d after SIGTERM, want 143", code)
	}
	allGone(t, procs, []int{blob, queue, port}, 15*time.Second)
	if _, err := os.Stat(filepath.Join(dir, ".dev", "dev.pid")); !os.IsNotExist(err) {
		t.Errorf("the lock .dev/dev.pid is left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".dev", "postgres", "data", "PG_VERSION")); err != nil {
		t.Errorf("the kept PostgreSQL's cluster is gone: %v", err)
	}
}

// TestDevShOneAtATimeAndClosedOutput: a lock left by a run that is gone is taken over, and said
// so; a second dev.sh in the same checkout is refused, naming the first one's pid and how to
// stop it, and leaves the first one's log alone; when the first one's output is closed (its
// reader went, as with dev.sh | head), it stops, and everything it started with it.
func TestDevShOneAtATimeAndClosedOutput(t *testing.T) {
	needServers(t)
	dir := checkout(t)
	// A pid that is gone: a process that has exited.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	stale := strconv.Itoa(gone.Process.Pid)
	if err := os.WriteFile(filepath.Join(dir, ".dev", "dev.pid"), []byte(stale+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	blob, queue := testenv.FreePort(t), testenv.FreePort(t)
	env := []string{fmt.Sprintf("DEV_BLOB_PORT=%d", blob), fmt.Sprintf("DEV_QUEUE_PORT=%d", queue)}
	first := start(t, dir, env, "scripts/dev.sh")
	first.waitFor(regexp.MustCompile(`\d\d:\d\d:\d\d orders +committed`), 5*time.Minute)
	if want := "taking over .dev/dev.pid: the run that held it (pid " + stale + ") is gone"; !strings.Contains(first.output(), want) {
		t.Errorf("no %q in:\n%s", want, first.output())
	}
	if !strings.Contains(first.output(), fixedSetup) {
		t.Errorf("no %q in:\n%s", fixedSetup, first.output())
	}
	healthy(t, first.output(), "orders", "orders-queue")
	logBefore, err := os.ReadFile(filepath.Join(dir, ".dev", "handler.log"))
	if err != nil {
		t.Fatal(err)
	}

	second := start(t, dir, env, "scripts/dev.sh")
	if code := second.exited(time.Minute); code == 0 {
		t.Fatalf("a second dev.sh ran:\n%s", second.output())
	}
	pid := strconv.Itoa(first.cmd.Process.Pid)
	for _, want := range []string{"scripts/dev.sh is already running in this checkout (pid " + pid, "kill " + pid} {
		if !strings.Contains(second.output(), want) {
			t.Errorf("the second dev.sh did not say %q:\n%s", want, second.output())
		}
	}
	logAfter, err := os.ReadFile(filepath.Join(dir, ".dev", "handler.log"))
	if err != nil || len(logAfter) < len(logBefore) || string(logAfter[:len(logBefore)]) != string(logBefore) {
		t.Errorf("the second dev.sh wrote over the first one's handler log (%d bytes, then %d)", len(logBefore), len(logAfter))
	}

	// The reader of the first one's output goes away.
	procs := descendants(first.cmd.Process.Pid)
	first.pipe.Close()
	first.exited(time.Minute)
	allGone(t, procs, []int{blob, queue}, 15*time.Second)
	if _, err := os.Stat(filepath.Join(dir, ".dev", "dev.pid")); !os.IsNotExist(err) {
		t.Errorf("the lock .dev/dev.pid is left: %v", err)
	}
}

// stopsOnSignal starts a script from the repository (RUN_DIR its own), waits for started, sends
// sig to the script's pid alone and requires it, and every process it started, to be gone within
// a few seconds, not when its foreground child would have finished.
func stopsOnSignal(t *testing.T, started *regexp.Regexp, sig syscall.Signal, env []string, args ...string) string {
	runDir := t.TempDir()
	s := start(t, repoRoot(t), append([]string{"RUN_DIR=" + runDir}, env...), args...)
	s.waitFor(started, 10*time.Minute)
	var ports []int
	for _, m := range regexp.MustCompile(`on 127\.0\.0\.1:(\d+)`).FindAllStringSubmatch(s.output(), -1) {
		p, _ := strconv.Atoi(m[1])
		ports = append(ports, p)
	}
	procs := descendants(s.cmd.Process.Pid)
	if len(procs) == 0 {
		t.Fatalf("no child of the script was running:\n%s", s.output())
	}
	began := time.Now()
	if err := syscall.Kill(s.cmd.Process.Pid, sig); err != nil {
		t.Fatal(err)
	}
	s.exited(45 * time.Second)
	allGone(t, procs, ports, 15*time.Second)
	t.Logf("%v: everything stopped %v after %v", args, time.Since(began).Round(time.Millisecond), sig)
	return runDir
}

// TestStopServicesOutlastsASecondSignal: a second SIGTERM (timeout(1) sends one to the script
// and one to its process group) or a SIGINT (Ctrl-C pressed again) while the exit trap stops what
// the script started does not end the trap midway: every stop runs, the last one too.
func TestStopServicesOutlastsASecondSignal(t *testing.T) {
	dir := t.TempDir()
	started, stopped := filepath.Join(dir, "started"), filepath.Join(dir, "stopped")
	s := start(t, dir, []string{"RUN_DIR=" + dir}, "-c", `source "$1/scripts/lib/services.sh"
start_child sleep 300
_stops+=("touch $2; sleep 2; touch $3")
echo ready
wait`, "x", repoRoot(t), started, stopped)
	s.waitFor(regexp.MustCompile(`ready`), time.Minute)
	procs := descendants(s.cmd.Process.Pid)
	if err := syscall.Kill(s.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for _, err := os.Stat(started); err != nil; _, err = os.Stat(started) {
		if time.Now().After(deadline) {
			t.Fatalf("the exit trap did not reach its stops:\n%s", s.output())
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		if err := syscall.Kill(s.cmd.Process.Pid, sig); err != nil {
			t.Fatal(err)
		}
	}
	if code := s.exited(time.Minute); code != 143 {
		t.Errorf("exit %d, want 143 (the first signal's)", code)
	}
	if _, err := os.Stat(stopped); err != nil {
		t.Errorf("the exit trap ended before its last stop: %v", err)
	}
	allGone(t, procs, nil, 15*time.Second)
}

// TestTestShStopsOnSignal: scripts/test.sh, interrupted (SIGINT, as Ctrl-C; to its pid alone)
// while go test builds and runs every package, stops go test and the servers at once. Before,
// bash deferred the trap until the foreground go test ended. (SKIP_CHECKS: vet, staticcheck and
// the model run as run_child does go test, and the whole scripts/test.sh runs them.)
func TestTestShStopsOnSignal(t *testing.T) {
	needServers(t)
	// Run by scripts/test.sh, this test inherits SIGINT ignored (bash ignores it in the commands
	// it runs in the background), and so would the script, whose trap could then not be set. A
	// handler here makes the script start with SIGINT's default, as from a terminal.
	sigint := make(chan os.Signal, 1)
	signal.Notify(sigint, syscall.SIGINT)
	defer signal.Stop(sigint)
	stopsOnSignal(t, regexp.MustCompile(`go test -race -timeout 30m ./\.\.\. -run NONE`), syscall.SIGINT, []string{"SKIP_CHECKS=1"}, "scripts/test.sh", "-run", "NONE")
}

// TestBenchShStopsOnSignal: scripts/bench.sh killed with SIGTERM while its benchmark runs stops
// the benchmark and Azurite at once (issue 28 item 6: it went on until its go test ended), so
// the benchmark's results never arrive.
func TestBenchShStopsOnSignal(t *testing.T) {
	needServers(t)
	runDir := stopsOnSignal(t, regexp.MustCompile(`go test -run '\^\$' -bench BenchmarkLeaseCycle`), syscall.SIGTERM,
		[]string{"COUNT=50", "AZURITE_CONNECTION_STRING="}, "scripts/bench.sh", "lease") // its own Azurite, not test.sh's
	if out, _ := os.ReadFile(filepath.Join(runDir, "bench-lease.txt")); strings.Contains(string(out), "\nok ") {
		t.Errorf("the benchmark ran to its end:\n%s", out)
	}
}

// TestBenchShEndToEnd: scripts/bench.sh e2e, at a small size, builds the handler, prints the
// end-to-end table (rows/s, MB/s, the ratio to the raw scan, peak RSS, blob requests) and a
// summary line for the path e2e with its goal and recorded figure from the performance page it is
// given: goal ">= 0" is met, and a recorded 50 (no run gets within 10% of it) is a REGRESSION.
func TestBenchShEndToEnd(t *testing.T) {
	needServers(t)
	dir := checkout(t)
	doc := filepath.Join(t.TempDir(), "performance.md")
	page, err := os.ReadFile(filepath.Join(dir, "docs", "performance.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `e2e` \\|.*$")
	if !row.Match(page) {
		t.Fatalf("docs/performance.md has no e2e row")
	}
	page = row.ReplaceAll(page, []byte("| `e2e` | >= 0 | 50 | the test's |"))
	if err := os.WriteFile(doc, page, 0o644); err != nil {
		t.Fatal(err)
	}
	// Its own Azurite, not test.sh's: the shared one serves every package's tests at once, and
	// under the e2e kill tests' load it once left this handler's first read unanswered for 42 s.
	s := start(t, dir, []string{"RUN_DIR=" + t.TempDir(), "PERF_DOC=" + doc, "E2E_ROWS=20000", "COUNT=1", "AZURITE_CONNECTION_STRING="}, "scripts/bench.sh", "e2e")
	if code := s.exited(10 * time.Minute); code != 0 {
		t.Fatalf("scripts/bench.sh e2e exited %d:\n%s", code, s.output())
	}
	out := s.output()
	for _, re := range []string{
		`(?m)^handler \(orders\) +\d+ +\d+\.\d +\d\.\d{3} +\d+\.\d +[\d.]+ +[\d.]+ +[\d.]+$`,
		`(?m)^raw keyset scan +\d+ +\d+\.\d +1\.000 `,
		`(?m)^Summary \(median over 1 runs; goals and recorded figures from .*performance\.md\):$`,
		`(?m)^path +rows/s +MB/s +measured +goal +verdict +recorded +note$`,
		`(?m)^e2e +\d+ +\d+\.\d\d +[\d.]+ +>= 0 met +50  REGRESSION: \d\.\d\d < recorded 50\.00 - 10%$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("no line matching %s in:\n%s", re, out)
		}
	}
}

// TestBenchShScale: scripts/bench.sh scale, at tiny sizes with its own Azurite and PostgreSQL and
// COUNT=2, has a result line for each sub-benchmark and run; prints the two-size table (rows/s,
// peak RSS, large/small of both) for the orders poller and the logical poller, the many-pollers
// table and the connections the handler held, and a summary line for each scale path with its
// goal and recorded figure from the checkout's docs/performance.md; and when it ends, nothing it started runs
// (the handlers, the servers), watched while it ran.
func TestBenchShScale(t *testing.T) {
	needServers(t)
	dir := checkout(t)
	runDir := t.TempDir()
	s := start(t, dir, []string{"RUN_DIR=" + runDir, "COUNT=2", "AZURITE_CONNECTION_STRING=", "PG_TEST_DSN=",
		"SCALE_SMALL=2000", "SCALE_LARGE=6000", "SCALE_LOGICAL_SMALL=500", "SCALE_LOGICAL_LARGE=1500", "SCALE_POLLERS=4", "SCALE_POLLER_ROWS=600"},
		"scripts/bench.sh", "scale")
	// What it started, gathered while it runs: the handlers come and go.
	procs := map[int]string{}
	for done := false; !done; {
		select {
		case <-s.done:
			done = true
		case <-time.After(200 * time.Millisecond): // polling until it ends
		}
		for p, c := range descendants(s.cmd.Process.Pid) {
			procs[p] = c
		}
	}
	if code := s.exited(10 * time.Minute); code != 0 {
		t.Fatalf("scripts/bench.sh scale exited %d:\n%s", code, s.output())
	}
	out := s.output()
	var ports []int
	for _, m := range regexp.MustCompile(`on 127\.0\.0\.1:(\d+)`).FindAllStringSubmatch(out, -1) {
		p, _ := strconv.Atoi(m[1])
		ports = append(ports, p)
	}
	handlers := 0
	for _, c := range procs {
		if strings.Contains(c, "bin/handler") {
			handlers++
		}
	}
	if len(ports) < 2 || handlers == 0 {
		t.Errorf("no servers or no handler seen among what it started (ports %v):\n%v", ports, procs)
	}
	allGone(t, procs, ports, 15*time.Second)
	for _, re := range []string{
		`(?m)^orders, 2000 vs 6000 rows +\d+ +\d+ +\d+\.\d{3} +\d+\.\d +\d+\.\d +\d+\.\d{3}$`,
		`(?m)^logical, 500 vs 1500 changes +\d+ +\d+ +\d+\.\d{3} +\d+\.\d +\d+\.\d +\d+\.\d{3}$`,
		`(?m)^one poller +\d+\.\d( +[\d.]+){4}$`,
		`(?m)^4 pollers +\d+\.\d( +[\d.]+){4}$`,
		`(?m)^PostgreSQL connections the handler held at once: [1-4] \(bound: POLLER_DB_MAX_CONNECTIONS, default 10\)$`,
		`(?m)^scale/rows/rate +\d+ +\d+\.\d\d +[\d.]+ +>= 0\.90 (met|NOT met) +\S+( .*)?$`,
		`(?m)^scale/rows/peak-rss +- +- +[\d.]+ +<= 1\.2 (met|NOT met) +\S+( .*)?$`,
		`(?m)^scale/logical/rate +\d+ +- +[\d.]+ +>= 0\.90 (met|NOT met) +\S+( .*)?$`,
		`(?m)^scale/logical/peak-rss +- +- +[\d.]+ +<= 1\.2 (met|NOT met) +\S+( .*)?$`,
		`(?m)^scale/pollers/pg-connections +- +- +[1-4] +<= 10 met +\S+( .*)?$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("no line matching %s in:\n%s", re, out)
		}
	}
	// Each run's figures on a result line of their own, where the medians are taken from (a line
	// the benchmark printed into would hide them).
	raw, err := os.ReadFile(filepath.Join(runDir, "bench-scale.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"rows", "logical", "pollers"} {
		if n := len(regexp.MustCompile(`(?m)^BenchmarkScale/`+sub+`-\d+\s+\d+\s+\d+ ns/op`).FindAll(raw, -1)); n != 2 {
			t.Errorf("%d result lines of BenchmarkScale/%s for COUNT=2:\n%s", n, sub, raw)
		}
	}
}

// TestBenchShOutbox: scripts/bench.sh outbox, at a tiny rate and window, runs pgbench's producers
// and the poller, prints the section's figures (events/s written and delivered, rows waiting,
// the table's rows, commit-to-delivery, blob writes, the tick's time, pgbench's rate) and a
// summary line for each outbox path with its goal from the checkout's docs/performance.md, from
// one result line a run, for each of the sink's modes (batch, then a POST per event).
func TestBenchShOutbox(t *testing.T) {
	needServers(t)
	if _, err := exec.LookPath("pgbench"); err != nil {
		t.Skip("no pgbench: install PostgreSQL's client tools")
	}
	dir := checkout(t)
	runDir := t.TempDir()
	s := start(t, dir, []string{"RUN_DIR=" + runDir, "COUNT=1", "OUTBOX_RATE=200", "OUTBOX_SECONDS=3", "OUTBOX_WARMUP_SECONDS=1"},
		"scripts/bench.sh", "outbox")
	if code := s.exited(10 * time.Minute); code != 0 {
		t.Fatalf("scripts/bench.sh outbox exited %d:\n%s", code, s.output())
	}
	out := s.output()
	for _, re := range []string{
		`(?m)^Outbox under load, many events to a POST \(the sink's "mode": "batch", CloudEvents\): pgbench, 8 clients writing 200 transactions/s `,
		`(?m)^Outbox under load, a POST per event: pgbench, 8 clients writing 200 transactions/s `,
		`(?m)^events/s written, delivered +\d+, \d+ \(delivered/written \d\.\d{3}\)$`,
		`(?m)^rows waiting after a tick, max +\d+ \(\d+\.\d\d ticks' worth of writes; counted up to 10,000\)$`,
		`(?m)^outbox table's rows, max +\d+ \(\d+\.\d\d ticks' worth\)$`,
		`(?m)^commit-to-delivery ms +p50 \d+, p95 \d+, p99 \d+, max \d+ \(p95 / \(period \+ 1 s\): \d+\.\d\d\)$`,
		`(?m)^blob writes a minute +\d+$`,
		`(?m)^a tick, ms +p50 \d+, p95 \d+; a tick's mean \d+: acquire \d+, fetch \d+, deliver \d+, commit \d+$`,
		`(?m)^producers \(pgbench\) +\d+ transactions/s, schedule lag max \d+ ms$`,
		`(?m)^the backlog, producers stopped +delivered at (\d+|-) events/s \(-: less than a tick's worth was left\)$`,
		`(?m)^re-deliveries, failed cleanups +0, 0$`,
		`(?m)^outbox/keep-up +\d+ +- +[\d.]+ +< 1 (met|NOT met) +\S+( .*)?$`,
		`(?m)^outbox/table-rows +- +- +[\d.]+ +< 2 (met|NOT met) +\S+( .*)?$`,
		`(?m)^outbox/p95 +- +- +[\d.]+ +< 1 (met|NOT met) +\S+( .*)?$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("no line matching %s in:\n%s", re, out)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^re-deliveries, failed cleanups +0, 0$`).FindAllString(out, -1)); n != 2 {
		t.Errorf("%d runs' figures, not one for each of the modes batch and row:\n%s", n, out)
	}
	for _, mode := range []string{"batch", "row"} {
		raw, err := os.ReadFile(filepath.Join(runDir, "bench-outbox-"+mode+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(regexp.MustCompile(`(?m)^BenchmarkOutbox-\d+\s+1\s+\d+ ns/op`).FindAll(raw, -1)); n != 1 {
			t.Errorf("mode %s: %d result lines of BenchmarkOutbox for COUNT=1:\n%s", mode, n, raw)
		}
	}
}

// TestBenchShInstructions: the instruction guard, provoked end to end. scripts/bench.sh
// instructions counts with callgrind against a performance page whose recorded count for the
// sinks' rendering is 10% below the checkout's and the others' 5% above: the script fails naming
// that path alone (a rise over 3%), prints every path's count against its record, and judges the
// others met. Whether the real records hold is bench.sh's to say, on a quiet machine: a count
// spreads by a fraction of a percent under the load of the other tests, not by 5%.
func TestBenchShInstructions(t *testing.T) {
	needServers(t)
	if _, err := exec.LookPath("valgrind"); err != nil {
		if testenv.InCI() {
			t.Fatal("no valgrind: scripts/test.sh installs it")
		}
		t.Skip("no valgrind: install it (Debian: apt-get install valgrind; scripts/test.sh does)")
	}
	dir := checkout(t)
	page, err := os.ReadFile(filepath.Join(dir, "docs", "performance.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Each path's record scaled: sink-render's 10% down (a rise the guard must catch), the others'
	// 5% up, well clear of their counts' spread under the load of the other tests.
	records := map[string]int{}
	for _, path := range []string{"logical-decode", "sink-render", "tick", "mysql-keyset"} {
		row := regexp.MustCompile("(?m)^(\\| `instructions/" + path + "` \\| )([\\d,]+)( a [a-z]+ \\|.*)$")
		m := row.FindSubmatch(page)
		if m == nil {
			t.Fatalf("docs/performance.md's Instructions per row has no instructions/%s row", path)
		}
		n, err := strconv.Atoi(strings.ReplaceAll(string(m[2]), ",", ""))
		if err != nil {
			t.Fatal(err)
		}
		records[path] = n * 105 / 100
		if path == "sink-render" {
			records[path] = n * 90 / 100
		}
		page = row.ReplaceAll(page, []byte("${1}"+strconv.Itoa(records[path])+"${3}"))
	}
	lowered := records["sink-render"]
	doc := filepath.Join(t.TempDir(), "performance.md")
	if err := os.WriteFile(doc, page, 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, dir, []string{"RUN_DIR=" + t.TempDir(), "PERF_DOC=" + doc, "COUNT=1"}, "scripts/bench.sh", "instructions")
	code := s.exited(10 * time.Minute)
	out := s.output()
	if code == 0 {
		t.Fatalf("scripts/bench.sh instructions exited 0 with sink-render's record lowered to %d:\n%s", lowered, out)
	}
	for _, re := range []string{
		`(?m)^instructions/logical-decode +\d+ +` + strconv.Itoa(records["logical-decode"]) + ` +0\.9\d\d +\d+ +0\.\d\d$`,
		`(?m)^instructions/sink-render +\d+ +` + strconv.Itoa(lowered) + ` +1\.[01]\d\d +\d+ +0\.\d\d$`,
		`(?m)^instructions/tick +\d+ +` + strconv.Itoa(records["tick"]) + ` +0\.9\d\d +- +-$`,
		`(?m)^instructions/mysql-keyset +\d+ +` + strconv.Itoa(records["mysql-keyset"]) + ` +0\.9\d\d +\d+ +[01]\.\d\d$`,
		`(?m)^instructions/logical-decode +- +- +[\d.]+ +<= 1\.03 met `,
		`(?m)^instructions/sink-render +- +- +[\d.]+ +<= 1\.03 NOT met `,
		`instructions a row rose more than 3% over .*performance\.md's record: instructions/sink-render \(1\.[01]\d+ of its recorded count\)$`,
	} {
		if !regexp.MustCompile(re).MatchString(strings.TrimSpace(out)) {
			t.Errorf("no line matching %s in:\n%s", re, out)
		}
	}
	if regexp.MustCompile(`instructions/(logical-decode|tick|mysql-keyset) \(`).MatchString(out) {
		t.Errorf("a path below its recorded count failed the guard too:\n%s", out)
	}
}

// TestSQLGrantsMySQLNeedsTheDatabase: --mysql refuses a table without its database, naming it,
// and prints nothing to run.
func TestSQLGrantsMySQLNeedsTheDatabase(t *testing.T) {
	cmd := exec.Command("bash", "sql-grants.sh", "--mysql", "app_user", "shop.orders", "orders")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.ProcessState.ExitCode() != 2 || stdout.Len() > 0 ||
		!strings.Contains(stderr.String(), "sql-grants.sh: --mysql: orders lacks its DATABASE: write DATABASE.TABLE (e.g. shop.orders)") {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out, err := exec.Command("bash", "sql-grants.sh", "--mysql", "app_user", "shop.orders").Output()
	if err != nil || !strings.Contains(string(out), "GRANT SELECT ON shop.orders TO 'app_user'@'%';") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestAzuriteWithoutGC: scripts/lib/azurite.js, which start_azurite runs for tests and
// benchmarks, starts each service with its extent garbage collection put off for good (its
// debug log says how long the collector sleeps after its first, empty run); an unknown service
// is refused. Azurite's collection froze the service for minutes ten minutes into a run.
func TestAzuriteWithoutGC(t *testing.T) {
	needServers(t)
	root := repoRoot(t)
	if out, err := exec.Command("node", filepath.Join(root, "scripts", "lib", "azurite.js"), "table").CombinedOutput(); err == nil || !strings.Contains(string(out), "usage: azurite.js blob|queue") {
		t.Fatalf("an unknown service: %v, %s", err, out)
	}
	for _, tc := range []struct{ service, manager string }{{"blob", "BlobGCManager"}, {"queue", "QueueGCManager"}} {
		t.Run(tc.service, func(t *testing.T) {
			dir := t.TempDir()
			logf := filepath.Join(dir, "debug.log")
			port := testenv.FreePort(t)
			cmd := exec.Command("node", filepath.Join(root, "scripts", "lib", "azurite.js"), tc.service,
				"--"+tc.service+"Host", "127.0.0.1", "--"+tc.service+"Port", strconv.Itoa(port),
				"--inMemoryPersistence", "--skipApiVersionCheck", "--disableTelemetry", "--debug", logf)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			sleeps := regexp.MustCompile(tc.manager + `:markSweepLoop\(\) Sleep for (\d+)`)
			deadline := time.Now().Add(30 * time.Second)
			for {
				b, _ := os.ReadFile(logf)
				if m := sleeps.FindSubmatch(b); m != nil {
					if string(m[1]) != "2147483647" {
						t.Fatalf("%s's collector sleeps %s ms after its first run, want 2147483647 (24.8 days)", tc.service, m[1])
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("no %s sleep in Azurite's debug log within 30 s:\n%s", tc.manager, b)
				}
				time.Sleep(100 * time.Millisecond) // polling with a deadline
			}
		})
	}
}

// TestCheckTree: scripts/lib/tree.sh's check_tree, which scripts/test.sh runs, passes a checkout
// whose imports are grouped (standard library, third-party, this module) and whose tracked files
// are under 1 MB, and fails, naming the file, on imports out of their group and on a tracked
// file over 1 MB (an untracked one is no concern, nor a tracked one deleted since).
func TestCheckTree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root := repoRoot(t)
	good := "package x\n\nimport (\n\t\"fmt\"\n\n\t\"github.com/go-chi/chi/v5\"\n\n\t\"github.com/pseudotrigger/pseudotrigger/internal/clock\"\n)\n\nvar _, _, _ = fmt.Sprint, chi.NewRouter, clock.Real\n"
	mixed := "package x\n\nimport (\n\t\"fmt\"\n\t\"github.com/pseudotrigger/pseudotrigger/internal/clock\"\n)\n\nvar _, _ = fmt.Sprint, clock.Real\n"
	split := "package x\n\nimport (\n\t\"fmt\"\n\n\t\"github.com/go-chi/chi/v5\"\n\n\t\"go.opentelemetry.io/otel\"\n)\n\nvar _, _, _ = fmt.Sprint, chi.NewRouter, otel.Tracer\n"
	late := "package x\n\nimport (\n\t\"fmt\"\n\n\t\"github.com/pseudotrigger/pseudotrigger/internal/clock\"\n\n\t\"github.com/go-chi/chi/v5\"\n)\n\nvar _, _, _ = fmt.Sprint, chi.NewRouter, clock.Real\n"
	for _, tc := range []struct {
		name  string
		files map[string]string // tracked
		extra map[string]int    // tracked files of that many bytes
		loose map[string]int    // untracked files of that many bytes
		want  string            // "" passes
	}{
		{name: "clean", files: map[string]string{"x/x.go": good}, loose: map[string]int{"x/pollerctl": 2 << 20}},
		{name: "imports", files: map[string]string{"x/x.go": good, "x/mixed.go": mixed}, want: "imports not grouped as the standard library, third-party modules, then github.com/pseudotrigger/pseudotrigger, or not as goimports formats them (goimports -local github.com/pseudotrigger/pseudotrigger -w FILE; then merge the groups it leaves): x/mixed.go"},
		{name: "groups", files: map[string]string{"x/x.go": good, "x/split.go": split, "x/late.go": late}, want: "imports not grouped as the standard library, third-party modules, then github.com/pseudotrigger/pseudotrigger, or not as goimports formats them (goimports -local github.com/pseudotrigger/pseudotrigger -w FILE; then merge the groups it leaves): x/late.go x/split.go"},
		{name: "big file", files: map[string]string{"x/x.go": good}, extra: map[string]int{"pollerctl": 1<<20 + 1}, want: "tracked files over 1 MB (a build output? git rm --cached it and add it to .gitignore): pollerctl (1048577 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(name string, b []byte) {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for name, s := range tc.files {
				write(name, []byte(s))
			}
			for name, n := range tc.extra {
				write(name, make([]byte, n))
			}
			git := func(args ...string) {
				if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v, %s", args, err, out)
				}
			}
			write("x/gone.go", []byte(mixed)) // tracked, then deleted: not a file to check
			git("init", "-q")
			git("add", ".")
			if err := os.Remove(filepath.Join(dir, "x/gone.go")); err != nil {
				t.Fatal(err)
			}
			for name, n := range tc.loose {
				write(name, make([]byte, n))
			}
			cmd := exec.Command("bash", "-c", `source "$1/scripts/lib/tree.sh" && check_tree "$2"`, "check", root, dir)
			out, err := cmd.CombinedOutput()
			got := strings.TrimSpace(string(out))
			switch {
			case tc.want == "" && (err != nil || got != ""):
				t.Fatalf("check_tree failed a clean tree: %v\n%s", err, got)
			case tc.want != "" && (err == nil || got != tc.want):
				t.Fatalf("check_tree: %v\n got %q\nwant %q", err, got, tc.want)
			}
		})
	}
}
