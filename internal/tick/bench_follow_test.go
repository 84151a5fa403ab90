package tick_test

// BenchmarkFollowLatency (scripts/bench.sh latency): commit-to-delivery time with follow mode on
// and off, for the logical, xid and timestamp+pk cursors, at LATENCY_RATES changes a second
// (default 1,000 and 10,000) written by LATENCY_CLIENTS (4) pgbench-style clients: each commits
// transactions of 5 rows at its share of the rate (paced by the clock, catching up when late, as
// pgbench --rate), with synchronous_commit on (the server's default is off here, and logical
// decoding reads only flushed WAL); a change's latency runs from the moment its INSERT was sent.
// The poller's timer fires every LATENCY_PERIOD_MS as its {P}_SCHEDULE ("S/60 * * * * *": from
// 2 s after the start on), as the host's timer fires: one tick at a time, the next at once when
// a tick ran past its firing. Follow on: every 60,000 ms with {P}_FOLLOW LATENCY_FOLLOW_MS,
// 59,500 (a tick follows all the time but for the pause the host needs between two
// invocations), for LATENCY_FOLLOW_SECONDS (130: two ticks' ends, where changes wait for the
// next tick); follow off: every 1,000 ms (the shortest schedule people run), for LATENCY_SECONDS
// (20). Reported: p50/p95/p99/max latency of every row,
// the rows delivered against those written (keep-up), and blob writes a minute. With follow on,
// LATENCY_BURSTS (5) bursts of LATENCY_BURST_ROWS (300,000) rows, each committed in one
// transaction, are delivered while the tick follows, and as many by catch-up ticks (follow off):
// the median rate of each, from a burst's first row delivered to its last (follow/catchup;
// timestamp+pk's rows come out of the settle lag as they were inserted, which paces its follow).
//
// LATENCY_DIAG=1 logs each tick's span and the p50/p99 of the changes committed in each quarter
// second: where the latency comes from (a tick's end, a stall of the server's).
//
// The timestamp+pk poller reads with a settle lag of LATENCY_SETTLE_MS (1,000): its latency
// cannot be less (docs/follow.md).

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

func BenchmarkFollowLatency(b *testing.B) {
	kinds := strings.Fields(os.Getenv("LATENCY_KINDS"))
	if len(kinds) == 0 {
		kinds = []string{"logical", "xid", "timestamp+pk"}
	}
	var rates []int
	for _, f := range strings.Fields(os.Getenv("LATENCY_RATES")) {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n <= 0 {
			b.Fatalf("LATENCY_RATES: %q is not a rate", f)
		}
		rates = append(rates, n)
	}
	if len(rates) == 0 {
		rates = []int{1000, 10000}
	}
	for _, rate := range rates {
		for _, kind := range kinds {
			for _, follow := range []bool{true, false} {
				mode := map[bool]string{true: "follow", false: "timer"}[follow]
				b.Run(fmt.Sprintf("%s/%s/%d", strings.ReplaceAll(kind, "+", "-"), mode, rate), func(b *testing.B) {
					for b.Loop() {
						followLatency(b, kind, follow, rate)
					}
				})
			}
		}
	}
}

// flDDL: the latency table: the logical cursor reads its changes, the xid cursor xid, the
// timestamp+pk cursor updated_at (the insert's clock_timestamp()).
const flDDL = `CREATE TABLE %s (id bigint PRIMARY KEY, customer text NOT NULL, amount numeric(12,2) NOT NULL,
  xid xid8 NOT NULL DEFAULT pg_current_xact_id(), updated_at timestamptz NOT NULL DEFAULT clock_timestamp())`

// flPoller is the latency table's poller of kind, its handler noting when each row arrived.
func flPoller(kind, table string, arrived []atomic.Int64) *poller.Poller {
	h := func(_ context.Context, bt *poller.Batch[poller.Row]) error {
		now := time.Now().UnixNano()
		for _, r := range bt.Raw {
			if id, ok := r.Get("id").(int64); ok && id < int64(len(arrived)) {
				arrived[id].CompareAndSwap(0, now)
			}
		}
		return nil
	}
	opts := []poller.Option{poller.WithColumns("id", "customer", "amount", "xid", "updated_at"), poller.WithKey("id")}
	switch kind {
	case "xid":
		return poller.New("follow", table, poller.XID, h, append(opts, poller.WithCursorColumn("xid"))...)
	case "timestamp+pk":
		return poller.New("follow", table, poller.TimestampPK, h, append(opts, poller.WithCursorColumn("updated_at"))...)
	}
	return poller.New("follow", table, poller.Logical, h, opts...)
}

