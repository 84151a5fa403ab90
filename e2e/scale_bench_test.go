package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// BenchmarkScale is item 3 of issue 28, a cost that grows linearly, measured on the handler binary
// (benchHandler) invoked as the Functions host invokes it, state on Azurite, a fresh handler
// process and state blob for every catch-up:
//
//   - rows: the example poller orders, default settings, catching up on SCALE_SMALL (1,000,000)
//     and SCALE_LARGE (10,000,000) PostgreSQL rows, the order alternating across iterations:
//     both rows/s and peak RSS (VmHWM), and large/small of each (goals >= 0.90 and <= 1.2).
//   - logical: the same for a logical cursor (a poller declared in poller.json, cursor kind
//     logical, a batch-mode webhook sink to a local server that only reads the request) over
//     SCALE_LOGICAL_SMALL (100,000) and SCALE_LOGICAL_LARGE (1,000,000) inserts committed in
//     transactions of SCALE_LOGICAL_TX_ROWS (5), each on a fresh slot.
//   - pollers: an app of SCALE_POLLERS (50) declared pollers, each with its own state blob,
//     reading one table of SCALE_POLLER_ROWS (10,000) rows to the same webhook, all invoked at once
//     until caught up and then once more (idle), against an app of one of them alone (5 runs an
//     iteration): the handler's peak RSS, each invocation's p50 and p95 time, catching up and
//     idle, and the most PostgreSQL connections the handler held at once (pg_stat_activity by
//     application_name, sampled), which must stay within POLLER_DB_MAX_CONNECTIONS' default
//     (source.DefaultPoolSize): above it, the benchmark fails.
func BenchmarkScale(b *testing.B) {
	bin := benchHandler()
	storage := testenv.Azurite(b)
	// The tables first, here: what a sub-benchmark prints while it runs lands inside its result
	// line from the second -count on, where scripts/bench.sh would not find the figures.
	small, large := envSize("SCALE_SMALL", 1_000_000), envSize("SCALE_LARGE", 10_000_000)
	dsnSmall, _ := ordersTable(b, small)
	dsnLarge, _ := ordersTable(b, large)
	pollerRows := envSize("SCALE_POLLER_ROWS", 10_000)
	dsnPollers, db := ordersTable(b, pollerRows)
	b.Run("rows", func(b *testing.B) { scaleRows(b, bin, storage, small, dsnSmall, large, dsnLarge) })
	b.Run("logical", func(b *testing.B) { scaleLogical(b, bin, storage) })
	b.Run("pollers", func(b *testing.B) { scalePollers(b, bin, storage, pollerRows, dsnPollers, db) })
}

