package telemetry

import (
	"context"
	"fmt"
	"slices"
	"strings"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// metricExporter is an sdkmetric.Exporter over OTLP/HTTP (otlp.go says why not otlpmetrichttp;
// wire.go writes the requests), with the temporality and histogram aggregation the standard
// variables choose.
type metricExporter struct {
	s           *sender
	delta       []sdkmetric.InstrumentKind // the kinds exported as deltas; the others cumulative
	exponential bool                       // histograms as base-2 exponential ones
}

// deltaKinds are the kinds each temporality preference exports as deltas. A gauge is one
// whatever the preference: exported only in the intervals it was recorded in (OTLP's gauge has
// no temporality, and a cumulative one would repeat an instance's last lag forever after another
// instance took the poller over).
var deltaKinds = map[string][]sdkmetric.InstrumentKind{
	"":           {sdkmetric.InstrumentKindGauge},
	"cumulative": {sdkmetric.InstrumentKindGauge},
	"delta": {sdkmetric.InstrumentKindCounter, sdkmetric.InstrumentKindObservableCounter, sdkmetric.InstrumentKindHistogram,
		sdkmetric.InstrumentKindGauge},
	"lowmemory": {sdkmetric.InstrumentKindCounter, sdkmetric.InstrumentKindHistogram, sdkmetric.InstrumentKindGauge},
}

// newMetricExporter reads OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE (cumulative, delta,
// lowmemory) and OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION
// (explicit_bucket_histogram, base2_exponential_bucket_histogram) beside the sender's variables.
func newMetricExporter(getenv func(string) string) (*metricExporter, error) {
	s, err := newSender(getenv, "metrics")
	if err != nil {
		return nil, err
	}
	e := &metricExporter{s: s}
	const tp = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"
	p := strings.ToLower(strings.TrimSpace(getenv(tp)))
	kinds, ok := deltaKinds[p]
	if !ok {
		return nil, fmt.Errorf("%w: %s=%s: cumulative, delta or lowmemory", ErrSetting, tp, p)
	}
	e.delta = kinds
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
	if slices.Contains(e.delta, k) {
		return metricdata.DeltaTemporality
	}
	return metricdata.CumulativeTemporality
}

func (e *metricExporter) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	if e.exponential && k == sdkmetric.InstrumentKindHistogram {
		return sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}
	}
	return sdkmetric.DefaultAggregationSelector(k)
}

func (e *metricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if len(rm.ScopeMetrics) == 0 {
		return nil
	}
	return e.s.send(ctx, metricsRequest(rm))
}

func (e *metricExporter) ForceFlush(context.Context) error { return nil }

func (e *metricExporter) Shutdown(context.Context) error {
	e.s.close()
	return nil
}
