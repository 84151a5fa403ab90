package scripts_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// needPostgres skips a test of DEV_DRIVER=postgres where the server cannot run as dev.sh runs it.
func needPostgres(t *testing.T) {
	t.Helper()
	if bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(bins) == 0 || os.Getuid() != 0 {
		t.Skip("needs PostgreSQL's server binaries, started as root as scripts/test.sh does")
	}
}

// cleanAtEnd runs scripts/dev.sh --clean in dir when the test ends, after the scripts it started
// are stopped (register it before starting them): the kept PostgreSQL's cluster may be outside
// the copy, under /var/tmp.
func cleanAtEnd(t *testing.T, dir string) {
	t.Cleanup(func() {
		if _, err := os.Lstat(filepath.Join(dir, ".dev")); err != nil {
			return
		}
		if out, err := exec.Command("bash", filepath.Join(dir, "scripts", "dev.sh"), "--clean").CombinedOutput(); err != nil {
			t.Errorf("scripts/dev.sh --clean after the test: %v\n%s", err, out)
		}
	})
}

// devEnv puts dev.sh's Azurite on free ports, not the 10000 and 10001 another run may hold.
func devEnv(t *testing.T) []string {
	return []string{fmt.Sprintf("DEV_BLOB_PORT=%d", testenv.FreePort(t)), fmt.Sprintf("DEV_QUEUE_PORT=%d", testenv.FreePort(t))}
}

