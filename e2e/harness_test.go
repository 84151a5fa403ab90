// Package e2e runs the real handler binary as processes against Azurite and PostgreSQL, with a
// webhook in the test process, the way the Functions host drives it.
package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

var binary string // the handler, built once by TestMain

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pseudotrigger-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "handler")
	build := exec.Command("go", "build", "-o", binary, "../cmd/handler")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the handler:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	builtMu sync.Mutex
	built   = map[string]*builtBinary{}
)

type builtBinary struct {
	once sync.Once
	path string
	err  error
}

// buildOnce builds a binary named name next to the handler, with go build args (flags, then the
// package), once per test process.
func buildOnce(t *testing.T, name string, args ...string) string {
	t.Helper()
	builtMu.Lock()
	b := built[name]
	if b == nil {
		b = &builtBinary{path: filepath.Join(filepath.Dir(binary), name)}
		built[name] = b
	}
	builtMu.Unlock()
	b.once.Do(func() {
		cmd := append([]string{"build", "-o", b.path}, args...)
		if out, err := exec.Command("go", cmd...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go %s: %v\n%s", strings.Join(cmd, " "), err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// world is one test's Azurite container, PostgreSQL schema with an orders table, and webhook.
type world struct {
	t       *testing.T
	azurite string
	app     string
	dsn     string
	db      *sql.DB
	st      *blobstore.Store
	hook    *webhook
	next    int64
	base    time.Time
	mu      sync.Mutex
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, azurite: testenv.Azurite(t), app: testenv.Name("e2e-"), base: time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Microsecond)}
	w.dsn, w.db = pgSchema(t, "e2e_")
	if _, err := w.db.Exec(`CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL,
		updated_at TIMESTAMPTZ(6) NOT NULL); CREATE INDEX ON orders (updated_at, id)`); err != nil {
		t.Fatal(err)
	}
	var err error
	w.st, err = blobstore.New(blobstore.Settings{Setting: "test", ConnectionString: w.azurite, Container: "db-state"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.hook = newWebhook(t)
	return w
}

// pgSchema creates a schema of its own on the test PostgreSQL, dropped at the end of the test,
// and returns a DSN whose search_path is that schema, with a pool on it.
func pgSchema(t *testing.T, prefix string) (string, *sql.DB) {
	t.Helper()
	return pgSchemaOn(t, testenv.Postgres(t), prefix)
}

// pgSchemaOn is pgSchema on the server of DSN pg (testenv.PostgresOwn's, say).
func pgSchemaOn(t *testing.T, pg, prefix string) (string, *sql.DB) {
	t.Helper()
	schema := strings.ReplaceAll(testenv.Name(prefix), "-", "_")
	admin, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	dsn := testenv.WithParam(pg, "search_path", schema)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return dsn, db
}

func (w *world) blobName() string { return "state/" + w.app + "/orders.json" }

// insert adds n orders with strictly increasing timestamps, in one transaction.
func (w *world) insert(n int) {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var sb strings.Builder
	args := []any{}
	sb.WriteString("INSERT INTO orders VALUES ")
	flush := func() {
		if len(args) == 0 {
			return
		}
		if _, err := w.db.Exec(sb.String(), args...); err != nil {
			w.t.Fatal(err)
		}
		sb.Reset()
		sb.WriteString("INSERT INTO orders VALUES ")
		args = args[:0]
	}
	for range n {
		w.next++
		if len(args) > 0 {
			sb.WriteString(", ")
		}
		i := len(args)
		fmt.Fprintf(&sb, "($%d, $%d, $%d, $%d)", i+1, i+2, i+3, i+4)
		args = append(args, w.next, "customer "+strconv.FormatInt(w.next, 10), fmt.Sprintf("%d.25", w.next), w.base.Add(time.Duration(w.next)*time.Microsecond))
		if len(args) >= 4000 {
			flush()
		}
	}
	flush()
}

// doc reads the state blob (nil when there is none).
func (w *world) doc() (*state.Doc, store.Blob) {
	w.t.Helper()
	b, err := w.st.Get(context.Background(), w.blobName())
	if err != nil {
		return nil, b
	}
	d, err := state.Decode(w.blobName(), "orders", b.Data)
	if err != nil {
		w.t.Fatalf("the state blob is not valid: %v", err)
	}
	return d, b
}

// proc is one handler process.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	port int
	out  *testenv.Buffer
}

func (w *world) env(extra ...string) []string {
	return ordersEnv(w.azurite, w.app, w.dsn, w.hook.srv.URL, extra...)
}

// ordersEnv is a handler's environment for the orders poller on PostgreSQL; extra settings come
// last, and a setting given twice takes its last value (os/exec keeps the last duplicate).
func ordersEnv(storage, app, dsn, webhook string, extra ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"StateStorage=" + storage,
		"POLLER_APP_NAME=" + app,
		"ORDERS_DB_DRIVER=postgres",
		"ORDERS_DB_CONNECTION=" + dsn,
		"ORDERS_WEBHOOK_URL=" + webhook,
		"ORDERS_SETTLE_LAG=1s",
	}
	return append(env, extra...)
}

func start(t *testing.T, env []string) *proc {
	t.Helper()
	return startWith(t, binary, env)
}

// startWith starts the handler binary bin and waits until it answers GET /.
func startWith(t *testing.T, bin string, env []string) *proc {
	t.Helper()
	port := testenv.FreePort(t)
	p := &proc{t: t, port: port, out: &testenv.Buffer{}}
	p.cmd = exec.Command(bin)
	p.cmd.Env = append(env, "FUNCTIONS_CUSTOMHANDLER_PORT="+strconv.Itoa(port))
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_, _ = p.cmd.Process.Wait()
		if t.Failed() {
			t.Logf("handler on port %d printed:\n%s", port, p.out.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(p.url("/"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the handler did not answer GET / within 15 s:\n%s", p.out.String())
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

func (p *proc) url(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", p.port, path) }

// hostBody is what the Functions host sends for a timer: ScheduleStatus null, as with
// useMonitor false.
const hostBody = `{"Data":{"timer":{"Schedule":{"AdjustForDST":true},"ScheduleStatus":null,"IsPastDue":false}},` +
	`"Metadata":{"sys":{"MethodName":"orders","UtcNow":"2026-11-22T12:00:00Z","RandGuid":"3c1c0ad4-1d5f-4d39-a0f4-e3cb4c8c2d0e"}}}`

type reply struct {
	status int
	body   map[string]any
	raw    string
}

func (p *proc) post(path, body string) reply {
	p.t.Helper()
	return p.postCtx(context.Background(), path, body)
}

// postCtx is post on ctx: its cancellation drops the request, as the host does (status -2; -1 is
// any other failure, a process that died).
func (p *proc) postCtx(ctx context.Context, path, body string) reply {
	p.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url(path), strings.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return reply{status: -2, raw: err.Error()}
		}
		return reply{status: -1, raw: err.Error()}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		p.t.Errorf("Content-Type %q", ct)
	}
	return r
}

func (p *proc) tick() reply { return p.post("/orders", hostBody) }

func (r reply) outcome() string {
	rv, _ := r.body["ReturnValue"].(map[string]any)
	s, _ := rv["outcome"].(string)
	return s
}

func (p *proc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_, _ = p.cmd.Process.Wait()
}

// webhook records deliveries; hold, when set, is called before answering (to stall a batch).
type webhook struct {
	srv *httptest.Server

	mu         sync.Mutex
	seen       map[int64]int // id -> deliveries
	tokens     []int64       // fencing tokens in arrival order
	batches    []delivery
	inFlight   int
	maxFlight  int
	hold       func(d delivery)
	failStatus int
	poison     map[int64]bool // a batch holding one of these rows is answered 500
}

type delivery struct {
	BatchID string
	Token   int64
	Attempt int64
	IDs     []int64
}

func newWebhook(t *testing.T) *webhook {
	h := &webhook{seen: map[int64]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var p struct {
			BatchID      string `json:"batch_id"`
			FencingToken int64  `json:"fencing_token"`
			Attempt      int64  `json:"attempt"`
			Rows         []struct {
				ID int64 `json:"id"`
			} `json:"rows"`
		}
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			t.Errorf("webhook: bad body: %v", err)
			rw.WriteHeader(400)
			return
		}
		if r.Header.Get("Idempotency-Key") != p.BatchID || r.Header.Get("X-Fencing-Token") != strconv.FormatInt(p.FencingToken, 10) {
			t.Errorf("webhook: headers %v do not match the body", r.Header)
		}
		d := delivery{BatchID: p.BatchID, Token: p.FencingToken, Attempt: p.Attempt}
		for _, row := range p.Rows {
			d.IDs = append(d.IDs, row.ID)
		}
		h.mu.Lock()
		h.inFlight++
		h.maxFlight = max(h.maxFlight, h.inFlight)
		h.tokens = append(h.tokens, p.FencingToken)
		hold, fail := h.hold, h.failStatus
		for _, id := range d.IDs {
			if h.poison[id] {
				fail = http.StatusInternalServerError
			}
		}
		h.mu.Unlock()
		if hold != nil {
			hold(d)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.inFlight--
		if fail != 0 {
			rw.WriteHeader(fail)
			return
		}
		for _, id := range d.IDs {
			h.seen[id]++
		}
		h.batches = append(h.batches, d)
		rw.WriteHeader(204)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *webhook) delivered() (distinct int, duplicates []int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, n := range h.seen {
		if n > 1 {
			duplicates = append(duplicates, id)
		}
	}
	return len(h.seen), duplicates
}

// drain ticks p until a tick is idle, failing after deadline.
func drain(t *testing.T, p *proc, deadline time.Duration) {
	t.Helper()
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		r := p.tick()
		if r.status != 200 {
			t.Fatalf("tick: %d %s", r.status, r.raw)
		}
		if r.outcome() == "idle" {
			return
		}
	}
	t.Fatalf("not caught up within %v", deadline)
}
