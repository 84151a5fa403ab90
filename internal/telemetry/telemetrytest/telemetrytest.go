// Package telemetrytest reads what the handler's telemetry recorded, for tests: spans from the
// SDK's in-memory recorder, metric values from a reader, and OTLP export requests received by a
// test server (OTLP/HTTP or OTLP/gRPC).
package telemetrytest

import (
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // the server takes gzip-compressed requests
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
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

// NewGRPCReceiver starts an OTLP/gRPC endpoint for tests (its URL is http://127.0.0.1:port),
// stopped when t ends: it keeps the export requests as Receiver does, with each call's metadata
// as its headers. Its Server holds the URL alone: not a server to Close or take a Client of.
func NewGRPCReceiver(t testing.TB) *Receiver {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := &Receiver{Server: &httptest.Server{URL: "http://" + lis.Addr().String()}}
	srv := grpc.NewServer(grpc.StatsHandler(encodings{}))
	coltrace.RegisterTraceServiceServer(srv, grpcTraces{rc: rc})
	colmetric.RegisterMetricsServiceServer(srv, grpcMetrics{rc: rc})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return rc
}

// keep records a gRPC call's metadata as headers and hands the receiver over, locked.
func (rc *Receiver) keep(ctx context.Context) func() {
	rc.mu.Lock()
	md, _ := metadata.FromIncomingContext(ctx)
	h := http.Header{}
	for k, vs := range md {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	if enc, ok := ctx.Value(encodingKey{}).(*string); ok && *enc != "" {
		h.Set("Grpc-Encoding", *enc) // gRPC keeps its own headers out of the metadata
	}
	rc.headers = append(rc.headers, h)
	return rc.mu.Unlock
}

// encodings notes each call's compression (its grpc-encoding) in the call's context.
type encodings struct{}

type encodingKey struct{}

func (encodings) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, encodingKey{}, new(string))
}

func (encodings) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if in, ok := s.(*stats.InHeader); ok {
		if enc, ok := ctx.Value(encodingKey{}).(*string); ok {
			*enc = in.Compression
		}
	}
}

func (encodings) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (encodings) HandleConn(context.Context, stats.ConnStats) {}

type grpcTraces struct {
	rc *Receiver
	coltrace.UnimplementedTraceServiceServer
}

func (g grpcTraces) Export(ctx context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	defer g.rc.keep(ctx)()
	g.rc.traces = append(g.rc.traces, req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

type grpcMetrics struct {
	rc *Receiver
	colmetric.UnimplementedMetricsServiceServer
}

func (g grpcMetrics) Export(ctx context.Context, req *colmetric.ExportMetricsServiceRequest) (*colmetric.ExportMetricsServiceResponse, error) {
	defer g.rc.keep(ctx)()
	g.rc.metrics = append(g.rc.metrics, req)
	return &colmetric.ExportMetricsServiceResponse{}, nil
}

// Received returns the requests received so far and their headers.
func (rc *Receiver) Received() ([]*coltrace.ExportTraceServiceRequest, []*colmetric.ExportMetricsServiceRequest, []http.Header) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.traces, rc.metrics, rc.headers
}
