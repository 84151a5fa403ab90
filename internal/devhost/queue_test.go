package devhost

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/sink"
)

const devKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

func TestOverlayEnvironmentWins(t *testing.T) {
	values := map[string]string{"ChangesQueue": "UseDevelopmentStorage=true", "StateStorage": "UseDevelopmentStorage=true", "X": "file"}
	env := map[string]string{"ChangesQueue": "QueueEndpoint=http://127.0.0.1:1/devstoreaccount1;", "X": "", "ONLY_ENV": "e"}
	Overlay(values, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	want := map[string]string{"ChangesQueue": env["ChangesQueue"], "StateStorage": "UseDevelopmentStorage=true", "X": ""}
	if len(values) != len(want) {
		t.Fatalf("%v, want %v", values, want)
	}
	for k, v := range want {
		if values[k] != v {
			t.Errorf("%s = %q, want %q", k, values[k], v)
		}
	}
}

func TestMissing(t *testing.T) {
	got := Missing(map[string]string{"A": "1", "ORDERS_SCHEDULE": ""},
		map[string]string{"A": "2", "ORDERS_SCHEDULE": "x", "ORDERS_QUEUE_SCHEDULE": "y", "ChangesQueue": "z"})
	if want := []string{"ChangesQueue", "ORDERS_QUEUE_SCHEDULE"}; !slices.Equal(got, want) {
		t.Errorf("Missing = %v, want %v", got, want)
	}
	// The repository's own files: the example is a superset of nothing missing from itself.
	ex, err := LoadSettings("../../local.settings.json.example")
	if err != nil {
		t.Fatal(err)
	}
	if m := Missing(ex, ex); len(m) != 0 {
		t.Errorf("%v", m)
	}
}

func writePoller(t *testing.T, root, name, pollerJSON string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, name, "function.json"), []byte(`{"bindings":[{"type":"timerTrigger","direction":"in","name":"timer","schedule":"0 * * * * *"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if pollerJSON != "" {
		if err := os.WriteFile(filepath.Join(root, name, "poller.json"), []byte(pollerJSON), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStorageQueueDepth: the example's poller.json resolves to Azurite's default queue for
// UseDevelopmentStorage=true; a full connection string is followed to its QueueEndpoint, where
// one GetProperties gives the depth; a missing queue, a refusal and a missing setting are said
// without the key.
func TestStorageQueueDepth(t *testing.T) {
	// The repository's example, with the shorthand.
	qs, err := StorageQueues("../..", "orders-queue", map[string]string{"ChangesQueue": "UseDevelopmentStorage=true"})
	if err != nil || len(qs) != 1 {
		t.Fatalf("orders-queue: %v %v", qs, err)
	}
	q := qs[0]
	if q.Name != "orders-changes" || q.URL() != "http://127.0.0.1:10001/devstoreaccount1/orders-changes" {
		t.Errorf("orders-queue: queue %q at %s", q.Name, q.URL())
	}
	if !strings.Contains(sink.DevelopmentQueueConnectionString, "QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;") {
		t.Errorf("the shorthand no longer means 127.0.0.1:10001")
	}

	var calls []string
	status, count := http.StatusOK, "1500"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		if r.Header.Get("Authorization") == "" {
			t.Errorf("unsigned request")
		}
		if status != http.StatusOK {
			w.Header().Set("x-ms-error-code", map[int]string{404: "QueueNotFound", 403: "AuthorizationFailure"}[status])
			w.WriteHeader(status)
			return
		}
		w.Header().Set("x-ms-approximate-messages-count", count)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	root := t.TempDir()
	writePoller(t, root, "changes", `{"source":{"table":"orders","columns":["id","updated_at"],"key":["id"],"cursor":{"kind":"timestamp+pk","column":"updated_at"}},
"sink":{"type":"storagequeue","connection":"Q","queue":"orders-changes"}}`)
	writePoller(t, root, "hook", `{"source":{"table":"orders","columns":["id","updated_at"],"key":["id"],"cursor":{"kind":"timestamp+pk","column":"updated_at"}},
"sink":{"type":"webhook","url":"https://example.com/x"}}`)
	writePoller(t, root, "gocode", "")
	cs := "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" + devKey + ";BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;QueueEndpoint=" + srv.URL + "/devstoreaccount1;"
	values := map[string]string{"Q": cs}
	qs, err = StorageQueues(root, "changes", values)
	if err != nil || len(qs) != 1 {
		t.Fatalf("changes: %v %v", qs, err)
	}
	q = qs[0]
	ctx := context.Background()
	if got := q.Depth(ctx); got != "queue orders-changes holds 1500 messages" {
		t.Errorf("depth: %q", got)
	}
	if len(calls) != 1 || calls[0] != "GET /devstoreaccount1/orders-changes?comp=metadata" {
		t.Errorf("one GetProperties wanted, got %v", calls)
	}
	count = "1"
	if got := q.Depth(ctx); got != "queue orders-changes holds 1 message" {
		t.Errorf("depth: %q", got)
	}
	status = http.StatusNotFound
	if got := q.Depth(ctx); got != "queue orders-changes not created yet" {
		t.Errorf("missing queue: %q", got)
	}
	status = http.StatusForbidden
	if got := q.Depth(ctx); got != "queue orders-changes: depth unknown (HTTP 403 AuthorizationFailure)" {
		t.Errorf("refused: %q", got)
	}
	srv.Close()
	if got := q.Depth(ctx); got != "queue orders-changes: depth unknown (not reachable)" || strings.Contains(got, devKey) {
		t.Errorf("unreachable: %q", got)
	}

	// Not a storage queue, or no poller.json: nothing to show. A webhook's poller.json with an
	// error (an option of another sink, no url) says nothing of a queue either: the handler says
	// what is wrong with it on each tick. A storage queue's does say why its depth is not shown.
	writePoller(t, root, "hook-queue", `{"source":{"table":"orders","columns":["id","updated_at"],"key":["id"],"cursor":{"kind":"timestamp+pk","column":"updated_at"}},
"sink":{"type":"webhook","url":"https://example.com/x","queue":"q"}}`)
	writePoller(t, root, "hook-nourl", `{"source":{"table":"orders","columns":["id","updated_at"],"key":["id"],"cursor":{"kind":"timestamp+pk","column":"updated_at"}},
"sink":{"type":"webhook"}}`)
	writePoller(t, root, "queue-hub", `{"source":{"table":"orders","columns":["id","updated_at"],"key":["id"],"cursor":{"kind":"timestamp+pk","column":"updated_at"}},
"sink":{"type":"storagequeue","connection":"Q","queue":"q","hub":"h"}}`)
	if _, err := StorageQueues(root, "queue-hub", values); err == nil || !strings.HasPrefix(err.Error(), "queue-hub/poller.json: sink.hub") {
		t.Errorf("a storage queue's poller.json with an error: %v", err)
	}
	for _, name := range []string{"hook", "hook-queue", "hook-nourl", "gocode", "absent"} {
		if qs, err := StorageQueues(root, name, values); qs != nil || err != nil {
			t.Errorf("%s: %v %v, want nil, nil", name, qs, err)
		}
	}
	// A route's queues, each once (two values to one queue), in the file's order; a webhook of
	// the route has none.
	writePoller(t, root, "routed", `{"source":{"table":"orders","columns":["id","kind","updated_at"],"key":["id"],"cursor":{"kind":"timestamp+pk","column":"updated_at"}},
"route":{"column":"kind","sinks":{"b":{"type":"storagequeue","connection":"Q","queue":"bees"},"c":{"type":"webhook","url":"https://example.com/x"},"d":{"type":"storagequeue","connection":"Q","queue":"bees"}},
"default":{"type":"storagequeue","connection":"Q","queue":"others"}}}`)
	qs, err = StorageQueues(root, "routed", values)
	if err != nil || len(qs) != 2 || qs[0].Name != "bees" || qs[1].Name != "others" {
		t.Errorf("routed: %v %v, want the queues bees and others", qs, err)
	}
	// Unset connection: named, no secret. A connection string that is no such thing: redacted.
	if _, err := StorageQueues(root, "changes", map[string]string{}); err == nil || !strings.Contains(err.Error(), "Q__queueServiceUri") {
		t.Errorf("unset connection: %v", err)
	}
	bad := "AccountKey=" + devKey + ";"
	if _, err := StorageQueues(root, "changes", map[string]string{"Q": bad}); err == nil || strings.Contains(err.Error(), devKey) {
		t.Errorf("a bad connection string: %v", err)
	}
}
