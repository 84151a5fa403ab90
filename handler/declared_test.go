package handler_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/declared"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestDeclaredPollers: pollers declared as folders run and show in the status like Go ones; a
// bad poller.json fails that poller alone, its invocations and its status naming the file and
// the field.
func TestDeclaredPollers(t *testing.T) {
	var hits atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hits.Add(1)
	}))
	defer hook.Close()
	root := t.TempDir()
	for name, spec := range map[string]string{
		"widgets": `{"source":{"table":"t","columns":["id","v"],"key":["id"],"cursor":{"kind":"integer","column":"id"}},"sink":{"type":"webhook","url":"%HOOK%"}}`,
		"broken":  `{"source":{"table":"t","columns":["id"],"key":["id"],"cursor":{"kind":"integer","column":"id"}},"sink":{"type":"storagequeue","connection":"Q","hub":"h"}}`,
	} {
		declarePoller(t, root, name, spec)
	}
	dsn := filepath.Join(t.TempDir(), "t.db")
	testenv.DB(t, "sqlite", dsn, `CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')`)
	env := map[string]string{
		"AzureWebJobsScriptRoot": root, // where New finds the declared pollers
		"WIDGETS_DB_DRIVER":      "sqlite", "WIDGETS_DB_CONNECTION": dsn, "HOOK": hook.URL,
		"BROKEN_DB_DRIVER": "sqlite", "BROKEN_DB_CONNECTION": dsn,
	}
	logs := &testenv.Buffer{}
	app := handler.NewForTest(t, handler.Options{
		Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		Pollers: []*poller.Poller{def("good", new(int))},
	}, handler.Internals{Store: memstore.New(nil), NoProbe: true})
	srv := httptest.NewServer(app.Routes())
	defer srv.Close()
	// The start-up line of a declared poller says where its changes go.
	var line map[string]any
	for _, l := range logLines(t, logs, "poller") {
		if l["poller"] == "widgets" {
			line = l
		}
	}
	if line == nil || line["delivers_to"] != "POST "+hook.URL {
		t.Fatalf("widgets' start-up line: %v", line)
	}

	if status, m, _ := post(t, srv.URL+"/widgets", strings.ReplaceAll(body, `"good"`, `"widgets"`)); status != 200 || hits.Load() != 3 {
		t.Fatalf("POST /widgets: %d %v; the webhook got %d rows, want 3", status, m, hits.Load())
	}
	status, m, _ := post(t, srv.URL+"/broken", strings.ReplaceAll(body, `"good"`, `"broken"`))
	if msg, _ := m["error"].(string); status != 500 || !strings.Contains(msg, "broken/poller.json: sink.hub") {
		t.Fatalf("POST /broken: %d %v; want 500 naming broken/poller.json and sink.hub", status, m)
	}
	_, page := get(t, srv.URL+"/api/status?format=json", "")
	report := decodeReport(t, page)
	seen := map[string]string{}
	for _, r := range report.Pollers {
		seen[r.Poller] = r.Health + ": " + r.HealthReason
	}
	if len(seen) != 3 || !strings.Contains(seen["broken"], "broken/poller.json: sink.hub") || strings.HasPrefix(seen["widgets"], "misconfigured") {
		t.Fatalf("status rows: %v", seen)
	}
}

// declarePoller writes the folder of a poller declared in root: its function.json and its
// poller.json, spec.
func declarePoller(t *testing.T, root, name, spec string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, name), 0o755); err != nil {
		t.Fatal(err)
	}
	for file, content := range map[string]string{"function.json": `{"bindings":[]}`, "poller.json": spec} {
		if err := os.WriteFile(filepath.Join(root, name, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPollerDeclaredTwice: New fails, naming the folder it read and the poller, when a Go
// poller's name is declared as a folder too (the binary reports it and stops).
func TestPollerDeclaredTwice(t *testing.T) {
	root := t.TempDir()
	declarePoller(t, root, "good", `{"source":{"table":"t","columns":["id"],"key":["id"],"cursor":{"kind":"integer","column":"id"}},"sink":{"type":"webhook","url":"http://127.0.0.1:1"}}`)
	app, err := handler.New(handler.Options{
		Getenv: func(k string) string { return map[string]string{"AzureWebJobsScriptRoot": root}[k] }, Logger: slog.New(slog.DiscardHandler),
		Pollers: []*poller.Poller{def("good", new(int))},
	})
	if app != nil || !errors.Is(err, declared.ErrConflict) || !strings.Contains(err.Error(), root) || !strings.Contains(err.Error(), "good/poller.json declares it again") {
		t.Fatalf("New: %v, %v", app, err)
	}
}
