package telemetry

import (
	"context"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP protobuf messages the handler sends, written field by field with protowire (the
// field numbers of opentelemetry-proto's trace.proto, metrics.proto, common.proto and
// resource.proto, v1): the generated Go types register their descriptors at start-up, which cost
// every start of the handler 1.4 MB and 2 ms (otlp.go). The tests decode what this writes with
// those types.

// message appends field num holding the message body writes.
func message(b []byte, num protowire.Number, body func(b []byte) []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), body(nil))
}

func str(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

func raw(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func varint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func fixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed64(protowire.AppendTag(b, num, protowire.Fixed64Type), v)
}

func fixed32(b []byte, num protowire.Number, v uint32) []byte {
	return protowire.AppendFixed32(protowire.AppendTag(b, num, protowire.Fixed32Type), v)
}

// double appends an optional double: present, even at 0.
func double(b []byte, num protowire.Number, v float64) []byte {
	return protowire.AppendFixed64(protowire.AppendTag(b, num, protowire.Fixed64Type), math.Float64bits(v))
}

// keyValues appends attrs as KeyValues (common.proto) in field num.
func keyValues(b []byte, num protowire.Number, attrs []attribute.KeyValue) []byte {
	for _, kv := range attrs {
		b = message(b, num, func(b []byte) []byte {
			b = str(b, 1, string(kv.Key))
			return message(b, 2, func(b []byte) []byte { return anyValue(b, kv.Value) })
		})
	}
	return b
}

// anyValue appends v's AnyValue fields.
func anyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		x := uint64(0)
		if v.AsBool() {
			x = 1
		}
		return protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), x)
	case attribute.INT64:
		return protowire.AppendVarint(protowire.AppendTag(b, 3, protowire.VarintType), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return double(b, 4, v.AsFloat64())
	case attribute.BOOLSLICE:
		return array(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return array(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return array(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return array(b, v.AsStringSlice(), attribute.StringValue)
	default:
		return protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), v.String())
	}
}

func array[T any](b []byte, items []T, value func(T) attribute.Value) []byte {
	return message(b, 5, func(b []byte) []byte {
		for _, item := range items {
			b = message(b, 1, func(b []byte) []byte { return anyValue(b, value(item)) })
		}
		return b
	})
}

func resourceMessage(b []byte, num protowire.Number, r *resource.Resource) []byte {
	return message(b, num, func(b []byte) []byte {
		if r == nil {
			return b
		}
		return keyValues(b, 1, r.Attributes())
	})
}

func scopeMessage(b []byte, num protowire.Number, s instrumentation.Scope) []byte {
	return message(b, num, func(b []byte) []byte {
		b = str(b, 1, s.Name)
		b = str(b, 2, s.Version)
		return keyValues(b, 3, s.Attributes.ToSlice())
	})
}

// unixNano is t in nanoseconds since 1970, 0 (absent) for the zero time.
func unixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

// traceRequest is an ExportTraceServiceRequest of spans: a ResourceSpans per resource, a
// ScopeSpans per scope, in the order the spans came.
func traceRequest(spans []sdktrace.ReadOnlySpan) []byte {
	type group struct {
		res    *resource.Resource
		scopes []instrumentation.Scope
		spans  map[instrumentation.Scope][]sdktrace.ReadOnlySpan
	}
	var groups []*group
	byRes := map[*resource.Resource]*group{}
	for _, s := range spans {
		g := byRes[s.Resource()]
		if g == nil {
			g = &group{res: s.Resource(), spans: map[instrumentation.Scope][]sdktrace.ReadOnlySpan{}}
			byRes[s.Resource()] = g
			groups = append(groups, g)
		}
		sc := s.InstrumentationScope()
		if _, ok := g.spans[sc]; !ok {
			g.scopes = append(g.scopes, sc)
		}
		g.spans[sc] = append(g.spans[sc], s)
	}
	var b []byte
	for _, g := range groups {
		b = message(b, 1, func(b []byte) []byte {
			b = resourceMessage(b, 1, g.res)
			for _, sc := range g.scopes {
				b = message(b, 2, func(b []byte) []byte {
					b = scopeMessage(b, 1, sc)
					for _, s := range g.spans[sc] {
						b = message(b, 2, func(b []byte) []byte { return span(b, s) })
					}
					return str(b, 3, sc.SchemaURL)
				})
			}
			if g.res != nil {
				b = str(b, 3, g.res.SchemaURL())
			}
			return b
		})
	}
	return b
}

