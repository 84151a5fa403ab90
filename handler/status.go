package handler

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
)

// StatusRoute is where the `status` function's requests reach the handler.
//
// status/function.json is an httpTrigger in (authLevel function, GET, route "status") and an
// http out, nothing else, and host.json sets customHandler.enableForwardingHttpRequest. For such a
// function, and only for such a function, the host forwards the original request to the handler
// at the original path, /api/status (routePrefix "api"), query string and headers included, and
// returns the handler's response to the caller as it is: status, headers, body. The function key
// is checked by the host before it forwards anything. Source: the Functions host,
// src/WebJobs.Script/Workers/Http/DefaultHttpWorkerService.cs: InvokeAsync takes the forwarding
// path only when FunctionMetadata.IsHttpInAndOutFunction() (exactly one input binding, of type
// httpTrigger, and one output binding, of type http: FunctionMetadataExtensions.cs) and
// EnableForwardingHttpRequest is set; GetPathValue then uses the request's AbsolutePath instead
// of the function name, and the HttpResponseMessage becomes the http output. Every other function
// (the pollers' timers) keeps ProcessDefaultInvocationRequest: the invocation JSON POSTed to
// /{FunctionName}, as before.
//
// Forwarding rather than the invocation JSON (Data.req in, Outputs.res{statusCode, body,
// headers} out) because content negotiation needs the caller's Accept header as a header, the
// reply is an HTML page or JSON with its own Content-Type and security headers, which the
// host passes through untouched, and the route is an ordinary GET that tests, a browser and
// headless Chromium can load directly. (Newer hosts also have customHandler.
// enableProxyingHttpRequest, which proxies the same requests to the same path with YARP and
// streams; nothing here would need to change for it, but forwarding is what every v4 host has.)
const StatusRoute = "/api/status"

// statusTimeout bounds the reads of one status request.
const statusTimeout = 30 * time.Second

// Report is the status function's JSON reply.
type Report struct {
	App         string             `json:"app"`
	Pollers     []pollerstatus.Row `json:"pollers"`
	GeneratedAt state.Time         `json:"generated_at"`
}

// status answers GET /api/status: every poller's row, as JSON, or as a page when the caller
// prefers HTML (a browser). It only reads the state store.
func (a *App) status(w http.ResponseWriter, r *http.Request) {
	asHTML := prefersHTML(r)
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Vary", "Accept")
	h.Set("X-Content-Type-Options", "nosniff")
	// The page's URL carries the function key (?code=): never send it anywhere as a Referer.
	h.Set("Referrer-Policy", "no-referrer")
	fail := func(code int, msg string) {
		a.log.Error("status", "error", msg)
		if asHTML {
			writePage(w, code, pageData{App: a.appName, Error: msg, GeneratedAt: a.clock.Now().UTC().Format(time.RFC3339)})
			return
		}
		writeJSON(w, code, map[string]any{"error": msg})
	}
	if a.storeErr != nil {
		fail(http.StatusServiceUnavailable, "state store: "+redact.Text(a.storeErr.Error()))
		return
	}
	rd, ok := a.store.(pollerstatus.Reader)
	if !ok {
		fail(http.StatusInternalServerError, "the state store cannot list blobs")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), statusTimeout)
	defer cancel()
	rows, err := pollerstatus.All(ctx, rd, a.statusConfig())
	if err != nil {
		fail(http.StatusServiceUnavailable, "state store: "+redact.Text(err.Error()))
		return
	}
	rep := Report{App: a.appName, Pollers: rows, GeneratedAt: state.At(a.clock.Now())}
	if !asHTML {
		writeJSON(w, http.StatusOK, rep)
		return
	}
	writePage(w, http.StatusOK, newPage(rep))
}

func (a *App) statusConfig() pollerstatus.Config {
	cfg := pollerstatus.Config{App: a.appName, Recent: a.recent, Now: a.clock.Now}
	if !a.noProbe {
		cfg.Probe = a.probe
	}
	for name, ps := range a.pollers {
		cfg.Registered = append(cfg.Registered, pollerstatus.RegisteredFrom(name, ps.settings, ps.err))
	}
	return cfg
}

