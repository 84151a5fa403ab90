package sink

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	_ "github.com/jackc/pgx/v5/stdlib" // the pgx driver for the hand-written loop

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/faultproxy"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// BenchmarkSinkCatchUp: a poller catching up on SINK_ROWS (default 10,000) PostgreSQL rows in
// batches of 500 through a sink (Azurite's storage queue; a local webhook), state on Azurite,
// and on SINK_REMOTE_ROWS (2,000) through the same sinks behind a proxy adding SINK_LATENCY_MS
// (20) each way (remotestoragequeue, remotewebhook: a consumer milliseconds away; the queue's
// sink with SINK_REMOTE_QUEUE_CONCURRENCY calls at once, default 16, as the webhook's),
// against a hand-written loop that reads the same rows by keyset and makes the same SDK (or
// HTTP) call per row at the same concurrency, with the same message and headers, in the same run
// (alternating). Reports rows/s of
// both and their ratio (target >= 0.9), and the blob writes of the catch-up tick against its
// batches (at most batches + 1).
func BenchmarkSinkCatchUp(b *testing.B) {
	latency := time.Duration(envInt("SINK_LATENCY_MS", 20)) * time.Millisecond
	for _, remote := range []bool{false, true} {
		name, rows := "storagequeue", envInt("SINK_ROWS", 10_000)
		if remote { // not "storagequeue-...": scripts/bench.sh matches names by prefix
			name, rows = "remotestoragequeue", envInt("SINK_REMOTE_ROWS", 2_000)
		}
		b.Run(name, func(b *testing.B) {
			sinkCatchUp(b, rows, remote, func(b *testing.B) (Config, []string, func(ctx context.Context, body []byte) error, func()) {
				// Each side sends to an Azurite queue service of its own, started empty for this
				// iteration: Azurite slows with every message it holds, and deleting a queue of
				// thousands stalls it (testenv.FreshAzuriteQueue), which measured Azurite, not the sink.
				sinkCS, stopSink := testenv.FreshAzuriteQueue(b)
				handCS, stopHand := testenv.FreshAzuriteQueue(b)
				var proxies []*faultproxy.Proxy
				if remote { // each side through a proxy of its own, latency each way
					for _, cs := range []*string{&sinkCS, &handCS} {
						p, through, err := faultproxy.ForEndpoint(*cs, "QueueEndpoint")
						if err != nil {
							b.Fatal(err)
						}
						p.SetLatency(latency)
						proxies, *cs = append(proxies, p), through
					}
				}
				queue := testenv.Name("bench-")
				q, err := azqueue.NewQueueClientFromConnectionString(handCS, queue, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := q.Create(context.Background(), nil); err != nil {
					b.Fatal(err)
				}
				ttl := int32(-1)
				send := func(ctx context.Context, body []byte) error {
					_, err := q.EnqueueMessage(ctx, base64.StdEncoding.EncodeToString(body), &azqueue.EnqueueMessageOptions{TimeToLive: &ttl})
					return err
				}
				done := func() {
					for _, p := range proxies {
						_ = p.Close()
					}
					stopSink()
					stopHand()
				}
				cfg := Config{Type: StorageQueue, Connection: "BenchQueue", Queue: queue}
				if remote {
					cfg.Concurrency = envInt("SINK_REMOTE_QUEUE_CONCURRENCY", DefaultConcurrency)
				}
				return cfg, []string{"BenchQueue=" + sinkCS}, send, done
			})
		})
	}
	// webhook, signedwebhook with signing on, whose hand loop signs each request as Standard
	// Webhooks says (what signing costs: signedwebhook's rows/s against webhook's), and
	// remotewebhook, through a proxy adding SINK_LATENCY_MS (20) each way, against the bound its
	// concurrency allows (concurrency / round trip).
	for _, name := range []string{"webhook", "signedwebhook", "remotewebhook"} { // not "webhook-...": scripts/bench.sh matches names by prefix
		signed, remote := name == "signedwebhook", name == "remotewebhook"
		rows := envInt("SINK_ROWS", 10_000)
		if remote {
			rows = envInt("SINK_REMOTE_ROWS", 2_000)
		}
		b.Run(name, func(b *testing.B) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
			}))
			defer srv.Close()
			url := srv.URL
			if remote {
				p, err := faultproxy.New(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				p.SetLatency(latency)
				url = p.URL()
			}
			key := bytes.Repeat([]byte{7}, 32)
			sinkCatchUp(b, rows, remote, func(b *testing.B) (Config, []string, func(ctx context.Context, body []byte) error, func()) {
				client := &http.Client{Timeout: 30 * time.Second, Transport: keepAlive(DefaultConcurrency)}
				const id = "0123456789abcdef0123456789abcdef"
				send := func(ctx context.Context, body []byte) error {
					req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
					if err != nil {
						return err
					}
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Idempotency-Key", id)
					req.Header.Set("X-Fencing-Token", "1")
					if signed {
						ts := strconv.FormatInt(time.Now().Unix(), 10)
						mac := hmac.New(sha256.New, key)
						mac.Write([]byte(id + "." + ts + "."))
						mac.Write(body)
						req.Header.Set("webhook-id", id)
						req.Header.Set("webhook-timestamp", ts)
						req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
					}
					resp, err := client.Do(req)
					if err != nil {
						return err
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					return resp.Body.Close()
				}
				if signed {
					return Config{Type: Webhook, URL: url, SigningSecret: "%BENCH_SECRET%"},
						[]string{"BENCH_SECRET=whsec_" + base64.StdEncoding.EncodeToString(key)}, send, func() {}
				}
				return Config{Type: Webhook, URL: url}, nil, send, func() {}
			})
		})
	}
}

