package handler_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/telemetry/telemetrytest"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// telemetryWorld is a declared poller "traced" with a webhook sink, on Azurite and SQLite (5
// rows), served by an App given opts' providers.
type telemetryWorld struct {
	srv     *httptest.Server
	hook    *httptest.Server
	db      *sql.DB
	mu      sync.Mutex
	parents []string // each webhook request's traceparent
	failing atomic.Bool
}

func newTelemetryWorld(t *testing.T, opts handler.Options) *telemetryWorld {
	t.Helper()
	w := &telemetryWorld{}
	w.hook = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.mu.Lock()
		w.parents = append(w.parents, r.Header.Get("traceparent"))
		w.mu.Unlock()
		if w.failing.Load() {
			http.Error(rw, "down for maintenance", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(w.hook.Close)
	root := t.TempDir()
	declarePoller(t, root, "traced", `{"source":{"table":"t","columns":["id","v"],"key":["id"],"cursor":{"kind":"integer","column":"id"}},"sink":{"type":"webhook","url":"%HOOK%"}}`)
	dsn := filepath.Join(t.TempDir(), "t.db")
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w.db = db
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e')`); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AzureWebJobsScriptRoot": root, "StateStorage": testenv.Azurite(t), "POLLER_APP_NAME": testenv.Name("otel-"),
		"TRACED_DB_DRIVER": "sqlite", "TRACED_DB_CONNECTION": dsn, "TRACED_BATCH_SIZE": "2", "HOOK": w.hook.URL}
	opts.Getenv, opts.Logger = func(k string) string { return env[k] }, slog.New(slog.NewJSONHandler(io.Discard, nil))
	w.srv = httptest.NewServer(handler.NewForTest(t, opts, handler.Internals{NoProbe: true}).Routes())
	t.Cleanup(w.srv.Close)
	return w
}

// invoke POSTs a timer invocation of traced with the traceparent header (none when "").
func (w *telemetryWorld) invoke(t *testing.T, traceparent string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, w.srv.URL+"/traced", strings.NewReader(strings.ReplaceAll(body, `"good"`, `"traced"`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Azure-Functions-InvocationId", "inv-"+traceparent)
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// takeParents returns the traceparents the webhook got since the last call.
func (w *telemetryWorld) takeParents() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	got := w.parents
	w.parents = nil
	return got
}

// The host's invocation, as .NET's HttpClient sends it under an Activity.
const hostTrace, hostSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"

// TestTelemetryFromHostToSink: a declared poller with a webhook sink, on Azurite and SQLite, with
// the SDK's in-memory recorder and reader. The tick continues the trace context the host sends
// (a traceparent header), the webhook's requests carry the send span's, and the metrics count
// what the ticks did.
func TestTelemetryFromHostToSink(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	w := newTelemetryWorld(t, handler.Options{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	hook, db := w.hook, w.db
	if status := w.invoke(t, "00-"+hostTrace+"-"+hostSpan+"-01"); status != 200 {
		t.Fatalf("tick: %d", status)
	}
	ended := spans.Ended()
	var tick sdktrace.ReadOnlySpan
	for _, s := range ended {
		if s.Name() == "tick traced" {
			tick = s
		}
	}
	if tick == nil {
		t.Fatalf("no tick span among %d", len(ended))
	}
	if tick.SpanContext().TraceID().String() != hostTrace || tick.Parent().SpanID().String() != hostSpan || !tick.Parent().IsRemote() {
		t.Fatalf("the tick's span does not continue the host's: trace %s, parent %s", tick.SpanContext().TraceID(), tick.Parent().SpanID())
	}
	// Each batch's deliver span has a send span, whose context the webhook's requests carry.
	sends := map[string]sdktrace.ReadOnlySpan{} // by span id
	delivers := 0
	for _, s := range ended {
		switch s.Name() {
		case "deliver":
			if s.Parent().SpanID() != tick.SpanContext().SpanID() {
				t.Fatalf("a deliver span's parent is %s, not the tick", s.Parent().SpanID())
			}
			delivers++
		case "send " + hook.URL:
			if s.SpanKind() != trace.SpanKindProducer {
				t.Fatalf("the send span's kind: %v", s.SpanKind())
			}
			sends[s.SpanContext().SpanID().String()] = s
		}
	}
	if delivers != 3 || len(sends) != 3 {
		t.Fatalf("%d deliver spans and %d send spans for 5 rows in batches of 2: %v", delivers, len(sends), telemetrytest.Names(ended))
	}
	got := w.takeParents()
	if len(got) != 5 {
		t.Fatalf("the webhook got %d requests", len(got))
	}
	perSend := map[string]int{}
	for _, tp := range got {
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || parts[1] != hostTrace || sends[parts[2]] == nil {
			t.Fatalf("a webhook request's traceparent %q: not the host's trace and a send span", tp)
		}
		perSend[parts[2]]++
	}
	for id, s := range sends {
		if n := telemetrytest.Attrs(s)["messaging.batch.message_count"]; n != int64(perSend[id]) || telemetrytest.Attrs(s)["url.full"] != hook.URL || telemetrytest.Attrs(s)["http.request.method"] != "POST" {
			t.Fatalf("send span %s, which %d requests carried: %v", id, perSend[id], s.Attributes())
		}
	}

	// A webhook that fails: the send, deliver and tick spans are errors; the error is counted.
	w.failing.Store(true)
	if _, err := db.Exec(`INSERT INTO t VALUES (6, 'f')`); err != nil {
		t.Fatal(err)
	}
	if status := w.invoke(t, ""); status != 500 {
		t.Fatalf("failing tick: %d", status)
	}
	ended = spans.Ended()
	last := ended[len(ended)-1]
	if last.Name() != "tick traced" || last.Parent().IsValid() || last.Status().Code != codes.Error || telemetrytest.Attrs(last)["error.type"] != "handler" {
		t.Fatalf("the failed tick's span: %s parent %v status %+v attributes %v", last.Name(), last.Parent(), last.Status(), last.Attributes())
	}
	for _, s := range ended {
		if s.SpanContext().TraceID() == last.SpanContext().TraceID() && (s.Name() == "deliver" || strings.HasPrefix(s.Name(), "send ")) && s.Status().Code != codes.Error {
			t.Fatalf("span %s of the failed tick has status %+v", s.Name(), s.Status())
		}
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sums := telemetrytest.Values(t, rm)
	if sums["pseudotrigger.rows{pseudotrigger.op=upsert,pseudotrigger.poller=traced}"] != 5 ||
		sums["pseudotrigger.batches{pseudotrigger.poller=traced}"] != 3 ||
		sums["pseudotrigger.errors{error.type=handler,pseudotrigger.poller=traced}"] != 1 {
		t.Fatalf("counters: %v", sums)
	}
}

// TestTelemetryHostNotSampled: a host traceparent whose sampled flag is off is not continued: the
// tick starts its own trace.
func TestTelemetryHostNotSampled(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	w := newTelemetryWorld(t, handler.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))})
	if status := w.invoke(t, "00-"+hostTrace+"-"+hostSpan+"-00"); status != 200 {
		t.Fatalf("tick: %d", status)
	}
	ended := spans.Ended()
	last := ended[len(ended)-1]
	if last.Name() != "tick traced" || last.Parent().IsValid() || last.SpanContext().TraceID().String() == hostTrace || !last.SpanContext().IsSampled() {
		t.Fatalf("the tick's span: %s, parent %v, trace %s", last.Name(), last.Parent(), last.SpanContext().TraceID())
	}
}

// TestTelemetryOff: without a tracer provider or telemetry.Setup, the host's traceparent is not
// read and no message carries one.
func TestTelemetryOff(t *testing.T) {
	w := newTelemetryWorld(t, handler.Options{})
	if status := w.invoke(t, "00-"+hostTrace+"-"+hostSpan+"-01"); status != 200 {
		t.Fatalf("tick: %d", status)
	}
	got := w.takeParents()
	if len(got) != 5 {
		t.Fatalf("the webhook got %d requests", len(got))
	}
	for _, tp := range got {
		if tp != "" {
			t.Fatalf("a webhook request carries traceparent %q with telemetry off", tp)
		}
	}
}