// numberIn returns the number re's first group matches in out (a pid, a port).
func numberIn(t *testing.T, out string, re *regexp.Regexp) int {
	t.Helper()
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %q in:\n%s", re, out)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// handlerPid is the pid of the bin/handler among dev.sh's descendants.
func handlerPid(t *testing.T, s *script) int {
	t.Helper()
	for pid, cmd := range descendants(s.cmd.Process.Pid) {
		if strings.HasPrefix(cmd, "bin/handler") {
			return pid
		}
	}
	t.Fatalf("no bin/handler among what dev.sh started: %v", descendants(s.cmd.Process.Pid))
	return 0
}

// TestDevShWatchdog: a service dev.sh started that stops while it runs is named, with how it
// ended and its log, and dev.sh stops the rest and exits 1, within seconds, instead of printing a
// failed tick every 5 s. The handler (devhost's child) in an SQLite run; Azurite's queue service
// in a PostgreSQL run after it, whose storage queue starts empty: Azurite's data is the
// database's own, and the SQLite run's messages are not in it.
func TestDevShWatchdog(t *testing.T) {
	needServers(t)
	needPostgres(t)
	dir := checkout(t)
	cleanAtEnd(t, dir)
	env := devEnv(t)

	s := start(t, dir, env, "scripts/dev.sh")
	s.waitFor(regexp.MustCompile(`orders-queue committed .* queue orders-changes holds [1-9]\d* messages`), 5*time.Minute)
	procs := descendants(s.cmd.Process.Pid)
	handler := handlerPid(t, s)
	if err := syscall.Kill(handler, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := s.exited(30 * time.Second); code != 1 {
		t.Errorf("exit %d after the handler was killed, want 1", code)
	}
	want := fmt.Sprintf("devhost: the handler (bin/handler, pid %d) stopped: signal: killed; its log: .dev/handler.log. The timers stop with it", handler)
	if !strings.Contains(s.output(), want) {
		t.Errorf("no %q in:\n%s", want, s.output())
	}
	allGone(t, procs, nil, 15*time.Second)

	p := start(t, dir, append(env, "DEV_DRIVER=postgres"), "scripts/dev.sh")
	first := p.waitFor(regexp.MustCompile(`orders-queue committed .* delivered +(\d+) .* queue orders-changes holds (\d+) messages`), 5*time.Minute)
	if first[1] != first[2] {
		t.Errorf("the PostgreSQL run's queue holds %s messages after its first %s: the SQLite run's are in it:\n%s", first[2], first[1], p.output())
	}
	if !strings.Contains(p.output(), "data in .dev/azurite-postgres)") {
		t.Errorf("Azurite's data is not .dev/azurite-postgres:\n%s", p.output())
	}
	procs = descendants(p.cmd.Process.Pid)
	queue := numberIn(t, p.output(), regexp.MustCompile(`Azurite queue service on 127\.0\.0\.1:\d+ \(pid (\d+),`))
	if err := syscall.Kill(queue, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := p.exited(45 * time.Second); code != 1 {
		t.Errorf("exit %d after Azurite's queue service was killed, want 1", code)
	}
	out := p.output()
	said := regexp.MustCompile(`error: Azurite's queue service \(127\.0\.0\.1:\d+\) stopped \(killed by SIGKILL, pid ` + strconv.Itoa(queue) +
		`\) while dev\.sh ran; its log, \.dev/azurite-queue\.log, ends:\n {4}Azurite Queue service is starting`)
	if !said.MatchString(out) || !strings.Contains(out, "stopping the rest: the pollers cannot work without it. Start scripts/dev.sh again.") {
		t.Errorf("dev.sh did not say which service stopped:\n%s", out)
	}
	if strings.Contains(out, "Killed ") {
		t.Errorf("bash's job notice is in the output:\n%s", out)
	}
	allGone(t, procs, nil, 15*time.Second)
}

// localBlocks returns the bodies of the ```sh local blocks of a section (## SECTION) of a page of
// docs/, in order.
func localBlocks(t *testing.T, page, section string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(t), "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []string
	var body []string
	in, inBlock := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case inBlock && line == "```":
			blocks, inBlock = append(blocks, strings.Join(body, "\n")+"\n"), false
		case inBlock:
			body = append(body, line)
		case strings.HasPrefix(line, "#"):
			in = line == "## "+section
		case in && line == "```sh local":
			inBlock, body = true, nil
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("docs/%s has no ```sh local blocks under %q", page, section)
	}
	return blocks
}

// TestDevShOwnPoller walks "Your own poller, locally" of docs/pollers.md in a fresh copy
// of the checkout in a mode-700 folder, as root: dev.sh with DEV_DRIVER=postgres, a table and a
// declared poller made from a second terminal, dev.sh stopped (SIGINT, as Ctrl-C) and started
// again, pollerctl check --fix and status, --clean. The table and the poller are there after the restart (the
// poller delivers the rows inserted before it), on the kept server (reused, its slot too, its
// cluster under /var/tmp: the postgres user cannot enter the copy). Beside the page: --clean is
// refused while dev.sh runs; the kept server killed under dev.sh is named and stops it; --clean
// says what it removes and leaves nothing, under /var/tmp neither.
func TestDevShOwnPoller(t *testing.T) {
	needServers(t)
	needPostgres(t)
	if _, err := exec.LookPath("psql"); err != nil {
		t.Skip("no psql: the page makes the table with it")
	}
	dir := checkout(t)
	cleanAtEnd(t, dir)
	env := devEnv(t)
	blocks := localBlocks(t, "pollers.md", "Your own poller, locally")
	if len(blocks) != 5 {
		t.Fatalf("%d blocks: the walk below expects the page's five (start, make, restart, status, clean)", len(blocks))
	}
	// run runs a block to its end, in the copy, as in a second terminal.
	run := func(body string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-e", "-c", body)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", body, err, out)
		}
		return string(out)
	}
	dev := func(body string) *script {
		t.Helper()
		if !regexp.MustCompile(`^DEV_DRIVER=postgres scripts/dev\.sh\n$`).MatchString(body) {
			t.Fatalf("not a dev.sh start: %q", body)
		}
		return start(t, dir, env, "-c", body)
	}

	first := dev(blocks[0])
	first.waitFor(regexp.MustCompile(`orders-changes committed +rows +\d+`), 5*time.Minute)
	// The restart below must find orders' checkpoint: wait for its first commit too (under
	// load it can come after orders-changes', and a SIGINT before it leaves no checkpoint).
	first.waitFor(regexp.MustCompile(`\borders +committed +rows +\d+`), 2*time.Minute)
	for _, want := range []string{"creating the kept PostgreSQL cluster (once; initdb) ...",
		"the postgres user cannot enter this checkout (a folder above it is closed to others, as root's home is): the cluster goes in /var/tmp/pseudotrigger-dev-",
		"created replication slot pseudotrigger_local_postgres_orders_changes"} {
		if !strings.Contains(first.output(), want) {
			t.Errorf("the first run did not say %q:\n%s", want, first.output())
		}
	}
	outside, err := filepath.EvalSymlinks(filepath.Join(dir, ".dev", "postgres", "data"))
	if err != nil || !strings.HasPrefix(outside, "/var/tmp/pseudotrigger-dev-") {
		t.Fatalf(".dev/postgres/data: %q, %v", outside, err)
	}
	run(blocks[1])

	if err := syscall.Kill(first.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := first.exited(45 * time.Second); code != 130 {
		t.Errorf("exit %d after SIGINT, want 130", code)
	}
	second := dev(blocks[2])
	second.waitFor(regexp.MustCompile(`invoices +committed +rows +100 +batches +1 +token +1 +delivered +100 .* queue invoices holds 100 messages`), 3*time.Minute)
	out := second.output()
	for _, want := range []string{"reusing the PostgreSQL kept in .dev/postgres", "orders-changes is enabled already: nothing to do"} {
		if !strings.Contains(out, want) {
			t.Errorf("the second run did not say %q:\n%s", want, out)
		}
	}
	port := numberIn(t, out, pgPort)
	if !regexp.MustCompile(`pollers reading the kept PostgreSQL: [a-z, -]*\binvoices\b`).MatchString(out) {
		t.Errorf("the second run does not point invoices at the kept server:\n%s", out)
	}
	if regexp.MustCompile(`orders +committed .* token +1 `).MatchString(out) {
		t.Errorf("orders started again from its first lease: the checkpoints of the first run are gone:\n%s", out)
	}
	status := run(blocks[3])
	if !regexp.MustCompile(`CREATE TRIGGER "invoices_stamp_updated_at"[^\n]*\n(.*\n)*invoices +OK `).MatchString(status) {
		t.Errorf("pollerctl check --fix, then status:\n%s", status)
	}

	// --clean while dev.sh runs is refused, and removes nothing.
	cmd := exec.Command("bash", "scripts/dev.sh", "--clean")
	cmd.Dir = dir
	if refused, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(refused), fmt.Sprintf("scripts/dev.sh runs in this checkout (pid %d): stop it", second.cmd.Process.Pid)) {
		t.Errorf("--clean while dev.sh runs: %v\n%s", err, refused)
	}
	if _, err := os.Stat(filepath.Join(outside, "PG_VERSION")); err != nil {
		t.Errorf("the refused --clean removed the cluster: %v", err)
	}

	// The kept server killed under dev.sh.
	procs := descendants(second.cmd.Process.Pid)
	server := numberIn(t, out, regexp.MustCompile(`PostgreSQL \S+ on 127\.0\.0\.1:\d+ \(pid (\d+)\)`))
	if err := syscall.Kill(server, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := second.exited(45 * time.Second); code != 1 {
		t.Errorf("exit %d after PostgreSQL was killed, want 1", code)
	}
	if want := fmt.Sprintf("error: PostgreSQL (127.0.0.1:%d, kept in .dev/postgres) stopped (killed by SIGKILL, pid %d) while dev.sh ran; its log, .dev/postgres/server.log, ends:", port, server); !strings.Contains(second.output(), want) {
		t.Errorf("no %q in:\n%s", want, second.output())
	}
	allGone(t, procs, []int{port}, 15*time.Second)

	cleaned := run(blocks[4])
	for _, want := range []string{"scripts/dev.sh --clean: removing what dev.sh kept between runs:",
		"  .dev/postgres (", "the kept PostgreSQL of DEV_DRIVER=postgres: its tables, replication slots and logs",
		"  .dev/azurite-postgres (", "Azurite's data for DEV_DRIVER=postgres: checkpoints and queues",
		"  " + outside + " (", "the kept PostgreSQL's cluster, which .dev/postgres/data linked to",
		"removed .dev: the next scripts/dev.sh starts afresh"} {
		if !strings.Contains(cleaned, want) {
			t.Errorf("--clean did not say %q:\n%s", want, cleaned)
		}
	}
	for _, gone := range []string{filepath.Join(dir, ".dev"), outside, filepath.Dir(outside)} {
		if _, err := os.Lstat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is left after --clean: %v", gone, err)
		}
	}
}

