package tick_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/telemetry"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// obxDDL is docs/outbox.md's PostgreSQL outbox (the xid cursor, its index and stamping trigger),
// named %[1]s, and the business table %[1]s_orders the producers write beside it.
const obxDDL = `CREATE TABLE %[1]s (id UUID PRIMARY KEY, aggregate_type VARCHAR(100) NOT NULL, aggregate_id VARCHAR(100) NOT NULL,
  type VARCHAR(100) NOT NULL, payload JSONB NOT NULL, headers JSONB,
  created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(), txid XID8 NOT NULL DEFAULT pg_current_xact_id());
CREATE INDEX ON %[1]s (txid, id);
CREATE FUNCTION %[1]s_stamp() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.txid := pg_current_xact_id(); RETURN NEW; END $$;
CREATE TRIGGER %[1]s_stamp BEFORE UPDATE ON %[1]s FOR EACH ROW EXECUTE FUNCTION %[1]s_stamp();
CREATE TABLE %[1]s_orders (id BIGSERIAL PRIMARY KEY, customer TEXT NOT NULL, amount NUMERIC(12,2) NOT NULL)`

// obxScript is the producers' pgbench transaction: an order and its event in one transaction,
// pipelined (one round trip, as pgx.Batch or Npgsql's batching send it), the event's payload
// carrying when it was written (clock_timestamp()), its aggregate one of 1,000 customers'.
const obxScript = `\set aggregate random(1, 1000)
\startpipeline
BEGIN;
INSERT INTO %[1]s_orders (customer, amount) VALUES ('customer ' || :aggregate, 9.50);
INSERT INTO %[1]s (id, aggregate_type, aggregate_id, type, payload) VALUES (gen_random_uuid(), 'order', :aggregate, 'OrderPlaced',
  jsonb_build_object('order', currval('%[1]s_orders_id_seq'), 'customer', 'customer ' || :aggregate, 'amount', 9.50, 'written_at', clock_timestamp()));
END;
\endpipeline
`

// obxArrival is an event as the receiver saw it first: when its payload says it was written and
// when its POST arrived.
type obxArrival struct{ written, received time.Time }

// obxReceiver is the local webhook: it notes each event's first arrival by its Idempotency-Key,
// counts re-deliveries, and answers 400 to a body without the payload's written_at (noting it:
// the benchmark fails on it).
type obxReceiver struct {
	mu     sync.Mutex
	got    map[string]obxArrival
	dups   int
	broken []string
}