// span appends s's Span fields.
func span(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc, parent := s.SpanContext(), s.Parent()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = raw(b, 1, tid[:])
	b = raw(b, 2, sid[:])
	b = str(b, 3, sc.TraceState().String())
	if parent.SpanID().IsValid() {
		psid := parent.SpanID()
		b = raw(b, 4, psid[:])
	}
	b = str(b, 5, s.Name())
	b = varint(b, 6, uint64(s.SpanKind())) // the API's kinds are the protocol's numbers
	b = fixed64(b, 7, unixNano(s.StartTime()))
	b = fixed64(b, 8, unixNano(s.EndTime()))
	b = keyValues(b, 9, s.Attributes())
	b = varint(b, 10, uint64(s.DroppedAttributes()))
	for _, e := range s.Events() {
		b = message(b, 11, func(b []byte) []byte {
			b = fixed64(b, 1, unixNano(e.Time))
			b = str(b, 2, e.Name)
			b = keyValues(b, 3, e.Attributes)
			return varint(b, 4, uint64(e.DroppedAttributeCount))
		})
	}
	b = varint(b, 12, uint64(s.DroppedEvents()))
	for _, l := range s.Links() {
		b = message(b, 13, func(b []byte) []byte {
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = raw(b, 1, ltid[:])
			b = raw(b, 2, lsid[:])
			b = str(b, 3, l.SpanContext.TraceState().String())
			b = keyValues(b, 4, l.Attributes)
			b = varint(b, 5, uint64(l.DroppedAttributeCount))
			return fixed32(b, 6, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext.IsRemote()))
		})
	}
	b = varint(b, 14, uint64(s.DroppedLinks()))
	st := s.Status()
	b = message(b, 15, func(b []byte) []byte {
		b = str(b, 2, st.Description)
		var code uint64 // STATUS_CODE_UNSET 0, OK 1, ERROR 2
		switch st.Code {
		case codes.Ok:
			code = 1
		case codes.Error:
			code = 2
		}
		return varint(b, 3, code)
	})
	return fixed32(b, 16, spanFlags(sc.TraceFlags(), parent.IsRemote()))
}

// spanFlags are a span's or link's flags: the W3C trace flags, and whether the parent (or the
// linked span) is remote, known (SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE 0x100, _IS_REMOTE 0x200).
func spanFlags(f trace.TraceFlags, remote bool) uint32 {
	flags := uint32(0x100)
	if f.IsSampled() {
		flags |= 1
	}
	if remote {
		flags |= 0x200
	}
	return flags
}

// spanExporter is an sdktrace.SpanExporter over a sender.
type spanExporter struct{ s *sender }

func (e spanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	return e.s.send(ctx, traceRequest(spans))
}

func (e spanExporter) Shutdown(context.Context) error {
	e.s.close()
	return nil
}

// metricsRequest is an ExportMetricsServiceRequest of rm.
func metricsRequest(rm *metricdata.ResourceMetrics) []byte {
	return message(nil, 1, func(b []byte) []byte {
		b = resourceMessage(b, 1, rm.Resource)
		for _, sm := range rm.ScopeMetrics {
			b = message(b, 2, func(b []byte) []byte {
				b = scopeMessage(b, 1, sm.Scope)
				for _, m := range sm.Metrics {
					b = metricMessage(b, m)
				}
				return str(b, 3, sm.Scope.SchemaURL)
			})
		}
		if rm.Resource != nil {
			b = str(b, 3, rm.Resource.SchemaURL())
		}
		return b
	})
}

// metricMessage appends m as a Metric in field 2 of a ScopeMetrics; nothing for an aggregation it does
// not know.
func metricMessage(b []byte, m metricdata.Metrics) []byte {
	var data func(b []byte) []byte
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		data = sum(7, d)
	case metricdata.Sum[float64]:
		data = sum(7, d)
	case metricdata.Gauge[int64]:
		data = func(b []byte) []byte {
			return message(b, 5, func(b []byte) []byte { return numberPoints(b, d.DataPoints) })
		}
	case metricdata.Gauge[float64]:
		data = func(b []byte) []byte {
			return message(b, 5, func(b []byte) []byte { return numberPoints(b, d.DataPoints) })
		}
	case metricdata.Histogram[int64]:
		data = histogram(d)
	case metricdata.Histogram[float64]:
		data = histogram(d)
	case metricdata.ExponentialHistogram[int64]:
		data = exponential(d)
	case metricdata.ExponentialHistogram[float64]:
		data = exponential(d)
	default:
		return b
	}
	return message(b, 2, func(b []byte) []byte {
		b = str(b, 1, m.Name)
		b = str(b, 2, m.Description)
		b = str(b, 3, m.Unit)
		return data(b)
	})
}

