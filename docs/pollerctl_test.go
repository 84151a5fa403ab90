package docs

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// pollerctlApp is a throwaway app for the documented pollerctl commands: a folder that looks like
// the repository to pollerctl (go.mod, pollers/pollers.go, main.bicepparam, so that `new` works
// there), the Go poller orders on an SQLite table, a declared logical poller cdcdemo on a fresh
// PostgreSQL database, and state in a fresh container of Azurite.
type pollerctlApp struct {
	root      string
	env       []string
	container string
	azurite   string
}

func newPollerctlApp(t *testing.T) *pollerctlApp {
	t.Helper()
	a := &pollerctlApp{root: t.TempDir(), azurite: testenv.Azurite(t), container: testenv.Name("docs")}
	pg := newDatabase(t, postgres.Name)
	execSQL(t, pg.db, "CREATE TABLE customers (id BIGINT PRIMARY KEY, name TEXT NOT NULL)")
	for _, f := range []string{"go.mod", "pollers/pollers.go", "infra/bicep/main.bicepparam", "local.settings.json.example"} {
		data, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		a.write(t, f, string(data))
	}
	a.write(t, "cdcdemo/function.json", `{"bindings": [{"type": "timerTrigger", "direction": "in", "name": "timer", "schedule": "%CDCDEMO_SCHEDULE%"}]}`)
	a.write(t, "cdcdemo/poller.json", `{"source": {"table": "customers", "columns": ["id", "name"], "key": ["id"], "cursor": {"kind": "logical"}},
		"sink": {"type": "webhook", "url": "http://127.0.0.1:9/changes"}}`)
	orders := filepath.Join(a.root, "orders.db")
	db := open(t, "sqlite", orders)
	execSQL(t, db, "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT NOT NULL, amount TEXT NOT NULL, updated_at TEXT NOT NULL)")
	execSQL(t, db, "INSERT INTO orders VALUES (12093, 'ada', '9.50', '2026-04-07T01:23:45.123456Z')")
	for k, v := range map[string]string{
		"StateStorage": a.azurite, "STATE_CONTAINER": a.container, "POLLER_APP_NAME": "docs",
		"ORDERS_DB_DRIVER": "sqlite", "ORDERS_DB_CONNECTION": orders, "ORDERS_SCHEDULE": "*/30 * * * * *",
		"CDCDEMO_DB_DRIVER": "postgres", "CDCDEMO_DB_CONNECTION": pg.dsn, "CDCDEMO_SCHEDULE": "*/30 * * * * *",
	} {
		a.env = append(a.env, k+"="+v)
	}
	return a
}

