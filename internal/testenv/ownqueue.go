package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// FreshAzuriteQueue starts an Azurite queue service of its own (scripts/lib/azurite.js, in
// memory, without the garbage collection that stalled it for minutes after a deleted queue's
// messages, on a free 127.0.0.1 port) and returns the connection string of Azurite's with its
// QueueEndpoint moved there; cleanup (also on tb's end) stops it. For a benchmark that sends
// thousands of messages: Azurite's queue slows with every message it holds (its in-memory
// indexes), so each measurement gets an empty one. Skips as AzuriteQueue does.
func FreshAzuriteQueue(tb testing.TB) (cs string, cleanup func()) {
	tb.Helper()
	base := AzuriteQueue(tb)
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for ; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		if filepath.Dir(dir) == dir {
			tb.Fatal("no go.mod above the test's directory")
		}
	}
	bin := filepath.Join(dir, "node_modules", ".bin", "azurite-queue")
	if _, err := os.Stat(bin); err != nil { // what azurite.js starts
		if InCI() {
			tb.Fatalf("%s is missing: scripts/test.sh and bench.sh install Azurite with npm ci", bin)
		}
		tb.Skipf("%s is missing: run npm ci (scripts/test.sh and bench.sh do)", bin)
	}
	port := FreePort(tb)
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	cmd := exec.Command("node", filepath.Join(dir, "scripts", "lib", "azurite.js"), "queue", "--queueHost", "127.0.0.1", "--queuePort", fmt.Sprint(port), "--inMemoryPersistence", "--silent",
		"--skipApiVersionCheck", "--disableTelemetry")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // node and what it starts, stopped together
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	stopped := false
	cleanup = func() {
		if !stopped {
			stopped = true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	}
	tb.Cleanup(cleanup)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			cleanup()
			tb.Fatalf("Azurite's queue service did not listen on port %d within 30 s", port)
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
	cs = regexp.MustCompile(`(?i)(QueueEndpoint=http://127\.0\.0\.1:)\d+`).ReplaceAllString(base, "${1}"+fmt.Sprint(port))
	return cs, cleanup
}
