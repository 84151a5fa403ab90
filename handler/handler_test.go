package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// testRow is a row of the tests' orders tables.
type testRow struct {
	ID        int64     `db:"id,key"`
	UpdatedAt time.Time `db:"updated_at,cursor"`
}

func def(name string, delivered *int) *poller.Poller {
	return poller.New(name, "orders", poller.TimestampPK, func(_ context.Context, b *poller.Batch[testRow]) error { *delivered += len(b.Rows); return nil },
		poller.WithSettleLag(0))
}

func newServer(t *testing.T) (*httptest.Server, *int) {
	return newServerLogging(t, io.Discard)
}

func newServerLogging(t *testing.T, logs io.Writer) (*httptest.Server, *int) {
	dsn := filepath.Join(t.TempDir(), "o.db")
	testenv.DB(t, "sqlite", dsn, `CREATE TABLE orders (id BIGINT PRIMARY KEY, updated_at TEXT NOT NULL);
		INSERT INTO orders VALUES (1, '2026-01-01T00:00:00.000000Z'), (2, '2026-01-01T00:00:01.000000Z')`)
	env := map[string]string{
		"GOOD_DB_DRIVER": "sqlite", "GOOD_DB_CONNECTION": dsn,
		"BAD_DB_DRIVER": "oracle", "BAD_DB_CONNECTION": dsn,
	}
	delivered := new(int)
	app := handler.NewForTest(t, handler.Options{
		Getenv:  func(k string) string { return env[k] },
		Logger:  slog.New(slog.NewJSONHandler(logs, nil)),
		Pollers: []*poller.Poller{def("good", delivered), def("bad", new(int))},
	}, handler.Internals{Store: memstore.New(nil)})
	srv := httptest.NewServer(app.Routes())
	t.Cleanup(srv.Close)
	return srv, delivered
}

const body = `{"Data":{"timer":{"Schedule":{},"ScheduleStatus":{"Last":"0001-01-01T00:00:00","Next":"2026-11-22T12:00:00Z","LastUpdated":"0001-01-01T00:00:00"},"IsPastDue":true}},"Metadata":{"sys":{"MethodName":"good"}}}`

func post(t *testing.T, url, b string) (int, map[string]any, http.Header) {
	resp, err := http.Post(url, "application/json", strings.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("the reply is not JSON: %v", err)
	}
	return resp.StatusCode, m, resp.Header
}

func TestHostProtocol(t *testing.T) {
	srv, delivered := newServer(t)
	resp, err := http.Get(srv.URL + "/")
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /: %v %v", resp, err)
	}
	resp.Body.Close()

	status, m, h := post(t, srv.URL+"/good", body)
	if status != 200 || h.Get("Content-Type") != "application/json" {
		t.Fatalf("tick: %d %v", status, m)
	}
	rv := m["ReturnValue"].(map[string]any)
	if rv["outcome"] != "committed" || rv["rows"].(float64) != 2 || rv["poller"] != "good" || *delivered != 2 {
		t.Fatalf("ReturnValue %v", rv)
	}
	if _, ok := m["Outputs"].(map[string]any); !ok {
		t.Fatalf("no Outputs object: %v", m)
	}
	if logs, _ := m["Logs"].([]any); len(logs) != 1 || !strings.Contains(logs[0].(string), "committed") {
		t.Fatalf("Logs %v", m["Logs"])
	}
	for _, k := range []string{"fencing_token", "cursor", "duration_ms", "batches"} {
		if _, ok := rv[k]; !ok {
			t.Errorf("ReturnValue lacks %s", k)
		}
	}
	// A null ScheduleStatus parses too.
	if status, m, _ := post(t, srv.URL+"/good", `{"Data":{"timer":{"ScheduleStatus":null,"IsPastDue":false}},"Metadata":{}}`); status != 200 || m["ReturnValue"].(map[string]any)["outcome"] != "idle" {
		t.Fatalf("second tick: %d %v", status, m)
	}
}

