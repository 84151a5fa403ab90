package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// The pollers of the status tests, and their settings. No source is opened (NoProbe): the rows
// come from the state store only; TestStatusFailingBeforeTheLease covers the probe.
const (
	orderTicks  = 7 // orders' history: lag on every tick
	ledgerTicks = 5 // ledger's (an integer cursor): rows waiting, one tick not counted
	deadID      = "batch_1f2e3d4c5b6a79880123abcd"
	secret      = "hunter2"
	statusApp   = "status-test"
	browser     = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
)

var statusEnv = map[string]string{
	"POLLER_APP_NAME":  statusApp,
	"ORDERS_DB_DRIVER": "postgres", "ORDERS_DB_CONNECTION": "postgres://app:" + secret + "@db.example.com:5432/shop",
	"ORDERS_MAX_ATTEMPTS": "3",
	"LEDGER_DB_DRIVER":    "sqlite", "LEDGER_DB_CONNECTION": "file:ledger.db?_pragma=busy_timeout(5000)",
	"LEDGER_ON_POISON": "quarantine",
	"FRESH_DB_DRIVER":  "sqlite", "FRESH_DB_CONNECTION": "fresh.db",
	// NEW has no source settings: its row says so, without them.
	"NEW_DB_CONNECTION": "server=db;password=" + secret,
}

func statusPollers() []*poller.Poller {
	mk := func(name string, kind poller.CursorKind, column string) *poller.Poller {
		return poller.New(name, name, kind, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
			poller.WithColumns(slices.Compact([]string{"id", column})...), poller.WithKey("id"), poller.WithCursorColumn(column))
	}
	return []*poller.Poller{
		mk("orders", poller.TimestampPK, "updated_at"),
		mk("ledger", poller.Integer, "id"),
		mk("fresh", poller.TimestampPK, "updated_at"),
		mk("new", poller.TimestampPK, "updated_at"),
	}
}

func ptr(f float64) *float64 { return &f }

