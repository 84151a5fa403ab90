package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

func writeSettings(t *testing.T, dir string, values map[string]string) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"IsEncrypted": false, "Values": values})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "local.settings.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// buildPollerctl builds pollerctl into a folder of the test's.
func buildPollerctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pollerctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runPollerctl runs bin with args in dir, with nothing in the environment but PATH, HOME (dir)
// and env, and returns its stdout, stderr and exit code.
func runPollerctl(t *testing.T, bin, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// TestSettings: local.settings.json's Values in the working directory, else at the repository
// root, under the environment (which wins); a file that does not parse is an error naming it;
// without one, the environment alone.
func TestSettings(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	writeSettings(t, root, map[string]string{"PT_TEST_A": "from root", "PT_TEST_B": "from root"})
	t.Setenv("PT_TEST_B", "from env")

	t.Chdir(sub)
	getenv, source, _, err := settings("")
	if err != nil || getenv("PT_TEST_A") != "" || !strings.Contains(source, "no local.settings.json") {
		t.Fatalf("without a file or a root: %q, %q, %v", getenv("PT_TEST_A"), source, err)
	}
	getenv, source, keys, err := settings(root)
	if err != nil || getenv("PT_TEST_A") != "from root" || getenv("PT_TEST_B") != "from env" || !strings.Contains(source, filepath.Join(root, "local.settings.json")) {
		t.Fatalf("the root's file: A=%q B=%q, %q, %v", getenv("PT_TEST_A"), getenv("PT_TEST_B"), source, err)
	}
	// The names it sees, for the misspelt-setting warnings: the file's and the environment's.
	if !slices.Contains(keys, "PT_TEST_A") || !slices.Contains(keys, "PT_TEST_B") || !slices.Contains(keys, "PATH") {
		t.Fatalf("the settings' names: %v", keys)
	}
	writeSettings(t, sub, map[string]string{"PT_TEST_A": "from here"})
	if getenv, _, _, err = settings(root); err != nil || getenv("PT_TEST_A") != "from here" {
		t.Fatalf("the working directory's file comes first: %q, %v", getenv("PT_TEST_A"), err)
	}
	if err := os.WriteFile(filepath.Join(sub, "local.settings.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := settings(root); err == nil || !strings.Contains(err.Error(), "local.settings.json") {
		t.Fatalf("a file that does not parse: %v", err)
	}
}

// TestPollerctlProcess builds pollerctl and runs it as an operator would, against Azurite, with
// nothing in the environment but PATH and HOME: from the app folder it reads the state store and
// the app name from local.settings.json and says so on stderr, without the account key; from a
// folder below the repository root it reads the root's file; an environment variable wins over
// the file, and a mistyped app name is told apart by the second announce line. It deletes an
// experiment's state only with --yes, after backing it up, and `backups` lists the backup.
func TestPollerctlProcess(t *testing.T) {
	cs := testenv.Azurite(t)
	bin := buildPollerctl(t)
	app, container := testenv.Name("ctlproc-"), testenv.Name("ctlproc-")
	root := t.TempDir()
	sub := filepath.Join(root, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	// The root is the repository root repoRoot looks for.
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module github.com/pseudotrigger/pseudotrigger\n\ngo 1.26\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeSettings(t, root, map[string]string{"StateStorage": cs, "STATE_CONTAINER": container, "POLLER_APP_NAME": app})

	ctx := context.Background()
	st, err := blobstore.New(blobstore.Settings{Setting: "test", ConnectionString: cs, Container: container}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cursor state.Cursor
	if err := json.Unmarshal([]byte(`{"kind":"integer","value":1234}`), &cursor); err != nil {
		t.Fatal(err)
	}
	doc := &state.Doc{Version: state.Version, PollerName: "exp", SourceFingerprint: "sha256:x",
		Checkpoint: state.Checkpoint{Cursor: &cursor}, Lease: state.Lease{FencingToken: 5}}
	data, err := state.Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	blob := "state/" + app + "/exp.json"
	if _, err := st.Put(ctx, blob, data, store.IfNotExists()); err != nil {
		t.Fatal(err)
	}

	run := func(dir string, env []string, args ...string) (string, string, int) {
		t.Helper()
		return runPollerctl(t, bin, dir, env, args...)
	}
	key := "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq"

	out, errOut, code := run(root, nil, "status", "--no-probe")
	if code != 3 || !strings.Contains(out, "exp") {
		t.Fatalf("status: exit %d\n%s\n%s", code, out, errOut)
	}
	first := strings.SplitN(errOut, "\n", 2)[0]
	if !strings.HasPrefix(first, `pollerctl: app "`+app+`" · state store `) || !strings.Contains(first, container) ||
		!strings.HasSuffix(first, "settings from the environment and "+filepath.Join(root, "local.settings.json")) {
		t.Fatalf("the announce line: %q", first)
	}
	if strings.Contains(errOut+out, key) {
		t.Fatalf("the account key was printed:\n%s", errOut)
	}
	if strings.Contains(out, "pollerctl: app") {
		t.Fatal("the announce line went to stdout")
	}

	// The environment wins; a mistyped app name is named as such, with the app that has state.
	_, errOut, _ = run(root, []string{"POLLER_APP_NAME=" + app + "-typo"}, "status", "--no-probe")
	if !strings.Contains(errOut, `pollerctl: app "`+app+`-typo"`) ||
		!strings.Contains(errOut, "pollerctl: no state under state/"+app+"-typo/; this container has state for apps: "+app+" (set POLLER_APP_NAME)") {
		t.Fatalf("with POLLER_APP_NAME in the environment:\n%s", errOut)
	}

	// Below the repository root, the root's local.settings.json. A dry run deletes nothing.
	out, errOut, code = run(sub, nil, "delete", "exp")
	if code != 0 || !strings.Contains(out, "dry run") || !strings.Contains(out, "1234") || !strings.Contains(out, "fencing token 5") ||
		!strings.Contains(errOut, `app "`+app+`"`) {
		t.Fatalf("delete dry run: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := st.Get(ctx, blob); err != nil {
		t.Fatalf("the dry run deleted the state: %v", err)
	}
	// exp is not in this build: the app may run it (a newer build), so a delete needs --force.
	if out, _, code := run(sub, nil, "delete", "exp", "--yes"); code != 1 || !strings.Contains(out, "not in this pollerctl's build") || !strings.Contains(out, "--force") {
		t.Fatalf("delete --yes of a poller this build does not have: exit %d\n%s", code, out)
	}
	out, errOut, code = run(sub, nil, "delete", "exp", "--yes", "--force")
	if code != 0 || !strings.Contains(out, "deleted "+blob) {
		t.Fatalf("delete --yes: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := st.Get(ctx, blob); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete --yes: %v", err)
	}
	backups, err := st.List(ctx, "backups/"+app+"/exp/")
	if err != nil || len(backups) != 1 {
		t.Fatalf("backups: %v %v", backups, err)
	}
	if b, err := st.Get(ctx, backups[0]); err != nil || string(b.Data) != string(data) {
		t.Fatalf("the backup is not the state document: %v\n%s", err, b.Data)
	}
	out, errOut, code = run(root, nil, "backups", "exp")
	if code != 0 || !strings.Contains(out, filepath.Base(backups[0])) || !strings.Contains(out, "1234") || !strings.Contains(out, "--from-backup") {
		t.Fatalf("backups: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, _, code := run(root, nil, "delete", "exp"); code != 2 || !strings.Contains(out, blob) {
		t.Fatalf("delete of nothing: exit %d\n%s", code, out)
	}
	if out, _, code := run(root, nil, "backups", "nope"); code != 2 || !strings.Contains(out, `no poller "nope"`) || !strings.Contains(out, "no state, backups or dead letters") {
		t.Fatalf("backups of none: exit %d\n%s", code, out)
	}
}

// TestPollerctlUnreachableStore: StateStorage names an Azurite address where nothing listens.
// pollerctl says so once, naming the setting and the address, says how to start Azurite, and
// exits with 4 at once (before, the SDK retried for seconds and the command ended with a long
// request error and exit 1). check, which needs only the database, runs all the same.
func TestPollerctlUnreachableStore(t *testing.T) {
	bin := buildPollerctl(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	dir := t.TempDir()
	cs := "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://" + addr + "/devstoreaccount1;"
	writeSettings(t, dir, map[string]string{"StateStorage": cs, "POLLER_APP_NAME": "local"})
	for _, args := range [][]string{{"status"}, {"backups", "orders"}} {
		began := time.Now()
		stdout, errOut, code := runPollerctl(t, bin, dir, nil, args...)
		took := time.Since(began)
		if code != 4 {
			t.Fatalf("%v: exit %d, want 4\n%s%s", args, code, stdout, errOut)
		}
		if took > 2*blobstore.ReachTimeout {
			t.Errorf("%v took %v: the refused connection was retried", args, took)
		}
		for _, want := range []string{"pollerctl: the state store is not reachable: StateStorage: cannot connect to " + addr,
			"StateStorage points at Azurite", "scripts/dev.sh", "npx azurite"} {
			if strings.Count(errOut, want) != 1 {
				t.Errorf("%v: want %q once in:\n%s", args, want, errOut)
			}
		}
		if strings.Contains(errOut, "RESPONSE") || strings.Contains(errOut+stdout, "AccountKey") {
			t.Errorf("%v: an SDK error or the key was printed:\n%s", args, errOut)
		}
	}

	// check needs only the database: it says in one line that the state store was not read,
	// and its exit code is the database's findings' (1: problems; 0 once --fix --yes fixed them).
	db := filepath.Join(dir, "orders.db")
	testenv.DB(t, "sqlite", db, "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT NOT NULL, amount TEXT NOT NULL, updated_at TEXT NOT NULL)")
	unset := t.TempDir() // no local.settings.json: no state store at all
	for _, tc := range []struct {
		dir, why string
		args     []string
		code     int
	}{
		{unset, "no state storage configured: set StateStorage", []string{"check", "orders"}, 1},
		{dir, "StateStorage: cannot connect to " + addr, []string{"check", "orders"}, 1},
		{dir, "StateStorage: cannot connect to " + addr, []string{"check", "orders", "--fix", "--yes"}, 0},
	} {
		stdout, errOut, code := runPollerctl(t, bin, tc.dir, []string{"ORDERS_DB_DRIVER=sqlite", "ORDERS_DB_CONNECTION=" + db}, tc.args...)
		if code != tc.code || !strings.Contains(stdout, "check orders (sqlite "+db) {
			t.Errorf("%v: exit %d, want %d\n%s%s", tc.args, code, tc.code, stdout, errOut)
		}
		want := "pollerctl: the state store was not read (" + tc.why
		if strings.Count(errOut, want) != 1 || !strings.Contains(errOut, "check needs only each poller's database; left out: the app's state") ||
			strings.Contains(errOut, "npx azurite") {
			t.Errorf("%v: want %q once, and no Azurite advice, in:\n%s", tc.args, want, errOut)
		}
	}
}

// TestPollerctlHelp runs the built pollerctl as a new user would ask it for help: with
// StateStorage pointing at an address that accepts connections and counts them, and with no
// settings at all. Every subcommand's --help, -h and `help SUBCOMMAND` print its usage on stdout
// and exit 0, at once, and nothing connects to the state store.
func TestPollerctlHelp(t *testing.T) {
	bin := buildPollerctl(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan string, 1000) // the connections' remote addresses, in the order accepted
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c.RemoteAddr().String()
			c.Close()
		}
	}()
	cs := "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://" + l.Addr().String() + "/devstoreaccount1;"
	withStore, without := t.TempDir(), t.TempDir()
	writeSettings(t, withStore, map[string]string{"StateStorage": cs, "POLLER_APP_NAME": "local"})
	for _, dir := range []string{withStore, without} {
		for _, args := range [][]string{
			{"backfill", "--help"}, {"backfill", "-h"}, {"help", "backfill"}, {"status", "-h"}, {"check", "--help"}, {"reset", "--help"},
			{"cdc", "--help"}, {"cdc", "enable", "-h"}, {"help", "cdc", "disable"}, {"deadletter", "replay", "--help"}, {"new", "--help"},
		} {
			stdout, stderr, code := runPollerctl(t, bin, dir, nil, args...)
			path := strings.Join(slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "help" || strings.HasPrefix(a, "-") }), " ")
			if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage: pollerctl "+path+" ") {
				t.Errorf("pollerctl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
			}
		}
	}
	// A last connection of the test's own: the ones accepted before it are pollerctl's.
	last, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer last.Close()
	for n := 0; ; n++ {
		if <-accepted == last.LocalAddr().String() {
			if n > 0 {
				t.Errorf("help connected to the state store's address %d time(s)", n)
			}
			break
		}
	}
}