func (a *pollerctlApp) write(t *testing.T, name, data string) {
	t.Helper()
	path := filepath.Join(a.root, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run runs pollerctl with args in the app's folder.
func (a *pollerctlApp) run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := command(t, pollerctlBinary(t), args...)
	cmd.Dir = a.root
	cmd.Env = append(filteredEnviron(), a.env...)
	return run(cmd)
}

// filteredEnviron is the test's environment without the app settings the docs' pollerctl app
// sets itself.
func filteredEnviron() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "StateStorage") || strings.HasPrefix(k, "AzureWebJobs") || k == "STATE_CONTAINER" || k == "POLLER_APP_NAME" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// blobs is the app's state container.
func (a *pollerctlApp) blobs(t *testing.T) *azblob.Client {
	t.Helper()
	c, err := azblob.NewClientFromConnectionString(a.azurite, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// state returns the orders poller's state document as stored.
func (a *pollerctlApp) state(t *testing.T) []byte {
	t.Helper()
	buf := make([]byte, 1<<20)
	n, err := a.blobs(t).DownloadBuffer(context.Background(), a.container, blobpath.State("docs", "orders"), buf, nil)
	if err != nil {
		t.Fatalf("reading the state blob: %v", err)
	}
	return buf[:n]
}

// deadLetter writes a dead letter of the orders poller, as a quarantine would have left it, and
// returns its batch id.
func (a *pollerctlApp) deadLetter(t *testing.T) string {
	t.Helper()
	var doc state.Doc
	if err := json.Unmarshal(a.state(t), &doc); err != nil {
		t.Fatal(err)
	}
	cur := state.Cursor{Kind: state.KindTimestampPK, Value: json.RawMessage(`"2026-04-07T01:23:45.123456Z"`),
		Tiebreaker: map[string]json.RawMessage{"id": json.RawMessage("12093")}}
	l := deadletter.Letter{Version: 1, Poller: "orders", BatchID: "batch_docs", SourceFingerprint: doc.SourceFingerprint,
		To: &cur, BatchRows: 1, Rows: []deadletter.Row{{Key: map[string]json.RawMessage{"id": json.RawMessage("12093")},
			Cursor: cur, Data: json.RawMessage(`{"id":12093}`), Error: "the handler failed", Attempts: 1}}}
	data, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.blobs(t).UploadBuffer(context.Background(), a.container, blobpath.DeadLetter("docs", "orders", l.BatchID), data, nil); err != nil {
		t.Fatalf("writing a dead letter: %v", err)
	}
	return l.BatchID
}

// saveState writes the orders poller's state document to file in the app's folder, as a user
// who downloaded a version of it would have it.
func (a *pollerctlApp) saveState(t *testing.T, file string) {
	t.Helper()
	a.write(t, file, string(a.state(t)))
}

// TestPollerctl: every pollerctl command the docs give runs against a throwaway app and is not a
// usage error (exit 2): a renamed command, flag or placeholder fails here. POLLER stands for the
// orders poller (cdcdemo, a logical one, for cdc commands), NEW for a clone's name, NAME for a
// new poller's, BATCH for a dead letter's batch id; a file a command reads is a state document
// saved from the app.
func TestPollerctl(t *testing.T) {
	t.Parallel()
	bs := blocksOf(t, "sh", "pollerctl")
	a := newPollerctlApp(t)
	// State and a backup of it to work on: the first reset writes the document, the second backs
	// it up.
	for range 2 {
		if _, stderr, code := a.run(t, "reset", "orders", "--to-beginning", "--yes"); code != 0 {
			t.Fatalf("setting up: pollerctl reset orders --to-beginning --yes exited %d: %s", code, stderr)
		}
	}
	batch := a.deadLetter(t)
	newNames := 0
	for _, b := range bs {
		for _, line := range b.lines() {
			words := strings.Fields(line)
			switch {
			case len(words) > 3 && strings.Join(words[:3], " ") == "go run ./cmd/pollerctl":
				words = words[3:]
			case len(words) > 0 && words[0] == "pollerctl":
				words = words[1:]
			default:
				t.Errorf("%s: %q is not a pollerctl command", b, line)
				continue
			}
			for i, w := range words {
				switch w {
				case "POLLER":
					words[i] = "orders"
					if words[0] == "cdc" {
						words[i] = "cdcdemo"
					}
				case "NEW":
					words[i] = "orders-copy"
				case "NAME":
					newNames++
					words[i] = "docsnew" + string(rune('a'+newNames))
				case "BATCH":
					words[i] = batch
				}
				if i > 0 && words[i-1] == "--from-file" {
					a.saveState(t, words[i])
				}
			}
			stdout, stderr, code := a.run(t, words...)
			if code == ctl.ExitUsage || code < 0 {
				t.Errorf("%s: pollerctl %s exited %d (bad usage or input):\nstdout:\n%s\nstderr:\n%s", b, strings.Join(words, " "), code, stdout, stderr)
			}
		}
	}
	// cdc enable --yes made a slot: drop it, as cdc disable does (the database goes with the test).
	if _, stderr, code := a.run(t, "cdc", "disable", "cdcdemo", "--yes"); code != 0 {
		t.Errorf("pollerctl cdc disable cdcdemo --yes exited %d: %s", code, stderr)
	}
}