// envInt is the positive integer in the environment variable name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// target returns a sink's definition and settings, the same call made by hand, and a cleanup.
type benchTarget func(b *testing.B) (Config, []string, func(ctx context.Context, body []byte) error, func())

// sinkCatchUp runs a catch-up on rows rows through newTarget's sink, and the hand loop, in
// turn. For a remote target it also reports the round trip of a lone call (the median of
// rttSamples made one after another before the runs, through the same proxy) and the rows/s the
// sink's concurrency allows at that round trip (bound: concurrency / round trip), which the tick
// is reported against (tick/bound).
func sinkCatchUp(b *testing.B, rows int, remote bool, newTarget benchTarget) {
	const batch = 500
	az := testenv.Azurite(b)
	table := "sink_orders_" + strconv.Itoa(rows)
	db, dsn := testenv.PostgresOrdersTable(b, table, rows)
	ct := &testenv.CountingTransport{}
	st, err := blobstore.New(blobstore.Settings{Setting: "bench", ConnectionString: az, Container: "db-state"}, &blobstore.Options{Transport: ct})
	if err != nil {
		b.Fatal(err)
	}
	settings := appsettings.Settings{Driver: postgres.Name, DSN: dsn, BatchSize: batch, LeaseTTL: lease.DefaultTTL,
		HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: time.Hour, CheckpointInterval: appsettings.DefaultCheckpointInterval,
		SettleLag: sourcedef.DefaultSettleLag}
	var tTick, tHand, rtt time.Duration
	var puts, batches int64
	concurrency := 0
	for i := 0; b.Loop(); i++ {
		cfg, env, send, done := newTarget(b)
		concurrency = cfg.concurrency()
		if remote {
			rtt += roundTrip(b, send)
		}
		s, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		envMap := map[string]string{}
		for _, kv := range env {
			k, v, _ := bytes.Cut([]byte(kv), []byte("="))
			envMap[string(k)] = string(v)
		}
		if err := s.Setup(func(k string) string { return envMap[k] }); err != nil {
			b.Fatal(err)
		}
		p := poller.New("orders", table, poller.TimestampPK, Handler[poller.Row](s),
			poller.WithColumns("id", "customer", "amount", "updated_at"), poller.WithKey("id"), poller.WithCursorColumn("updated_at"))
		runTick := func() {
			r, err := tick.Open(context.Background(), tick.Config{Poller: pollerdef.Of(p), Settings: settings, Store: st, App: testenv.Name("bench-"), Owner: "bench/1"})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			p0 := ct.Puts.Load()
			t0 := time.Now()
			sum, err := r.Tick(context.Background(), "")
			if err != nil || sum.Rows != rows {
				b.Fatalf("catch-up tick: %+v %v", sum, err)
			}
			tTick += time.Since(t0)
			puts += ct.Puts.Load() - p0
			batches += int64(sum.Batches)
		}
		runHand := func() {
			t0 := time.Now()
			if n := handLoop(b, db, table, batch, cfg.concurrency(), send); n != rows {
				b.Fatalf("the hand-written loop sent %d rows", n)
			}
			tHand += time.Since(t0)
		}
		testenv.InTurn(i, runTick, runHand)
		_ = s.Close(context.Background())
		done()
	}
	n := float64(b.N)
	total := float64(rows) * n
	sample := firstBatch(b, settings, table, batch)
	testenv.ReportMB(b, testenv.JSONBytesPerRow(b, sample, len(sample.Rows)),
		map[string]float64{"tick": total / tTick.Seconds(), "handwritten": total / tHand.Seconds()})
	b.ReportMetric(total/tTick.Seconds(), "tick-rows/s")
	b.ReportMetric(total/tHand.Seconds(), "handwritten-rows/s")
	b.ReportMetric(tHand.Seconds()/tTick.Seconds(), "tick/handwritten")
	if remote {
		bound := float64(concurrency) / (rtt.Seconds() / n)
		b.ReportMetric(float64(rtt.Microseconds())/1000/n, "round-trip-ms")
		b.ReportMetric(bound, "bound-rows/s")
		b.ReportMetric(total/tTick.Seconds()/bound, "tick/bound")
	}
	b.ReportMetric(float64(batches)/n, "batches/tick")
	b.ReportMetric(float64(puts)/n, "blob-writes/tick")
}