// temporality is AGGREGATION_TEMPORALITY_DELTA (1) or _CUMULATIVE (2).
func temporality(t metricdata.Temporality) uint64 {
	if t == metricdata.DeltaTemporality {
		return 1
	}
	return 2
}

func sum[N int64 | float64](num protowire.Number, d metricdata.Sum[N]) func([]byte) []byte {
	return func(b []byte) []byte {
		return message(b, num, func(b []byte) []byte {
			b = numberPoints(b, d.DataPoints)
			b = varint(b, 2, temporality(d.Temporality))
			if d.IsMonotonic {
				b = varint(b, 3, 1)
			}
			return b
		})
	}
}

// numberPoints appends NumberDataPoints in field 1.
func numberPoints[N int64 | float64](b []byte, points []metricdata.DataPoint[N]) []byte {
	for _, p := range points {
		b = message(b, 1, func(b []byte) []byte {
			b = fixed64(b, 2, unixNano(p.StartTime))
			b = fixed64(b, 3, unixNano(p.Time))
			switch v := any(p.Value).(type) {
			case int64: // as_int, sfixed64
				b = protowire.AppendFixed64(protowire.AppendTag(b, 6, protowire.Fixed64Type), uint64(v))
			case float64:
				b = double(b, 4, v)
			}
			return keyValues(b, 7, p.Attributes.ToSlice())
		})
	}
	return b
}

func histogram[N int64 | float64](d metricdata.Histogram[N]) func([]byte) []byte {
	return func(b []byte) []byte {
		return message(b, 9, func(b []byte) []byte {
			for _, p := range d.DataPoints {
				b = message(b, 1, func(b []byte) []byte {
					b = fixed64(b, 2, unixNano(p.StartTime))
					b = fixed64(b, 3, unixNano(p.Time))
					b = protowire.AppendFixed64(protowire.AppendTag(b, 4, protowire.Fixed64Type), p.Count)
					b = double(b, 5, float64(p.Sum))
					b = packedFixed64(b, 6, p.BucketCounts)
					bounds := make([]uint64, len(p.Bounds))
					for i, f := range p.Bounds {
						bounds[i] = math.Float64bits(f)
					}
					b = packedFixed64(b, 7, bounds)
					b = keyValues(b, 9, p.Attributes.ToSlice())
					return extrema(b, 11, 12, p.Min, p.Max)
				})
			}
			return varint(b, 2, temporality(d.Temporality))
		})
	}
}

func exponential[N int64 | float64](d metricdata.ExponentialHistogram[N]) func([]byte) []byte {
	return func(b []byte) []byte {
		return message(b, 10, func(b []byte) []byte {
			for _, p := range d.DataPoints {
				b = message(b, 1, func(b []byte) []byte {
					b = keyValues(b, 1, p.Attributes.ToSlice())
					b = fixed64(b, 2, unixNano(p.StartTime))
					b = fixed64(b, 3, unixNano(p.Time))
					b = protowire.AppendFixed64(protowire.AppendTag(b, 4, protowire.Fixed64Type), p.Count)
					b = double(b, 5, float64(p.Sum))
					b = varint(b, 6, protowire.EncodeZigZag(int64(p.Scale)))
					b = fixed64(b, 7, p.ZeroCount)
					b = buckets(b, 8, p.PositiveBucket)
					b = buckets(b, 9, p.NegativeBucket)
					b = extrema(b, 12, 13, p.Min, p.Max)
					if p.ZeroThreshold != 0 {
						b = double(b, 14, p.ZeroThreshold)
					}
					return b
				})
			}
			return varint(b, 2, temporality(d.Temporality))
		})
	}
}

func buckets(b []byte, num protowire.Number, bk metricdata.ExponentialBucket) []byte {
	return message(b, num, func(b []byte) []byte {
		b = varint(b, 1, protowire.EncodeZigZag(int64(bk.Offset)))
		if len(bk.Counts) == 0 {
			return b
		}
		var packed []byte
		for _, c := range bk.Counts {
			packed = protowire.AppendVarint(packed, c)
		}
		return raw(b, 2, packed)
	})
}

func packedFixed64(b []byte, num protowire.Number, vs []uint64) []byte {
	if len(vs) == 0 {
		return b
	}
	var packed []byte
	for _, v := range vs {
		packed = protowire.AppendFixed64(packed, v)
	}
	return raw(b, num, packed)
}

func extrema[N int64 | float64](b []byte, minNum, maxNum protowire.Number, lo, hi metricdata.Extrema[N]) []byte {
	if v, ok := lo.Value(); ok {
		b = double(b, minNum, float64(v))
	}
	if v, ok := hi.Value(); ok {
		b = double(b, maxNum, float64(v))
	}
	return b
}
