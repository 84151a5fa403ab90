package tick

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/telemetry"
)

// A tick is a span ("tick {poller}") with a child per fetch, per batch delivered ("deliver",
// whose context the handler gets: a sink's send span is its child) and per state write
// ("acquire", "commit": fetch, handle and write, beside the steps they run); at its end it records
// the metrics of telemetry.Metrics. Without a
// tracer or instruments given and without telemetry.Setup's exporters, no span is started and
// nothing measured (telemetry.ActiveTracer, Active).

// tracer returns the runner's tracer, or nil when nothing would take its spans (no Tracer given,
// telemetry.Setup exported no traces): then no span is started, which costs a tick nothing.
func (r *Runner) tracer() trace.Tracer { return telemetry.ActiveTracer(r.Tracer) }

// metrics returns the runner's instruments, or nil when nothing would take them.
func (r *Runner) metrics() *telemetry.Metrics { return telemetry.Active(r.Metrics) }

// start starts a span of the tick called name as ctx's child (telemetry.Start).
func (r *Runner) start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return telemetry.Start(r.tracer(), ctx, name, opts...)
}

// startSpan starts the tick's span, a child of the invocation's trace context when ctx has one
// (the handler continues the host's), and puts it in t.ctx. Its name and attributes are made
// only for a tracer.
func (t *tickRun) startSpan(invocationID string) {
	tr := t.r.tracer()
	var (
		name string
		opts []trace.SpanStartOption
	)
	if tr != nil {
		attrs := []attribute.KeyValue{telemetry.Poller.String(t.r.Poller.Name()), semconv.FaaSTriggerTimer}
		if invocationID != "" {
			attrs = append(attrs, semconv.FaaSInvocationID(invocationID))
		}
		name, opts = "tick "+t.r.Poller.Name(), []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...)}
	}
	t.ctx, t.span = telemetry.Start(tr, t.ctx, name, opts...)
}

// endSpan ends span with err as its status.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorTypeKey.String(ErrorClass(err)))
	}
	span.End()
}

// tookOver says the lease a tick won was taken from an owner whose lease expired unreleased.
func tookOver(snap lease.Snapshot) bool {
	return snap.Doc != nil && snap.Doc.Lease.OwnerID != "" && !snap.Doc.Lease.Released()
}

// record ends the tick's span with its summary and records the tick's metrics.
func (t *tickRun) record(err error) {
	sum := &t.sum
	if m := t.r.metrics(); m != nil {
		t.measure(m, err)
	}
	span := t.span
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(telemetry.Outcome.String(string(sum.Outcome)), telemetry.Rows.Int(sum.Rows), telemetry.Batches.Int(sum.Batches),
		telemetry.FencingToken.Int64(sum.FencingToken), telemetry.Cursor.String(sum.Cursor.JSON()), telemetry.RowsWaiting.Int64(sum.RowsWaiting))
	if sum.LagSeconds != nil {
		span.SetAttributes(telemetry.LagSeconds.Float64(*sum.LagSeconds))
	}
	if sum.Holder != "" {
		span.SetAttributes(telemetry.Holder.String(sum.Holder))
	}
	if t.tookOver {
		span.SetAttributes(telemetry.TookOver.Bool(true))
	}
	if sum.BatchID != "" {
		span.SetAttributes(telemetry.BatchID.String(sum.BatchID))
	}
	endSpan(span, err)
}

// measure records the tick's metrics on m.
func (t *tickRun) measure(m *telemetry.Metrics, err error) {
	sum, ctx := &t.sum, t.ctx
	poller := telemetry.Poller.String(sum.Poller)
	base := metric.WithAttributeSet(attribute.NewSet(poller))
	m.TickDuration.Record(ctx, float64(sum.DurationMS)/1000, metric.WithAttributeSet(attribute.NewSet(poller, telemetry.Outcome.String(string(sum.Outcome)))))
	for op, n := range sum.Ops {
		m.Rows.Add(ctx, int64(n), metric.WithAttributeSet(attribute.NewSet(poller, telemetry.Op.String(op))))
	}
	if sum.Batches > 0 {
		m.Batches.Add(ctx, int64(sum.Batches), base)
	}
	if sum.LagSeconds != nil {
		m.Lag.Record(ctx, *sum.LagSeconds, base)
	}
	if sum.RowsWaiting >= 0 {
		m.Backlog.Record(ctx, sum.RowsWaiting, base)
	}
	if sum.RetainedBytes != nil && sum.Outcome != LeaseHeld { // a held lease's figure is this process's last, not now's
		m.Retained.Record(ctx, *sum.RetainedBytes, base)
	}
	if sum.DeadLettered > 0 {
		m.DeadLettered.Add(ctx, int64(sum.DeadLettered), base)
	}
	if t.tookOver {
		m.Takeovers.Add(ctx, 1, base)
	}
	if err != nil {
		m.Errors.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(poller, semconv.ErrorTypeKey.String(ErrorClass(err)))))
	}
}

// ErrorClass names the kind of a tick's error, for error.type: few values, each one a cause an
// operator acts on differently (docs/telemetry.md).
func ErrorClass(err error) string {
	for _, c := range errorClasses {
		if errors.Is(err, c.err) {
			return c.class
		}
	}
	return "other"
}

// errorClasses in the order ErrorClass tries them: a blocked poller's error also wraps its
// batch's failure, and a slot ahead of the checkpoint is a stream_ahead before it is a set-up
// problem (source.ErrSlotAhead wraps both).
var errorClasses = []struct {
	err   error
	class string
}{
	{ErrBlocked, "blocked"},
	{ErrBatchFailed, "handler"},
	{lease.ErrLost, "lease_lost"},
	{state.ErrFingerprintMismatch, "source_changed"},
	{state.ErrCorrupt, "state_document"},
	{state.ErrVersion, "state_document"},
	{state.ErrPollerMismatch, "state_document"},
	{driver.ErrStreamAhead, "stream_ahead"},
	{source.ErrConnect, "source_connect"},
	{source.ErrSchema, "source_schema"},
	{source.ErrMisconfigured, "source_setup"},
	{row.ErrUnreachableRow, "unreachable_row"},
	{source.ErrNullCursor, "null_cursor"},
}