// rttSamples is how many lone calls roundTrip times.
const rttSamples = 21

// roundTrip is the median time of a lone call of send, rttSamples made one after another, with a
// body of a row's message's size: the round trip a remote target's concurrency works against.
func roundTrip(b *testing.B, send func(ctx context.Context, body []byte) error) time.Duration {
	body := bytes.Repeat([]byte("x"), 300)
	took := make([]time.Duration, rttSamples)
	for i := range took {
		t0 := time.Now()
		if err := send(context.Background(), body); err != nil {
			b.Fatal(err)
		}
		took[i] = time.Since(t0)
	}
	slices.Sort(took)
	return took[len(took)/2]
}

// firstBatch reads the first batch of the benchmark's table through a source, for its MB/s
// (testenv.JSONBytesPerRow).
func firstBatch(b *testing.B, settings appsettings.Settings, table string, batch int) *row.Batch {
	p := poller.New("orders", table, poller.TimestampPK, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
		poller.WithColumns("id", "customer", "amount", "updated_at"), poller.WithKey("id"), poller.WithCursorColumn("updated_at"))
	src, err := drivers.Open(context.Background(), settings.Config(pollerdef.Of(p)))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	sample, err := src.Fetch(context.Background(), nil, batch)
	if err != nil {
		b.Fatal(err)
	}
	return sample
}

// handLoop reads table by keyset in batches and sends each row as JSON with send, concurrency at
// a time, a batch after the other: what a sink does (the same message, built with
// encoding/json), without lease, checkpoint, row normalization or the sink's checks.
func handLoop(b *testing.B, db *sql.DB, table string, batch, concurrency int, send func(ctx context.Context, body []byte) error) int {
	ctx := context.Background()
	var (
		total   int
		lastAt  time.Time
		lastID  int64
		started bool
	)
	for {
		var rs *sql.Rows
		var err error
		if !started {
			rs, err = db.Query(`SELECT id, customer, amount::text, updated_at FROM `+table+` ORDER BY updated_at, id LIMIT $1`, batch)
		} else {
			rs, err = db.Query(`SELECT id, customer, amount::text, updated_at FROM `+table+` WHERE (updated_at, id) > ($1, $2) ORDER BY updated_at, id LIMIT $3`, lastAt, lastID, batch)
		}
		if err != nil {
			b.Fatal(err)
		}
		var bodies [][]byte
		for rs.Next() {
			var row struct {
				ID        int64     `json:"id"`
				Customer  string    `json:"customer"`
				Amount    string    `json:"amount"`
				UpdatedAt time.Time `json:"updated_at"`
			}
			if err := rs.Scan(&row.ID, &row.Customer, &row.Amount, &row.UpdatedAt); err != nil {
				b.Fatal(err)
			}
			// The message a sink sends (Change): the same bytes on the wire, by hand.
			id := strconv.FormatInt(row.ID, 10)
			ts, _ := json.Marshal(row.UpdatedAt)
			rowJSON, _ := json.Marshal(row)
			body, err := json.Marshal(Change{
				ID: ChangeID("orders", []byte(`{"id":`+id+`}`), ts), Poller: "orders", Op: "upsert", Key: map[string]any{"id": row.ID},
				Row: rowJSON, Cursor: poller.Cursor{Kind: "timestamp+pk", Value: ts, Tiebreaker: map[string]json.RawMessage{"id": json.RawMessage(`"` + id + `"`)}},
				BatchID: "hand", FencingToken: 1, Attempt: 1,
			})
			if err != nil {
				b.Fatal(err)
			}
			bodies = append(bodies, body)
			lastAt, lastID = row.UpdatedAt, row.ID
		}
		if err := rs.Err(); err != nil {
			b.Fatal(err)
		}
		rs.Close()
		started = true
		if len(bodies) == 0 {
			return total
		}
		if err := each(ctx, len(bodies), concurrency, func(ctx context.Context, i int) error { return send(ctx, bodies[i]) }); err != nil {
			b.Fatal(err)
		}
		total += len(bodies)
	}
}