func TestErrors(t *testing.T) {
	srv, _ := newServer(t)
	cases := []struct {
		path, body string
		status     int
		mentions   string
	}{
		{"/bad", body, 500, "BAD_DB_DRIVER"},
		{"/nope", body, 404, "nope"},
		{"/good", "garbage", 400, "invocation JSON"},
		{"/good", `[1, 2]`, 400, "invocation JSON"},
		{"/good", `{"Metadata":{}}`, 400, "Data"},
		{"/good", `{"Data":{"x":"` + strings.Repeat("y", handler.MaxBodyBytes) + `"}}`, 413, "exceeds"},
	}
	for _, c := range cases {
		status, m, h := post(t, srv.URL+c.path, c.body)
		msg, _ := m["error"].(string)
		if status != c.status || !strings.Contains(msg, c.mentions) || h.Get("Content-Type") != "application/json" {
			t.Errorf("POST %s %.20q: %d %v; want %d mentioning %s", c.path, c.body, status, m, c.status, c.mentions)
		}
	}
	// The misconfigured poller does not stop the good one.
	if status, _, _ := post(t, srv.URL+"/good", body); status != 200 {
		t.Fatalf("the good poller failed after the bad one: %d", status)
	}
	resp, err := http.Get(srv.URL + "/good")
	if err != nil || resp.StatusCode != 405 {
		t.Fatalf("GET /good: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
}

func TestMissingStateStorage(t *testing.T) {
	app := handler.NewForTest(t, handler.Options{
		Getenv: func(k string) string {
			return map[string]string{"GOOD_DB_DRIVER": "sqlite", "GOOD_DB_CONNECTION": "x.db"}[k]
		},
		Logger:  slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Pollers: []*poller.Poller{def("good", new(int))},
	}, handler.Internals{})
	srv := httptest.NewServer(app.Routes())
	defer srv.Close()
	status, m, _ := post(t, srv.URL+"/good", body)
	if status != 500 || !strings.Contains(m["error"].(string), "StateStorage") {
		t.Fatalf("%d %v", status, m)
	}
}

// logLines returns the JSON log lines of logs whose msg is msg.
func logLines(t *testing.T, logs *testenv.Buffer, msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestTickLogLine: one JSON line per tick and per batch, with the fields the README's queries and
// the alert rules read, the Functions invocation id among them.
func TestTickLogLine(t *testing.T) {
	logs := &testenv.Buffer{}
	srv, _ := newServerLogging(t, logs)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/good", strings.NewReader(body))
	req.Header.Set("X-Azure-Functions-InvocationId", "inv-123")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	resp.Body.Close()
	ticks := logLines(t, logs, "tick")
	if len(ticks) != 1 {
		t.Fatalf("%d tick lines", len(ticks))
	}
	tick := ticks[0]
	for _, k := range []string{"poller", "invocation_id", "outcome", "rows", "batches", "attempt", "fencing_token", "cursor", "lag_seconds",
		"rows_waiting", "duration_ms", "blob_requests", "conflicts"} {
		if _, ok := tick[k]; !ok {
			t.Errorf("the tick line lacks %s: %v", k, tick)
		}
	}
	// A read, the tombstone's (the poller's first acquire starts above a deleted document's last
	// token), the acquire and the commit folded into the release; nothing waits after the tick, so
	// the lag (the age of the oldest row waiting) is 0 however old the rows were.
	if tick["invocation_id"] != "inv-123" || tick["outcome"] != "committed" || tick["blob_requests"] != 4.0 || tick["conflicts"] != 0.0 ||
		tick["rows_waiting"] != 0.0 || tick["rows"] != 2.0 || tick["lag_seconds"] != 0.0 {
		t.Fatalf("tick line %v", tick)
	}
	batches := logLines(t, logs, "batch")
	if len(batches) != 1 || batches[0]["batch_id"] == nil || batches[0]["invocation_id"] != "inv-123" || batches[0]["cursor_age_seconds"].(float64) < 1e6 {
		t.Fatalf("batch lines %v", batches)
	}
}

// TestMissingScheduleFailsThatPollerAlone: two pollers on one table, one without {P}_SCHEDULE.
// The handler logs one error for it, naming the setting and the fix; the other is not named and
// ticks as usual.
func TestMissingScheduleFailsThatPollerAlone(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "o.db")
	testenv.DB(t, "sqlite", dsn, `CREATE TABLE orders (id BIGINT PRIMARY KEY, updated_at TEXT NOT NULL);
		INSERT INTO orders VALUES (1, '2026-01-01T00:00:00.000000Z')`)
	env := map[string]string{
		"TIMED_DB_DRIVER": "sqlite", "TIMED_DB_CONNECTION": dsn, "TIMED_SCHEDULE": "*/5 * * * * *",
		"UNTIMED_DB_DRIVER": "sqlite", "UNTIMED_DB_CONNECTION": dsn,
	}
	logs := &testenv.Buffer{}
	delivered := new(int)
	app := handler.NewForTest(t, handler.Options{
		Getenv:  func(k string) string { return env[k] },
		Logger:  slog.New(slog.NewJSONHandler(logs, nil)),
		Pollers: []*poller.Poller{def("timed", delivered), def("untimed", new(int))},
	}, handler.Internals{Store: memstore.New(nil)})
	srv := httptest.NewServer(app.Routes())
	defer srv.Close()
	var errs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		if m["level"] == "ERROR" {
			errs = append(errs, m)
		}
	}
	if len(errs) != 1 || errs[0]["poller"] != "untimed" || errs[0]["setting"] != "UNTIMED_SCHEDULE" ||
		!strings.Contains(errs[0]["msg"].(string), "set UNTIMED_SCHEDULE to an NCRONTAB schedule") {
		t.Fatalf("want one error, for untimed, naming UNTIMED_SCHEDULE; the log:\n%s", logs.String())
	}
	if status, m, _ := post(t, srv.URL+"/timed", body); status != 200 || m["ReturnValue"].(map[string]any)["outcome"] != "committed" || *delivered != 1 {
		t.Fatalf("the scheduled poller: %d %v (delivered %d)", status, m, *delivered)
	}
}

// TestExampleRoutes: ExampleApp_Routes's exchange, with the state in memory (the example names
// Azurite's): its two replies are the ones the example shows.
func TestExampleRoutes(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "events.db")
	testenv.DB(t, "sqlite", dsn, `CREATE TABLE events (seq INTEGER PRIMARY KEY, what TEXT);
		INSERT INTO events VALUES (1, 'created'), (2, 'paid')`)
	type Event struct {
		Seq  int64  `db:"seq,key,cursor"`
		What string `db:"what"`
	}
	events := poller.New("events", "events", poller.Integer,
		func(ctx context.Context, b *poller.Batch[Event]) error { return nil })
	settings := map[string]string{"EVENTS_DB_DRIVER": "sqlite", "EVENTS_DB_CONNECTION": dsn}
	app := handler.NewForTest(t, handler.Options{
		Getenv:  func(name string) string { return settings[name] },
		Logger:  slog.New(slog.DiscardHandler),
		Pollers: []*poller.Poller{events},
	}, handler.Internals{Store: memstore.New(nil)})
	host := httptest.NewServer(app.Routes())
	defer host.Close()
	invocation := `{"Data":{"timer":{"IsPastDue":false}},"Metadata":{"sys":{"MethodName":"events"}}}`
	for i, want := range []string{
		`200 {"attempt":1,"batches":1,"cursor":{"kind":"integer","value":2},"fencing_token":1,"lag_seconds":0,"ops":{"upsert":2},"outcome":"committed","poller":"events","rows":2,"rows_waiting":0}`,
		`200 {"batches":0,"cursor":{"kind":"integer","value":2},"fencing_token":1,"lag_seconds":0,"outcome":"idle","poller":"events","rows":0,"rows_waiting":0}`,
	} {
		resp, err := http.Post(host.URL+"/events", "application/json", strings.NewReader(invocation))
		if err != nil {
			t.Fatal(err)
		}
		var reply struct{ ReturnValue map[string]any }
		err = json.NewDecoder(resp.Body).Decode(&reply)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		delete(reply.ReturnValue, "duration_ms")
		summary, _ := json.Marshal(reply.ReturnValue)
		if got := fmt.Sprint(resp.StatusCode, " ", string(summary)); got != want {
			t.Errorf("reply %d:\n got %s\nwant %s", i+1, got, want)
		}
	}
}