// TestDevAppRoots: the folder each DEV_DRIVER runs the app from (func start --script-root, devhost
// -root) holds what the Functions host reads there: host.json, and the handler it names;
// local.settings.json, with FUNCTIONS_WORKER_RUNTIME custom and AzureWebJobsStorage; each
// function folder of the checkout (and the mode's own), with function.json; and each timer's
// %SETTING% schedule, set in local.settings.json or by dev.sh in the environment. Core Tools is
// not needed: these are the files `func start` reads.
func TestDevAppRoots(t *testing.T) {
	dir := checkout(t)
	handler := filepath.Join(dir, "bin", "handler")
	if err := os.MkdirAll(filepath.Dir(handler), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(handler, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tops, _ := filepath.Glob(filepath.Join(dir, "*", "function.json"))
	for _, tc := range []struct {
		mode  string
		extra []string // function folders the mode adds
	}{{"sqlite", nil}, {"mysql", nil}, {"postgres", []string{"orders-changes"}}} {
		t.Run(tc.mode, func(t *testing.T) {
			cmd := exec.Command("bash", "-c", `source scripts/lib/services.sh && source scripts/dev/lib.sh && dev_settings_file && dev_app_root "$0" && printf '%s\0' "$app_root" && env -0`, tc.mode)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "RUN_DIR="+t.TempDir())
			raw, err := cmd.Output()
			if err != nil {
				t.Fatalf("dev_app_root %s: %v", tc.mode, err)
			}
			fields := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
			root := filepath.Join(dir, fields[0])
			env := map[string]string{}
			for _, kv := range fields[1:] {
				if k, v, ok := strings.Cut(kv, "="); ok {
					env[k] = v
				}
			}

			var host struct {
				CustomHandler struct {
					Description struct {
						DefaultExecutablePath string `json:"defaultExecutablePath"`
					} `json:"description"`
				} `json:"customHandler"`
			}
			readJSON(t, filepath.Join(root, "host.json"), &host)
			exe := filepath.Join(root, host.CustomHandler.Description.DefaultExecutablePath)
			if a, err := os.Stat(exe); err != nil || a.Mode()&0o111 == 0 {
				t.Errorf("host.json's handler %s: %v", exe, err)
			} else if b, _ := os.Stat(handler); !os.SameFile(a, b) {
				t.Errorf("host.json's handler %s is not the build's bin/handler", exe)
			}
			var settings struct{ Values map[string]string }
			readJSON(t, filepath.Join(root, "local.settings.json"), &settings)
			if v := settings.Values["FUNCTIONS_WORKER_RUNTIME"]; v != "custom" {
				t.Errorf("local.settings.json: FUNCTIONS_WORKER_RUNTIME %q, want custom", v)
			}
			if settings.Values["AzureWebJobsStorage"] == "" {
				t.Errorf("local.settings.json sets no AzureWebJobsStorage")
			}
			want := tc.extra
			for _, f := range tops {
				want = append(want, filepath.Base(filepath.Dir(f)))
			}
			for _, name := range want {
				var fn struct {
					Bindings []struct{ Type, Schedule string }
				}
				readJSON(t, filepath.Join(root, name, "function.json"), &fn)
				for _, b := range fn.Bindings {
					if b.Type != "timerTrigger" {
						continue
					}
					if m := regexp.MustCompile(`^%(.+)%$`).FindStringSubmatch(b.Schedule); m != nil && settings.Values[m[1]] == "" && env[m[1]] == "" {
						t.Errorf("%s's schedule %s is set neither in local.settings.json nor by dev.sh", name, b.Schedule)
					}
				}
			}
		})
	}
}

// readJSON decodes the JSON file at path into v.
func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
		return
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Errorf("%s: %v", path, err)
	}
}
