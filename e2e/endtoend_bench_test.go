package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/devhost"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/pollers/orders"
)

// BenchmarkEndToEnd is the end-to-end path of issue 28: the handler binary (E2E_HANDLER, e.g.
// bin/handler from scripts/build.sh; else the one TestMain builds) with the example poller
// orders and its default settings, catching up on E2E_ROWS (default 1,000,000) PostgreSQL rows
// with its state on Azurite, invoked as the Functions host invokes it (POST /orders with a timer
// body) until it is caught up; against a raw database/sql keyset scan (pgx stdlib, batches of the
// default batch size, the same columns) of the same table in the same run, the order alternating.
// It reports rows/s and MB/s (testenv.JSONBytesPerRow) of both and their ratio, the handler's
// peak RSS (VmHWM), the blob reads and writes it made (through a counting proxy to Azurite) and
// the invocations it took. A fresh handler and state blob each iteration.
func BenchmarkEndToEnd(b *testing.B) {
	rows := 1_000_000
	if n, err := strconv.Atoi(os.Getenv("E2E_ROWS")); err == nil && n > 0 {
		rows = n
	}
	bin := benchHandler()
	storage, reads, writes := countingAzurite(b, testenv.Azurite(b))
	dsn, db := ordersTable(b, rows)
	batch := appsettings.DefaultBatchSize
	bytesPerRow := ordersBytesPerRow(b, dsn, batch)

	var tHandler, tRaw time.Duration
	var peak, ticks, nReads, nWrites float64
	for i := 0; b.Loop(); i++ {
		viaHandler := func() {
			r0, w0 := reads.Load(), writes.Load()
			d, hwm, n := catchUpInHandler(b, bin, []string{"PATH=" + os.Getenv("PATH"), "StateStorage=" + storage,
				"POLLER_APP_NAME=" + testenv.Name("e2e-bench-"), "ORDERS_DB_DRIVER=postgres", "ORDERS_DB_CONNECTION=" + dsn}, rows)
			tHandler += d
			peak = max(peak, hwm)
			ticks += float64(n)
			nReads += float64(reads.Load() - r0)
			nWrites += float64(writes.Load() - w0)
		}
		raw := func() {
			t0 := time.Now()
			n, err := testenv.PostgresKeysetLoop(db, "orders", batch)
			if err != nil || n != rows {
				b.Fatalf("the raw keyset scan read %d rows of %d: %v", n, rows, err)
			}
			tRaw += time.Since(t0)
		}
		testenv.InTurn(i, viaHandler, raw)
	}
	n := float64(b.N)
	total := float64(rows) * n
	b.ReportMetric(total/tHandler.Seconds(), "e2e-rows/s")
	b.ReportMetric(total/tRaw.Seconds(), "raw-rows/s")
	b.ReportMetric(tRaw.Seconds()/tHandler.Seconds(), "e2e/raw")
	testenv.ReportMB(b, bytesPerRow, map[string]float64{"e2e": total / tHandler.Seconds(), "raw": total / tRaw.Seconds()})
	b.ReportMetric(peak, "peak-rss-MB")
	b.ReportMetric(nReads/n, "blob-reads")
	b.ReportMetric(nWrites/n, "blob-writes")
	b.ReportMetric(ticks/n, "invocations")
}

// benchHandler is the handler binary the benchmarks run: E2E_HANDLER (bin/handler from
// scripts/build.sh, as scripts/bench.sh gives it), else the one TestMain builds.
func benchHandler() string {
	if h := os.Getenv("E2E_HANDLER"); h != "" {
		return h
	}
	return binary
}

