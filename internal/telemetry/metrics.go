package telemetry

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"
)

// metricExporter is an sdkmetric.Exporter over OTLP/HTTP (otlp.go says why not otlpmetrichttp),
// with the temporality and histogram aggregation the standard variables choose.
type metricExporter struct {
	s           *sender
	temporality sdkmetric.TemporalitySelector
	exponential bool // histograms as base-2 exponential ones
}

// newMetricExporter reads OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE (cumulative, delta,
// lowmemory) and OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION
// (explicit_bucket_histogram, base2_exponential_bucket_histogram) beside the sender's variables.
func newMetricExporter(getenv func(string) string) (*metricExporter, error) {
	s, err := newSender(getenv, "metrics")
	if err != nil {
		return nil, err
	}
	// A gauge is exported only in the intervals it was recorded in (delta), whatever the
	// preference: OTLP's gauge has no temporality, and a cumulative one would repeat an
	// instance's last lag forever after another instance took the poller over.
	e := &metricExporter{s: s, temporality: func(k sdkmetric.InstrumentKind) metricdata.Temporality {
		if k == sdkmetric.InstrumentKindGauge {
			return metricdata.DeltaTemporality
		}
		return metricdata.CumulativeTemporality
	}}
	const tp = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"
	switch p := strings.ToLower(strings.TrimSpace(getenv(tp))); p {
	case "", "cumulative":
	case "delta":
		e.temporality = func(k sdkmetric.InstrumentKind) metricdata.Temporality {
			switch k {
			case sdkmetric.InstrumentKindCounter, sdkmetric.InstrumentKindObservableCounter, sdkmetric.InstrumentKindHistogram, sdkmetric.InstrumentKindGauge:
				return metricdata.DeltaTemporality
			}
			return metricdata.CumulativeTemporality
		}
	case "lowmemory":
		e.temporality = func(k sdkmetric.InstrumentKind) metricdata.Temporality {
			switch k {
			case sdkmetric.InstrumentKindCounter, sdkmetric.InstrumentKindHistogram, sdkmetric.InstrumentKindGauge:
				return metricdata.DeltaTemporality
			}
			return metricdata.CumulativeTemporality
		}
	default:
		return nil, fmt.Errorf("%w: %s=%s: cumulative, delta or lowmemory", ErrSetting, tp, p)
	}
	const ha = "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"
	switch a := strings.ToLower(strings.TrimSpace(getenv(ha))); a {
	case "", "explicit_bucket_histogram":
	case "base2_exponential_bucket_histogram":
		e.exponential = true
	default:
		return nil, fmt.Errorf("%w: %s=%s: explicit_bucket_histogram or base2_exponential_bucket_histogram", ErrSetting, ha, a)
	}
	return e, nil
}

func (e *metricExporter) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return e.temporality(k)
}

func (e *metricExporter) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	if e.exponential && k == sdkmetric.InstrumentKindHistogram {
		return sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}
	}
	return sdkmetric.DefaultAggregationSelector(k)
}

func (e *metricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	m := resourceMetrics(rm)
	if len(m.ScopeMetrics) == 0 {
		return nil
	}
	return e.s.send(ctx, []proto.Message{m})
}

func (e *metricExporter) ForceFlush(context.Context) error { return nil }

func (e *metricExporter) Shutdown(context.Context) error {
	e.s.client.CloseIdleConnections()
	return nil
}

// resourceMetrics is rm as OTLP's protobuf (the specification's data model: metrics.proto).
func resourceMetrics(rm *metricdata.ResourceMetrics) *metricpb.ResourceMetrics {
	out := &metricpb.ResourceMetrics{Resource: resourceProto(rm.Resource)}
	if rm.Resource != nil {
		out.SchemaUrl = rm.Resource.SchemaURL()
	}
	for _, sm := range rm.ScopeMetrics {
		s := &metricpb.ScopeMetrics{SchemaUrl: sm.Scope.SchemaURL, Scope: &commonpb.InstrumentationScope{
			Name: sm.Scope.Name, Version: sm.Scope.Version, Attributes: keyValues(sm.Scope.Attributes.ToSlice()),
		}}
		for _, m := range sm.Metrics {
			if pm := metricProto(m); pm != nil {
				s.Metrics = append(s.Metrics, pm)
			}
		}
		if len(s.Metrics) > 0 {
			out.ScopeMetrics = append(out.ScopeMetrics, s)
		}
	}
	return out
}

func resourceProto(r *resource.Resource) *resourcepb.Resource {
	if r == nil {
		return &resourcepb.Resource{}
	}
	return &resourcepb.Resource{Attributes: keyValues(r.Attributes())}
}

