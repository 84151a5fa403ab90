package handler_test

import (
	"bytes"
	"html"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestSameLastTick: the status page of the very handler that ran the ticks and pollerctl status
// show the same last tick (the newest sign in the state container), and the same lag. Before,
// the page took the answering instance's memory of an idle tick ("0s ago idle") while pollerctl
// showed the state document's commit ("30s ago committed").
func TestSameLastTick(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	st := memstore.New(clk)
	env := map[string]string{"POLLER_APP_NAME": "same", "GOOD_DB_DRIVER": "sqlite", "GOOD_DB_CONNECTION": sqliteOrders(t, "(1, '2026-01-01T00:00:00.000000Z')"),
		"GOOD_SCHEDULE": "*/10 * * * * *"}
	good := def("good", new(int))
	app := handler.NewForTest(t, handler.Options{Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Pollers: []*poller.Poller{good}}, handler.Internals{Clock: clk, Store: st, NoProbe: true})
	srv := httptest.NewServer(app.Routes())
	defer srv.Close()
	if status, m, _ := post(t, srv.URL+"/good", body); status != 200 || m["ReturnValue"].(map[string]any)["outcome"] != "committed" {
		t.Fatalf("first tick: %d %v", status, m)
	}
	clk.Advance(30 * time.Second)
	if status, m, _ := post(t, srv.URL+"/good", body); status != 200 || m["ReturnValue"].(map[string]any)["outcome"] != "idle" {
		t.Fatalf("second tick: %d %v", status, m)
	}

	rep := decodeReport(t, func() string { _, b := get(t, srv.URL+handler.StatusRoute, ""); return b }())
	if len(rep.Pollers) != 1 || rep.Pollers[0].LastTick == nil {
		t.Fatalf("status rows %+v", rep.Pollers)
	}
	want := rep.Pollers[0].LastTick.Text()
	if want != "30s ago · committed (state document)" {
		t.Errorf("the status function's last tick: %q", want)
	}
	_, page := get(t, srv.URL+handler.StatusRoute, "text/html")
	if !strings.Contains(html.UnescapeString(page), want) {
		t.Errorf("the page does not show the last tick %q", want)
	}
	var out bytes.Buffer
	ctl.Run(ctx, []string{"status", "--no-probe", "good"}, ctl.Env{Store: st, App: "same", Getenv: func(k string) string { return env[k] },
		Pollers: pollerdef.OfAll([]*poller.Poller{good}), Out: &out, In: strings.NewReader(""), Clock: clk})
	if !strings.Contains(out.String(), want) {
		t.Errorf("pollerctl status does not show the last tick %q:\n%s", want, out.String())
	}
	if lag := "0s (nothing waits)"; !strings.Contains(out.String(), lag) || !strings.Contains(html.UnescapeString(page), lag) {
		t.Errorf("the page and pollerctl status do not both show the lag %q:\n%s", lag, out.String())
	}
}
