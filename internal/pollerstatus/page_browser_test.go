package pollerstatus_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/liveness"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// fiftyPollers is the report of an app with 50 pollers, read by Read from what their ticks left:
// most ok; some failing every 5 s before they take the lease (a database that refuses them), one
// misconfigured (a key that does not tell rows apart: an eight-line error), one blocked, two
// stopped, some lagging, two degraded (dead letters).
func fiftyPollers(t *testing.T) pollerstatus.Report {
	t.Helper()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(now.Add(-time.Hour))
	st := memstore.New(clk)
	marker := &liveness.Marker{Store: st, App: "test", Owner: "test/host/1", Clock: clk}
	at := func(ago time.Duration) { clk.Advance(now.Add(-ago).Sub(clk.Now())) } // sets the clock, back or forth
	lag := func(f float64) *float64 { return &f }
	refused := errors.New("source: poller: opening postgres db.internal:5432/shop: dial tcp 10.0.0.7:5432: connect: connection refused\n" +
		"(is the database up, and does the app's outbound network reach it? see docs/networking.md)")
	nopk := fmt.Errorf("source: poller \"p07\", table nopk: %w: no primary key or unique index covers the key columns (id),\n"+
		"so rows that share them are skipped when a batch ends between them,\nand get the same message id.\n"+
		"  id=7 appears twice\n  id=9 appears twice\nCreate one:\n  CREATE UNIQUE INDEX nopk_id ON nopk (id);\nor name another key.", source.ErrKeyNotUnique)
	probes := map[string]pollerstatus.Probe{}
	cfg := pollerstatus.Config{App: "test", Now: clk.Now,
		Probe: func(_ context.Context, name string, _ *state.Doc) pollerstatus.Probe { return probes[name] }}
	var marks []func()
	for i := range 50 {
		name := fmt.Sprintf("p%02d", i)
		reg := pollerstatus.Registered{Name: name, Schedule: "*/5 * * * * *", LivenessInterval: time.Minute}
		probes[name] = pollerstatus.Probe{OK: true, RowsWaiting: int64(i % 4), LagSeconds: lag(float64(i%4) * 1.5)}
		tick := liveness.Tick{Poller: name, Outcome: "idle", RowsWaiting: 0, LagSeconds: lag(0), Interval: time.Minute}
		ago := time.Duration(i%7) * 5 * time.Second
		switch {
		case i == 7:
			tick.Outcome, tick.Err, tick.RowsWaiting, tick.LagSeconds = pollerstatus.OutcomeMisconfigured, nopk, -1, nil
			probes[name] = pollerstatus.ProbeFailed(nopk)
		case i%10 == 3:
			tick.Outcome, tick.Err, tick.RowsWaiting, tick.LagSeconds = "failed", refused, -1, nil
			probes[name] = pollerstatus.ProbeFailed(refused)
		case i == 12:
			reg.Poison = appsettings.Poison{MaxAttempts: 5, OnPoison: appsettings.Block}
			d := &state.Doc{Version: 1, PollerName: name, SourceFingerprint: "sha256:x", Checkpoint: state.Checkpoint{Cursor: tsCursor(now.Add(-time.Hour), 12)},
				Lease:   state.Lease{OwnerID: "test/host/1", FencingToken: 9, TTLSeconds: 60, ReleasedAt: state.At(now)},
				Failure: &state.Failure{Attempts: 5, BatchID: "batch_0c1d", FirstFailureAt: state.At(now.Add(-5 * time.Minute)), LastFailureAt: state.At(now), LastError: "webhook: 500 Internal Server Error"}}
			d.AddHistory(state.Tick{At: state.At(now), Outcome: "blocked", RowsWaiting: 4200, LagSeconds: lag(3600)})
			at(2 * time.Second)
			putDoc(t, st, d)
			cfg.Registered = append(cfg.Registered, reg)
			continue
		case i == 21 || i == 34:
			ago = 20 * time.Minute
		case i%10 == 5:
			probes[name] = pollerstatus.Probe{OK: true, RowsWaiting: 2500 + int64(i), LagSeconds: lag(420 + float64(i))}
		case i == 40 || i == 41:
			if _, err := deadletter.Write(context.Background(), st, "test", &deadletter.Letter{Poller: name, BatchID: "batch_dead" + name, CreatedAt: state.At(now.Add(-time.Hour))}); err != nil {
				t.Fatal(err)
			}
		}
		cfg.Registered = append(cfg.Registered, reg)
		marks = append(marks, func() {
			if tick.Err != nil { // failing every 5 s for the last 2 minutes
				for a := 2 * time.Minute; a >= 3*time.Second; a -= 5 * time.Second {
					at(a)
					marker.Record(context.Background(), tick)
				}
				return
			}
			at(ago)
			marker.Record(context.Background(), tick)
		})
	}
	for _, m := range marks {
		m()
	}
	at(0)
	rep, err := pollerstatus.NewReport(context.Background(), st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

var browserRow = regexp.MustCompile(`<tr id="row-(p\d\d)" class="tone-[a-z]+" data-poller="p\d\d" data-health="([a-z]+)"><td><a href="#poller-(p\d\d)">`)

// TestPageFiftyPollersInChromium: with 50 pollers the page leads with a compact table, a row per
// poller (health, lag, rows waiting, where measured, last tick, the problem's first words), the
// problems first, each row linking to its card, and a legend; Chromium builds it so, and a
// screenshot renders it (STATUS_SCREENSHOT_50=file.png keeps a 1280x2000 copy).
func TestPageFiftyPollersInChromium(t *testing.T) {
	bin := testenv.Chromium(t)
	rep := fiftyPollers(t)
	var page bytes.Buffer
	if err := pollerstatus.RenderPage(&page, pollerstatus.NewPage(rep)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page.Bytes())
	}))
	defer srv.Close()

	dom := string(testenv.RunChromium(t, bin, srv.URL, "--dump-dom"))
	rows := browserRow.FindAllStringSubmatch(dom, -1)
	if len(rows) != 50 {
		t.Fatalf("Chromium's DOM has %d table rows, want 50:\n%s", len(rows), testenv.Tail(dom, 3000))
	}
	var order []int
	for _, m := range rows {
		if m[1] != m[3] || !strings.Contains(dom, `id="poller-`+m[1]+`"`) {
			t.Errorf("the row of %s links to #poller-%s", m[1], m[3])
		}
		order = append(order, slices.Index(pollerstatus.Healths, m[2]))
	}
	if !slices.IsSorted(order) {
		t.Errorf("the table is not most urgent first: %v", order)
	}
	var first []string
	for _, m := range rows[:10] {
		first = append(first, m[1]+":"+m[2])
	}
	if got := strings.Join(first, " "); got != "p12:blocked p07:misconfigured p03:failing p13:failing p23:failing p33:failing p43:failing p21:stopped p34:stopped p40:degraded" {
		t.Errorf("the table's first rows: %s", got)
	}
	if i, j := strings.Index(dom, `id="summary"`), strings.Index(dom, `class="poller `); i < 0 || j < i {
		t.Error("the table does not lead the page")
	}
	for _, want := range []string{"<dt>lag</dt>", "<dt>rows waiting</dt>", "<dt>measured</dt>", "<dt>last tick</dt>"} {
		if !strings.Contains(dom, want) {
			t.Errorf("no legend entry %s", want)
		}
	}

	_, data := testenv.Screenshot(t, bin, srv.URL, 1280, 2000)
	if keep := os.Getenv("STATUS_SCREENSHOT_50"); keep != "" {
		if err := os.WriteFile(keep, data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", keep)
	}
}
