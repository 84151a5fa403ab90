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
	bin := binary
	if h := os.Getenv("E2E_HANDLER"); h != "" {
		bin = h
	}
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
		if i%2 == 0 {
			viaHandler()
			raw()
		} else {
			raw()
			viaHandler()
		}
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
	for _, q := range []string{
		`INSERT INTO orders SELECT g, 'customer ' || g, (g % 100000) / 100.0, now() - interval '1 day' + g * interval '10 microseconds'
		  FROM generate_series(1, ` + strconv.Itoa(rows) + `) g`,
		`VACUUM ANALYZE orders`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
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
	port := testenv.FreePort(b)
	out := &testenv.Buffer{}
	cmd := exec.Command(bin)
	cmd.Env = append(env, "FUNCTIONS_CUSTOMHANDLER_PORT="+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	}()
	fail := func(format string, args ...any) {
		tail := out.String()
		if len(tail) > 4000 {
			tail = tail[len(tail)-4000:]
		}
		b.Fatalf("%s\nthe handler's last output:\n%s", fmt.Sprintf(format, args...), tail)
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(15 * time.Second); ; {
		if resp, err := http.Get(base + "/"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			fail("the handler did not answer GET / within 15 s")
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	client := &http.Client{Timeout: 10 * time.Minute}
	delivered, invocations := 0, 0
	t0 := time.Now()
	for {
		resp, err := client.Post(base+"/orders", "application/json", strings.NewReader(hostBody))
		if err != nil {
			fail("POST /orders: %v", err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		invocations++
		var reply struct {
			ReturnValue struct {
				Outcome     string `json:"outcome"`
				Rows        int    `json:"rows"`
				RowsWaiting int64  `json:"rows_waiting"`
			}
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &reply) != nil {
			fail("POST /orders: %s %s", resp.Status, raw)
		}
		delivered += reply.ReturnValue.Rows
		if delivered >= rows && reply.ReturnValue.RowsWaiting == 0 {
			break
		}
		if reply.ReturnValue.Rows == 0 {
			fail("tick %d delivered nothing (%s) with %d of %d rows delivered: %s", invocations, reply.ReturnValue.Outcome, delivered, rows, raw)
		}
	}
	d := time.Since(t0)
	if delivered != rows {
		fail("delivered %d rows, want %d", delivered, rows)
	}
	return d, statusMB(b, cmd.Process.Pid, "VmHWM"), invocations
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
