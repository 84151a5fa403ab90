package sink

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pseudotrigger/pseudotrigger/internal/telemetry"
)

// A send is a producer span, "send {destination}", following OpenTelemetry's messaging
// conventions (a webhook's names its URL instead). Its context is the trace context the
// messages carry, when the service has a place for it: Service Bus application properties and
// Event Hubs properties (traceparent, tracestate and Diagnostic-Id, the names the Azure SDKs
// read), a CloudEvent's traceparent and tracestate extensions (Event Grid), a webhook's
// traceparent and tracestate headers; a storage queue message has none. A consumer that
// continues it joins the tick's trace.
//
// The span is made by the tracer provider of the span in the send's context (the tick's
// "deliver" span), else, when the handler exports traces (telemetry.Setup), by OpenTelemetry's
// global one; without either there is none and no message carries a trace context.

// scope is the instrumentation scope of the sinks' spans.
const scope = "github.com/pseudotrigger/pseudotrigger/sink"

var globalTracer = otel.Tracer(scope)

// traceTarget is what a transport's send span says of its destination.
type traceTarget struct {
	name  string // the span's name: "send orders-changes"
	attrs []attribute.KeyValue
}

// messagingTarget is a messaging service's destination: system is messaging.system's value.
func messagingTarget(system attribute.KeyValue, destination string) traceTarget {
	return traceTarget{name: "send " + destination, attrs: []attribute.KeyValue{
		system, semconv.MessagingDestinationName(destination), semconv.MessagingOperationTypeSend, semconv.MessagingOperationName("send"),
	}}
}

// startSend starts the send span of msgs and, when it has a trace context, sets it in each
// message.
func startSend(ctx context.Context, target traceTarget, msgs []Message) (context.Context, trace.Span) {
	var tracer trace.Tracer // nil: nothing would take the span, none is made
	if parent := trace.SpanFromContext(ctx); parent.SpanContext().IsValid() {
		tracer = parent.TracerProvider().Tracer(scope)
	} else if telemetry.Enabled() {
		tracer = globalTracer
	}
	ctx, span := telemetry.Start(tracer, ctx, target.name, trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		span.SetAttributes(target.attrs...)
		span.SetAttributes(semconv.MessagingBatchMessageCount(len(msgs)))
	}
	if !span.SpanContext().IsValid() {
		return ctx, span
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	parent, state := carrier["traceparent"], carrier["tracestate"]
	for i := range msgs {
		msgs[i].TraceParent, msgs[i].TraceState = parent, state
	}
	return ctx, span
}

// endSend ends a send span with err as its status.
func endSend(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorTypeKey.String("send_failed"))
	}
	span.End()
}