// seed writes the status tests' state into st, as ticks would have at now:
//   - orders: a timestamp cursor 90 s behind, a live lease, 3 failed attempts with
//     ORDERS_MAX_ATTEMPTS=3 (blocked), orderTicks ticks of history, a dead letter;
//   - ledger: an integer cursor (no lag), history of rows waiting, failures but quarantine on poison;
//   - fresh: one tick of history;
//   - legacy: state only, not registered; broken: a corrupt document; new: registered, no state.
func seed(t *testing.T, st store.Store, app string, now time.Time) {
	t.Helper()
	putDoc := func(d *state.Doc) {
		t.Helper()
		data, err := state.Encode(d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(ctx, "state/"+app+"/"+d.PollerName+".json", data, store.IfNotExists()); err != nil {
			t.Fatal(err)
		}
	}
	at := func(ago time.Duration) state.Time { return state.At(now.Add(-ago)) }
	ts, _ := json.Marshal(now.Add(-90 * time.Second).UTC().Format(state.TimeLayout))

	orders := &state.Doc{Version: 1, PollerName: "orders", SourceFingerprint: "sha256:orders",
		Checkpoint: state.Checkpoint{Cursor: &state.Cursor{Kind: state.KindTimestampPK, Value: ts, Tiebreaker: map[string]json.RawMessage{"id": json.RawMessage(`12093`)}},
			LastSuccessfulBatchID: "batch_last0001", UpdatedAt: at(40 * time.Second), Metadata: state.Metadata{RowCount: 500}},
		Lease: state.Lease{OwnerID: "status-test/host-1/5f0c2a9e", FencingToken: 42, AcquiredAt: at(time.Second), HeartbeatAt: at(time.Second),
			ExpiresAt: state.At(now.Add(59 * time.Second)), TTLSeconds: 60},
		Failure: &state.Failure{Attempts: 3, BatchID: "batch_poison01", FirstFailureAt: at(time.Minute), LastFailureAt: at(time.Second),
			LastError: `webhook: Post "https://hooks.example/in?sig=` + secret + `": 500 <script>alert(1)</script>`, Keys: `{"id":12094}..{"id":12593}`},
	}
	for i := range orderTicks {
		ms := int64(1500 + 250*i)
		orders.AddHistory(state.Tick{At: at(time.Duration(orderTicks-i) * 10 * time.Second), Outcome: "committed", Rows: 100 * i,
			LagSeconds: ptr(float64(300 - 30*i)), RowsWaiting: int64(1000 - 100*i), DurationMS: &ms})
	}
	putDoc(orders)
	if _, err := deadletter.Write(ctx, st, app, &deadletter.Letter{Poller: "orders", BatchID: deadID, FencingToken: 41, CreatedAt: at(time.Hour),
		BatchRows: 500, Delivered: 499, Rows: []deadletter.Row{{Key: map[string]json.RawMessage{"id": json.RawMessage(`7`)}, Error: "bad row"}}}); err != nil {
		t.Fatal(err)
	}

	ledger := &state.Doc{Version: 1, PollerName: "ledger", SourceFingerprint: "sha256:ledger",
		Checkpoint: state.Checkpoint{Cursor: &state.Cursor{Kind: state.KindInteger, Value: json.RawMessage(`99000`)}, LastSuccessfulBatchID: "batch_l", UpdatedAt: at(time.Hour)},
		Lease:      state.Lease{FencingToken: 3},
		Failure:    &state.Failure{Attempts: 4, BatchID: "batch_l2", LastError: "boom"},
	}
	for i := range ledgerTicks {
		waiting := int64(50 * (ledgerTicks - i))
		if i == 1 {
			waiting = -1
		}
		ledger.AddHistory(state.Tick{At: at(time.Duration(ledgerTicks-i) * time.Minute), Outcome: "failed", RowsWaiting: waiting})
	}
	putDoc(ledger)

	fresh := &state.Doc{Version: 1, PollerName: "fresh", SourceFingerprint: "sha256:fresh",
		Checkpoint: state.Checkpoint{Cursor: &state.Cursor{Kind: state.KindTimestampPK, Value: ts, Tiebreaker: map[string]json.RawMessage{"id": json.RawMessage(`1`)}}}}
	fresh.Lease = state.Lease{OwnerID: "someone/else", FencingToken: 1, TTLSeconds: 60, ReleasedAt: at(0)}
	fresh.AddHistory(state.Tick{At: at(0), Outcome: "committed", Rows: 1, LagSeconds: ptr(90), RowsWaiting: 0})
	fresh.Backfill = &state.Backfill{ID: "bf_status", Kind: state.BackfillRequested, Chunk: 500, Rows: 4000, Left: 12, Estimate: 10000, StartedAt: at(40 * time.Second),
		After: map[string]json.RawMessage{"id": json.RawMessage(`4012`)}}
	putDoc(fresh)

	putDoc(&state.Doc{Version: 1, PollerName: "legacy", SourceFingerprint: "sha256:legacy"})
	if _, err := st.Put(ctx, "state/"+app+"/broken.json", []byte(`{"version": 1, "poller_name": "broken", "checkpoint": `), store.IfNotExists()); err != nil {
		t.Fatal(err)
	}
}

var ctx = context.Background()

var statusNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// statusServer serves the handler over a memstore seeded at statusNow.
func statusServer(t *testing.T) *httptest.Server { return statusServerWith(t, statusEnv) }

// statusServerWith is statusServer with env as the app settings.
func statusServerWith(t *testing.T, env map[string]string) *httptest.Server {
	t.Helper()
	clk := clock.NewFake(statusNow)
	st := memstore.New(clk)
	seed(t, st, statusApp, statusNow)
	app := handler.NewForTest(t, handler.Options{
		Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Pollers: statusPollers(),
	}, handler.Internals{Clock: clk, Store: st, NoProbe: true})
	srv := httptest.NewServer(app.Routes())
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url, accept string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func decodeReport(t *testing.T, body string) handler.Report {
	t.Helper()
	var rep handler.Report
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatalf("not the report: %v\n%s", err, body)
	}
	return rep
}

// storeFromEnv opens the state store the settings name, as the handler does.
func storeFromEnv(t testing.TB, env map[string]string) store.Store {
	t.Helper()
	settings, err := blobstore.SettingsFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	st, err := blobstore.New(settings, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestStatusJSON(t *testing.T) {
	srv := statusServer(t)
	for _, accept := range []string{"", "*/*", "application/json", "application/json, text/html"} {
		resp, body := get(t, srv.URL+handler.StatusRoute+"?code=FUNCTIONKEY", accept)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Cache-Control") != "no-store" ||
			resp.Header.Get("Vary") != "Accept" {
			t.Fatalf("Accept %q: %d %v", accept, resp.StatusCode, resp.Header)
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &raw); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"app", "pollers", "generated_at"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("the report lacks %q", k)
			}
		}
		for _, bad := range []string{secret, "FUNCTIONKEY", "DB_CONNECTION", "<script>"} {
			if strings.Contains(body, bad) {
				t.Errorf("Accept %q: the JSON shows %q", accept, bad)
			}
		}
	}

	_, body := get(t, srv.URL+handler.StatusRoute, "")
	rep := decodeReport(t, body)
	if rep.App != statusApp || !rep.GeneratedAt.Equal(statusNow) {
		t.Errorf("app %q generated_at %v", rep.App, rep.GeneratedAt)
	}
	var names []string
	for _, r := range rep.Pollers {
		names = append(names, r.Poller)
	}
	if got := strings.Join(names, " "); got != "broken fresh ledger legacy new orders" {
		t.Fatalf("pollers: %s", got)
	}
	o := rep.Pollers[5]
	// The lag is the last tick's (its history's last entry: the oldest row then waiting), not
	// the cursor's age; the health is blocked, and says how to unblock.
	if o.Health != "blocked" || !strings.Contains(o.HealthReason, "pollerctl quarantine orders") || o.LastTick == nil || o.LastTick.From != "state" {
		t.Errorf("orders health %q (%s), last tick %+v", o.Health, o.HealthReason, o.LastTick)
	}
	if o.State != "ok" || o.LagSeconds == nil || *o.LagSeconds != 120 || o.LagFrom != "last tick" || o.RowsWaiting != 400 || o.FencingToken != 42 || !o.LeaseLive || o.LeaseOwner != "status-test/host-1/5f0c2a9e" ||
		o.LastBatchID != "batch_last0001" || o.FailedAttempts != 3 || !o.Blocked || o.MaxAttempts != 3 || o.OnPoison != "block" ||
		o.FailureKeys != `{"id":12094}..{"id":12593}` || len(o.History) != orderTicks || o.DeadLetters.Count != 1 || o.DeadLetters.BatchIDs[0] != deadID ||
		string(o.Cursor.Tiebreaker["id"]) != "12093" {
		t.Errorf("orders: %+v", o)
	}
	if l := rep.Pollers[2]; l.Blocked || l.FailedAttempts != 4 || l.LagSeconds != nil || l.OnPoison != "quarantine" || l.Health != "stopped" {
		t.Errorf("ledger: %+v", l)
	}
	if p := rep.Pollers[1].BackfillProgress; rep.Pollers[1].Backfill == nil || p == nil || p.Done != 4012 || p.Percent == nil || *p.Percent != 40 ||
		p.RowsPerSecond == nil || *p.RowsPerSecond < 100 || *p.RowsPerSecond > 101 || p.SecondsLeft == nil || *p.SecondsLeft < 59 || *p.SecondsLeft > 60 {
		t.Errorf("fresh's backfill: %+v, progress %+v", rep.Pollers[1].Backfill, p)
	}
	if f := rep.Pollers[1]; f.LeaseOwner != "" || f.LeaseLive || len(f.History) != 1 {
		t.Errorf("fresh (released lease): %+v", f)
	}
	if f := rep.Pollers[1]; f.Health != "ok" || f.LagSeconds == nil || *f.LagSeconds != 90 {
		t.Errorf("fresh: health %q (%s), lag %v", f.Health, f.HealthReason, f.LagSeconds)
	}
	if n := rep.Pollers[4]; n.State != "none" || !n.Registered || !strings.Contains(n.SettingsProblem, "NEW_DB_DRIVER") || n.Health != "misconfigured" {
		t.Errorf("new: %+v", n)
	}
	if l := rep.Pollers[3]; l.Registered || l.State != "ok" || l.Health != "stopped" {
		t.Errorf("legacy: %+v", l)
	}
	if b := rep.Pollers[0]; b.State != "corrupt" || b.Problem == "" || b.Health != "misconfigured" {
		t.Errorf("broken: %+v", b)
	}

	// Other methods are not the status function's; the timers' route is unchanged.
	resp, err := http.Post(srv.URL+handler.StatusRoute, "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST %s: %v %v", handler.StatusRoute, resp.StatusCode, err)
	}
	resp.Body.Close()
}

