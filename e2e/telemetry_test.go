package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/telemetry/telemetrytest"
)

// TestTelemetryFlushedOnStop: the handler binary with OTEL_EXPORTER_OTLP_ENDPOINT exports its
// tick's spans and metrics over OTLP/HTTP; with export intervals of an hour, only the flush at
// a SIGTERM can have sent them.
func TestTelemetryFlushedOnStop(t *testing.T) {
	receiver := telemetrytest.NewReceiver(t)
	w := newWorld(t)
	w.insert(120)
	p := start(t, w.env("ORDERS_BATCH_SIZE=50", "OTEL_EXPORTER_OTLP_ENDPOINT="+receiver.URL,
		"OTEL_BSP_SCHEDULE_DELAY=3600000", "OTEL_METRIC_EXPORT_INTERVAL=3600000"))
	if r := p.tick(); r.status != 200 || r.outcome() != "committed" {
		t.Fatalf("tick: %d %s", r.status, r.raw)
	}
	if !strings.Contains(p.out.String(), `"msg":"OpenTelemetry exports over OTLP"`) {
		t.Fatalf("no start-up line for OpenTelemetry:\n%s", p.out.String())
	}
	if traces, metrics, _ := receiver.Received(); len(traces)+len(metrics) != 0 {
		t.Fatalf("exported before the stop, with hour-long intervals: %v, %v", traces, metrics)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not exit within 30 s of SIGTERM")
	}
	spans, metrics := map[string]int{}, map[string]int64{} // span name -> how many; counter -> its sum
	var rows int64                                         // the tick span's pseudotrigger.rows
	traces, exported, _ := receiver.Received()
	for _, req := range traces {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans[s.Name]++
					for _, a := range s.Attributes {
						if a.Key == "pseudotrigger.rows" && s.Name == "tick orders" {
							rows = a.Value.GetIntValue()
						}
					}
				}
			}
		}
	}
	for _, req := range exported {
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					for _, p := range m.GetSum().GetDataPoints() {
						metrics[m.Name] += p.GetAsInt()
					}
				}
			}
		}
	}
	if spans["tick orders"] != 1 || rows != 120 || spans["deliver"] != 3 || metrics["pseudotrigger.rows"] != 120 || metrics["pseudotrigger.batches"] != 3 {
		t.Fatalf("after the stop: spans %v (the tick's rows %d), metrics %v; want one tick of 120 rows in 3 batches", spans, rows, metrics)
	}
}
