// Package telemetrytest reads what the handler's telemetry recorded, for tests: spans from the
// SDK's in-memory recorder, metric values from a reader, and OTLP/HTTP export requests received
// by a test server.
package telemetrytest

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Named returns the spans called name, in order.
func Named(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// Names lists the spans' names, in order.
func Names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}

// Attrs returns s's attributes by key.
func Attrs(s sdktrace.ReadOnlySpan) map[string]any {
	out := map[string]any{}
	for _, a := range s.Attributes() {
		out[string(a.Key)] = a.Value.AsInterface()
	}
	return out
}

// WantAttrs fails t unless s has each attribute of want with its value.
func WantAttrs(t testing.TB, s sdktrace.ReadOnlySpan, want map[string]any) {
	t.Helper()
	got := Attrs(s)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %s: %s = %v (%T), want %v (%T)", s.Name(), k, got[k], got[k], v, v)
		}
	}
}

// Values flattens rm to "name{k=v,...}" -> value: a sum's or gauge's value, a histogram's count.
func Values(t testing.TB, rm metricdata.ResourceMetrics) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	key := func(name string, set attribute.Set) string {
		return name + "{" + set.Encoded(attribute.DefaultEncoder()) + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Count)
				}
			default:
				t.Fatalf("metric %s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// Receiver is an OTLP/HTTP endpoint for tests: it decodes the export requests posted to
// /v1/traces and /v1/metrics (gzip or not) and keeps them, with their headers.
type Receiver struct {
	*httptest.Server
	mu      sync.Mutex
	traces  []*coltrace.ExportTraceServiceRequest
	metrics []*colmetric.ExportMetricsServiceRequest
	headers []http.Header
}

// NewReceiver starts a Receiver, closed when t ends.
func NewReceiver(t testing.TB) *Receiver {
	rc := &Receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Errorf("%s: not gzip: %v", r.URL.Path, err)
				return
			}
			body = zr
		}
		data, _ := io.ReadAll(body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.headers = append(rc.headers, r.Header.Clone())
		switch r.URL.Path {
		case "/v1/traces":
			var req coltrace.ExportTraceServiceRequest
			if err := proto.Unmarshal(data, &req); err != nil {
				t.Errorf("traces: %v", err)
			}
			rc.traces = append(rc.traces, &req)
		case "/v1/metrics":
			var req colmetric.ExportMetricsServiceRequest
			if err := proto.Unmarshal(data, &req); err != nil {
				t.Errorf("metrics: %v", err)
			}
			rc.metrics = append(rc.metrics, &req)
		default:
			t.Errorf("OTLP request to %s", r.URL.Path)
		}
	}))
	t.Cleanup(rc.Close)
	return rc
}

// Received returns the requests received so far and their headers.
func (rc *Receiver) Received() ([]*coltrace.ExportTraceServiceRequest, []*colmetric.ExportMetricsServiceRequest, []http.Header) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.traces, rc.metrics, rc.headers
}
