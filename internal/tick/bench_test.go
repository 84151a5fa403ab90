package tick_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// BenchmarkCatchUp: a poller catching up on CATCHUP_ROWS (default 1,000,000, as the source and
// e2e sections read; a tick's fixed cost, its lease's acquire and release, is about 5% of a
// 200,000-row catch-up) PostgreSQL rows in batches of 1,000 with a no-op handler, state on
// Azurite, against a hand-written keyset loop over the same table in the same run (alternating).
// Reports rows/s and MB/s (testenv.JSONBytesPerRow) for both and their ratio (target >= 0.95),
// and the blob requests of the catch-up and of an idle tick.
func BenchmarkCatchUp(b *testing.B) {
	for _, interval := range []time.Duration{appsettings.DefaultCheckpointInterval, 0} {
		name := "checkpoint-every-" + interval.String()
		if interval == 0 {
			name = "checkpoint-every-batch"
		}
		b.Run(name, func(b *testing.B) { catchUp(b, interval) })
	}
}

func catchUp(b *testing.B, interval time.Duration) {
	rows := 1_000_000
	if n, err := strconv.Atoi(os.Getenv("CATCHUP_ROWS")); err == nil && n > 0 {
		rows = n
	}
	az := testenv.Azurite(b)
	table := "catchup_orders_" + strconv.Itoa(rows)
	db, dsn := testenv.PostgresOrdersTable(b, table, rows)
	p := poller.New("orders", table, poller.TimestampPK, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
		poller.WithColumns("id", "customer", "amount", "updated_at"), poller.WithKey("id"), poller.WithCursorColumn("updated_at"))
	settings := appsettings.Settings{Driver: postgres.Name, DSN: dsn, BatchSize: 1000, LeaseTTL: lease.DefaultTTL, HeartbeatInterval: lease.DefaultTTL / 4,
		TickBudget: time.Hour, CheckpointInterval: interval, SettleLag: sourcedef.DefaultSettleLag}
	src, err := drivers.Open(context.Background(), source.Config{Poller: "orders", Driver: postgres.Name, DSN: dsn, Definition: pollerdef.Of(p).Source()})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	sample, err := src.Fetch(context.Background(), nil, 1000)
	if err != nil {
		b.Fatal(err)
	}
	bytesPerRow := testenv.JSONBytesPerRow(b, sample, len(sample.Rows))
	ct := &testenv.CountingTransport{}
	st, err := blobstore.New(blobstore.Settings{Setting: "bench", ConnectionString: az, Container: "db-state"}, &blobstore.Options{Transport: ct})
	if err != nil {
		b.Fatal(err)
	}
	runner := func() *tick.Runner {
		r, err := tick.Open(context.Background(), tick.Config{Poller: pollerdef.Of(p), Settings: settings, Store: st, App: testenv.Name("bench-"), Owner: "bench/1",
			Source: src})
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	hand := func() int {
		n, err := testenv.PostgresKeysetLoop(db, table, 1000)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	var tTick, tHand time.Duration
	var tickGets, tickPuts, batches, idleGets, idlePuts int64
	for i := 0; b.Loop(); i++ {
		r := runner()
		runTick := func() {
			g0, p0 := ct.Gets.Load(), ct.Puts.Load()
			t0 := time.Now()
			sum, err := r.Tick(context.Background(), "")
			if err != nil || sum.Rows != rows {
				b.Fatalf("catch-up tick: %+v %v", sum, err)
			}
			tTick += time.Since(t0)
			tickGets += ct.Gets.Load() - g0
			tickPuts += ct.Puts.Load() - p0
			batches += int64(sum.Batches)
		}
		runHand := func() {
			t0 := time.Now()
			if n := hand(); n != rows {
				b.Fatalf("hand-written loop read %d rows", n)
			}
			tHand += time.Since(t0)
		}
		testenv.InTurn(i, runTick, runHand)
		g0, p0 := ct.Gets.Load(), ct.Puts.Load()
		if sum, err := r.Tick(context.Background(), ""); err != nil || sum.Outcome != tick.Idle {
			b.Fatalf("idle tick: %+v %v", sum, err)
		}
		idleGets += ct.Gets.Load() - g0
		idlePuts += ct.Puts.Load() - p0
	}
	n := float64(b.N)
	total := float64(rows) * n
	b.ReportMetric(total/tTick.Seconds(), "tick-rows/s")
	b.ReportMetric(total/tHand.Seconds(), "handwritten-rows/s")
	b.ReportMetric(tHand.Seconds()/tTick.Seconds(), "tick/handwritten")
	b.ReportMetric(float64(batches)/n, "batches/tick")
	b.ReportMetric(float64(tickGets)/n, "blob-reads/tick")
	b.ReportMetric(float64(tickPuts)/n, "blob-writes/tick")
	b.ReportMetric(float64(idleGets)/n, "idle-blob-reads")
	b.ReportMetric(float64(idlePuts)/n, "idle-blob-writes")
	testenv.ReportMB(b, bytesPerRow, map[string]float64{"tick": total / tTick.Seconds(), "handwritten": total / tHand.Seconds()})
}
