package handler_test

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestStatusSetupWarning: a poller whose cursor column nothing stamps on UPDATE ticks fine, but
// the status calls it degraded, with the problem and its fix, in the instance that ticks and in
// another one (which checks through its own probe); once the table is fixed, the next status
// request shows it ok.
func TestStatusSetupWarning(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	st := memstore.New(clk)
	dsn := sqliteOrders(t)
	env := map[string]string{"POLLER_APP_NAME": "setup", "GOOD_DB_DRIVER": "sqlite", "GOOD_DB_CONNECTION": dsn}
	opts := handler.Options{Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Pollers: []*poller.Poller{def("good", new(int))}}
	in := handler.Internals{Clock: clk, Store: st}
	app := handler.NewForTest(t, opts, in)
	srv := httptest.NewServer(app.Routes())
	defer srv.Close()
	if status, m, _ := post(t, srv.URL+"/good", body); status != 200 {
		t.Fatalf("tick: %d %v", status, m)
	}
	other := httptest.NewServer(handler.NewForTest(t, opts, in).Routes())
	defer other.Close()
	status := func(url string) pollerstatus.Row {
		t.Helper()
		_, raw := get(t, url+handler.StatusRoute, "")
		rep := decodeReport(t, raw)
		if len(rep.Pollers) != 1 {
			t.Fatalf("%d rows", len(rep.Pollers))
		}
		return rep.Pollers[0]
	}
	for _, url := range []string{srv.URL, other.URL} {
		r := status(url)
		if r.Health != pollerstatus.HealthDegraded || !strings.Contains(r.HealthReason, "pollerctl check good --fix") {
			t.Fatalf("health %q (%s), want degraded naming pollerctl check", r.Health, r.HealthReason)
		}
		var stamped *setup.Finding
		for i, w := range r.SetupWarnings {
			if w.Check == setup.CheckStamped {
				stamped = &r.SetupWarnings[i]
			}
		}
		if stamped == nil || !strings.Contains(strings.Join(stamped.Fix, "\n"), "AFTER UPDATE ON \"orders\"") {
			t.Fatalf("setup warnings %+v: want the unstamped column with its trigger", r.SetupWarnings)
		}
	}

	setUp(t, dsn)
	for _, url := range []string{srv.URL, other.URL} {
		if r := status(url); r.Health == pollerstatus.HealthDegraded || len(r.SetupWarnings) != 0 {
			t.Fatalf("after the fix: health %q (%s), warnings %+v", r.Health, r.HealthReason, r.SetupWarnings)
		}
	}
}