// probe looks at a poller's source live, with the app's own settings, through the source its
// ticks use (opened now if no tick has opened it yet).
func (a *App) probe(ctx context.Context, name string, doc *state.Doc) pollerstatus.Probe {
	ps := a.pollers[name]
	start := a.clock.Now()
	ctx, cancel := context.WithTimeout(ctx, pollerstatus.ProbeTimeout)
	defer cancel()
	r, err := a.runner(ctx, ps)
	if err != nil {
		p := pollerstatus.ProbeFailed(err)
		p.DurationMS = a.clock.Now().Sub(start).Milliseconds()
		return p
	}
	src, ok := r.Source.(pollerstatus.Source)
	if !ok {
		return pollerstatus.Probe{Skipped: "this poller's source cannot be probed", RowsWaiting: -1}
	}
	return pollerstatus.ProbeSource(ctx, src, r.Lease.Config().Blob, doc, a.clock.Now)
}

// recent is this process's own record of a poller's last tick.
func (a *App) recent(name string) (pollerstatus.LastTick, bool) {
	ps, ok := a.pollers[name]
	if !ok {
		return pollerstatus.LastTick{}, false
	}
	ps.recentMu.Lock()
	rt := ps.recent
	ps.recentMu.Unlock()
	if rt == nil {
		return pollerstatus.LastTick{}, false
	}
	return pollerstatus.NewLastTick(a.clock.Now().Sub(rt.at).Seconds(), rt.outcome, rt.err, "process", rt.rowsWaiting, rt.lag), true
}

// prefersHTML reports whether the request's Accept header ranks text/html (or XHTML) above
// application/json, as a browser's does. A tie (*/*, curl's default), no Accept and anything
// unparsable are JSON. ?format=html or ?format=json overrides it.
func prefersHTML(r *http.Request) bool {
	switch r.URL.Query().Get("format") {
	case "html":
		return true
	case "json":
		return false
	}
	accept := r.Header.Values("Accept")
	if len(accept) == 0 {
		return false
	}
	ranges := parseAccept(strings.Join(accept, ","))
	return max(quality(ranges, "text/html"), quality(ranges, "application/xhtml+xml")) > quality(ranges, "application/json")
}

type mediaRange struct {
	typ, sub string
	q        float64
}

func parseAccept(header string) []mediaRange {
	var out []mediaRange
	for part := range strings.SplitSeq(header, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		typ, sub, ok := strings.Cut(mt, "/")
		if !ok {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f <= 1 {
				q = f
			} else {
				q = 0
			}
		}
		out = append(out, mediaRange{typ, sub, q})
	}
	return out
}

// quality is the q the most specific matching range gives mediaType (RFC 9110 §12.5.1): an exact
// match over type/*, over */*; 0 when none matches.
func quality(ranges []mediaRange, mediaType string) float64 {
	typ, sub, _ := strings.Cut(mediaType, "/")
	best, specificity := 0.0, -1
	for _, m := range ranges {
		s := -1
		switch {
		case m.typ == typ && m.sub == sub:
			s = 2
		case m.typ == typ && m.sub == "*":
			s = 1
		case m.typ == "*" && m.sub == "*":
			s = 0
		}
		if s > specificity || (s == specificity && s >= 0 && m.q > best) {
			best, specificity = m.q, s
		}
	}
	return best
}

// The page.

//go:embed status.html
var pageSource string

var page = template.Must(template.New("status").Parse(pageSource))

// maxDeadLetterIDs bounds the dead letter ids a poller's card lists (the count is complete).
const maxDeadLetterIDs = 20

type pageData struct {
	App         string
	GeneratedAt string
	Error       string
	Pollers     []pollerCard
	Blocked     int           // pollers blocked
	Counts      []healthCount // pollers per health, most urgent first; only those with some
	NotOK       int           // pollers whose health is not ok
	Refresh     int           // seconds between reloads of the page
}

type healthCount struct {
	Health string
	N      int
}

// refreshSeconds is how often the page reloads itself (a meta refresh: the page has no script).
const refreshSeconds = 15

// pollerCard is a Row made ready to show: every value is text (html/template escapes it).
type pollerCard struct {
	pollerstatus.Row
	CursorKind   string
	CursorText   string
	Lag          string
	LagFrom      string
	RowsWaiting  string
	LastTickText string
	Lease        string
	LeaseClass   string
	LastCommit   string
	Attempts     string
	DeadIDs      []string
	DeadMore     int
	Spark        sparkline
}