func followLatency(b *testing.B, kind string, follow bool, rate int) {
	const txRows = 5
	secs := envInt("LATENCY_SECONDS", 20)
	if follow {
		secs = envInt("LATENCY_FOLLOW_SECONDS", 2*envInt("LATENCY_PERIOD_MS", 60_000)/1000+10)
	}
	clients := envInt("LATENCY_CLIENTS", 4)
	burst := envInt("LATENCY_BURST_ROWS", 300_000)
	bursts := envInt("LATENCY_BURSTS", 5)
	e := newLgEnv(b)
	table := testenv.Name("follow")
	e.exec(fmt.Sprintf(flDDL, table), "CREATE INDEX ON "+table+" (xid, id)", "CREATE INDEX ON "+table+" (updated_at, id)",
		"CREATE PUBLICATION "+table+" FOR TABLE "+table)
	b.Cleanup(func() { e.db.Exec("DROP PUBLICATION IF EXISTS " + table); e.db.Exec("DROP TABLE IF EXISTS " + table) })
	capacity := rate*secs*3/2 + 2*bursts*burst + 1000
	committed := make([]atomic.Int64, capacity)
	arrived := make([]atomic.Int64, capacity)

	s := lgSettings(e.dsn, "", "")
	if kind == "logical" {
		s.Slot, s.Publication = e.slot(), table
	}
	s.SettleLag = time.Duration(envInt("LATENCY_SETTLE_MS", 1000)) * time.Millisecond // timestamp+pk's alone
	period := time.Duration(envInt("LATENCY_PERIOD_MS", 1000)) * time.Millisecond
	if follow {
		period = time.Duration(envInt("LATENCY_PERIOD_MS", 60_000)) * time.Millisecond
		s.Follow = time.Duration(envInt("LATENCY_FOLLOW_MS", 59_500)) * time.Millisecond
		s.FollowInterval, s.FollowCommit = appsettings.DefaultFollowInterval, appsettings.DefaultFollowCommit
	}
	s.TickBudget = max(s.Follow, period)
	if period%time.Second != 0 || time.Minute%period != 0 {
		b.Fatalf("LATENCY_PERIOD_MS: %v is not a whole number of seconds that divides a minute (the timer's NCRONTAB schedule)", period)
	}
	// The schedule fires every period from 2 s from now on (the seconds field "first/period").
	p := int(period / time.Second)
	s.Schedule = fmt.Sprintf("%d/%d * * * * *", (time.Now().Second()+2)%p, p)
	sched, err := appsettings.ParseSchedule(s.Schedule)
	if err != nil {
		b.Fatal(err)
	}
	r := e.runner(flPoller(kind, table, arrived), s)
	r.Settings.Follow = 0
	if sum, err := r.Tick(context.Background(), ""); err != nil { // the first tick: a logical poller starts at now
		b.Fatalf("first tick: %+v %v", sum, err)
	}
	r.Settings.Follow = s.Follow

	// The timer, as the Functions host's (TimerListener, Microsoft.Azure.WebJobs.Extensions.Timers):
	// it fires at the schedule's first firing, invokes a tick and waits for it, and fires again
	// at the schedule's next firing after the last one's: at once when a tick ran past it (none
	// is skipped, and none starts while a tick runs).
	at := sched.Next(time.Now())
	time.Sleep(time.Until(at)) // the schedule's first firing
	t0diag := time.Now()
	stop := make(chan struct{})
	timerDone := make(chan struct{})
	var ticks, failed atomic.Int64
	go func() {
		defer close(timerDone)
		for {
			ts := time.Now()
			sum, err := r.Tick(context.Background(), "")
			if err != nil {
				failed.Add(1)
				b.Logf("tick: %v", err)
			}
			if os.Getenv("LATENCY_DIAG") != "" {
				b.Logf("diag tick %v-%v %s rows %d", ts.Sub(t0diag).Round(time.Millisecond), time.Since(t0diag).Round(time.Millisecond), sum.Outcome, sum.Rows)
			}
			ticks.Add(1)
			at = sched.Next(at)
			tm := time.NewTimer(max(time.Until(at), 0))
			select {
			case <-stop:
				tm.Stop()
				return
			case <-tm.C:
			}
		}
	}()

	// The writers: pgbench-style clients at rate/clients changes a second each.
	w := testenv.DB(b, "pgx", e.dsn+"&synchronous_commit=on")
	w.SetMaxOpenConns(clients)
	w.SetMaxIdleConns(clients) // database/sql keeps 2 by default: the others would connect again for every transaction
	var nextID atomic.Int64
	insert := func(n int) {
		last := nextID.Add(int64(n))
		first := last - int64(n) + 1
		// A change's commit time is when its transaction (one INSERT, autocommitted) was sent: the
		// server commits before it answers, and a streamed change can arrive before the answer.
		sent := time.Now().UnixNano()
		if _, err := w.Exec("INSERT INTO "+table+" (id, customer, amount) SELECT g, 'c', 1 FROM generate_series($1::bigint, $2::bigint) g", first, last); err != nil {
			b.Error(err)
			return
		}
		for id := first; id <= last; id++ {
			committed[id].Store(sent)
		}
	}
	puts0, t0 := e.ct.Puts.Load(), time.Now()
	end := t0.Add(time.Duration(secs) * time.Second)
	every := time.Duration(float64(time.Second) * float64(clients*txRows) / float64(rate))
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := t0.Add(every * time.Duration(c) / time.Duration(clients))
			for next.Before(end) {
				time.Sleep(time.Until(next)) // the client's pace (pgbench --rate), not a wait for a result
				insert(txRows)
				next = next.Add(every)
			}
		}()
	}
	wg.Wait()
	wrote := time.Since(t0)
	written := nextID.Load()
	deliveredInTime := int64(0)
	endNanos := time.Now().UnixNano()
	for id := int64(1); id <= written; id++ {
		if a := arrived[id].Load(); a != 0 && a <= endNanos {
			deliveredInTime++
		}
	}
	puts := e.ct.Puts.Load() - puts0
	waitAll := func(upTo int64, within time.Duration) {
		deadline := time.Now().Add(within)
		for id := int64(1); id <= upTo; id++ {
			for arrived[id].Load() == 0 {
				if time.Now().After(deadline) {
					b.Fatalf("%s: row %d of %d never arrived", kind, id, upTo)
				}
				time.Sleep(10 * time.Millisecond) // polling with a deadline
			}
		}
	}
	waitAll(written, 2*period+30*time.Second)

	var lat []time.Duration
	for id := int64(1); id <= written; id++ {
		lat = append(lat, time.Duration(arrived[id].Load()-committed[id].Load()))
	}
	if os.Getenv("LATENCY_DIAG") != "" {
		type bk struct{ l []time.Duration }
		bks := map[int64]*bk{}
		t0n := t0.UnixNano()
		for id := int64(1); id <= written; id++ {
			k := (committed[id].Load() - t0n) / int64(250*time.Millisecond)
			if bks[k] == nil {
				bks[k] = &bk{}
			}
			bks[k].l = append(bks[k].l, time.Duration(arrived[id].Load()-committed[id].Load()))
		}
		for k := int64(0); k < int64(len(bks)+5); k++ {
			if x := bks[k]; x != nil {
				slices.Sort(x.l)
				b.Logf("diag %5.2fs n=%5d p50=%8.1f p99=%8.1f", float64(k)/4, len(x.l), float64(pct(x.l, 0.5).Microseconds())/1000, float64(pct(x.l, 0.99).Microseconds())/1000)
			}
		}
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(pct(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(pct(lat, 0.95)), "p95-ms")
	b.ReportMetric(ms(pct(lat, 0.99)), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
	b.ReportMetric(float64(written)/wrote.Seconds(), "written/s")
	b.ReportMetric(float64(deliveredInTime)/float64(written), "keep-up")
	b.ReportMetric(float64(puts)/wrote.Minutes(), "blob-writes/min")

	if follow && burst > 0 {
		// A burst of one transaction while the tick follows, then the same burst for a catch-up
		// tick (follow off) once the timer stopped; each delivered at the rate from its first
		// row's arrival to its last's.
		burstOf := func() (first, last int64) {
			insert(burst)
			return nextID.Load() - int64(burst) + 1, nextID.Load()
		}
		rateOf := func(first, last int64) float64 {
			lo, hi := int64(1<<62), int64(0)
			for id := first; id <= last; id++ {
				a := arrived[id].Load()
				lo, hi = min(lo, a), max(hi, a)
			}
			return float64(last-first+1) / time.Duration(hi-lo).Seconds()
		}
		median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
		var follows, catchUps []float64
		for range bursts {
			first, last := burstOf()
			waitAll(last, 2*period+60*time.Second)
			follows = append(follows, rateOf(first, last))
		}
		close(stop)
		<-timerDone
		r.Settings.Follow = 0
		// The last following tick held its stream for a next one that will not come, which would
		// serve the catch-up ticks (a change of the settings restarts the host, and its streams).
		if f := r.Source.(interface{ Follower() driver.Follower }).Follower(); f != nil {
			if err := f.EndFollow(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		lag := time.Duration(0)
		if kind == "timestamp+pk" {
			lag = s.SettleLag
		}
		for range bursts {
			first, last := burstOf()
			time.Sleep(lag) // a timestamp+pk row is readable once its settle lag has passed
			if sum, err := r.Tick(context.Background(), ""); err != nil || sum.Rows != int(last-first+1) {
				b.Fatalf("catch-up tick: %+v %v (want %d rows)", sum, err, last-first+1)
			}
			catchUps = append(catchUps, rateOf(first, last))
		}
		b.Logf("bursts: follow %.0f rows/s, catch-up %.0f rows/s", follows, catchUps)
		followRate, catchUp := median(follows), median(catchUps)
		b.ReportMetric(followRate, "burst-follow-rows/s")
		b.ReportMetric(catchUp, "burst-catchup-rows/s")
		b.ReportMetric(followRate/catchUp, "follow/catchup")
	} else {
		close(stop)
		<-timerDone
	}
	b.Logf("%s, follow %v, %d changes/s: %d rows written in %v by %d clients, %d ticks (%d failed)", kind, follow, rate, written, wrote.Round(time.Millisecond), clients, ticks.Load(), failed.Load())
}