func TestStatusHTML(t *testing.T) {
	srv := statusServer(t)
	for _, c := range []struct{ accept, query string }{{browser, ""}, {"text/html", ""}, {"", "&format=html"}, {"application/xhtml+xml", ""}} {
		resp, body := get(t, srv.URL+handler.StatusRoute+"?code=FUNCTIONKEY"+c.query, c.accept)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") || resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Fatalf("Accept %q: %d %v", c.accept, resp.StatusCode, resp.Header)
		}
		checkPage(t, body)
	}
	// An explicit format=json wins over a browser's Accept.
	if resp, _ := get(t, srv.URL+handler.StatusRoute+"?format=json", browser); resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("format=json: %v", resp.Header)
	}
}

// checkPage checks what the page shows; body is the page as served, or the DOM Chromium built.
func checkPage(t *testing.T, body string) {
	t.Helper()
	for _, bad := range []string{secret, "FUNCTIONKEY", "DB_CONNECTION", "<script", "src="} {
		if strings.Contains(body, bad) {
			t.Errorf("the page shows %q", bad)
		}
	}
	// It links within itself only: the table's rows to the cards, the cards back to the table.
	for _, m := range hrefAttr.FindAllStringSubmatch(body, -1) {
		if !strings.HasPrefix(m[1], "#poller-") && !strings.HasPrefix(m[1], "#row-") {
			t.Errorf("the page links to %q", m[1])
		}
	}
	// The table leads, a row per poller, the problems first (as the cards), each row linking to
	// its poller's card, and a legend says what the figures mean.
	var order []string
	for _, m := range summaryRow.FindAllStringSubmatch(body, -1) {
		if m[1] != m[3] || !strings.Contains(body, `id="poller-`+m[1]+`"`) {
			t.Errorf("the table's row of %s links to #poller-%s", m[1], m[3])
		}
		order = append(order, m[1]+":"+m[2])
	}
	if got := strings.Join(order, " "); got != "orders:blocked broken:misconfigured new:misconfigured ledger:stopped legacy:stopped fresh:ok" {
		t.Errorf("the table's rows: %s", got)
	}
	if i, j := strings.Index(body, `id="summary"`), strings.Index(body, `class="poller `); i < 0 || j < i {
		t.Error("the table does not come before the cards")
	}
	for _, want := range []string{"<dt>lag</dt><dd>The age of the oldest row not yet delivered", "<dt>rows waiting</dt><dd>Rows after the checkpoint not yet delivered",
		"<dt>last tick</dt><dd>The poller's last attempt"} {
		if !strings.Contains(body, want) {
			t.Errorf("the legend lacks %q", want)
		}
	}
	if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the handler's error is not shown escaped")
	}
	// From here on, compare text: the served page escapes quotes (&#34;), Chromium's DOM does not.
	body = html.UnescapeString(body)
	orders := section(t, body, "orders")
	for _, want := range []string{
		statusNow.Add(-90 * time.Second).Format(state.TimeLayout), "id=12093", // the cursor
		`class="lag">2m0s<`, "at the last tick", // the oldest row waiting at the last tick
		`class="waiting">400<`, // rows waiting after the last tick
		"0s ago · failed (state document)",
		"live: status-test/host-1/5f0c2a9e", "fencing token 42",
		"batch_last0001", "2026-11-22T11:59:20Z (40s ago)",
		"3 failed (the limit of 3 is reached; on poison: block)", "batch_poison01", `{"id":12094}..{"id":12593}`,
		`data-blocked="true">BLOCKED</span>`, "ORDERS_ON_POISON=quarantine", "pollerctl quarantine orders --yes",
		`<code class="dead-letter">` + deadID + `</code>`,
	} {
		if !strings.Contains(orders, want) {
			t.Errorf("orders does not show %q", want)
		}
	}
	// The failed batch's error is the last tick's too: shown once on the card.
	if n := strings.Count(orders, "alert(1)"); n != 1 || !strings.Contains(orders, "(the error above)") {
		t.Errorf("orders shows its error %d times, want once and a reference to it:\n%s", n, orders)
	}
	checkSpark(t, orders, "lag", orderTicks)
	if !strings.Contains(orders, "last tick 2m0s · min 2m0s · max 5m0s") {
		t.Errorf("orders' sparkline legend:\n%s", orders)
	}
	// Beside the lag, the rows each tick delivered and how long it ran.
	for _, want := range []string{`data-of="rows per tick" data-points="7"`, "last tick 600 · min 0 · max 600",
		`data-of="tick duration" data-points="7"`, "last tick 3s · min 1.5s · max 3s"} {
		if !strings.Contains(orders, want) {
			t.Errorf("orders' history charts lack %q:\n%s", want, orders)
		}
	}

	ledger := section(t, body, "ledger")
	checkSpark(t, ledger, "rows waiting", ledgerTicks-1) // the tick that did not count is left out
	for _, want := range []string{"unknown (the integer cursor has no clock: see the rows waiting)", "99000", "4 failed of 5 allowed (on poison: quarantine)",
		"none recorded", "no tick recorded yet", `data-failed="4"`, "4 failed ticks"} {
		if !strings.Contains(ledger, want) {
			t.Errorf("ledger does not show %q", want)
		}
	}
	if strings.Contains(ledger, `data-of="tick duration"`) || !strings.Contains(ledger, `data-of="rows per tick"`) {
		t.Error("ledger's history (rows, no durations) charts no rows per tick, or durations it does not have")
	}
	if strings.Contains(ledger, "BLOCKED") {
		t.Error("ledger (quarantine on poison) is shown blocked")
	}
	fresh := section(t, body, "fresh")
	checkSpark(t, fresh, "lag", 1)
	if !strings.Contains(fresh, ">free<") || !strings.Contains(fresh, `data-health="ok"`) || !strings.Contains(fresh, ">ok</span>") {
		t.Error("fresh's released lease is not shown free")
	}
	for _, want := range []string{`<progress max="100" value="40"`, "backfill bf_status: 4000 rows sent, 12 left to the live changes of about 10000 rows (40%), 100 rows/s over 40s, about 59.7s left"} {
		if !strings.Contains(fresh, want) {
			t.Errorf("fresh's backfill: no %q in\n%s", want, fresh)
		}
	}
	newSection := section(t, body, "new")
	if !strings.Contains(newSection, "no ticks recorded yet") || !strings.Contains(newSection, "NEW_DB_DRIVER") || strings.Contains(newSection, "<svg") {
		t.Errorf("new:\n%s", newSection)
	}
	if !strings.Contains(section(t, body, "legacy"), "not in this build") {
		t.Error("legacy is not marked as not in this build")
	}
	if !strings.Contains(section(t, body, "broken"), "corrupt") {
		t.Error("broken is not shown corrupt")
	}
	if !strings.Contains(body, "<title>BLOCKED · pseudotrigger status · "+statusApp+"</title>") {
		t.Error("the title does not say BLOCKED")
	}
	// The header counts the pollers per health; BLOCKED is never beside a green ok; the page reloads.
	for _, want := range []string{`data-health="blocked">1 blocked<`, `data-health="misconfigured">2 misconfigured<`,
		`data-health="stopped">2 stopped<`, `data-health="ok">1 ok<`, `<meta http-equiv="refresh" content="15">`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
	if strings.Contains(orders, "health-ok") || strings.Contains(orders, ">ok<") {
		t.Error("orders is blocked but something on its card says ok")
	}
}

