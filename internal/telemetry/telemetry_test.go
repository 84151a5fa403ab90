package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/pseudotrigger/pseudotrigger/internal/telemetry/telemetrytest"
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
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, want: Signals{true, true}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
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

// TestSetupRefusedLeavesNoOp: a setting Setup cannot honour is an error naming it, and
// OpenTelemetry's globals are left as they were: nothing half on. (Before TestSetupExportsOverOTLP,
// which installs them.)
func TestSetupRefusedLeavesNoOp(t *testing.T) {
	tp, mp := otel.GetTracerProvider(), otel.GetMeterProvider()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "sometimes")
	_, shutdown, err := Setup(context.Background(), os.Getenv, "app", "i", "v", slog.New(slog.DiscardHandler))
	if !errors.Is(err, ErrSetting) || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=sometimes") {
		t.Fatalf("Setup: %v", err)
	}
	if Enabled() || otel.GetTracerProvider() != tp || otel.GetMeterProvider() != mp || shutdown(context.Background()) != nil {
		t.Fatal("a refused Setup changed OpenTelemetry's globals")
	}
}

// TestSetupExportsOverOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, Setup installs providers that
// send spans and metrics to it over OTLP/HTTP (protobuf), with the app's resource; the shutdown
// flushes them.
func TestSetupExportsOverOTLP(t *testing.T) {
	receiver := telemetrytest.NewReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "X-Tenant=t1%2Dsecret")
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION", "base2_exponential_bucket_histogram")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("WEBSITE_SITE_NAME", "orders-app")
	logs := &testenv.Buffer{}
	got, shutdown, err := Setup(context.Background(), os.Getenv, "orders-app", "instance-7", "v1.2.3", slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil || got != (Signals{true, true}) || !Enabled() {
		t.Fatalf("Setup: %+v %v (enabled %v)", got, err, Enabled())
	}
	if !strings.Contains(logs.String(), `"msg":"OpenTelemetry exports over OTLP"`) || !strings.Contains(logs.String(), `"service_name":"orders-app"`) ||
		!strings.Contains(logs.String(), `"settings":["OTEL_EXPORTER_OTLP_ENDPOINT","OTEL_EXPORTER_OTLP_HEADERS","OTEL_EXPORTER_OTLP_COMPRESSION",`+
			`"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE","OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"]`) || strings.Contains(logs.String(), "t1-secret") {
		t.Fatalf("start-up line: %s", logs)
	}
	_, span := Start(ActiveTracer(nil), context.Background(), "tick orders")
	span.End()
	Global().Rows.Add(context.Background(), 7, metric.WithAttributes(Poller.String("orders"), Op.String("insert")))
	Global().TickDuration.Record(context.Background(), 0.25, metric.WithAttributes(Poller.String("orders"), Outcome.String("committed")))
	Global().Lag.Record(context.Background(), 1.5, metric.WithAttributes(Poller.String("orders")))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	traces, metrics, headers := receiver.Received()
	for _, h := range headers {
		if h.Get("Content-Type") != "application/x-protobuf" || h.Get("X-Tenant") != "t1-secret" || h.Get("Content-Encoding") != "gzip" {
			t.Errorf("an export's headers: %v", h)
		}
	}
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
	found := map[string]bool{}
	for _, rm := range metrics {
		for _, sm := range rm.ResourceMetrics {
			if v := sm.Resource.Attributes; len(v) == 0 {
				t.Fatalf("metrics without their resource")
			}
			for _, s := range sm.ScopeMetrics {
				if s.Scope.Name != Scope {
					t.Fatalf("metrics of scope %q", s.Scope.Name)
				}
				for _, m := range s.Metrics {
					switch m.Name {
					case "pseudotrigger.rows":
						sum := m.GetSum()
						p := sum.GetDataPoints()[0]
						found[m.Name] = p.GetAsInt() == 7 && m.Unit == "{row}" && sum.IsMonotonic &&
							sum.AggregationTemporality == metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA &&
							len(p.Attributes) == 2 && p.TimeUnixNano > 0
					case "pseudotrigger.tick.duration":
						h := m.GetExponentialHistogram()
						found[m.Name] = h != nil && h.DataPoints[0].Count == 1 && h.DataPoints[0].GetSum() == 0.25 && h.DataPoints[0].GetMax() == 0.25 &&
							h.AggregationTemporality == metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
					case "pseudotrigger.lag":
						found[m.Name] = m.GetGauge().GetDataPoints()[0].GetAsDouble() == 1.5 && m.Unit == "s"
					}
				}
			}
		}
	}
	if !found["pseudotrigger.rows"] || !found["pseudotrigger.tick.duration"] || !found["pseudotrigger.lag"] {
		t.Fatalf("the rows counter (7, delta), the tick duration (an exponential histogram) and the lag gauge, as exported: %v (%v)", found, metrics)
	}
}