func newPage(rep Report) pageData {
	now := rep.GeneratedAt.Time
	d := pageData{App: rep.App, GeneratedAt: now.UTC().Format(time.RFC3339), Refresh: refreshSeconds}
	counts := map[string]int{}
	for _, r := range rep.Pollers {
		c := pollerCard{Row: r, CursorText: pollerstatus.CursorText(r.Cursor), Lag: "-", RowsWaiting: waiting(r.RowsWaiting), LastCommit: "-", Attempts: "none"}
		if r.Cursor != nil {
			c.CursorKind = r.Cursor.Kind
		}
		switch {
		case r.LagSeconds != nil && *r.LagSeconds == 0 && r.RowsWaiting == 0:
			c.Lag = "0s (nothing waits)"
		case r.LagSeconds != nil:
			c.Lag = seconds(*r.LagSeconds)
		case r.Cursor != nil && r.Cursor.Kind != state.KindTimestampPK && r.RowsWaiting != 0:
			c.Lag = "no lag for this cursor kind (" + r.Cursor.Kind + "): see the rows waiting"
		}
		switch r.LagFrom {
		case "probe":
			c.LagFrom = "measured now"
		case "last tick":
			c.LagFrom = "at the last tick"
		}
		c.LastTickText = "none recorded"
		if t := r.LastTick; t != nil {
			c.LastTickText = seconds(t.AgoSeconds) + " ago · " + t.Outcome
			switch t.From {
			case "liveness":
				c.LastTickText += " (liveness mark)"
			case "state":
				c.LastTickText += " (state document)"
			case "process":
				c.LastTickText += " (this instance)"
			}
		}
		switch {
		case r.LeaseOwner == "":
			c.Lease, c.LeaseClass = "free", "free"
		case r.LeaseLive:
			c.Lease, c.LeaseClass = "live: "+r.LeaseOwner, "live"
		default:
			c.Lease, c.LeaseClass = "expired: "+r.LeaseOwner, "expired"
		}
		if r.LastCommitAt != "" {
			c.LastCommit = r.LastCommitAt
			if t, err := time.Parse(time.RFC3339, r.LastCommitAt); err == nil && !now.IsZero() {
				c.LastCommit += " (" + seconds(now.Sub(t).Seconds()) + " ago)"
			}
		} else if n := len(r.History); n > 0 && (r.History[n-1].Outcome == "reset" || r.History[n-1].Outcome == "clone") {
			c.LastCommit = "none since the " + r.History[n-1].Outcome + " at " + r.History[n-1].At.UTC().Format(time.RFC3339)
		}
		if r.FailedAttempts > 0 {
			c.Attempts = strconv.FormatInt(r.FailedAttempts, 10) + " failed"
			switch {
			case r.MaxAttempts > 0 && r.FailedAttempts >= int64(r.MaxAttempts):
				c.Attempts += fmt.Sprintf(" (the limit of %d is reached; on poison: %s)", r.MaxAttempts, r.OnPoison)
			case r.MaxAttempts > 0:
				c.Attempts += fmt.Sprintf(" of %d allowed (on poison: %s)", r.MaxAttempts, r.OnPoison)
			}
		}
		c.DeadIDs = r.DeadLetters.BatchIDs
		if len(c.DeadIDs) > maxDeadLetterIDs {
			c.DeadIDs, c.DeadMore = c.DeadIDs[:maxDeadLetterIDs], len(c.DeadIDs)-maxDeadLetterIDs
		}
		c.Spark = newSparkline(r)
		if r.Blocked {
			d.Blocked++
		}
		counts[r.Health]++
		if r.Health != pollerstatus.HealthOK {
			d.NotOK++
		}
		d.Pollers = append(d.Pollers, c)
	}
	for _, h := range pollerstatus.Healths {
		if counts[h] > 0 {
			d.Counts = append(d.Counts, healthCount{h, counts[h]})
		}
	}
	// What needs someone first: by health, most urgent first (the report's order, by name,
	// within each).
	slices.SortStableFunc(d.Pollers, func(a, b pollerCard) int { return cmp.Compare(urgency(a.Row), urgency(b.Row)) })
	return d
}

