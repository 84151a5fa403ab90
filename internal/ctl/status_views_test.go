package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/liveness"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// viewsWorld is five pollers at one moment, written as their ticks would have:
//   - nopk: every tick fails before the lease, every 5 s for 40 s, with a long error that needs a
//     change (the key does not tell the rows apart), the last attempt 3 s ago;
//   - busy: its last tick, 4 s ago, delivered everything (0 waiting); since then 333 rows came,
//     the oldest 5 s old: what the probe measures now;
//   - quiet: idle, its liveness mark 20 s old;
//   - gone: its last mark 10 minutes old, on a 10 s schedule;
//   - slow: its last tick left 1200 rows, the oldest 6m40s old.
//
// probe is what the status's probe of each finds when one is asked for.
func viewsWorld(t *testing.T) (st *memstore.Store, cfg pollerstatus.Config, probe map[string]pollerstatus.Probe) {
	t.Helper()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(now.Add(-10 * time.Minute))
	st = memstore.New(clk)
	marker := &liveness.Marker{Store: st, App: "views", Owner: "views/host/1", Clock: clk}
	mark := func(name, outcome string, err error, waiting int64, lag *float64) {
		t.Helper()
		if !marker.Record(context.Background(), liveness.Tick{Poller: name, Outcome: outcome, Err: err, RowsWaiting: waiting, LagSeconds: lag, Interval: time.Minute}) {
			t.Fatalf("%s: no mark written", name)
		}
	}
	putDoc := func(d *state.Doc) {
		t.Helper()
		data, err := state.Encode(d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(context.Background(), blobpath.State("views", d.PollerName), data, store.IfNotExists()); err != nil {
			t.Fatal(err)
		}
	}
	lag := func(f float64) *float64 { return &f }
	ts, _ := json.Marshal(now.Add(-time.Hour).Format(state.TimeLayout))
	cursor := &state.Cursor{Kind: state.KindTimestampPK, Value: ts, Tiebreaker: map[string]json.RawMessage{"id": json.RawMessage(`7`)}}
	doc := func(name string, waiting int64, l *float64) *state.Doc {
		d := &state.Doc{Version: 1, PollerName: name, SourceFingerprint: "sha256:" + name, Checkpoint: state.Checkpoint{Cursor: cursor},
			Lease: state.Lease{OwnerID: "views/host/1", FencingToken: 4, TTLSeconds: 60, ReleasedAt: state.At(clk.Now())}}
		d.AddHistory(state.Tick{At: state.At(clk.Now()), Outcome: "committed", Rows: 50, RowsWaiting: waiting, LagSeconds: l})
		return d
	}

	at := func(ago time.Duration) { clk.Advance(now.Add(-ago).Sub(clk.Now())) }
	mark("gone", "idle", nil, 0, lag(0)) // 10 minutes ago
	at(38 * time.Second)
	nopkErr := fmt.Errorf("source: poller \"nopk\", table nopk: %w: no primary key or unique index covers the key columns (id),\n"+
		"so rows that share them are skipped when a batch ends between them,\nand get the same message id.\n"+
		"  id=7 appears twice\n  id=9 appears twice\nCreate one:\n  CREATE UNIQUE INDEX nopk_id ON nopk (id);\nor name another key.", source.ErrKeyNotUnique)
	for range 8 { // a failed tick every 5 s, as the handler marks it
		mark("nopk", pollerstatus.OutcomeMisconfigured, nopkErr, -1, nil)
		clk.Advance(5 * time.Second)
	}
	at(20 * time.Second)
	mark("quiet", "idle", nil, 0, lag(0))
	at(6 * time.Second)
	putDoc(doc("slow", 1200, lag(400)))
	at(4 * time.Second)
	putDoc(doc("busy", 0, lag(0)))
	at(0)

	cfg = pollerstatus.Config{App: "views", Now: clk.Now}
	for _, n := range []string{"busy", "gone", "nopk", "quiet", "slow"} {
		cfg.Registered = append(cfg.Registered, pollerstatus.Registered{Name: n, Schedule: "*/10 * * * * *", LivenessInterval: time.Minute})
	}
	probe = map[string]pollerstatus.Probe{
		"busy":  {OK: true, RowsWaiting: 333, LagSeconds: lag(5)},
		"gone":  {OK: true, RowsWaiting: 0, LagSeconds: lag(0)},
		"nopk":  pollerstatus.ProbeFailed(nopkErr),
		"quiet": {OK: true, RowsWaiting: 0, LagSeconds: lag(0)},
		"slow":  {OK: true, RowsWaiting: 1100, LagSeconds: lag(390)},
	}
	return st, cfg, probe
}

var (
	pageRow  = regexp.MustCompile(`<tr id="row-([a-z]+)" class="tone-[a-z]+" data-poller="[a-z]+" data-health="([a-z]+)">(.*)</tr>`)
	pageCell = regexp.MustCompile(`<td[^>]*>(.*?)</td>`)
	tags     = regexp.MustCompile(`<[^>]+>`)
)

// TestStatusViewsAgree: for the same pollers at the same moment, the status JSON, the page's
// table and cards and pollerctl status's table say the same health, lag, rows waiting, where
// those were measured and last tick, with the probe (the handler's status, pollerctl status) and
// without it (pollerctl status --no-probe). The probe changes what it measures (busy: 333 rows
// waiting measured now, 0 at the last tick, each labelled), never the verdict on the same facts:
// nopk is misconfigured either way (before, FAILING with --no-probe). Its eight-line error is
// shown once on its card, and its last tick is its last attempt.
func TestStatusViewsAgree(t *testing.T) {
	st, cfg, probes := viewsWorld(t)
	health := map[bool]map[string]string{}
	for _, probed := range []bool{true, false} {
		cfg := cfg
		if probed {
			cfg.Probe = func(_ context.Context, name string, _ *state.Doc) pollerstatus.Probe { return probes[name] }
		}
		names, err := pollerstatus.Pollers(context.Background(), st, cfg)
		if err != nil {
			t.Fatal(err)
		}
		rows := pollerstatus.ReadAll(context.Background(), st, cfg, names)
		health[probed] = map[string]string{}
		want := map[string]pollerstatus.Figures{}
		for _, r := range rows {
			want[r.Poller], health[probed][r.Poller] = r.Figures(), r.Health
		}
		label := fmt.Sprintf("probe %v", probed)

		// The JSON: the same fields give the same figures.
		data, err := json.Marshal(rows)
		if err != nil {
			t.Fatal(err)
		}
		var back []pollerstatus.Row
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		for _, r := range back {
			got, w := r.Figures(), want[r.Poller]
			got.Problem, w.Problem = "", "" // the JSON's reason is one text: the table shows its first words
			if got != w {
				t.Errorf("%s: %s's JSON says %+v, the rows %+v", label, r.Poller, got, w)
			}
		}

		// The page: its table, and each card.
		var page bytes.Buffer
		if err := pollerstatus.RenderPage(&page, pollerstatus.NewPage(pollerstatus.Report{App: "views", Pollers: rows, GeneratedAt: state.At(cfg.Now())})); err != nil {
			t.Fatal(err)
		}
		body := html.UnescapeString(page.String())
		seen := 0
		for _, m := range pageRow.FindAllStringSubmatch(body, -1) {
			seen++
			w := want[m[1]]
			var cells []string
			for _, c := range pageCell.FindAllStringSubmatch(m[3], -1) {
				cells = append(cells, strings.TrimSpace(tags.ReplaceAllString(c[1], "")))
			}
			health := w.Health
			if w.NotProbed {
				health += " not probed"
			}
			if wantCells := []string{m[1], health, w.Lag, w.Waiting, w.Measured, w.LastTick, w.Problem}; m[2] != w.Health || strings.Join(cells, "|") != strings.Join(wantCells, "|") {
				t.Errorf("%s: the page's row of %s:\n%q\nwant\n%q", label, m[1], cells, wantCells)
			}
			card := testenv.Section(t, body, "poller-"+m[1])
			for _, s := range []string{`class="lag">` + w.Lag + "<", `class="waiting">` + w.Waiting + "<", `class="last-tick">` + w.LastTick} {
				if !strings.Contains(card, s) {
					t.Errorf("%s: %s's card does not show %q", label, m[1], s)
				}
			}
		}
		if seen != len(rows) {
			t.Errorf("%s: the page's table has %d rows, want %d", label, seen, len(rows))
		}
		if card := testenv.Section(t, body, "poller-nopk"); strings.Count(card, "id=7 appears twice") != 1 || strings.Count(card, `<pre class="error">`) != 1 {
			t.Errorf("%s: nopk's card shows its error %d times (%d <pre>), want once:\n%s", label, strings.Count(card, "id=7 appears twice"), strings.Count(card, `<pre class="error">`), card)
		}

		// pollerctl status: its table's columns.
		var out bytes.Buffer
		if err := statusTable(Env{Out: &out, Clock: clock.System{}}, rows); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(out.String(), "\n")
		if cols := regexp.MustCompile(`\s{2,}`).Split(lines[0], -1); strings.Join(cols[:6], "|") != "POLLER|HEALTH|LAST TICK|LAG|WAITING|MEASURED" {
			t.Fatalf("pollerctl status's columns: %q", cols)
		}
		for _, l := range lines[1 : len(rows)+1] {
			cols := regexp.MustCompile(`\s{2,}`).Split(l, -1)
			w := want[cols[0]]
			health := strings.ToUpper(w.Health)
			if w.NotProbed {
				health += " (not probed)"
			}
			if got, wantCols := strings.Join(cols[1:6], "|"), strings.Join([]string{health, w.LastTick, w.Lag, w.Waiting, orDash(w.Measured)}, "|"); got != wantCols {
				t.Errorf("%s: pollerctl status's line of %s:\n%s\nwant\n%s", label, cols[0], got, wantCols)
			}
		}
		for _, r := range rows {
			if !strings.Contains(out.String(), r.Poller+": "+r.Health+": "+r.HealthReason+"\n") && r.HealthReason != "" {
				t.Errorf("%s: pollerctl status does not give %s's reason %q", label, r.Poller, r.HealthReason)
			}
		}
		if t.Failed() {
			t.Logf("%s: pollerctl status:\n%s", label, out.String())
		}

		// What each poller shows, by the facts.
		busy, nopk := want["busy"], want["nopk"]
		switch {
		case probed && (busy.Lag != "5s" || busy.Waiting != "333" || busy.Measured != pollerstatus.MeasuredNow):
			t.Errorf("%s: busy %+v, want 5s and 333 measured now", label, busy)
		case !probed && (busy.Lag != "0s (nothing waits)" || busy.Waiting != "0" || busy.Measured != pollerstatus.MeasuredLastTick || !busy.NotProbed):
			t.Errorf("%s: busy %+v, want nothing waiting at the last tick, not probed", label, busy)
		}
		if wantTick := "failing since 2026-11-22T11:59:22Z (38s), last attempt 3s ago · misconfigured (liveness mark)"; nopk.LastTick != wantTick ||
			!strings.HasPrefix(nopk.Problem, `source: poller "nopk", table nopk: the key does not tell the rows apart`) {
			t.Errorf("%s: nopk's last tick %q, problem %q; want %q", label, nopk.LastTick, nopk.Problem, wantTick)
		}
	}
	for name, h := range health[true] {
		if health[false][name] != h {
			t.Errorf("%s is %s with the probe, %s without it", name, h, health[false][name])
		}
	}
	if got := fmt.Sprint(health[true]); got != "map[busy:ok gone:stopped nopk:misconfigured quiet:ok slow:lagging]" {
		t.Errorf("health: %s", got)
	}
}
