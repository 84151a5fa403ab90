package telemetry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestWanted: what the standard variables ask for, and the settings refused with their name.
func TestWanted(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want Signals
		err  string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, want: Signals{true, true}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, want: Signals{Traces: true}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://collector:4318/v1/metrics"}, want: Signals{Metrics: true}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_METRICS_EXPORTER": "none"}, want: Signals{Traces: true}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, want: Signals{true, true}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
			"OTEL_METRICS_EXPORTER": "none"}, want: Signals{Traces: true}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER=zipkin"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_METRICS_EXPORTER": "prometheus"}, err: "OTEL_METRICS_EXPORTER=prometheus"},
	} {
		got, err := Wanted(func(k string) string { return c.env[k] })
		if c.err != "" {
			if !errors.Is(err, ErrSetting) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: %v, want an error naming %s", c.env, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v: %+v %v, want %+v", c.env, got, err, c.want)
		}
	}
}

// TestSetupExportsOverOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, Setup installs providers that
// send spans and metrics to it over OTLP/HTTP (protobuf), with the app's resource; the shutdown
// flushes them.
func TestSetupExportsOverOTLP(t *testing.T) {
	var (
		mu      sync.Mutex
		traces  []*coltrace.ExportTraceServiceRequest
		metrics []*colmetric.ExportMetricsServiceRequest
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Type") != "application/x-protobuf" || r.Header.Get("X-Tenant") != "t1" {
			t.Errorf("%s: content type %q, headers %v", r.URL.Path, r.Header.Get("Content-Type"), r.Header)
		}
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/v1/traces":
			var req coltrace.ExportTraceServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				t.Errorf("traces: %v", err)
			}
			traces = append(traces, &req)
		case "/v1/metrics":
			var req colmetric.ExportMetricsServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				t.Errorf("metrics: %v", err)
			}
			metrics = append(metrics, &req)
		default:
			t.Errorf("OTLP request to %s", r.URL.Path)
		}
	}))
	defer receiver.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "X-Tenant=t1")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("WEBSITE_SITE_NAME", "orders-app")
	logs := &testenv.Buffer{}
	got, shutdown, err := Setup(context.Background(), os.Getenv, "orders-app", "instance-7", "v1.2.3", slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil || got != (Signals{true, true}) || !Enabled() {
		t.Fatalf("Setup: %+v %v (enabled %v)", got, err, Enabled())
	}
	if !strings.Contains(logs.String(), `"msg":"OpenTelemetry exports over OTLP"`) || !strings.Contains(logs.String(), `"service_name":"orders-app"`) {
		t.Fatalf("start-up line: %s", logs)
	}
	_, span := Tracer(nil).Start(context.Background(), "tick orders")
	span.End()
	Global().Rows.Add(context.Background(), 7, metric.WithAttributes(Poller.String("orders"), Op.String("insert")))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(traces) == 0 || len(metrics) == 0 {
		t.Fatalf("the receiver got %d trace and %d metric requests", len(traces), len(metrics))
	}
	rs := traces[0].ResourceSpans[0]
	res := map[string]string{}
	for _, kv := range rs.Resource.Attributes {
		res[kv.Key] = kv.Value.GetStringValue()
	}
	if res["service.name"] != "orders-app" || res["service.version"] != "v1.2.3" || res["service.instance.id"] != "instance-7" ||
		res["cloud.platform"] != "azure.functions" {
		t.Fatalf("resource %v", res)
	}
	if ss := rs.ScopeSpans[0]; ss.Scope.Name != Scope || ss.Spans[0].Name != "tick orders" {
		t.Fatalf("spans: scope %s, %v", ss.Scope.Name, ss.Spans)
	}
	found := false
	for _, rm := range metrics {
		for _, sm := range rm.ResourceMetrics {
			for _, s := range sm.ScopeMetrics {
				for _, m := range s.Metrics {
					if m.Name == "pseudotrigger.rows" && m.GetSum().GetDataPoints()[0].GetAsInt() == 7 && m.Unit == "{row}" {
						found = true
					}
				}
			}
		}
	}
	if !found {
		t.Fatalf("pseudotrigger.rows = 7 not among the metrics exported: %v", metrics)
	}
}
