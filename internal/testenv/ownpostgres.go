package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
)

// PostgresOwn starts a PostgreSQL server of the test's own (wal_level=logical), as
// scripts/lib/services.sh's start_postgres starts the shared one, and returns its DSN; it is
// stopped and removed when the test ends. It is for a test whose verdict depends on what is
// server-wide, such as the end of the WAL, which every other test writing to the shared server
// moves (CI runs every package at once). It runs where the shared server does (PostgresVar; else
// it skips, naming it), and needs the server's binaries (initdb, pg_ctl).
func PostgresOwn(tb testing.TB) string {
	tb.Helper()
	Postgres(tb)
	bin := postgresBin()
	if bin == "" {
		tb.Skip("no PostgreSQL server binaries (initdb, pg_ctl) for a server of the test's own: apt-get install postgresql")
	}
	dir, command := ServerDir(tb, "pseudotrigger-pgown-", "postgres") // initdb refuses root
	run := func(args ...string) {
		tb.Helper()
		if out, err := command(args...).CombinedOutput(); err != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			tb.Fatalf("%s: %v\n%s\n%s", args[0], err, out, log)
		}
	}
	data := filepath.Join(dir, "data")
	run(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	run(filepath.Join(bin, "pg_ctl"), "-D", data, "-w", "-t", "60", "-l", filepath.Join(dir, "server.log"), "-o",
		fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c wal_level=logical -c max_replication_slots=8 -c max_wal_senders=4", port, dir),
		"start")
	tb.Cleanup(func() { _ = command(filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "stop").Run() })
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
}

// ServerDir makes a directory for a server a test starts of its own, removed when the test ends,
// and returns it with a maker of commands run in it. Run as root, the commands run as runAs (a
// server that drops privileges, or refuses root, as initdb does), which owns the directory and
// must reach it through every parent; the test skips when there is no such user.
func ServerDir(tb testing.TB, prefix, runAs string) (string, func(args ...string) *exec.Cmd) {
	tb.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	var as []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup(runAs)
		if err != nil {
			tb.Skipf("running as root and there is no %s user to run the server as: %v", runAs, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		if err := os.Chown(dir, uid, -1); err != nil {
			tb.Fatal(err)
		}
		as = []string{"runuser", "-u", runAs, "--"}
		if err := exec.Command("runuser", "-u", runAs, "--", "test", "-x", dir).Run(); err != nil {
			tb.Fatalf("the %s user cannot enter %s: set TMPDIR to a directory it can reach", runAs, dir)
		}
	}
	return dir, func(args ...string) *exec.Cmd {
		all := append(append([]string{}, as...), args...)
		c := exec.Command(all[0], all[1:]...)
		c.Dir = dir
		return c
	}
}

// postgresBin is the directory of the newest PostgreSQL server binaries installed; "" when none.
func postgresBin() string {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a < b
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	return ""
}
