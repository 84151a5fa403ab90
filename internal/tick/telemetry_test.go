package tick_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/telemetry"
	"github.com/pseudotrigger/pseudotrigger/internal/telemetry/telemetrytest"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestTickTelemetry runs real ticks (SQLite) with the SDK's in-memory span recorder and metric
// reader: a lease taken over from an owner that vanished, batches delivered, a failing batch.
func TestTickTelemetry(t *testing.T) {
	e := newEnv(t, 2)
	clk := clock.NewFake(time.Now())
	e.st = &lease.Counting{Store: memstore.New(clk)}
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	// An owner takes the lease and vanishes without releasing it.
	ghost, err := lease.New(e.st, lease.Config{Poller: "orders", Blob: "state/test/orders.json", Owner: "ghost", Fingerprint: e.src.Fingerprint(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := ghost.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := ghost.Acquire(ctx, snap); err != nil || !res.Won() {
		t.Fatalf("the ghost's acquire: %+v %v", res, err)
	}

	fail := false
	r, err := tick.Open(ctx, tick.Config{Poller: pollerdef.Of(ordersPoller(func(ctx context.Context, b *poller.Batch[poller.Row]) error {
		if !trace.SpanContextFromContext(ctx).IsValid() {
			return errors.New("the handler's context carries no span")
		}
		if fail {
			return errors.New("the downstream service is down")
		}
		return nil
	})), Store: e.st, App: "test", Owner: "A", Source: e.src, Clock: clk,
		Settings: appsettings.Settings{BatchSize: 2, LeaseTTL: lease.DefaultTTL, HeartbeatInterval: lease.DefaultTTL / 4,
			TickBudget: time.Minute, MaxAttempts: 5},
		Tracer: telemetry.Tracer(tp), Metrics: telemetry.NewMetrics(mp)})
	if err != nil {
		t.Fatal(err)
	}
	e.insert(5)
	if sum, err := r.Tick(ctx, "inv-held"); err != nil || sum.Outcome != tick.LeaseHeld {
		t.Fatalf("while the ghost's lease lives: %+v %v", sum, err)
	}
	clk.Advance(lease.DefaultTTL + lease.DefaultMargin + time.Second)
	sum, err := r.Tick(ctx, "inv-1")
	if err != nil || sum.Rows != 5 || sum.Batches != 3 {
		t.Fatalf("the takeover's tick: %+v %v", sum, err)
	}

	ended := spans.Ended()
	ticks := telemetrytest.Named(ended, "tick orders")
	if len(ticks) != 2 {
		t.Fatalf("%d tick spans, want 2: %v", len(ticks), telemetrytest.Names(ended))
	}
	held, took := ticks[0], ticks[1]
	telemetrytest.WantAttrs(t, held, map[string]any{"pseudotrigger.outcome": "lease_held", "pseudotrigger.lease_holder": "ghost", "faas.invocation_id": "inv-held"})
	telemetrytest.WantAttrs(t, took, map[string]any{"pseudotrigger.poller": "orders", "pseudotrigger.outcome": "committed", "pseudotrigger.rows": int64(5),
		"pseudotrigger.batches": int64(3), "pseudotrigger.fencing_token": int64(2), "pseudotrigger.took_over": true,
		"pseudotrigger.rows_waiting": int64(0), "faas.invocation_id": "inv-1"})
	if took.SpanKind() != trace.SpanKindServer || took.Parent().IsValid() {
		t.Fatalf("the tick span: kind %v, parent %v (want a server span, a root here)", took.SpanKind(), took.Parent())
	}
	children := map[string]int{}
	for _, s := range ended {
		if s.Parent().SpanID() == took.SpanContext().SpanID() {
			children[s.Name()]++
		}
	}
	// The peek and two more fetches, the acquire, a deliver per batch, a commit before each batch
	// after the first (CheckpointInterval 0) and the last one with the release.
	if children["fetch"] != 3 || children["acquire"] != 1 || children["deliver"] != 3 || children["commit"] != 3 {
		t.Fatalf("the tick's children: %v", children)
	}
	for _, d := range telemetrytest.Named(ended, "deliver") {
		if d.Parent().SpanID() == took.SpanContext().SpanID() {
			telemetrytest.WantAttrs(t, d, map[string]any{"pseudotrigger.attempt": int64(1), "pseudotrigger.fencing_token": int64(2)})
		}
	}
	commits := telemetrytest.Named(ended, "commit")
	telemetrytest.WantAttrs(t, commits[len(commits)-1], map[string]any{"pseudotrigger.release": true})

	// A failing batch: the tick's span and its deliver's are errors, counted by class.
	fail = true
	e.insert(1)
	if _, err := r.Tick(ctx, "inv-2"); !errors.Is(err, tick.ErrBatchFailed) {
		t.Fatalf("failing tick: %v", err)
	}
	ticks = telemetrytest.Named(spans.Ended(), "tick orders")
	failed := ticks[len(ticks)-1]
	if failed.Status().Code != codes.Error {
		t.Fatalf("the failed tick's span status: %+v", failed.Status())
	}
	telemetrytest.WantAttrs(t, failed, map[string]any{"pseudotrigger.outcome": "failed", "error.type": "handler", "pseudotrigger.rows": int64(0)})
	delivers := telemetrytest.Named(spans.Ended(), "deliver")
	if last := delivers[len(delivers)-1]; last.Status().Code != codes.Error || last.Status().Description != "the downstream service is down" {
		t.Fatalf("the failed deliver span: %+v", last.Status())
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	m := telemetrytest.Values(t, rm)
	for k, want := range map[string]float64{
		"pseudotrigger.rows{pseudotrigger.op=upsert,pseudotrigger.poller=orders}":                   5,
		"pseudotrigger.batches{pseudotrigger.poller=orders}":                                        3,
		"pseudotrigger.lease.takeovers{pseudotrigger.poller=orders}":                                1,
		"pseudotrigger.errors{error.type=handler,pseudotrigger.poller=orders}":                      1,
		"pseudotrigger.tick.duration{pseudotrigger.outcome=committed,pseudotrigger.poller=orders}":  1, // count
		"pseudotrigger.tick.duration{pseudotrigger.outcome=lease_held,pseudotrigger.poller=orders}": 1,
		"pseudotrigger.tick.duration{pseudotrigger.outcome=failed,pseudotrigger.poller=orders}":     1,
		"pseudotrigger.backlog{pseudotrigger.poller=orders}":                                        1, // the last measured: the failed batch's row waits
	} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("%s = %v (recorded: %v), want %v", k, got, ok, want)
		}
	}
	if lag := m["pseudotrigger.lag{pseudotrigger.poller=orders}"]; lag < 3600 {
		t.Errorf("lag %v s: the waiting row was written an hour before the clock's start", lag)
	}
	if t.Failed() {
		t.Logf("metrics: %v", m)
	}
}
