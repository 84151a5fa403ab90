package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestTelemetryFlushedOnStop: the handler binary with OTEL_EXPORTER_OTLP_ENDPOINT exports its
// tick's spans and metrics over OTLP/HTTP; with export intervals of an hour, only the flush at
// a SIGTERM can have sent them.
func TestTelemetryFlushedOnStop(t *testing.T) {
	var (
		mu      sync.Mutex
		spans   = map[string]int{}   // span name -> how many
		rows    int64                // the tick span's pseudotrigger.rows
		metrics = map[string]int64{} // counter name -> its sum
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/v1/traces":
			var req coltrace.ExportTraceServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				t.Errorf("traces: %v", err)
			}
			for _, rs := range req.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					for _, s := range ss.Spans {
						spans[s.Name]++
						for _, a := range s.Attributes {
							if a.Key == "pseudotrigger.rows" && s.Name == "tick orders" {
								rows = a.Value.GetIntValue()
							}
						}
					}
				}
			}
		case "/v1/metrics":
			var req colmetric.ExportMetricsServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				t.Errorf("metrics: %v", err)
			}
			for _, rm := range req.ResourceMetrics {
				for _, sm := range rm.ScopeMetrics {
					for _, m := range sm.Metrics {
						for _, p := range m.GetSum().GetDataPoints() {
							metrics[m.Name] += p.GetAsInt()
						}
					}
				}
			}
		}
	}))
	defer receiver.Close()
	w := newWorld(t)
	w.insert(120)
	p := start(t, w.env("ORDERS_BATCH_SIZE=50", "OTEL_EXPORTER_OTLP_ENDPOINT="+receiver.URL,
		"OTEL_BSP_SCHEDULE_DELAY=3600000", "OTEL_METRIC_EXPORT_INTERVAL=3600000"))
	if r := p.tick(); r.status != 200 || r.outcome() != "committed" {
		t.Fatalf("tick: %d %s", r.status, r.raw)
	}
	if !strings.Contains(p.out.String(), `"msg":"OpenTelemetry exports over OTLP"`) {
		t.Fatalf("no start-up line for OpenTelemetry:\n%s", p.out.String())
	}
	mu.Lock()
	early := len(spans) + len(metrics)
	mu.Unlock()
	if early != 0 {
		t.Fatalf("exported before the stop, with hour-long intervals: spans %v, metrics %v", spans, metrics)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not exit within 30 s of SIGTERM")
	}
	mu.Lock()
	defer mu.Unlock()
	if spans["tick orders"] != 1 || rows != 120 || spans["deliver"] != 3 || metrics["pseudotrigger.rows"] != 120 || metrics["pseudotrigger.batches"] != 3 {
		t.Fatalf("after the stop: spans %v (the tick's rows %d), metrics %v; want one tick of 120 rows in 3 batches", spans, rows, metrics)
	}
}
