package tick_test

import (
	"context"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// BenchmarkTickMachinery measures the tick's own work, with its source and state store in memory
// and a handler that does nothing: per batch of a tick of 100 (each committed: checkpoint
// interval 0), and per idle tick. What it times is what the tick adds to a row's path beside the
// database and the blob (its spans and metrics among it); scripts/bench.sh times those.
func BenchmarkTickMachinery(b *testing.B) {
	noop := pollerdef.Of(ordersPoller(func(context.Context, *poller.Batch[poller.Row]) error { return nil }))
	run := func(b *testing.B, batches int) {
		ops := 0
		for b.Loop() {
			b.StopTimer() // a new state store and lease each tick: each starts from the beginning
			m, err := lease.New(memstore.New(nil), lease.Config{Poller: "orders", Blob: blobpath.State("test", "orders"), Owner: "A", Fingerprint: "sha256:window"})
			if err != nil {
				b.Fatal(err)
			}
			// No heartbeat in a tick however slow (callgrind runs it about 50 times slower, and
			// bench.sh instructions counts it: a heartbeat's work would make the count follow the
			// machine's speed).
			r := &tick.Runner{Poller: noop, Lease: m, Source: &windowSource{n: batches, size: 1000},
				Settings: appsettings.Settings{BatchSize: 1000, LeaseTTL: time.Hour, HeartbeatInterval: 15 * time.Minute,
					TickBudget: time.Hour, CheckpointInterval: 0}}
			b.StartTimer()
			sum, err := r.Tick(ctx, "bench")
			if err != nil || sum.Batches != batches {
				b.Fatalf("tick: %+v %v", sum, err)
			}
			ops += max(batches, 1)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(ops), "ns/batch")
	}
	b.Run("batches", func(b *testing.B) { run(b, 100) })
	b.Run("idle", func(b *testing.B) { run(b, 0) })
}