// section returns the poller's <section> of the page: its card.
func section(t *testing.T, body, poller string) string {
	t.Helper()
	return testenv.Section(t, body, "poller-"+poller)
}

var (
	hrefAttr    = regexp.MustCompile(`href="([^"]*)"`)
	summaryRow  = regexp.MustCompile(`<tr id="row-([a-z]+)" class="tone-[a-z]+" data-poller="[a-z]+" data-health="([a-z]+)"><td><a href="#poller-([a-z]+)">`)
	svgTag      = regexp.MustCompile(`<svg [^>]*data-of="([^"]*)"[^>]*data-points="(\d+)"`)
	polylineTag = regexp.MustCompile(`<polyline points="([^"]*)"`)
	xyPair      = regexp.MustCompile(`^\d+(\.\d+)?,\d+(\.\d+)?$`)
)

func checkSpark(t *testing.T, sec, of string, points int) {
	t.Helper()
	m := svgTag.FindStringSubmatch(sec)
	if m == nil || m[1] != of || m[2] != fmt.Sprint(points) {
		t.Errorf("want an <svg> of %s with %d points; got %q in\n%s", of, points, m, sec)
		return
	}
	p := polylineTag.FindStringSubmatch(sec)
	if p == nil {
		t.Errorf("no polyline in\n%s", sec)
		return
	}
	pairs := strings.Fields(p[1])
	if len(pairs) != points {
		t.Errorf("the polyline has %d points, want %d: %q", len(pairs), points, p[1])
	}
	for _, xy := range pairs {
		if !xyPair.MatchString(xy) {
			t.Errorf("polyline point %q", xy)
		}
	}
}