// ordersTable makes, unless it is there from an earlier run, the schema bench_e2e_ROWS with the
// example's orders table (devhost.CreateOrdersFor) holding rows rows a day old, ten microseconds
// apart, filled by generate_series, and returns a DSN whose search_path is that schema and a pool
// on it.
func ordersTable(b *testing.B, rows int) (string, *sql.DB) {
	pg := testenv.Postgres(b)
	schema := "bench_e2e_" + strconv.Itoa(rows)
	dsn := testenv.WithParam(pg, "search_path", schema)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	ctx := context.Background()
	var have int
	if db.QueryRowContext(ctx, "SELECT count(*) FROM orders").Scan(&have) == nil && have == rows {
		return dsn, db
	}
	b.Logf("creating %s.orders with %d rows ...", schema, rows)
	for _, q := range []string{"DROP SCHEMA IF EXISTS " + schema + " CASCADE", "CREATE SCHEMA " + schema} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	if err := devhost.CreateOrdersFor(ctx, db, postgres.Name); err != nil {
		b.Fatal(err)
	}
	// A million rows a statement, with a line for each when there are more (10M take minutes):
	// printed at once, where b.Logf shows only when the benchmark ends.
	const chunk = 1_000_000
	t0 := time.Now()
	for from := 1; from <= rows; from += chunk {
		to := min(from+chunk-1, rows)
		q := `INSERT INTO orders SELECT g, 'customer ' || g, (g % 100000) / 100.0, now() - interval '1 day' + g * interval '10 microseconds'
		  FROM generate_series(` + strconv.Itoa(from) + `, ` + strconv.Itoa(to) + `) g`
		if _, err := db.ExecContext(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
		if rows > chunk {
			fmt.Printf("%s.orders: %d of %d rows inserted (%v)\n", schema, to, rows, time.Since(t0).Round(time.Second))
		}
	}
	if _, err := db.ExecContext(ctx, `VACUUM ANALYZE orders`); err != nil {
		b.Fatalf("VACUUM ANALYZE %s.orders: %v", schema, err)
	}
	return dsn, db
}

// ordersBytesPerRow reads the first batch through the orders poller's own source definition, for
// the MB/s.
func ordersBytesPerRow(b *testing.B, dsn string, batch int) float64 {
	src, err := drivers.Open(context.Background(), source.Config{Poller: "orders", Driver: postgres.Name, DSN: dsn,
		Definition: pollerdef.Of(orders.New()).Source()})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	sample, err := src.Fetch(context.Background(), nil, batch)
	if err != nil {
		b.Fatal(err)
	}
	return testenv.JSONBytesPerRow(b, sample, len(sample.Rows))
}

// countingAzurite puts a reverse proxy in front of the Azurite blob endpoint of connection string
// cs and returns the connection string through it, with the proxy's counts of blob reads (GET,
// HEAD) and writes (PUT, DELETE).
func countingAzurite(b *testing.B, cs string) (string, *atomic.Int64, *atomic.Int64) {
	m := regexp.MustCompile(`BlobEndpoint=(https?://[^/;]+)`).FindStringSubmatch(cs)
	if m == nil {
		b.Fatalf("no BlobEndpoint in the Azurite connection string")
	}
	target, err := url.Parse(m[1])
	if err != nil {
		b.Fatal(err)
	}
	var reads, writes atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			reads.Add(1)
		case http.MethodPut, http.MethodDelete:
			writes.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	b.Cleanup(srv.Close)
	return strings.Replace(cs, m[0], "BlobEndpoint="+srv.URL, 1), &reads, &writes
}

// catchUpInHandler starts the handler bin with env, invokes /orders as the host does until it
// has delivered rows rows and none waits, and returns the time from the first invocation to the
// last answer, the handler's peak RSS in MB (VmHWM) and the invocations made. The handler is
// stopped before it returns.
func catchUpInHandler(b *testing.B, bin string, env []string, rows int) (time.Duration, float64, int) {
	h := startHandler(b, bin, env)
	defer h.stop()
	d, ticks := h.catchUp("orders", rows)
	return d, h.peakMB(), len(ticks)
}

// handlerProc is a handler binary started by startHandler, answering on base.
type handlerProc struct {
	b    *testing.B
	cmd  *exec.Cmd
	out  *testenv.Buffer
	base string
}

// startHandler starts the handler bin with env on a free port and waits (15 s at most) until it
// answers GET /. The handler is stopped at the benchmark's end unless stop came first.
func startHandler(b *testing.B, bin string, env []string) *handlerProc {
	port := testenv.FreePort(b)
	h := &handlerProc{b: b, out: &testenv.Buffer{}, base: "http://127.0.0.1:" + strconv.Itoa(port)}
	h.cmd = exec.Command(bin)
	h.cmd.Env = append(env, "FUNCTIONS_CUSTOMHANDLER_PORT="+strconv.Itoa(port))
	h.cmd.Stdout, h.cmd.Stderr = h.out, h.out
	if err := h.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(h.stop)
	for deadline := time.Now().Add(15 * time.Second); ; {
		if resp, err := http.Get(h.base + "/"); err == nil {
			resp.Body.Close()
			return h
		}
		if time.Now().After(deadline) {
			h.fail("the handler did not answer GET / within 15 s")
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

// stop kills the handler and waits for it; a second call does nothing.
func (h *handlerProc) stop() {
	if h.cmd.ProcessState != nil {
		return
	}
	_ = h.cmd.Process.Kill()
	_ = h.cmd.Wait() // sets ProcessState
}

// fail ends the benchmark with the handler's last output.
func (h *handlerProc) fail(format string, args ...any) {
	h.b.Helper()
	h.b.Fatal(h.failure(format, args...))
}

// failure is an error of format and args followed by the handler's last output.
func (h *handlerProc) failure(format string, args ...any) error {
	tail := h.out.String()
	if len(tail) > 4000 {
		tail = tail[len(tail)-4000:]
	}
	return fmt.Errorf("%s\nthe handler's last output:\n%s", fmt.Sprintf(format, args...), tail)
}

// peakMB is the handler's peak RSS so far in MB (VmHWM).
func (h *handlerProc) peakMB() float64 { return statusMB(h.b, h.cmd.Process.Pid, "VmHWM") }

// catchUp invokes the function fn as the host does until it has delivered rows rows and none
// waits (or, for a cursor that cannot count what waits, it has delivered rows rows), and returns
// the time from the first invocation to the last answer and each invocation's time. It fails
// (fatally: call it from the benchmark's goroutine) when a tick delivers nothing first, or more
// than rows arrive; tryCatchUp returns the failure instead, for other goroutines.
func (h *handlerProc) catchUp(fn string, rows int) (time.Duration, []time.Duration) {
	h.b.Helper()
	d, ticks, err := h.tryCatchUp(fn, rows)
	if err != nil {
		h.b.Fatal(err)
	}
	return d, ticks
}

func (h *handlerProc) tryCatchUp(fn string, rows int) (time.Duration, []time.Duration, error) {
	client := &http.Client{Timeout: 10 * time.Minute}
	body := strings.Replace(hostBody, `"MethodName":"orders"`, `"MethodName":"`+fn+`"`, 1)
	delivered := 0
	var ticks []time.Duration
	t0 := time.Now()
	for {
		t1 := time.Now()
		resp, err := client.Post(h.base+"/"+fn, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, nil, h.failure("POST /%s: %v", fn, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ticks = append(ticks, time.Since(t1))
		var reply struct {
			ReturnValue struct {
				Outcome     string `json:"outcome"`
				Rows        int    `json:"rows"`
				RowsWaiting int64  `json:"rows_waiting"`
			}
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &reply) != nil {
			return 0, nil, h.failure("POST /%s: %s %s", fn, resp.Status, raw)
		}
		delivered += reply.ReturnValue.Rows
		if delivered >= rows && reply.ReturnValue.RowsWaiting <= 0 {
			break
		}
		if reply.ReturnValue.Rows == 0 {
			return 0, nil, h.failure("%s: tick %d delivered nothing (%s) with %d of %d rows delivered: %s",
				fn, len(ticks), reply.ReturnValue.Outcome, delivered, rows, raw)
		}
	}
	d := time.Since(t0)
	if delivered != rows {
		return 0, nil, h.failure("%s: delivered %d rows, want %d", fn, delivered, rows)
	}
	return d, ticks, nil
}

// statusMB is a memory figure of a process's /proc/PID/status (VmRSS, VmHWM) in MB.
func statusMB(b *testing.B, pid int, field string) float64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
