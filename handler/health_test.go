package handler_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// countingStore counts the writes to each blob.
type countingStore struct {
	*memstore.Store
	writes map[string]*atomic.Int64
	reads  atomic.Int64
}

func (c *countingStore) Put(ctx context.Context, name string, data []byte, cond store.Condition) (store.Written, error) {
	if c.writes[name] == nil {
		c.writes[name] = new(atomic.Int64)
	}
	c.writes[name].Add(1)
	return c.Store.Put(ctx, name, data, cond)
}

func (c *countingStore) Get(ctx context.Context, name string) (store.Blob, error) {
	c.reads.Add(1)
	return c.Store.Get(ctx, name)
}

func (c *countingStore) count(name string) int64 {
	if n := c.writes[name]; n != nil {
		return n.Load()
	}
	return 0
}

// sqliteOrders makes an SQLite orders table with the given rows (id, updated_at) and returns
// its DSN.
func sqliteOrders(t testing.TB, rows ...string) string {
	t.Helper()
	dsn := filepath.Join(t.TempDir(), "o.db")
	db := testenv.DB(t, "sqlite", dsn)
	q := `CREATE TABLE orders (id BIGINT PRIMARY KEY, updated_at TEXT NOT NULL);`
	if len(rows) > 0 {
		q += "INSERT INTO orders VALUES " + strings.Join(rows, ", ")
	}
	if _, err := db.Exec(q); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// TestIdleWritesPerDay measures what liveness costs: a poller on a quiet table, its timer every
// 10 s for a day (8,640 ticks, a fake clock). The state document is never written; the liveness
// mark once per {P}_LIVENESS_INTERVAL (5m by default): 288 writes a day, the first tick's
// included, and every tick is one state blob read.
func TestIdleWritesPerDay(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	st := &countingStore{Store: memstore.New(clk), writes: map[string]*atomic.Int64{}}
	env := map[string]string{"POLLER_APP_NAME": "day", "GOOD_DB_DRIVER": "sqlite", "GOOD_DB_CONNECTION": sqliteOrders(t), "GOOD_SCHEDULE": "*/10 * * * * *"}
	app := handler.NewForTest(t, handler.Options{Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Pollers: []*poller.Poller{def("good", new(int))}}, handler.Internals{Clock: clk, Store: st})
	srv := httptest.NewServer(app.Routes())
	defer srv.Close()

	const ticks = 24 * 60 * 6
	for i := range ticks {
		clk.Advance(10 * time.Second)
		if status, m, _ := post(t, srv.URL+"/good", body); status != 200 || m["ReturnValue"].(map[string]any)["outcome"] != "idle" {
			t.Fatalf("tick %d: %d %v", i, status, m)
		}
	}
	stateWrites, marks := st.count(blobpath.State("day", "good")), st.count(blobpath.Liveness("day", "good"))
	t.Logf("an idle poller on a 10 s schedule for a day: %d ticks, %d state blob reads, %d state writes, %d liveness writes", ticks, st.reads.Load(), stateWrites, marks)
	if stateWrites != 0 || marks != 288 || st.reads.Load() != ticks {
		t.Fatalf("a day of idle ticks: %d state writes, %d liveness writes, %d reads; want 0, 288, %d", stateWrites, marks, st.reads.Load(), ticks)
	}
}

// TestStatusFailingBeforeTheLease: a stored cursor that no longer fits the source (a key value
// "abc" for a BIGINT key) makes every tick fail before it takes the lease, so the state document
// is never written. The status must not call the poller ok: before, it showed "ok", "attempts
// none", no error. Now the ticks' liveness mark and the probe both say why, and the same: the
// cursor needs a change, so it is misconfigured with the probe and without it (before, the mark
// alone said failing). The last tick is the last attempt, 3 s ago, failing since the first.
func TestStatusFailingBeforeTheLease(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	st := memstore.New(clk)
	env := map[string]string{"POLLER_APP_NAME": "bad-cursor", "GOOD_DB_DRIVER": "sqlite",
		"GOOD_DB_CONNECTION": sqliteOrders(t, "(1, '2026-01-01T00:00:00.000000Z')")}
	opts := handler.Options{Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Pollers: []*poller.Poller{def("good", new(int))}}
	in := handler.Internals{Clock: clk, Store: st}
	app := handler.NewForTest(t, opts, in)
	srv := httptest.NewServer(app.Routes())
	defer srv.Close()
	// One good tick creates the state; then an operator's mistake puts "abc" in the key.
	if status, m, _ := post(t, srv.URL+"/good", body); status != 200 {
		t.Fatalf("first tick: %d %v", status, m)
	}
	breakCursor(t, st, "bad-cursor", "good")
	var first time.Time
	for i := range 3 {
		clk.Advance(10 * time.Second)
		if i == 0 {
			first = clk.Now()
		}
		if status, m, _ := post(t, srv.URL+"/good", body); status != 500 || !strings.Contains(m["error"].(string), `"abc"`) {
			t.Fatalf("a tick with the bad cursor: %d %v", status, m)
		}
	}
	clk.Advance(3 * time.Second)
	// What the handler that ran the ticks serves, and what another instance (no memory of the
	// ticks, no probe: only the liveness mark) serves.
	other := handler.NewForTest(t, opts, in)
	in.NoProbe = true
	markOnly := handler.NewForTest(t, opts, in)
	for name, h := range map[string]*handler.App{"this instance": app, "another instance": other, "the liveness mark alone": markOnly} {
		s := httptest.NewServer(h.Routes())
		_, raw := get(t, s.URL+handler.StatusRoute, "")
		s.Close()
		rep := decodeReport(t, raw)
		if len(rep.Pollers) != 1 {
			t.Fatalf("%s: %d rows", name, len(rep.Pollers))
		}
		r := rep.Pollers[0]
		if r.Health != pollerstatus.HealthMisconfigured || !strings.Contains(r.HealthReason, `"abc"`) {
			t.Errorf("%s: health %q, reason %q; want misconfigured, naming the bad value", name, r.Health, r.HealthReason)
		}
		if lt := r.LastTick; lt == nil || !lt.Failed() || lt.Outcome != pollerstatus.OutcomeMisconfigured || lt.AgoSeconds != 3 ||
			lt.FailingSince == nil || !lt.FailingSince.Equal(first) || lt.FailingSeconds != 23 {
			t.Errorf("%s: last tick %+v, want the last attempt 3s ago, failing for 23s since %v", name, lt, first)
		} else if want := "failing since " + first.Format(time.RFC3339) + " (23s), last attempt 3s ago · misconfigured (liveness mark)"; lt.Text() != want {
			t.Errorf("%s: last tick %q, want %q", name, lt.Text(), want)
		}
	}
}

// TestUnreachableRowIsLoud: on SQLite a row stamped with CURRENT_TIMESTAMP ("2026-11-23
// 03:40:32", a space) sorts before a cursor of the same day. Before, it was skipped forever while
// every tick said idle; now the next tick's stamp check (at most a minute later) fails it, naming
// the row and the form it needs, and the status says failing.
func TestUnreachableRowIsLoud(t *testing.T) {
	clk := clock.NewFake(time.Now())
	now := time.Now().UTC()
	dsn := sqliteOrders(t, "(1, '"+now.Add(-2*time.Second).Format(state.TimeLayout)+"')", "(2, '"+now.Add(-time.Second).Format(state.TimeLayout)+"')")
	env := map[string]string{"POLLER_APP_NAME": "stamps", "GOOD_DB_DRIVER": "sqlite", "GOOD_DB_CONNECTION": dsn}
	delivered := new(int)
	app := handler.NewForTest(t, handler.Options{Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Pollers: []*poller.Poller{def("good", delivered)}}, handler.Internals{Clock: clk, Store: memstore.New(clk)})
	srv := httptest.NewServer(app.Routes())
	defer srv.Close()
	if status, m, _ := post(t, srv.URL+"/good", body); status != 200 || *delivered != 2 {
		t.Fatalf("first tick: %d %v, %d delivered", status, m, *delivered)
	}
	testenv.DB(t, "sqlite", dsn, `INSERT INTO orders VALUES (3, CURRENT_TIMESTAMP)`)
	clk.Advance(61 * time.Second)
	status, m, _ := post(t, srv.URL+"/good", body)
	msg, _ := m["error"].(string)
	if status != 500 || !strings.Contains(msg, `{"id":3}`) || !strings.Contains(msg, "YYYY-MM-DDTHH:MM:SS.ffffffZ") {
		t.Fatalf("the tick after a CURRENT_TIMESTAMP row: %d %v", status, m)
	}
	_, raw := get(t, srv.URL+handler.StatusRoute, "")
	if r := decodeReport(t, raw).Pollers[0]; r.Health != pollerstatus.HealthFailing || !strings.Contains(r.HealthReason, `{"id":3}`) {
		t.Fatalf("status: %s (%s)", r.Health, r.HealthReason)
	}
}