// TestExportRefused: an export the endpoint refuses (400) is an error naming the endpoint, logged
// as at most 300 bytes of printable text (the SDK's error carries the answer's body, here 4 KiB
// with a NUL), and a setting the SDK would pass over (or send without a word) is refused, naming
// its variable.
func TestExportRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("no such tenant\x00" + strings.Repeat("x", 4096)))
	}))
	defer srv.Close()
	env := map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": srv.URL + "/otlp/traces", "OTEL_EXPORTER_OTLP_TIMEOUT": "1500"}
	c, err := readOTLP(func(k string) string { return env[k] }, "traces")
	if err != nil {
		t.Fatal(err)
	}
	exp, spans := spanExporter(t, c)
	err = exp.ExportSpans(context.Background(), spans)
	if logged := exportOf(err); err == nil || !strings.Contains(logged, "400") || !strings.Contains(logged, srv.URL+"/otlp/traces") ||
		strings.Contains(logged, "\x00") || len(logged) > 303 {
		t.Errorf("a refused export: %v (logged as %q)", err, logged)
	}
	for name, bad := range map[string]map[string]string{
		"OTEL_EXPORTER_OTLP_TIMEOUT":                                                       {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "soon"},
		"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION":                                            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "zstd"},
		"OTEL_EXPORTER_OTLP_HEADERS":                                                       {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"},
		"OTEL_EXPORTER_OTLP_CLIENT_KEY":                                                    {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_CLIENT_KEY": "/k.pem"},
		"OTEL_EXPORTER_OTLP_CERTIFICATE":                                                   {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:4318", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent.pem"},
		"OTEL_EXPORTER_OTLP_ENDPOINT must be":                                              {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"},
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT has a query":                                   {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://c/v1/traces?api-key=k1"},
		"OTEL_EXPORTER_OTLP_ENDPOINT has a query":                                          {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://user:pw@c:4318"},
		"OTEL_EXPORTER_OTLP_CERTIFICATE is set but OTEL_EXPORTER_OTLP_ENDPOINT is http://": {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/ca.pem"},
		"OTEL_EXPORTER_OTLP_HEADERS:":                                                      {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=b", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"},
	} {
		if _, err := readOTLP(func(k string) string { return bad[k] }, "traces"); !errors.Is(err, ErrSetting) || !strings.Contains(err.Error(), name) {
			t.Errorf("%v: %v, want an error naming %s", bad, err, name)
		}
	}
}

// TestMetricTemporality: counters and histograms follow the preference; gauges are delta under
// every preference, so that an instance's last lag is not exported again once it stopped
// measuring (a cumulative gauge repeats its last value at every export).
func TestMetricTemporality(t *testing.T) {
	for pref, counter := range map[string]metricdata.Temporality{
		"": metricdata.CumulativeTemporality, "cumulative": metricdata.CumulativeTemporality,
		"delta": metricdata.DeltaTemporality, "lowmemory": metricdata.DeltaTemporality,
	} {
		temporality, _, err := metricSelectors(func(k string) string {
			return map[string]string{"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": pref}[k]
		})
		if err != nil {
			t.Fatal(err)
		}
		if temporality(sdkmetric.InstrumentKindCounter) != counter || temporality(sdkmetric.InstrumentKindHistogram) != counter ||
			temporality(sdkmetric.InstrumentKindGauge) != metricdata.DeltaTemporality ||
			temporality(sdkmetric.InstrumentKindUpDownCounter) != metricdata.CumulativeTemporality {
			t.Errorf("preference %q: counter %v, gauge %v", pref, temporality(sdkmetric.InstrumentKindCounter), temporality(sdkmetric.InstrumentKindGauge))
		}
	}
}

func exportOf(err error) string {
	if err == nil {
		return ""
	}
	return exportError(err)
}

// TestExportersOverGRPC: with OTEL_EXPORTER_OTLP_PROTOCOL=grpc the endpoint is the collector's
// gRPC address as it is (no /v1/ path), and spans and metrics reach an OTLP/gRPC receiver with the
// headers as metadata, gzip-compressed, with the chosen temporality.
func TestExportersOverGRPC(t *testing.T) {
	receiver := telemetrytest.NewGRPCReceiver(t)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.URL, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_EXPORTER_OTLP_HEADERS": "X-Tenant=t1%2Dsecret", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
		"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "delta"}
	getenv := func(k string) string { return env[k] }
	if s, err := Wanted(getenv); err != nil || s != (Signals{true, true}) {
		t.Fatalf("Wanted: %+v %v", s, err)
	}
	ctx := context.Background()
	tc, err := readOTLP(getenv, "traces")
	if err != nil || tc.endpoint != receiver.URL || tc.protocol != "grpc" {
		t.Fatalf("traces: %+v %v", tc, err)
	}
	spans, err := newSpanExporter(ctx, tc)
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	_, span := tp.Tracer(Scope).Start(ctx, "tick orders")
	span.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	mc, err := readOTLP(getenv, "metrics")
	if err != nil {
		t.Fatal(err)
	}
	points, err := newMetricExporter(ctx, getenv, mc)
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(points)))
	rows, _ := mp.Meter(Scope).Int64Counter("pseudotrigger.rows")
	rows.Add(ctx, 7)
	if err := mp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	traces, metrics, headers := receiver.Received()
	if len(traces) != 1 || traces[0].ResourceSpans[0].ScopeSpans[0].Spans[0].Name != "tick orders" || len(metrics) != 1 {
		t.Fatalf("the receiver got %d trace and %d metric requests: %v", len(traces), len(metrics), traces)
	}
	sum := metrics[0].ResourceMetrics[0].ScopeMetrics[0].Metrics[0].GetSum()
	if sum.GetDataPoints()[0].GetAsInt() != 7 || sum.AggregationTemporality != metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA {
		t.Fatalf("rows: %v", sum)
	}
	for _, h := range headers {
		if h.Get("X-Tenant") != "t1-secret" || h.Get("Grpc-Encoding") != "gzip" || !strings.HasPrefix(h.Get("Content-Type"), "application/grpc") {
			t.Errorf("a call's metadata: %v", h)
		}
	}
}

