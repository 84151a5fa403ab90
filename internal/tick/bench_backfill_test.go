package tick_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// BenchmarkBackfill: a timestamp+pk poller, caught up, backfilling BACKFILL_ROWS (default
// 1,000,000) PostgreSQL rows in chunks of 1,000 with a no-op handler, state on Azurite, against a
// hand-written read of the same table by primary key in batches of 1,000 with typed scans, in
// the same run (alternating). Reports rows/s and MB/s of both and their ratio (goal >= 0.80).
func BenchmarkBackfill(b *testing.B) {
	rows := envInt("BACKFILL_ROWS", 1_000_000)
	az := testenv.Azurite(b)
	table := "catchup_orders_" + strconv.Itoa(rows) // the catch-up benchmark's table
	db, dsn := testenv.PostgresOrdersTable(b, table, rows)
	p := poller.New("orders", table, poller.TimestampPK, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
		poller.WithColumns("id", "customer", "amount", "updated_at"), poller.WithKey("id"), poller.WithCursorColumn("updated_at"))
	settings := appsettings.Settings{Driver: postgres.Name, DSN: dsn, BatchSize: 1000, LeaseTTL: lease.DefaultTTL, HeartbeatInterval: lease.DefaultTTL / 4,
		TickBudget: time.Hour, CheckpointInterval: appsettings.DefaultCheckpointInterval, SettleLag: sourcedef.DefaultSettleLag}
	src, err := drivers.Open(context.Background(), settings.Config(pollerdef.Of(p)))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	sample, err := src.Fetch(context.Background(), nil, 1000)
	if err != nil {
		b.Fatal(err)
	}
	bytesPerRow := testenv.JSONBytesPerRow(b, sample, len(sample.Rows))
	st, err := blobstore.New(blobstore.Settings{Setting: "bench", ConnectionString: az, Container: "db-state"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var tBack, tHand time.Duration
	for i := 0; b.Loop(); i++ {
		app := testenv.Name("bfbench-")
		r, err := tick.Open(context.Background(), tick.Config{Poller: pollerdef.Of(p), Settings: settings, Store: st, App: app, Owner: "bench/1", Source: src})
		if err != nil {
			b.Fatal(err)
		}
		if sum, err := r.Tick(context.Background(), ""); err != nil || sum.Rows != rows { // caught up: the live side idle
			b.Fatalf("catch-up: %+v %v", sum, err)
		}
		runBackfill := func() {
			writeBackfill(b, st, app, "orders", &state.Backfill{ID: "bf_bench", Kind: state.BackfillRequested, Chunk: 1000, StartedAt: state.At(time.Now())})
			t0 := time.Now()
			sum, err := r.Tick(context.Background(), "")
			if err != nil || sum.Rows != rows || sum.Ops[row.OpRead] != rows {
				b.Fatalf("backfill tick: %+v %v", sum, err)
			}
			tBack += time.Since(t0)
			if d := readDoc(b, st, app, "orders"); d.Backfill != nil {
				b.Fatalf("the backfill did not end: %+v", d.Backfill)
			}
		}
		runHand := func() {
			t0 := time.Now()
			if n, err := testenv.PostgresPKLoop(db, table, 1000); err != nil || n != rows {
				b.Fatalf("hand-written read: %d rows, %v", n, err)
			}
			tHand += time.Since(t0)
		}
		testenv.InTurn(i, runBackfill, runHand)
	}
	total := float64(rows) * float64(b.N)
	b.ReportMetric(total/tBack.Seconds(), "backfill-rows/s")
	b.ReportMetric(total/tHand.Seconds(), "handwritten-rows/s")
	b.ReportMetric(tHand.Seconds()/tBack.Seconds(), "backfill/handwritten")
	testenv.ReportMB(b, bytesPerRow, map[string]float64{"backfill": total / tBack.Seconds(), "handwritten": total / tHand.Seconds()})
}

// BenchmarkBackfillLiveLatency: an xid poller on a 1 s schedule delivering rows a writer commits
// a random 0-1.5 s apart (LATENCY_ROWS, 30), while a backfill of BACKFILL_LIVE_ROWS (200,000)
// rows runs beside it (started again whenever it ends) and, in the other half of the runs
// (alternating), without one: commit-to-delivery p50 and p95 of both, and the ratio of the p95s
// (with / without).
func BenchmarkBackfillLiveLatency(b *testing.B) {
	n, rows := envInt("LATENCY_ROWS", 30), envInt("BACKFILL_LIVE_ROWS", 200_000)
	e := newLgEnv(b)
	e.insert(rows, 1000)
	w := testenv.DB(b, "pgx", e.dsn)
	var mu sync.Mutex
	committed, arrived := map[int64]time.Time{}, map[int64]time.Time{}
	var reads int
	r := e.runner(lgPoller(poller.XID, e.table, func(_ context.Context, bt *poller.Batch[poller.Row]) error {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, r := range bt.Raw {
			if r.Op() == row.OpRead {
				reads++
				continue
			}
			if id := r.Key()["id"].(int64); id > int64(rows) {
				if _, ok := arrived[id]; !ok {
					arrived[id] = now
				}
			}
		}
		return nil
	}), lgSettings(e.dsn, "", ""))
	if sum, err := r.Tick(context.Background(), ""); err != nil || sum.Rows != rows {
		b.Fatalf("catch-up: %+v %v", sum, err)
	}
	// The runner's state blob is state/{app}/orders.json, its app its own.
	app := strings.TrimSuffix(strings.TrimPrefix(r.Lease.Config().Blob, "state/"), "/orders.json")
	var lat [2][]time.Duration // without, with
	next := int64(rows) + 1
	for i := 0; b.Loop(); i++ {
		with := i%2 == 1
		first := next
		done := writeSpaced(b, w, e.table, first, n, &mu, committed)
		next += int64(n)
		tickUntil(done, func() bool {
			if with && readDoc(b, e.st, app, "orders").Backfill == nil { // one runs throughout
				writeBackfill(b, e.st, app, "orders", &state.Backfill{ID: "bf_bench", Kind: state.BackfillRequested, Chunk: 1000, StartedAt: state.At(time.Now())})
			}
			if _, err := r.Tick(context.Background(), ""); err != nil {
				b.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			return len(arrived) >= int(next-int64(rows)-1)
		})
		mu.Lock()
		for id := first; id < next; id++ {
			a, ok := arrived[id]
			if !ok {
				b.Fatalf("row %d never arrived", id)
			}
			k := 0
			if with {
				k = 1
			}
			lat[k] = append(lat[k], a.Sub(committed[id]))
		}
		mu.Unlock()
	}
	if b.N < 2 {
		b.Fatal("run it at least twice (-benchtime 2x): once without a backfill, once with")
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	var p95 [2]float64
	for k, name := range []string{"without", "with"} {
		s := slices.Clone(lat[k])
		slices.Sort(s)
		p95[k] = ms(pct(s, 0.95))
		b.ReportMetric(ms(pct(s, 0.50)), name+"-p50-ms")
		b.ReportMetric(p95[k], name+"-p95-ms")
	}
	b.ReportMetric(p95[1]/p95[0], "p95-with/without")
	b.ReportMetric(float64(reads)/float64(b.N/2), "reads/run")
}
