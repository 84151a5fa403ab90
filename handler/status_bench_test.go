package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// BenchmarkStatus20Pollers measures the status function's latency with 20 pollers on Azurite,
// each with its own SQLite table of 1,000 rows and a state document, one of them failing (a
// stored key "abc" for a BIGINT column): as the page is served (with the live probe of every
// source) against the baseline measured in the same run, the same status without the probes
// (state, liveness marks and dead letters only). scripts/bench.sh status prints the ratio.
func BenchmarkStatus20Pollers(b *testing.B) {
	cs := testenv.Azurite(b)
	app := testenv.Name("status-bench-")
	env := map[string]string{"StateStorage": cs, "POLLER_APP_NAME": app}
	var defs []*poller.Poller
	rows := make([]string, 1000)
	for i := range rows {
		rows[i] = fmt.Sprintf("(%d, '%s')", i+1, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Second).Format(state.TimeLayout))
	}
	for i := range 20 {
		name := fmt.Sprintf("p%02d", i)
		p := appsettings.Prefix(name)
		env[p+"_DB_DRIVER"], env[p+"_DB_CONNECTION"] = "sqlite", setUp(b, sqliteOrders(b, rows...))
		env[p+"_BATCH_SIZE"], env[p+"_TICK_BUDGET"] = "400", "1ns" // one batch a tick: 600 rows left waiting
		defs = append(defs, def(name, new(int)))
	}
	opts := handler.Options{Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Pollers: defs}
	a := handler.NewForTest(b, opts, handler.Internals{})
	srv := httptest.NewServer(a.Routes())
	defer srv.Close()
	for _, d := range defs { // one tick each: a state document, 600 rows left waiting
		if resp, err := http.Post(srv.URL+"/"+d.Name(), "application/json", strings.NewReader(body)); err != nil || resp.StatusCode != 200 {
			b.Fatalf("tick %s: %v %v", d.Name(), resp, err)
		}
	}
	breakCursor(b, storeFromEnv(b, env), app, "p07")

	check := func(rep handler.Report, probed bool) {
		failing := 0
		for _, r := range rep.Pollers {
			if r.Health != pollerstatus.HealthOK && r.Health != pollerstatus.HealthLagging {
				failing++
				if r.Poller != "p07" {
					b.Fatalf("%s is %s: %s", r.Poller, r.Health, r.HealthReason)
				}
			}
			if probed && r.Poller != "p07" && (r.Probe == nil || !r.Probe.OK || r.RowsWaiting != 600) {
				b.Fatalf("%s: probe %+v, %d waiting", r.Poller, r.Probe, r.RowsWaiting)
			}
		}
		if len(rep.Pollers) != 20 || (probed && failing != 1) {
			b.Fatalf("%d rows, %d failing", len(rep.Pollers), failing)
		}
	}
	for _, mode := range []struct {
		name    string
		noProbe bool
	}{{"state-only", true}, {"with-probes", false}} {
		b.Run(mode.name, func(b *testing.B) {
			h := handler.NewForTest(b, opts, handler.Internals{NoProbe: mode.noProbe})
			s := httptest.NewServer(h.Routes())
			defer s.Close()
			var lat []time.Duration
			for b.Loop() {
				t0 := time.Now()
				resp, err := http.Get(s.URL + handler.StatusRoute)
				if err != nil {
					b.Fatal(err)
				}
				var rep handler.Report
				err = json.NewDecoder(resp.Body).Decode(&rep)
				resp.Body.Close()
				lat = append(lat, time.Since(t0))
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("status: %d %v", resp.StatusCode, err)
				}
				check(rep, !mode.noProbe)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "p90-ms")
		})
	}
}

// setUp gives the orders table of dsn what the setup check asks for (pollerctl check orders --fix),
// as a table in production has it: the status then checks each source's set-up once per process
// and finds nothing, which is the cost this benchmark measures.
func setUp(tb testing.TB, dsn string) string {
	tb.Helper()
	db := testenv.DB(tb, "sqlite", dsn)
	for _, q := range []string{
		`CREATE INDEX orders_updated_at_id ON orders (updated_at, id)`,
		`CREATE TRIGGER orders_stamp_insert AFTER INSERT ON orders BEGIN UPDATE orders SET updated_at = ` + sqlite.StampExpr + ` WHERE id = NEW.id; END`,
		`CREATE TRIGGER orders_stamp_update AFTER UPDATE ON orders BEGIN UPDATE orders SET updated_at = ` + sqlite.StampExpr + ` WHERE id = NEW.id; END`,
	} {
		if _, err := db.Exec(q); err != nil {
			tb.Fatal(err)
		}
	}
	return dsn
}

// breakCursor writes a key value "abc" into a poller's stored cursor, as a mistaken reset would.
func breakCursor(tb testing.TB, st store.Store, app, name string) {
	tb.Helper()
	blob := blobpath.State(app, name)
	ctx := context.Background()
	bl, err := st.Get(ctx, blob)
	if err != nil {
		tb.Fatal(err)
	}
	d, err := state.Decode(blob, name, bl.Data)
	if err != nil {
		tb.Fatal(err)
	}
	d.Checkpoint.Cursor.Tiebreaker["id"] = json.RawMessage(`"abc"`)
	data, _ := state.Encode(d)
	if _, err := st.Put(ctx, blob, data, store.IfMatch(bl.ETag)); err != nil {
		tb.Fatal(err)
	}
}