// TestExportRetries: an export answered 503 (with Retry-After) and 429 is sent again until it is
// accepted; one never accepted gives up within OTEL_EXPORTER_OTLP_TIMEOUT, not the SDK's minute.
func TestExportRetries(t *testing.T) {
	var mu sync.Mutex
	var answers []int
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		code := http.StatusServiceUnavailable
		if len(answers) > 0 {
			code, answers = answers[0], answers[1:]
		}
		mu.Unlock()
		if code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "0")
		}
		w.WriteHeader(code)
	}))
	defer srv.Close()
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_TIMEOUT": "1500"}
	c, err := readOTLP(func(k string) string { return env[k] }, "traces")
	if err != nil {
		t.Fatal(err)
	}
	exp, spans := spanExporter(t, c)
	for _, c := range []struct {
		answers []int
		calls   int
		fails   bool
	}{
		{[]int{503, 429, 200}, 3, false},
		{nil, 0, true}, // 503 every time
	} {
		mu.Lock()
		answers, calls = c.answers, 0
		mu.Unlock()
		start := time.Now()
		err := exp.ExportSpans(context.Background(), spans)
		took := time.Since(start)
		mu.Lock()
		n := calls
		mu.Unlock()
		if (err != nil) != c.fails || (c.calls > 0 && n != c.calls) || took > 5*time.Second {
			t.Errorf("answers %v: %v after %d calls in %v; want failing %v after %d calls within the 1.5 s timeout", c.answers, err, n, took, c.fails, c.calls)
		}
	}
}

// spanExporter is the span exporter of c, shut down when t ends, and a span to export.
func spanExporter(t *testing.T, c *otlpConfig) (sdktrace.SpanExporter, []sdktrace.ReadOnlySpan) {
	t.Helper()
	exp, err := newSpanExporter(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter()))
	_, span := tp.Tracer("t").Start(context.Background(), "s")
	span.End()
	return exp, []sdktrace.ReadOnlySpan{span.(sdktrace.ReadOnlySpan)}
}

// TestIdleMetricsNotSent: an export with no metric (what the periodic reader hands over from an
// idle handler) sends nothing; one with a metric is sent.
func TestIdleMetricsNotSent(t *testing.T) {
	receiver := telemetrytest.NewReceiver(t)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.URL}
	c, err := readOTLP(func(k string) string { return env[k] }, "metrics")
	if err != nil {
		t.Fatal(err)
	}
	e, err := newMetricExporter(context.Background(), func(k string) string { return env[k] }, c)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	if err := e.Export(context.Background(), &metricdata.ResourceMetrics{}); err != nil {
		t.Fatal(err)
	}
	if _, got, _ := receiver.Received(); len(got) != 0 {
		t.Fatalf("an empty export sent %d requests", len(got))
	}
	rm := &metricdata.ResourceMetrics{ScopeMetrics: []metricdata.ScopeMetrics{{Metrics: []metricdata.Metrics{{Name: "m",
		Data: metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{{Value: 1}}}}}}}}
	if err := e.Export(context.Background(), rm); err != nil {
		t.Fatal(err)
	}
	if _, got, _ := receiver.Received(); len(got) != 1 {
		t.Fatalf("an export of a metric sent %d requests", len(got))
	}
}

// TestSDKLogRedacted: what the SDK logs through the logger Setup gives it (logr over the
// handler's slog) has its strings and errors redacted, and goes to the handler's log.
func TestSDKLogRedacted(t *testing.T) {
	var buf testenv.Buffer
	l := logr.FromSlogHandler(redacting{slog.NewJSONHandler(&buf, nil)})
	l.WithValues("header", "x-key=AccountKey=abc123secret").Error(errors.New("parse AccountKey=def456secret"), "could not parse OTEL_EXPORTER_OTLP_HEADERS", "value", "AccountKey=ghi789secret")
	out := buf.String()
	if !strings.Contains(out, "could not parse OTEL_EXPORTER_OTLP_HEADERS") || strings.Contains(out, "secret") {
		t.Fatalf("logged: %s", out)
	}
}