// metricProto is m as protobuf; nil for an aggregation it does not know.
func metricProto(m metricdata.Metrics) *metricpb.Metric {
	out := &metricpb.Metric{Name: m.Name, Description: m.Description, Unit: m.Unit}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		out.Data = &metricpb.Metric_Sum{Sum: &metricpb.Sum{IsMonotonic: d.IsMonotonic, AggregationTemporality: temporality(d.Temporality), DataPoints: numberPoints(d.DataPoints)}}
	case metricdata.Sum[float64]:
		out.Data = &metricpb.Metric_Sum{Sum: &metricpb.Sum{IsMonotonic: d.IsMonotonic, AggregationTemporality: temporality(d.Temporality), DataPoints: numberPoints(d.DataPoints)}}
	case metricdata.Gauge[int64]:
		out.Data = &metricpb.Metric_Gauge{Gauge: &metricpb.Gauge{DataPoints: numberPoints(d.DataPoints)}}
	case metricdata.Gauge[float64]:
		out.Data = &metricpb.Metric_Gauge{Gauge: &metricpb.Gauge{DataPoints: numberPoints(d.DataPoints)}}
	case metricdata.Histogram[int64]:
		out.Data = &metricpb.Metric_Histogram{Histogram: &metricpb.Histogram{AggregationTemporality: temporality(d.Temporality), DataPoints: histogramPoints(d.DataPoints)}}
	case metricdata.Histogram[float64]:
		out.Data = &metricpb.Metric_Histogram{Histogram: &metricpb.Histogram{AggregationTemporality: temporality(d.Temporality), DataPoints: histogramPoints(d.DataPoints)}}
	case metricdata.ExponentialHistogram[int64]:
		out.Data = &metricpb.Metric_ExponentialHistogram{ExponentialHistogram: &metricpb.ExponentialHistogram{AggregationTemporality: temporality(d.Temporality), DataPoints: exponentialPoints(d.DataPoints)}}
	case metricdata.ExponentialHistogram[float64]:
		out.Data = &metricpb.Metric_ExponentialHistogram{ExponentialHistogram: &metricpb.ExponentialHistogram{AggregationTemporality: temporality(d.Temporality), DataPoints: exponentialPoints(d.DataPoints)}}
	default:
		return nil
	}
	return out
}

func temporality(t metricdata.Temporality) metricpb.AggregationTemporality {
	if t == metricdata.DeltaTemporality {
		return metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
	}
	return metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

func numberPoints[N int64 | float64](points []metricdata.DataPoint[N]) []*metricpb.NumberDataPoint {
	out := make([]*metricpb.NumberDataPoint, len(points))
	for i, p := range points {
		np := &metricpb.NumberDataPoint{Attributes: keyValues(p.Attributes.ToSlice()), StartTimeUnixNano: unixNano(p.StartTime), TimeUnixNano: unixNano(p.Time)}
		switch v := any(p.Value).(type) {
		case int64:
			np.Value = &metricpb.NumberDataPoint_AsInt{AsInt: v}
		case float64:
			np.Value = &metricpb.NumberDataPoint_AsDouble{AsDouble: v}
		}
		out[i] = np
	}
	return out
}

func histogramPoints[N int64 | float64](points []metricdata.HistogramDataPoint[N]) []*metricpb.HistogramDataPoint {
	out := make([]*metricpb.HistogramDataPoint, len(points))
	for i, p := range points {
		sum := float64(p.Sum)
		hp := &metricpb.HistogramDataPoint{Attributes: keyValues(p.Attributes.ToSlice()), StartTimeUnixNano: unixNano(p.StartTime),
			TimeUnixNano: unixNano(p.Time), Count: p.Count, Sum: &sum, BucketCounts: p.BucketCounts, ExplicitBounds: p.Bounds}
		hp.Min, hp.Max = extrema(p.Min), extrema(p.Max)
		out[i] = hp
	}
	return out
}

func exponentialPoints[N int64 | float64](points []metricdata.ExponentialHistogramDataPoint[N]) []*metricpb.ExponentialHistogramDataPoint {
	out := make([]*metricpb.ExponentialHistogramDataPoint, len(points))
	for i, p := range points {
		sum := float64(p.Sum)
		ep := &metricpb.ExponentialHistogramDataPoint{Attributes: keyValues(p.Attributes.ToSlice()), StartTimeUnixNano: unixNano(p.StartTime),
			TimeUnixNano: unixNano(p.Time), Count: p.Count, Sum: &sum, Scale: p.Scale, ZeroCount: p.ZeroCount, ZeroThreshold: p.ZeroThreshold,
			Positive: &metricpb.ExponentialHistogramDataPoint_Buckets{Offset: p.PositiveBucket.Offset, BucketCounts: p.PositiveBucket.Counts},
			Negative: &metricpb.ExponentialHistogramDataPoint_Buckets{Offset: p.NegativeBucket.Offset, BucketCounts: p.NegativeBucket.Counts}}
		ep.Min, ep.Max = extrema(p.Min), extrema(p.Max)
		out[i] = ep
	}
	return out
}

func extrema[N int64 | float64](e metricdata.Extrema[N]) *float64 {
	v, ok := e.Value()
	if !ok {
		return nil
	}
	f := float64(v)
	return &f
}

// keyValues is attributes as OTLP's KeyValues.
func keyValues(attrs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(attrs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, len(attrs))
	for i, kv := range attrs {
		out[i] = &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)}
	}
	return out
}

func anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.BOOLSLICE:
		return arrayValue(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return arrayValue(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return arrayValue(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return arrayValue(v.AsStringSlice(), attribute.StringValue)
	default:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.String()}}
	}
}

func arrayValue[T any](items []T, value func(T) attribute.Value) *commonpb.AnyValue {
	vs := make([]*commonpb.AnyValue, len(items))
	for i, item := range items {
		vs[i] = anyValue(value(item))
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}
