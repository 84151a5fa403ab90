package testenv_test

import (
	"bufio"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// TestStartPostgresFromPrivateCheckout runs scripts/lib/services.sh's start_postgres from a
// checkout inside a mode-700 directory, as in root's home: the server, which runs as the postgres
// user, must still start (before, initdb could not enter .test/pg/data: Permission denied), accept
// a connection, and be stopped and its directory removed when the script exits.
func TestStartPostgresFromPrivateCheckout(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("start_postgres switches to the postgres user only as root")
	}
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("no PostgreSQL server binaries (scripts/test.sh installs them)")
		}
		t.Skip("no PostgreSQL server binaries: install postgresql (scripts/test.sh does)")
	}
	private := filepath.Join(t.TempDir(), "home")
	lib := filepath.Join(private, "checkout", "scripts", "lib")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("../../scripts/lib/services.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lib, "services.sh"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", `source scripts/lib/services.sh && start_postgres && echo "DSN=$PG_TEST_DSN" && echo "DIR=$PG_DIR" && { read -r _ || true; }`)
	cmd.Dir = filepath.Join(private, "checkout")
	cmd.Env = append(os.Environ(), "RUN_DIR="+filepath.Join(private, "checkout", ".test"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := map[string]string{}
	sc := bufio.NewScanner(stdout)
	for len(lines) < 2 && sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			lines[k] = v
		}
	}
	if lines["DSN"] == "" {
		_ = cmd.Wait()
		t.Fatalf("start_postgres from a mode-700 checkout did not start PostgreSQL:\n%s", stderr.String())
	}
	db, err := sql.Open("pgx", lines["DSN"])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var one int
	if err := db.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("the started server does not answer: %v", err)
	}
	db.Close()

	stdin.Close() // the script exits: its EXIT trap stops what it started
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the script failed: %v\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the script did not exit")
	}
	if _, err := os.Stat(lines["DIR"]); !os.IsNotExist(err) {
		t.Errorf("the cluster's directory %s is still there after the stop (%v)", lines["DIR"], err)
	}
	check, _ := sql.Open("pgx", lines["DSN"]+"&connect_timeout=2")
	defer check.Close()
	if err := check.Ping(); err == nil {
		t.Error("the server still answers after the script exited")
	}
}
