package telemetry

import (
	"context"
	"fmt"
	"slices"
	"strings"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

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

// metricSelectors reads OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE (cumulative, delta,
// lowmemory) and OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION
// (explicit_bucket_histogram, base2_exponential_bucket_histogram); another value is an error
// naming the variable (the SDK would ignore it).
func metricSelectors(getenv func(string) string) (sdkmetric.TemporalitySelector, sdkmetric.AggregationSelector, error) {
	const tp = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"
	p := strings.ToLower(strings.TrimSpace(getenv(tp)))
	kinds, ok := deltaKinds[p]
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s=%s: cumulative, delta or lowmemory", ErrSetting, tp, p)
	}
	temporality := func(k sdkmetric.InstrumentKind) metricdata.Temporality {
		if slices.Contains(kinds, k) {
			return metricdata.DeltaTemporality
		}
		return metricdata.CumulativeTemporality
	}
	const ha = "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"
	switch a := strings.ToLower(strings.TrimSpace(getenv(ha))); a {
	case "", "explicit_bucket_histogram":
		return temporality, sdkmetric.DefaultAggregationSelector, nil
	case "base2_exponential_bucket_histogram":
		return temporality, func(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
			if k == sdkmetric.InstrumentKindHistogram {
				return sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}
			}
			return sdkmetric.DefaultAggregationSelector(k)
		}, nil
	default:
		return nil, nil, fmt.Errorf("%w: %s=%s: explicit_bucket_histogram or base2_exponential_bucket_histogram", ErrSetting, ha, a)
	}
}

// quietExporter leaves out an export with no metric in it: the periodic reader sends one every
// interval, a resource and nothing else, from an idle handler.
type quietExporter struct {
	sdkmetric.Exporter
}

func (e quietExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if len(rm.ScopeMetrics) == 0 {
		return nil
	}
	return e.Exporter.Export(ctx, rm)
}
