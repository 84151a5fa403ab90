package handler_test

import (
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestDeadLettersLine: while a poller has dead letters the handler logs a "dead letters" line
// (count, the oldest one's age, the command that lists them) at most every five minutes, which
// the dead-letters alert rule counts; once they are resolved one line says count 0, then none.
func TestDeadLettersLine(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "o.db")
	testenv.DB(t, "sqlite", dsn, `CREATE TABLE orders (id BIGINT PRIMARY KEY, updated_at TEXT NOT NULL)`)
	clk := clock.NewFake(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	st := memstore.New(clk)
	for _, id := range []string{"b1", "b2"} {
		if _, err := deadletter.Write(ctx, st, "test", &deadletter.Letter{Poller: "good", BatchID: id}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
	}
	logs := &testenv.Buffer{}
	env := map[string]string{"POLLER_APP_NAME": "test", "GOOD_DB_DRIVER": "sqlite", "GOOD_DB_CONNECTION": dsn}
	app := handler.NewForTest(t, handler.Options{
		Getenv:  func(k string) string { return env[k] },
		Logger:  slog.New(slog.NewJSONHandler(logs, nil)),
		Pollers: []*poller.Poller{def("good", new(int))},
	}, handler.Internals{Clock: clk, Store: st})
	srv := httptest.NewServer(app.Routes())
	defer srv.Close()
	tickOnce := func() {
		t.Helper()
		if status, m, _ := post(t, srv.URL+"/good", body); status != 200 {
			t.Fatalf("tick: %d %v", status, m)
		}
	}

	tickOnce()
	lines := logLines(t, logs, "dead letters")
	if len(lines) != 1 {
		t.Fatalf("%d dead letters lines after the first tick, want 1:\n%s", len(lines), logs.String())
	}
	l := lines[0]
	if l["level"] != "WARN" || l["poller"] != "good" || l["count"] != 2.0 || l["oldest_age_seconds"] != 120.0 || l["list"] != "pollerctl deadletter list good" {
		t.Fatalf("the dead letters line: %v", l)
	}
	clk.Advance(time.Minute)
	tickOnce()
	if n := len(logLines(t, logs, "dead letters")); n != 1 {
		t.Fatalf("a tick within five minutes of the last listing logged again (%d lines)", n)
	}
	clk.Advance(5 * time.Minute)
	tickOnce()
	if lines := logLines(t, logs, "dead letters"); len(lines) != 2 || lines[1]["oldest_age_seconds"] != 480.0 {
		t.Fatalf("five minutes later: %v", lines)
	}

	for _, id := range []string{"b1", "b2"} {
		_, b, err := deadletter.Read(ctx, st, "test", "good", id)
		if err != nil {
			t.Fatal(err)
		}
		if err := deadletter.Delete(ctx, st, "test", "good", id, b.ETag); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(5 * time.Minute)
	tickOnce()
	clk.Advance(5 * time.Minute)
	tickOnce()
	lines = logLines(t, logs, "dead letters")
	if len(lines) != 3 || lines[2]["count"] != 0.0 || lines[2]["level"] != "INFO" {
		t.Fatalf("resolved: want one line with count 0, then none: %v", lines)
	}
}