func TestStatusNegotiation(t *testing.T) {
	srv := statusServer(t)
	for accept, want := range map[string]string{
		"":                                  "application/json",
		"*/*":                               "application/json",
		"application/json":                  "application/json",
		"text/html":                         "text/html; charset=utf-8",
		"text/html;q=0.5, application/json": "application/json",
		"application/json;q=0.5, text/html": "text/html; charset=utf-8",
		"text/*":                            "text/html; charset=utf-8",
		"text/html;q=0":                     "application/json",
		"text/html;q=bogus, */*;q=0.1":      "application/json",
		"image/png":                         "application/json",
		browser:                             "text/html; charset=utf-8",
		"application/json, text/plain, */*": "application/json", // what fetch and axios send
	} {
		if resp, _ := get(t, srv.URL+handler.StatusRoute, accept); resp.Header.Get("Content-Type") != want {
			t.Errorf("Accept %q: %s, want %s", accept, resp.Header.Get("Content-Type"), want)
		}
	}
}

func TestStatusStoreProblems(t *testing.T) {
	// No state store setting: 503, naming the setting, as JSON or as a page.
	app := handler.NewForTest(t, handler.Options{Getenv: func(string) string { return "" }, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Pollers: statusPollers()}, handler.Internals{})
	srv := httptest.NewServer(app.Routes())
	defer srv.Close()
	resp, body := get(t, srv.URL+handler.StatusRoute, "")
	if resp.StatusCode != 503 || !strings.Contains(body, "StateStorage") || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	resp, body = get(t, srv.URL+handler.StatusRoute, browser)
	if resp.StatusCode != 503 || !strings.Contains(body, "StateStorage") || !strings.Contains(body, `id="error"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	// An empty store and no pollers: an empty list, and a page that says so.
	app = handler.NewForTest(t, handler.Options{Getenv: func(string) string { return "" }, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}, handler.Internals{Store: memstore.New(nil)})
	srv2 := httptest.NewServer(app.Routes())
	defer srv2.Close()
	if _, body := get(t, srv2.URL+handler.StatusRoute, ""); !strings.Contains(body, `"pollers":[]`) {
		t.Fatalf("%s", body)
	}
	if _, body := get(t, srv2.URL+handler.StatusRoute, browser); !strings.Contains(body, "No pollers") {
		t.Fatalf("%s", body)
	}
}

// TestStatusFunctionIsForwarded checks the conditions under which the host forwards the request
// as is (see handler.StatusRoute): status/function.json has exactly an httpTrigger in and an
// http out, host.json enables forwarding and keeps the "api" route prefix, and no other function
// is HTTP-triggered (the timers keep the invocation protocol).
func TestStatusFunctionIsForwarded(t *testing.T) {
	type binding struct {
		Type, Direction, Name, AuthLevel, Route string
		Methods                                 []string
	}
	readFunction := func(path string) []binding {
		var fn struct {
			Bindings []binding `json:"bindings"`
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &fn); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return fn.Bindings
	}
	b := readFunction("../status/function.json")
	if len(b) != 2 || b[0].Type != "httpTrigger" || b[0].Direction != "in" || b[0].AuthLevel != "function" ||
		!slices.Equal(b[0].Methods, []string{"get"}) || b[1].Type != "http" || b[1].Direction != "out" {
		t.Fatalf("status/function.json: %+v", b)
	}
	if "/api/"+b[0].Route != handler.StatusRoute {
		t.Fatalf("route %q is not %s", b[0].Route, handler.StatusRoute)
	}

	var host struct {
		CustomHandler struct {
			EnableForwardingHttpRequest bool `json:"enableForwardingHttpRequest"`
			EnableProxyingHttpRequest   bool `json:"enableProxyingHttpRequest"`
		} `json:"customHandler"`
		Extensions struct {
			HTTP struct {
				RoutePrefix *string `json:"routePrefix"`
			} `json:"http"`
		} `json:"extensions"`
	}
	data, err := os.ReadFile("../host.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &host); err != nil {
		t.Fatal(err)
	}
	if !host.CustomHandler.EnableForwardingHttpRequest || !host.CustomHandler.EnableProxyingHttpRequest {
		t.Error("host.json: customHandler.enableProxyingHttpRequest (today's hosts) and enableForwardingHttpRequest (older ones) must be true for the status function")
	}
	if p := host.Extensions.HTTP.RoutePrefix; p != nil && *p != "api" {
		t.Errorf("host.json: routePrefix %q moves the status function away from %s", *p, handler.StatusRoute)
	}

	paths, err := filepath.Glob("../*/function.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if filepath.Base(filepath.Dir(p)) == "status" {
			continue
		}
		for _, b := range readFunction(p) {
			if strings.HasPrefix(strings.ToLower(b.Type), "http") {
				t.Errorf("%s has an %s binding: the handler serves the timers' invocation protocol only", p, b.Type)
			}
		}
	}
}

func TestStatusAzurite(t *testing.T) {
	cs := testenv.Azurite(t)
	container, app := testenv.Name("status-"), testenv.Name("app-")
	env := map[string]string{"StateStorage": cs, "STATE_CONTAINER": container, "POLLER_APP_NAME": app}
	for k, v := range statusEnv {
		if k != "POLLER_APP_NAME" {
			env[k] = v
		}
	}
	h := handler.NewForTest(t, handler.Options{Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Pollers: statusPollers()}, handler.Internals{NoProbe: true})
	srv := httptest.NewServer(h.Routes())
	defer srv.Close()

	// Before the container exists: every registered poller, none with state.
	resp, body := get(t, srv.URL+handler.StatusRoute, "")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	rep := decodeReport(t, body)
	if len(rep.Pollers) != 4 || rep.Pollers[0].State != "none" {
		t.Fatalf("before any state: %s", body)
	}

	// The seeded state, written to Azurite through the same settings.
	st := storeFromEnv(t, env)
	now := time.Now().UTC().Truncate(time.Second)
	seed(t, st, app, now)
	resp, body = get(t, srv.URL+handler.StatusRoute, "")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if strings.Contains(body, "AccountKey") || strings.Contains(body, "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq") || strings.Contains(body, secret) {
		t.Fatal("the status shows a secret")
	}
	rep = decodeReport(t, body)
	var names []string
	for _, r := range rep.Pollers {
		names = append(names, r.Poller+":"+r.State)
	}
	if got := strings.Join(names, " "); got != "broken:corrupt fresh:ok ledger:ok legacy:ok new:none orders:ok" {
		t.Fatalf("pollers: %s", got)
	}
	o := rep.Pollers[5]
	if !o.Blocked || !o.LeaseLive || o.DeadLetters.Count != 1 || o.DeadLetters.BatchIDs[0] != deadID || len(o.History) != orderTicks ||
		o.LagSeconds == nil || *o.LagSeconds < 85 || *o.LagSeconds > 120 {
		t.Errorf("orders on Azurite: %+v", o)
	}
	resp, body = get(t, srv.URL+handler.StatusRoute, browser)
	if resp.StatusCode != 200 || !strings.Contains(section(t, body, "orders"), deadID) {
		t.Fatalf("the page on Azurite: %d", resp.StatusCode)
	}
}

// TestStatusHistoryLink: with STATUS_WORKBOOK_URL (the deployment's workbook) the page links to
// it, and to nothing else; an address that is not https is not linked.
func TestStatusHistoryLink(t *testing.T) {
	const workbook = "https://portal.azure.com/#resource/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Insights/workbooks/1111"
	for _, c := range []struct {
		url  string
		link bool
	}{{workbook, true}, {"javascript:alert(1)", false}, {"", false}} {
		env := map[string]string{}
		for k, v := range statusEnv {
			env[k] = v
		}
		env["STATUS_WORKBOOK_URL"] = c.url
		_, body := get(t, statusServerWith(t, env).URL+handler.StatusRoute, browser)
		want := `<a id="history" href="` + workbook + `">history in Azure Monitor</a>`
		got := 0 // links out of the page (the others are the table's and the cards' to each other)
		for _, m := range hrefAttr.FindAllStringSubmatch(body, -1) {
			if !strings.HasPrefix(m[1], "#") {
				got++
			}
		}
		if c.link && (got != 1 || !strings.Contains(body, want)) || !c.link && got != 0 {
			t.Errorf("STATUS_WORKBOOK_URL %q: %d links; the page's header: %s", c.url, got, body[strings.Index(body, "<header>"):strings.Index(body, "</header>")])
		}
	}
}
