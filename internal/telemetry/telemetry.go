// Package telemetry holds the handler's OpenTelemetry: the tracer and the instruments a tick
// records, their names and attributes (docs/telemetry.md lists them), and Setup, which exports
// them over OTLP/HTTP when the standard variables ask for it.
//
// Without those variables nothing is set up: Active and ActiveTracer are nil, so that no span is
// started (Start) and no measurement made, and the handler neither reads nor writes trace
// context.
package telemetry

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of the handler's spans and metrics.
const Scope = "github.com/pseudotrigger/pseudotrigger"

// The attributes the handler's spans and metrics carry, beside the semantic conventions' own.
const (
	Poller       = attribute.Key("pseudotrigger.poller")        // the poller's name
	Outcome      = attribute.Key("pseudotrigger.outcome")       // a tick's outcome (tick.Outcome)
	Op           = attribute.Key("pseudotrigger.op")            // a row's change: insert, update, delete, upsert, read
	Rows         = attribute.Key("pseudotrigger.rows")          // rows fetched, delivered or sent
	Batches      = attribute.Key("pseudotrigger.batches")       // batches a tick handled
	FencingToken = attribute.Key("pseudotrigger.fencing_token") // the lease's fencing token
	BatchID      = attribute.Key("pseudotrigger.batch_id")      // a batch's id
	Attempt      = attribute.Key("pseudotrigger.attempt")       // the attempt at a batch
	Cursor       = attribute.Key("pseudotrigger.cursor")        // where a batch or tick ends, as the log lines render it
	Release      = attribute.Key("pseudotrigger.release")       // a commit that also releases the lease
	LagSeconds   = attribute.Key("pseudotrigger.lag_seconds")   // the oldest waiting row's age at the tick's end
	RowsWaiting  = attribute.Key("pseudotrigger.rows_waiting")  // rows after the cursor at the tick's end
	Holder       = attribute.Key("pseudotrigger.lease_holder")  // who holds the lease, when not this tick
	TookOver     = attribute.Key("pseudotrigger.took_over")     // the lease was taken from an owner whose lease expired
	Peek         = attribute.Key("pseudotrigger.peek")          // the fetch before the lease (the first batch)
)

// Metrics are the handler's instruments. Every one carries Poller; the rest of each one's
// attributes are in its comment.
type Metrics struct {
	Rows         metric.Int64Counter     // pseudotrigger.rows: rows delivered; Op
	Batches      metric.Int64Counter     // pseudotrigger.batches: batches a tick handled (delivered, quarantined, a move with no row, a backfill chunk)
	TickDuration metric.Float64Histogram // pseudotrigger.tick.duration (s); Outcome
	Lag          metric.Float64Gauge     // pseudotrigger.lag (s): the oldest waiting row's age at a tick's end
	Backlog      metric.Int64Gauge       // pseudotrigger.backlog: rows waiting after the cursor (up to 10,000)
	Retained     metric.Int64Gauge       // pseudotrigger.source.retained (By): the change log the database keeps for the poller
	DeadLettered metric.Int64Counter     // pseudotrigger.dead_lettered: rows quarantined into dead letters
	DeadLetters  metric.Int64Gauge       // pseudotrigger.dead_letters: dead letters waiting, as last listed
	Takeovers    metric.Int64Counter     // pseudotrigger.lease.takeovers: leases taken from an owner whose lease expired
	Errors       metric.Int64Counter     // pseudotrigger.errors: failed ticks; error.type (ErrorClass)
}

// NewMetrics makes the instruments on mp's meter for Scope.
func NewMetrics(mp metric.MeterProvider) *Metrics {
	m := mp.Meter(Scope)
	var ms Metrics
	// The SDK's instruments cannot fail with these fixed, valid names: an error would return a
	// no-op instrument, which is used as it is.
	ms.Rows, _ = m.Int64Counter("pseudotrigger.rows", metric.WithUnit("{row}"),
		metric.WithDescription("Rows delivered to the poller's handler or sink."))
	ms.Batches, _ = m.Int64Counter("pseudotrigger.batches", metric.WithUnit("{batch}"),
		metric.WithDescription("Batches the ticks handled and committed: delivered, quarantined, a change stream's move with no row, a backfill chunk."))
	ms.TickDuration, _ = m.Float64Histogram("pseudotrigger.tick.duration", metric.WithUnit("s"),
		metric.WithDescription("How long a tick ran, by outcome."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
	ms.Lag, _ = m.Float64Gauge("pseudotrigger.lag", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest row still waiting at a tick's end (0: none waits)."))
	ms.Backlog, _ = m.Int64Gauge("pseudotrigger.backlog", metric.WithUnit("{row}"),
		metric.WithDescription("Rows waiting after the cursor at a tick's end, counted up to 10,000."))
	ms.Retained, _ = m.Int64Gauge("pseudotrigger.source.retained", metric.WithUnit("By"),
		metric.WithDescription("Change log the source database keeps for the poller (a replication slot's retained WAL)."))
	ms.DeadLettered, _ = m.Int64Counter("pseudotrigger.dead_lettered", metric.WithUnit("{row}"),
		metric.WithDescription("Rows quarantined into dead letters."))
	ms.DeadLetters, _ = m.Int64Gauge("pseudotrigger.dead_letters", metric.WithUnit("{letter}"),
		metric.WithDescription("Dead letters waiting for an operator, as last listed."))
	ms.Takeovers, _ = m.Int64Counter("pseudotrigger.lease.takeovers", metric.WithUnit("{takeover}"),
		metric.WithDescription("Leases taken from an owner whose lease expired without a release (a crash, a freeze, a lost instance)."))
	ms.Errors, _ = m.Int64Counter("pseudotrigger.errors", metric.WithUnit("{tick}"),
		metric.WithDescription("Failed ticks, by error class (error.type)."))
	return &ms
}

var global = sync.OnceValue(func() *Metrics { return NewMetrics(otel.GetMeterProvider()) })

// Global returns the instruments on OpenTelemetry's global meter provider (the one Setup
// installs; until then, and without it, a no-op one).
func Global() *Metrics { return global() }

// globalTracer is the handler's tracer on the global provider, made once: it delegates to the
// provider Setup installs, and a tracer made per span would cost a lookup under a lock each.
var globalTracer = otel.Tracer(Scope)

// Active returns m; or, when m is nil, the global instruments if Setup exports metrics, else nil:
// nothing would take a measurement, so none is made.
func Active(m *Metrics) *Metrics {
	switch {
	case m != nil:
		return m
	case Measured():
		return Global()
	}
	return nil
}

// ActiveTracer returns tr; or, when tr is nil, the handler's global tracer if Setup exports
// traces, else nil: nothing would take a span, so none is started.
func ActiveTracer(tr trace.Tracer) trace.Tracer {
	switch {
	case tr != nil:
		return tr
	case Enabled():
		return globalTracer
	}
	return nil
}

// Tracer returns the handler's tracer on tp.
func Tracer(tp trace.TracerProvider) trace.Tracer { return tp.Tracer(Scope) }

// noSpan is the span nothing takes: made once, as an interface value (one made per span would
// be an allocation each).
var noSpan trace.Span = noop.Span{}

// Start starts a span called name as ctx's child with tr; when tr is nil (nothing would take the
// span: ActiveTracer), it returns ctx and a span that does nothing, which costs nothing.
func Start(tr trace.Tracer, ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if tr == nil {
		return ctx, noSpan
	}
	return tr.Start(ctx, name, opts...)
}
