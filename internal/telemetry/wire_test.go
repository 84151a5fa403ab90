package telemetry

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestWireTraces: what wire.go writes for spans decodes, with opentelemetry-proto's generated
// types, to the spans: ids, parent (remote), kind, times, attributes of every type, events,
// links, status and flags, grouped by resource and scope.
func TestWireTraces(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	res := resource.NewSchemaless(attribute.String("service.name", "orders-app"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res))
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{1, 2, 3}, SpanID: [8]byte{4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
	linked := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{9}, SpanID: [8]byte{8}, TraceFlags: trace.FlagsSampled})
	ctx, tick := tp.Tracer(Scope).Start(ctx, "tick orders", trace.WithSpanKind(trace.SpanKindServer), trace.WithLinks(trace.Link{SpanContext: linked, Attributes: []attribute.KeyValue{attribute.Int("n", 1)}}))
	tick.SetAttributes(attribute.String("s", "x"), attribute.Bool("b", true), attribute.Int64("i", -7), attribute.Float64("f", 1.5),
		attribute.StringSlice("ss", []string{"a", "b"}), attribute.Int64Slice("is", []int64{1, 2}))
	tick.AddEvent("lost", trace.WithAttributes(attribute.String("why", "expired")))
	_, send := tp.Tracer("github.com/pseudotrigger/pseudotrigger/sink").Start(ctx, "send q", trace.WithSpanKind(trace.SpanKindProducer))
	send.SetStatus(codes.Error, "refused")
	send.End()
	tick.End()
	spans := rec.Ended()

	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(traceRequest(spans), &req); err != nil {
		t.Fatal(err)
	}
	if len(req.ResourceSpans) != 1 || len(req.ResourceSpans[0].ScopeSpans) != 2 {
		t.Fatalf("%d resources, scopes %v", len(req.ResourceSpans), req.ResourceSpans)
	}
	rs := req.ResourceSpans[0]
	if kv := rs.Resource.Attributes; len(kv) != 1 || kv[0].Key != "service.name" || kv[0].Value.GetStringValue() != "orders-app" {
		t.Fatalf("resource %v", kv)
	}
	got := map[string]*tracepb.Span{}
	for _, ss := range rs.ScopeSpans {
		for _, s := range ss.Spans {
			got[ss.Scope.Name+" "+s.Name] = s
		}
	}
	ps, pt := got["github.com/pseudotrigger/pseudotrigger/sink send q"], got[Scope+" tick orders"]
	if ps == nil || pt == nil {
		t.Fatalf("spans %v", got)
	}
	for _, s := range spans {
		p := got[s.InstrumentationScope().Name+" "+s.Name()]
		tid, sid := s.SpanContext().TraceID(), s.SpanContext().SpanID()
		psid := s.Parent().SpanID()
		if string(p.TraceId) != string(tid[:]) || string(p.SpanId) != string(sid[:]) || string(p.ParentSpanId) != string(psid[:]) ||
			p.StartTimeUnixNano != uint64(s.StartTime().UnixNano()) || p.EndTimeUnixNano != uint64(s.EndTime().UnixNano()) ||
			int(p.Kind) != int(s.SpanKind()) {
			t.Errorf("span %s: %v", s.Name(), p)
		}
	}
	if pt.Flags != 0x301 || ps.Flags != 0x101 {
		t.Errorf("flags: tick %#x (remote parent), send %#x", pt.Flags, ps.Flags)
	}
	attrs := map[string]*commonpb.AnyValue{}
	for _, kv := range pt.Attributes {
		attrs[kv.Key] = kv.Value
	}
	if attrs["s"].GetStringValue() != "x" || !attrs["b"].GetBoolValue() || attrs["i"].GetIntValue() != -7 || attrs["f"].GetDoubleValue() != 1.5 ||
		len(attrs["ss"].GetArrayValue().GetValues()) != 2 || attrs["ss"].GetArrayValue().Values[1].GetStringValue() != "b" ||
		attrs["is"].GetArrayValue().Values[1].GetIntValue() != 2 {
		t.Errorf("attributes %v", pt.Attributes)
	}
	if len(pt.Events) != 1 || pt.Events[0].Name != "lost" || pt.Events[0].Attributes[0].Value.GetStringValue() != "expired" || pt.Events[0].TimeUnixNano == 0 {
		t.Errorf("events %v", pt.Events)
	}
	if len(pt.Links) != 1 || pt.Links[0].TraceId[0] != 9 || pt.Links[0].SpanId[0] != 8 || pt.Links[0].Attributes[0].Value.GetIntValue() != 1 {
		t.Errorf("links %v", pt.Links)
	}
	if ps.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || ps.Status.Message != "refused" || pt.Status.GetCode() != tracepb.Status_STATUS_CODE_UNSET {
		t.Errorf("status: send %v, tick %v", ps.Status, pt.Status)
	}
}

// TestWireMetrics: what wire.go writes for metrics decodes to the values recorded: an int
// counter, a float counter, gauges, an explicit histogram with its buckets, min and max.
func TestWireMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter(Scope)
	ctx := context.Background()
	rows, _ := m.Int64Counter("rows", metric.WithUnit("{row}"))
	secs, _ := m.Float64Counter("secs")
	lag, _ := m.Float64Gauge("lag")
	backlog, _ := m.Int64Gauge("backlog")
	dur, _ := m.Float64Histogram("dur", metric.WithExplicitBucketBoundaries(1, 10))
	poller := metric.WithAttributes(attribute.String("poller", "orders"))
	rows.Add(ctx, 5, poller)
	secs.Add(ctx, 0.25, poller)
	lag.Record(ctx, 2.5, poller)
	backlog.Record(ctx, 40, poller)
	for _, v := range []float64{0.5, 5, 50} {
		dur.Record(ctx, v, poller)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var req colmetric.ExportMetricsServiceRequest
	if err := proto.Unmarshal(metricsRequest(&rm), &req); err != nil {
		t.Fatal(err)
	}
	got := map[string]*metricpb.Metric{}
	for _, sm := range req.ResourceMetrics[0].ScopeMetrics {
		if sm.Scope.Name != Scope {
			t.Fatalf("scope %v", sm.Scope)
		}
		for _, m := range sm.Metrics {
			got[m.Name] = m
		}
	}
	p := got["rows"].GetSum().GetDataPoints()[0]
	if p.GetAsInt() != 5 || got["rows"].Unit != "{row}" || !got["rows"].GetSum().IsMonotonic || p.Attributes[0].Value.GetStringValue() != "orders" ||
		got["rows"].GetSum().AggregationTemporality != metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE || p.TimeUnixNano < uint64(time.Now().Add(-time.Minute).UnixNano()) {
		t.Errorf("rows %v", got["rows"])
	}
	if got["secs"].GetSum().GetDataPoints()[0].GetAsDouble() != 0.25 || got["lag"].GetGauge().GetDataPoints()[0].GetAsDouble() != 2.5 ||
		got["backlog"].GetGauge().GetDataPoints()[0].GetAsInt() != 40 {
		t.Errorf("secs %v, lag %v, backlog %v", got["secs"], got["lag"], got["backlog"])
	}
	h := got["dur"].GetHistogram().GetDataPoints()[0]
	if h.Count != 3 || h.GetSum() != 55.5 || h.GetMin() != 0.5 || h.GetMax() != 50 || len(h.ExplicitBounds) != 2 || h.ExplicitBounds[1] != 10 ||
		len(h.BucketCounts) != 3 || h.BucketCounts[0] != 1 || h.BucketCounts[1] != 1 || h.BucketCounts[2] != 1 {
		t.Errorf("dur %v", got["dur"])
	}
}