func (rc *obxReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	body, err := io.ReadAll(r.Body)
	events := []obxEvent{{ID: r.Header.Get("Idempotency-Key"), Data: body}}
	if err == nil && strings.HasPrefix(r.Header.Get("Content-Type"), "application/cloudevents-batch+json") {
		err = json.Unmarshal(body, &events) // a sink in mode batch: the events' CloudEvents
	}
	written := make([]time.Time, len(events))
	for i, e := range events {
		if err == nil {
			written[i], err = writtenAt(e.Data)
		}
		if err == nil && e.ID == "" {
			err = errors.New("no id")
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err != nil {
		rc.broken = append(rc.broken, fmt.Sprintf("Idempotency-Key %q, body %.200s (%v)", r.Header.Get("Idempotency-Key"), body, err))
		http.Error(w, "not an event of the benchmark", http.StatusBadRequest)
		return
	}
	for i, e := range events {
		if _, ok := rc.got[e.ID]; ok {
			rc.dups++
			continue
		}
		rc.got[e.ID] = obxArrival{written: written[i], received: now}
	}
}

// obxEvent is an event as the receiver reads it: its id and payload (a CloudEvent's id and data).
type obxEvent struct {
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

// writtenAt reads the time of the body's "written_at" field (RFC 3339, as PostgreSQL's jsonb
// renders a timestamptz) without decoding the rest: the receiver shares the machine with what
// it measures, so it does no more than that.
func writtenAt(body []byte) (time.Time, error) {
	const field = `"written_at"`
	i := bytes.Index(body, []byte(field))
	if i < 0 {
		return time.Time{}, fmt.Errorf("no %s", field)
	}
	rest := body[i+len(field):]
	open := bytes.IndexByte(rest, '"')
	if open < 0 {
		return time.Time{}, fmt.Errorf("%s is not a string", field)
	}
	rest = rest[open+1:]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return time.Time{}, fmt.Errorf("%s is not a string", field)
	}
	return time.Parse(time.RFC3339Nano, string(rest[:end]))
}

// obxSpans sums the time of the tick's spans (tick, acquire, fetch, deliver, commit) that start
// within [from, to), by name: where a tick's time goes.
type obxSpans struct {
	mu       sync.Mutex
	from, to time.Time
	sum      map[string]time.Duration
}

func (s *obxSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (s *obxSpans) Shutdown(context.Context) error                  { return nil }
func (s *obxSpans) ForceFlush(context.Context) error                { return nil }
func (s *obxSpans) OnEnd(sp sdktrace.ReadOnlySpan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if at := sp.StartTime(); !at.Before(s.from) && at.Before(s.to) {
		s.sum[sp.Name()] += sp.EndTime().Sub(sp.StartTime())
	}
}

// BenchmarkOutbox: the outbox under a sustained write load (scripts/bench.sh outbox). pgbench
// (PGBENCH, default pgbench) runs OUTBOX_CLIENTS (8) producers at OUTBOX_RATE (5,000)
// transactions a second in all, each an order and its event (obxScript), into docs/outbox.md's
// PostgreSQL outbox, for OUTBOX_WARMUP_SECONDS (10) and then OUTBOX_SECONDS (60) measured. A Go
// poller with the outbox and cleanup "delete" (xid cursor, batches of OUTBOX_BATCH, 500, state
// on Azurite) ticks every OUTBOX_PERIOD_MS (1,000), as the host's timer would, with a tick
// budget of OUTBOX_TICK_BUDGET_MS (800), delivering to a local webhook with concurrency
// OUTBOX_CONCURRENCY (16), a POST per event (OUTBOX_MODE=batch: many to a POST, as CloudEvents). When the producers stop, it ticks until every event arrived (failing
// after 30 s without a new one). Reported over the measured window: events written and
// delivered a second, the most rows waiting after a tick (its summary) and in the outbox table
// (sampled every 100 ms), both also in ticks' worth of writes (rate x period),
// commit-to-delivery p50/p95/p99/max (the POST's arrival minus the payload's written_at) and p95
// against the period + 1 s, blob writes a minute, the ticks' p50/p95 time and their spans' mean
// (where a tick's time goes), and pgbench's own rate and schedule lag. OUTBOX_CLEANUP=off leaves
// the cleanup out (what it costs). Use -benchtime 1x: an iteration is a whole run, on fresh
// tables.
func BenchmarkOutbox(b *testing.B) {
	rate, clients, concurrency := envInt("OUTBOX_RATE", 5000), envInt("OUTBOX_CLIENTS", 8), envInt("OUTBOX_CONCURRENCY", sink.DefaultConcurrency)
	warm, run := time.Duration(envInt("OUTBOX_WARMUP_SECONDS", 10))*time.Second, time.Duration(envInt("OUTBOX_SECONDS", 60))*time.Second
	period, budget := time.Duration(envInt("OUTBOX_PERIOD_MS", 1000))*time.Millisecond, time.Duration(envInt("OUTBOX_TICK_BUDGET_MS", 800))*time.Millisecond
	pgbench := os.Getenv("PGBENCH")
	if pgbench == "" {
		pgbench = "pgbench"
	}
	if _, err := exec.LookPath(pgbench); err != nil {
		b.Fatalf("PGBENCH: %v (install PostgreSQL's client tools, or set PGBENCH to pgbench's path)", err)
	}
	az := testenv.Azurite(b)
	dsn := testenv.Postgres(b)
	db := testenv.DB(b, "pgx", dsn)
	ct := &testenv.CountingTransport{}
	st, err := blobstore.New(blobstore.Settings{Setting: "bench", ConnectionString: az, Container: "db-state"}, &blobstore.Options{Transport: ct})
	if err != nil {
		b.Fatal(err)
	}
	settings := appsettings.Settings{Driver: postgres.Name, DSN: dsn, BatchSize: envInt("OUTBOX_BATCH", appsettings.DefaultBatchSize), LeaseTTL: lease.DefaultTTL,
		HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: budget, CheckpointInterval: appsettings.DefaultCheckpointInterval,
		SettleLag: sourcedef.DefaultSettleLag}
	perTick := float64(rate) * period.Seconds() // one tick's worth of writes

	var m obxFigures
	for b.Loop() {
		m.add(obxRunOnce(b, obxSetup{db: db, dsn: dsn, st: st, ct: ct, settings: settings, pgbench: pgbench,
			rate: rate, clients: clients, concurrency: concurrency, warm: warm, run: run, period: period}))
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(m.written/n, "written-events/s")
	b.ReportMetric(m.delivered/n, "delivered-events/s")
	b.ReportMetric(m.delivered/m.written, "delivered/written")
	b.ReportMetric(float64(m.waitingMax), "rows-waiting-max")
	b.ReportMetric(float64(m.waitingMax)/perTick, "rows-waiting-ticks")
	b.ReportMetric(float64(m.tableMax), "table-rows-max")
	b.ReportMetric(float64(m.tableMax)/perTick, "table-rows-ticks")
	slices.Sort(m.lat)
	b.ReportMetric(ms(pct(m.lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(pct(m.lat, 0.95)), "p95-ms")
	b.ReportMetric(ms(pct(m.lat, 0.99)), "p99-ms")
	b.ReportMetric(ms(m.lat[len(m.lat)-1]), "max-ms")
	b.ReportMetric(pct(m.lat, 0.95).Seconds()/(period+time.Second).Seconds(), "p95/period+1s")
	b.ReportMetric(m.blobWrites/n, "blob-writes/min")
	slices.Sort(m.ticks)
	b.ReportMetric(ms(pct(m.ticks, 0.50)), "tick-p50-ms")
	b.ReportMetric(ms(pct(m.ticks, 0.95)), "tick-p95-ms")
	b.ReportMetric(m.pgbenchTPS/n, "pgbench-tps")
	b.ReportMetric(m.lagMax, "pgbench-lag-max-ms")
	b.ReportMetric(float64(m.dups), "redelivered")
	b.ReportMetric(float64(m.cleanupErrors), "cleanup-errors")
	if m.drained > 0 {
		b.ReportMetric(m.drain/float64(m.drained), "drain-events/s")
	}
	// Where a tick's time goes, ms a tick: the tick, and its acquire, fetches, deliveries and
	// commits (fetch and deliver overlap when the tick reads ahead; the rest of the tick is its
	// cleanup, the backlog's count and the release).
	ticks := float64(len(m.ticks))
	for _, k := range []string{"tick outbox", "acquire", "fetch", "deliver", "commit"} {
		b.ReportMetric(ms(m.spans[k])/ticks, strings.TrimSuffix(k, " outbox")+"-ms/tick")
	}
}

// obxSetup is what every run of BenchmarkOutbox shares.
type obxSetup struct {
	db                         *sql.DB
	dsn                        string
	st                         *blobstore.Store
	ct                         *testenv.CountingTransport
	settings                   appsettings.Settings
	pgbench                    string
	rate, clients, concurrency int
	warm, run, period          time.Duration
}

// obxFigures are a run's figures over its measured window (or, added up, several runs'; the
// maxima and samples over all of them).
type obxFigures struct {
	written, delivered   float64 // events a second
	waitingMax, tableMax int64
	lat, ticks           []time.Duration
	blobWrites           float64 // a minute
	pgbenchTPS, lagMax   float64
	dups, cleanupErrors  int
	spans                map[string]time.Duration // the ticks' spans' time by name
	// drain is the events a second delivered after the producers' end, the backlog they left
	// (when at least a tick's worth) with PostgreSQL no longer busy with them; 0: none.
	drain   float64
	drained int // the runs with a drain
}

func (f *obxFigures) add(g obxFigures) {
	f.written += g.written
	f.delivered += g.delivered
	f.waitingMax, f.tableMax = max(f.waitingMax, g.waitingMax), max(f.tableMax, g.tableMax)
	f.lat, f.ticks = append(f.lat, g.lat...), append(f.ticks, g.ticks...)
	f.blobWrites += g.blobWrites
	f.pgbenchTPS += g.pgbenchTPS
	f.lagMax = max(f.lagMax, g.lagMax)
	f.dups += g.dups
	f.cleanupErrors += g.cleanupErrors
	f.drain += g.drain
	if g.drain > 0 {
		f.drained++
	}
	if f.spans == nil {
		f.spans = map[string]time.Duration{}
	}
	for k, v := range g.spans {
		f.spans[k] += v
	}
}

// obxRunOnce is one run of BenchmarkOutbox on fresh tables and a fresh state blob.
func obxRunOnce(b *testing.B, s obxSetup) obxFigures {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	table := testenv.Name("obx")
	if _, err := s.db.Exec(fmt.Sprintf(obxDDL, table)); err != nil {
		b.Fatalf("creating the outbox: %v", err)
	}
	defer s.db.Exec(fmt.Sprintf("DROP TABLE IF EXISTS %[1]s, %[1]s_orders; DROP FUNCTION IF EXISTS %[1]s_stamp()", table))

	rc := &obxReceiver{got: map[string]obxArrival{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	snk, err := sink.New(sink.Config{Type: sink.Webhook, URL: srv.URL, Concurrency: s.concurrency, Mode: os.Getenv("OUTBOX_MODE")})
	if err != nil {
		b.Fatal(err)
	}
	if err := snk.Setup(func(string) string { return "" }); err != nil {
		b.Fatal(err)
	}
	defer snk.Close(context.Background())
	opts := []poller.Option{poller.WithColumns("id"), poller.WithKey("id"), poller.WithCursorColumn("txid"),
		poller.WithOutbox(poller.Outbox{ID: "id", AggregateType: "aggregate_type", AggregateID: "aggregate_id", Type: "type", Payload: "payload", Headers: "headers"})}
	if os.Getenv("OUTBOX_CLEANUP") != "off" { // off: what the cleanup costs, by its absence
		opts = append(opts, poller.WithCleanup(poller.Cleanup{Delete: true}))
	}
	p := poller.New("outbox", table, poller.XID, sink.Handler[poller.Row](snk), opts...)
	spans := &obxSpans{sum: map[string]time.Duration{}}
	tracer := telemetry.Tracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	r, err := tick.Open(ctx, tick.Config{Poller: pollerdef.Of(p), Settings: s.settings, Store: s.st, App: testenv.Name("obxbench-"), Owner: "bench/1", Tracer: tracer})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()

	script := filepath.Join(b.TempDir(), "outbox.sql")
	if err := os.WriteFile(script, fmt.Appendf(nil, obxScript, table), 0o600); err != nil {
		b.Fatal(err)
	}
	var pgOut bytes.Buffer
	cmd := exec.CommandContext(ctx, s.pgbench, "-n", "-M", "prepared", "-f", script, "-c", strconv.Itoa(s.clients), "-j", "2",
		"--rate", strconv.Itoa(s.rate), "-T", strconv.Itoa(int((s.warm + s.run).Seconds())), s.dsn)
	cmd.Stdout, cmd.Stderr = &pgOut, &pgOut
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatalf("%s: %v", s.pgbench, err)
	}
	producing := make(chan error, 1)
	go func() { producing <- cmd.Wait() }()
	t0, t1 := start.Add(s.warm), start.Add(s.warm+s.run)
	spans.mu.Lock()
	spans.from, spans.to = t0, t1
	spans.mu.Unlock()

	// The table's size, sampled every 100 ms until the end.
	var tableMax int64
	var sampleErr error // why the sampling stopped before the end
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tk.C:
				var n int64
				if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
					if ctx.Err() == nil {
						sampleErr = err
					}
					return
				}
				if now.After(t0) && now.Before(t1) {
					tableMax = max(tableMax, n)
				}
			}
		}
	}()

	var f obxFigures
	var putsAt0, putsAt1 int64 = -1, -1
	var deadline time.Time // after the producers' end: 30 s after the last new arrival
	var written, got int64
	var drainFrom time.Time // the producers' end, when drainGot events had arrived
	var drainGot int64
	tk := time.NewTicker(s.period)
	defer tk.Stop()
	for {
		now := <-tk.C
		if putsAt0 < 0 && !now.Before(t0) {
			putsAt0 = s.ct.Puts.Load()
		}
		if putsAt1 < 0 && !now.Before(t1) {
			putsAt1 = s.ct.Puts.Load()
		}
		began := time.Now()
		sum, err := r.Tick(ctx, "")
		if err != nil {
			b.Fatalf("tick: %v; pgbench so far:\n%s", err, pgOut.String())
		}
		if sum.CleanupError != "" {
			f.cleanupErrors++
			b.Logf("tick's cleanup: %s", sum.CleanupError)
		}
		if now.After(t0) && now.Before(t1) {
			f.ticks = append(f.ticks, time.Since(began))
			f.waitingMax = max(f.waitingMax, sum.RowsWaiting)
		}
		if deadline.IsZero() {
			select {
			case err := <-producing:
				if err != nil {
					b.Fatalf("pgbench: %v\n%s", err, pgOut.String())
				}
				if err := s.db.QueryRow("SELECT count(*) FROM " + table + "_orders").Scan(&written); err != nil {
					b.Fatal(err)
				}
				deadline = time.Now().Add(30 * time.Second)
				rc.mu.Lock()
				drainFrom, drainGot = time.Now(), int64(len(rc.got))
				rc.mu.Unlock()
			default:
			}
			continue
		}
		rc.mu.Lock()
		n := int64(len(rc.got))
		rc.mu.Unlock()
		if n >= written {
			if backlog := written - drainGot; float64(backlog) >= float64(s.rate)*s.period.Seconds() {
				f.drain = float64(backlog) / time.Since(drainFrom).Seconds()
			}
			break
		}
		if n > got {
			got, deadline = n, time.Now().Add(30*time.Second)
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of the %d events written arrived, none for 30 s", got, written)
		}
	}
	cancel()
	<-sampled
	if sampleErr != nil {
		b.Fatalf("counting the outbox table's rows: %v", sampleErr)
	}
	if putsAt1 < 0 {
		putsAt1 = s.ct.Puts.Load()
	}

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.broken) > 0 {
		b.Fatalf("%d requests were not the benchmark's events, the first: %s", len(rc.broken), rc.broken[0])
	}
	var inW, outW int
	for _, a := range rc.got {
		if !a.written.Before(t0) && a.written.Before(t1) {
			inW++
			f.lat = append(f.lat, a.received.Sub(a.written))
		}
		if !a.received.Before(t0) && a.received.Before(t1) {
			outW++
		}
	}
	var left int64
	if err := s.db.QueryRow("SELECT count(*) FROM " + table).Scan(&left); err != nil {
		b.Fatal(err)
	}
	if inW == 0 || len(f.ticks) == 0 {
		b.Fatalf("nothing written or no tick in the measured window; pgbench:\n%s", pgOut.String())
	}
	f.written, f.delivered = float64(inW)/s.run.Seconds(), float64(outW)/s.run.Seconds()
	f.tableMax = tableMax
	f.blobWrites = float64(putsAt1-putsAt0) / s.run.Minutes()
	f.dups = rc.dups
	spans.mu.Lock()
	f.spans = maps.Clone(spans.sum)
	spans.mu.Unlock()
	out := pgOut.String()
	if m := regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`).FindStringSubmatch(out); m != nil {
		f.pgbenchTPS, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := regexp.MustCompile(`rate limit schedule lag: avg [0-9.]+ \(max ([0-9.]+)\) ms`).FindStringSubmatch(out); m != nil {
		f.lagMax, _ = strconv.ParseFloat(m[1], 64)
	}
	b.Logf("%d events written, %d delivered, %d re-delivered, %d left in the outbox table (the last tick's cleanup keeps none); pgbench:\n%s",
		written, len(rc.got), rc.dups, left, out)
	return f
}