func urgency(r pollerstatus.Row) int {
	if i := slices.Index(pollerstatus.Healths, r.Health); i >= 0 {
		return i
	}
	return len(pollerstatus.Healths)
}

func writePage(w http.ResponseWriter, code int, d pageData) {
	var b strings.Builder
	if err := page.Execute(&b, d); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": "rendering the status page: " + err.Error()})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	// Self-contained: inline CSS and SVG, no script, nothing loaded from anywhere.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(b.String()))
}

// seconds renders a number of seconds as a Go duration (pollerstatus.DurationText).
var seconds = pollerstatus.DurationText

func waiting(n int64) string {
	switch {
	case n < 0:
		return "not counted"
	case n >= tick.WaitingCap:
		return "at least " + strconv.Itoa(tick.WaitingCap)
	}
	return strconv.FormatInt(n, 10)
}

// sparkline is an inline SVG polyline over a poller's history: its lag, or, for cursors without
// a timestamp, the rows waiting; the ticks that failed are red dots, and the value the status
// measured now (the probe) is the last point, so the legend's "now" is the card's value. Points
// has one "x,y" per point drawn.
type sparkline struct {
	Of             string // "lag" or "rows waiting"; "" when there is nothing to draw
	Note           string // why there is no chart
	Points         string
	N              int // points drawn
	Ticks          int // ticks in the history
	Failed         []xy
	Width, Height  int
	LastX, LastY   string
	Min, Max, Last string
	LastLabel      string // "now" (measured by the probe) or "last tick"
}

type xy struct{ X, Y string }

const (
	sparkWidth, sparkHeight, sparkPad = 240, 48, 4
)

func newSparkline(r pollerstatus.Row) sparkline {
	s := sparkline{Ticks: len(r.History), Width: sparkWidth, Height: sparkHeight, LastLabel: "last tick"}
	if len(r.History) == 0 {
		s.Note = "no ticks recorded yet (ticks that find nothing to read are not recorded here)"
		return s
	}
	type point struct {
		i      int
		v      float64
		failed bool
	}
	failed := func(t state.Tick) bool { return t.Outcome == "failed" || t.Outcome == "blocked" }
	var pts []point
	for i, t := range r.History {
		if t.LagSeconds != nil {
			pts = append(pts, point{i, *t.LagSeconds, failed(t)})
		}
	}
	format := seconds
	s.Of = "lag"
	live := r.LagSeconds
	if len(pts) == 0 {
		for i, t := range r.History {
			if t.RowsWaiting >= 0 {
				pts = append(pts, point{i, float64(t.RowsWaiting), failed(t)})
			}
		}
		format = func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
		s.Of = "rows waiting"
		live = nil
		if r.RowsWaiting >= 0 {
			w := float64(r.RowsWaiting)
			live = &w
		}
	}
	if len(pts) == 0 {
		s.Of, s.Note = "", "no lag for this cursor kind, and the rows waiting were not counted"
		return s
	}
	slots := len(r.History)
	if r.LagFrom == "probe" && live != nil {
		pts = append(pts, point{slots, *live, false})
		slots++
		s.LastLabel = "now"
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		lo, hi = min(lo, p.v), max(hi, p.v)
	}
	// The y axis starts at zero (a lag or a count), unless values go below it (clock skew).
	bottom := min(lo, 0)
	span := hi - bottom
	x := func(i int) float64 {
		if slots == 1 {
			return float64(sparkWidth) / 2
		}
		return sparkPad + float64(i)*float64(sparkWidth-2*sparkPad)/float64(slots-1)
	}
	y := func(v float64) float64 {
		if span <= 0 {
			return float64(sparkHeight - sparkPad)
		}
		return float64(sparkHeight-sparkPad) - (v-bottom)/span*float64(sparkHeight-2*sparkPad)
	}
	coords := make([]string, len(pts))
	for k, p := range pts {
		coords[k] = coord(x(p.i)) + "," + coord(y(p.v))
		if p.failed {
			s.Failed = append(s.Failed, xy{coord(x(p.i)), coord(y(p.v))})
		}
	}
	last := pts[len(pts)-1]
	s.Points, s.N = strings.Join(coords, " "), len(pts)
	s.LastX, s.LastY = coord(x(last.i)), coord(y(last.v))
	s.Min, s.Max, s.Last = format(lo), format(hi), format(last.v)
	return s
}

func coord(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