// envSize is the positive integer in the environment variable name, else def.
func envSize(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// sizeRuns adds up the catch-ups of one size: time, rows and the highest peak RSS seen.
type sizeRuns struct {
	rows int
	dur  time.Duration
	peak float64
}

func (s *sizeRuns) add(d time.Duration, peak float64) {
	s.dur += d
	s.peak = max(s.peak, peak)
}

// rate is the rows/s over n catch-ups.
func (s *sizeRuns) rate(n int) float64 { return float64(s.rows) * float64(n) / s.dur.Seconds() }

// reportSizes reports both sizes' rows/s and peak RSS, and large/small of each.
func reportSizes(b *testing.B, small, large *sizeRuns) {
	rs, rl := small.rate(b.N), large.rate(b.N)
	b.ReportMetric(rs, "small-rows/s")
	b.ReportMetric(rl, "large-rows/s")
	b.ReportMetric(rl/rs, "large/small-rows/s")
	b.ReportMetric(small.peak, "small-peak-rss-MB")
	b.ReportMetric(large.peak, "large-peak-rss-MB")
	b.ReportMetric(large.peak/small.peak, "large/small-peak-rss")
	b.ReportMetric(float64(small.rows), "small-rows")
	b.ReportMetric(float64(large.rows), "large-rows")
}

// scaleRows: the orders poller catching up on the tables of smallRows and largeRows rows (DSNs
// dsnSmall and dsnLarge, made by ordersTable).
func scaleRows(b *testing.B, bin, storage string, smallRows int, dsnSmall string, largeRows int, dsnLarge string) {
	small, large := &sizeRuns{rows: smallRows}, &sizeRuns{rows: largeRows}
	bytesPerRow := ordersBytesPerRow(b, dsnSmall, appsettings.DefaultBatchSize)
	run := func(s *sizeRuns, dsn string) func() {
		return func() {
			d, peak, _ := catchUpInHandler(b, bin, []string{"PATH=" + os.Getenv("PATH"), "StateStorage=" + storage,
				"POLLER_APP_NAME=" + testenv.Name("scale-rows-"), "ORDERS_DB_DRIVER=postgres", "ORDERS_DB_CONNECTION=" + dsn}, s.rows)
			s.add(d, peak)
		}
	}
	for i := 0; b.Loop(); i++ {
		testenv.InTurn(i, run(small, dsnSmall), run(large, dsnLarge))
	}
	reportSizes(b, small, large)
	testenv.ReportMB(b, bytesPerRow, map[string]float64{"small": small.rate(b.N), "large": large.rate(b.N)})
}

// declaredApp writes an app root holding a poller folder (function.json with a timer, poller.json
// spec) for each of names, and returns the root.
func declaredApp(b *testing.B, spec string, names ...string) string {
	root := b.TempDir()
	const function = `{"bindings":[{"type":"timerTrigger","direction":"in","name":"timer","schedule":"*/10 * * * * *"}]}`
	for _, n := range names {
		dir := filepath.Join(root, n)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for file, text := range map[string]string{"function.json": function, "poller.json": spec} {
			if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return root
}

// sinkServer is a webhook that reads each request and answers 204: the cheapest consumer, so
// that what is measured is the handler.
func sinkServer(b *testing.B) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// webhookSpec is a poller.json source (JSON) with a batch-mode webhook sink to url.
func webhookSpec(b *testing.B, source map[string]any, url string) string {
	data, err := json.Marshal(map[string]any{"source": source, "sink": map[string]any{"type": "webhook", "url": url, "mode": "batch"}})
	if err != nil {
		b.Fatal(err)
	}
	return string(data)
}

func scaleLogical(b *testing.B, bin, storage string) {
	small := &sizeRuns{rows: envSize("SCALE_LOGICAL_SMALL", 100_000)}
	large := &sizeRuns{rows: envSize("SCALE_LOGICAL_LARGE", 1_000_000)}
	txRows := envSize("SCALE_LOGICAL_TX_ROWS", 5)
	dsn := testenv.Postgres(b)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	table := testenv.Name("scale_lg_")
	exec := func(qs ...string) {
		b.Helper()
		for _, q := range qs {
			if _, err := db.Exec(q); err != nil {
				b.Fatalf("%s: %v", q, err)
			}
		}
	}
	exec(`CREATE TABLE `+table+` (id bigint PRIMARY KEY, customer text NOT NULL, amount numeric(12,2) NOT NULL)`,
		`CREATE PUBLICATION `+table+` FOR TABLE `+table)
	var slots []string
	b.Cleanup(func() {
		for _, s := range slots {
			_, _ = db.Exec("SELECT pg_drop_replication_slot($1)", s)
		}
		_, _ = db.Exec("DROP PUBLICATION IF EXISTS " + table)
		_, _ = db.Exec("DROP TABLE IF EXISTS " + table)
		db.Close()
	})
	root := declaredApp(b, webhookSpec(b, map[string]any{"table": table, "columns": []string{"id", "customer", "amount"},
		"key": []string{"id"}, "cursor": map[string]any{"kind": "logical"}}, sinkServer(b)), "changes")

	run := func(s *sizeRuns) func() {
		return func() {
			exec("TRUNCATE " + table) // before the slot: it sees only what follows
			slot := testenv.Name("scale_lg_")
			exec(fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", slot))
			slots = append(slots, slot)
			insertLogical(b, db, table, s.rows, txRows)
			h := startHandler(b, bin, []string{"PATH=" + os.Getenv("PATH"), "StateStorage=" + storage, "AzureWebJobsScriptRoot=" + root,
				"POLLER_APP_NAME=" + testenv.Name("scale-lg-"), "CHANGES_DB_DRIVER=postgres", "CHANGES_DB_CONNECTION=" + dsn,
				"CHANGES_CDC_SLOT=" + slot, "CHANGES_CDC_PUBLICATION=" + table})
			d, _ := h.catchUp("changes", s.rows)
			s.add(d, h.peakMB())
			h.stop()
			exec(fmt.Sprintf("SELECT pg_drop_replication_slot('%s')", slot))
			slots = slices.DeleteFunc(slots, func(x string) bool { return x == slot })
		}
	}
	for i := 0; b.Loop(); i++ {
		testenv.InTurn(i, run(small), run(large))
	}
	reportSizes(b, small, large)
}

// insertLogical commits rows rows into table (ids from 1) in transactions of txRows rows, many
// transactions to a round trip; the last commit waits for its WAL flush (the test servers run with
// synchronous_commit=off, and logical decoding reads only flushed WAL), which flushes all before.
func insertLogical(b *testing.B, db *sql.DB, table string, rows, txRows int) {
	const perExec = 200
	var q strings.Builder
	for next := 1; next <= rows; {
		q.Reset()
		for k := 0; k < perExec && next <= rows; k++ {
			last := min(next+txRows-1, rows)
			q.WriteString("BEGIN;")
			if last == rows {
				q.WriteString("SET LOCAL synchronous_commit = on;")
			}
			fmt.Fprintf(&q, "INSERT INTO %s (id, customer, amount) SELECT g, 'customer ' || g, (g %% 100000) / 100.0 FROM generate_series(%d, %d) g;COMMIT;",
				table, next, last)
			next = last + 1
		}
		if _, err := db.Exec(q.String()); err != nil {
			b.Fatalf("inserting into %s: %v", table, err)
		}
	}
}

// pct is the q-quantile of sorted d (nearest rank), in ms.
func pct(d []time.Duration, q float64) float64 {
	i := max(0, min(len(d)-1, int(q*float64(len(d))+0.5)-1))
	return float64(d[i].Microseconds()) / 1000
}

// scalePollers: SCALE_POLLERS pollers reading the orders table of rows rows (dsn, made by
// ordersTable; db counts the handler's connections).
func scalePollers(b *testing.B, bin, storage string, rows int, dsn string, db *sql.DB) {
	n := envSize("SCALE_POLLERS", 50)
	const aloneRuns = 5
	app := testenv.Name("scale-pollers-") // the handler's connections' application_name, to count them
	dsnApp := testenv.WithParam(dsn, "application_name", app)
	spec := webhookSpec(b, map[string]any{"table": "orders", "columns": []string{"id", "customer", "amount", "updated_at"},
		"key": []string{"id"}, "cursor": map[string]any{"kind": "timestamp+pk", "column": "updated_at"}, "settle_lag": "5s"}, sinkServer(b))
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("p%02d", i+1))
	}
	all, one := declaredApp(b, spec, names...), declaredApp(b, spec, names[0])
	env := func(root string) []string {
		e := []string{"PATH=" + os.Getenv("PATH"), "StateStorage=" + storage, "AzureWebJobsScriptRoot=" + root,
			"POLLER_APP_NAME=" + testenv.Name("scale-pollers-")}
		for _, name := range names {
			p := strings.ToUpper(name)
			e = append(e, p+"_DB_DRIVER=postgres", p+"_DB_CONNECTION="+dsnApp)
		}
		return e
	}

	// The ticks of each app: catching up (a fresh process's first ticks) and then idle, each
	// poller's timer firing once more with nothing new.
	var allTicks, oneTicks, allIdle, oneIdle []time.Duration
	var allPeak, onePeak float64
	var conns int
	for b.Loop() {
		h := startHandler(b, bin, env(all))
		stopSampling := sampleConnections(b, db, app, &conns)
		allTicks = append(allTicks, atOnce(b, h, names, rows)...)
		allIdle = append(allIdle, atOnce(b, h, names, 0)...)
		stopSampling()
		allPeak = max(allPeak, h.peakMB())
		h.stop()

		for range aloneRuns {
			h := startHandler(b, bin, env(one))
			_, ticks := h.catchUp(names[0], rows)
			oneTicks = append(oneTicks, ticks...)
			_, ticks = h.catchUp(names[0], 0)
			oneIdle = append(oneIdle, ticks...)
			onePeak = max(onePeak, h.peakMB())
			h.stop()
		}
	}
	b.ReportMetric(float64(n), "pollers")
	b.ReportMetric(onePeak, "one-peak-rss-MB")
	b.ReportMetric(allPeak, "all-peak-rss-MB")
	b.ReportMetric(allPeak/onePeak, "all/one-peak-rss")
	for _, t := range []struct {
		name  string
		ticks []time.Duration
	}{{"one-tick", oneTicks}, {"all-tick", allTicks}, {"one-idle-tick", oneIdle}, {"all-idle-tick", allIdle}} {
		slices.Sort(t.ticks)
		b.ReportMetric(pct(t.ticks, 0.50), t.name+"-p50-ms")
		b.ReportMetric(pct(t.ticks, 0.95), t.name+"-p95-ms")
	}
	b.ReportMetric(float64(conns), "peak-pg-conns")
	b.ReportMetric(source.DefaultPoolSize, "pg-conns-bound")
	if conns > source.DefaultPoolSize {
		b.Fatalf("the handler held %d PostgreSQL connections at once for %d pollers on one database; POLLER_DB_MAX_CONNECTIONS (default %d) bounds them",
			conns, n, source.DefaultPoolSize)
	}
}

// atOnce invokes each of the functions names of h at the same moment, as timers that fire
// together, each until it has delivered rows rows, and returns every invocation's time.
func atOnce(b *testing.B, h *handlerProc, names []string, rows int) []time.Duration {
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var all []time.Duration
	var failed atomic.Pointer[error]
	for _, name := range names {
		wg.Go(func() {
			<-start
			_, ticks, err := h.tryCatchUp(name, rows)
			if err != nil {
				failed.CompareAndSwap(nil, &err)
				return
			}
			mu.Lock()
			all = append(all, ticks...)
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	return all
}

// sampleConnections counts, every 10 ms until the returned func is called, the connections of
// application_name app in pg_stat_activity, keeping the highest count in *peak.
func sampleConnections(b *testing.B, db *sql.DB, app string, peak *int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			var c int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&c); err != nil {
				if ctx.Err() != nil {
					done <- nil
				} else {
					done <- fmt.Errorf("counting the handler's connections: %w", err)
				}
				return
			}
			*peak = max(*peak, c)
			select {
			case <-ctx.Done():
				done <- nil
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}
