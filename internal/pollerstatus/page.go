package pollerstatus

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Report is every poller's row at one moment: the status function's JSON reply, and what its
// page shows.
type Report struct {
	App         string     `json:"app"`
	Pollers     []Row      `json:"pollers"`
	GeneratedAt state.Time `json:"generated_at"`
}

// NewReport reads every poller's row (All) into a Report generated at cfg's now.
func NewReport(ctx context.Context, st Reader, cfg Config) (Report, error) {
	rows, err := All(ctx, st, cfg)
	if err != nil {
		return Report{}, err
	}
	return Report{App: cfg.App, Pollers: rows, GeneratedAt: state.At(cfg.now())}, nil
}

// NotOK counts the rows whose health is not ok.
func NotOK(rows []Row) int {
	n := 0
	for _, r := range rows {
		if r.Health != HealthOK {
			n++
		}
	}
	return n
}

// The page: the status function's HTML rendering of a Report. Self-contained: inline CSS and
// SVG, no script, nothing loaded from anywhere (the handler's Content-Security-Policy says so).

//go:embed status.html
var pageSource string

var page = template.Must(template.New("status").Parse(pageSource))

// RenderPage writes the page of a report (NewPage) or of an error (ErrorPage) to w.
func RenderPage(w io.Writer, d PageData) error { return page.Execute(w, d) }

// maxDeadLetterIDs bounds the dead letter ids a poller's card lists (the count is complete).
const maxDeadLetterIDs = 20

// PageData is what the page shows: a report made ready for the template, or an error.
type PageData struct {
	App         string
	GeneratedAt string
	Error       string
	Pollers     []pollerCard
	Blocked     int           // pollers blocked
	Counts      []healthCount // pollers per health, most urgent first; only those with some
	NotOK       int           // pollers whose health is not ok
	Refresh     int           // seconds between reloads of the page
	// History links to the pollers over days and weeks (the deployment's Azure Monitor workbook,
	// the app setting STATUS_WORKBOOK_URL); "" for none.
	History string
}

type healthCount struct {
	Health string
	N      int
}

// refreshSeconds is how often the page reloads itself (a meta refresh: the page has no script).
const refreshSeconds = 15

// ErrorPage is the page that says the report could not be made, and why (msg, redacted).
func ErrorPage(app, msg string, now time.Time) PageData {
	return PageData{App: app, Error: msg, GeneratedAt: now.UTC().Format(time.RFC3339), Refresh: refreshSeconds}
}

// pollerCard is a Row made ready to show: every value is text (html/template escapes it). It is
// the poller's line in the page's table and its card.
type pollerCard struct {
	Row
	Figures      Figures
	CursorKind   string
	CursorText   string
	Lease        string
	LeaseClass   string
	LastCommit   string
	Attempts     string
	DeadIDs      []string
	DeadMore     int
	DeadOldest   string // the oldest dead letter's age, for people
	Spark        sparkline
	ReasonHead   string // the health reason's headline
	Error        string // the error the reason quotes, shown once on the card
	TickError    string // the last tick's error, where it is not one shown before it ("": "the error above")
	ProbeError   string // the probe's, likewise
	AttemptError string // the failed batch's, likewise
	// Rows and Duration chart the history's rows per tick and tick duration beside Spark.
	Rows, Duration sparkline
	// Ops are the rows the history's ticks delivered, by op ("120 insert · 4 delete"); LastOps
	// the newest tick's that counted any. "" when none was counted.
	Ops, LastOps string
	// Details are what the source's driver shows of the poller (Row.Shown): a logical poller's
	// replication slot, how a MySQL timestamp+pk poller's reads are kept behind late commits.
	Details []driver.Detail
	// BackfillText is the running backfill's progress in words (BackfillText), BackfillBar its
	// percentage for the bar (-1: no estimate to show one).
	BackfillText string
	BackfillBar  int64
	// FollowText is a following tick's progress in words (FollowText); "" when none follows.
	FollowText string
}

// NewPage makes a report ready for the page: one card per poller, most urgent first.
func NewPage(rep Report) PageData {
	now := rep.GeneratedAt.Time
	d := PageData{App: rep.App, GeneratedAt: now.UTC().Format(time.RFC3339), Refresh: refreshSeconds}
	counts := map[string]int{}
	for _, r := range rep.Pollers {
		c := pollerCard{Row: r, Figures: r.Figures(), CursorText: r.Cursor.Text(), LastCommit: "-", Attempts: "none"}
		if r.Cursor != nil {
			c.CursorKind = r.Cursor.Kind
		}
		c.errorsOnce()
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
				c.LastCommit += " (" + DurationText(now.Sub(t).Seconds()) + " ago)"
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
		if a := r.DeadLetters.OldestAgeSeconds; a != nil {
			c.DeadOldest = DurationText(*a)
		}
		if len(c.DeadIDs) > maxDeadLetterIDs {
			c.DeadIDs, c.DeadMore = c.DeadIDs[:maxDeadLetterIDs], len(c.DeadIDs)-maxDeadLetterIDs
		}
		c.Spark = newSparkline(r)
		c.Rows = seriesSparkline(r, "rows per tick", func(t state.Tick) (float64, bool) { return float64(t.Rows), true }, countText)
		c.Duration = seriesSparkline(r, "tick duration", func(t state.Tick) (float64, bool) {
			if t.DurationMS == nil {
				return 0, false
			}
			return float64(*t.DurationMS) / 1000, true
		}, DurationText)
		c.Ops = OpsText(r.HistoryOps)
		for i := len(r.History) - 1; i >= 0 && c.Ops != ""; i-- {
			if len(r.History[i].Ops) > 0 {
				c.LastOps = OpsText(r.History[i].Ops) + " (" + r.History[i].At.UTC().Format(time.RFC3339) + ")"
				break
			}
		}
		c.Details = r.Shown()
		if r.Following != nil {
			c.FollowText = FollowText(r.Following, now)
		}
		if r.Backfill != nil {
			c.BackfillText, c.BackfillBar = BackfillText(r.Backfill, now), -1
			if p := r.BackfillProgress; p != nil && p.Percent != nil {
				c.BackfillBar = *p.Percent
			}
		}
		if r.Blocked {
			d.Blocked++
		}
		counts[r.Health]++
		d.Pollers = append(d.Pollers, c)
	}
	d.NotOK = NotOK(rep.Pollers)
	for _, h := range Healths {
		if counts[h] > 0 {
			d.Counts = append(d.Counts, healthCount{h, counts[h]})
		}
	}
	// What needs someone first: by health, most urgent first (the report's order, by name,
	// within each).
	slices.SortStableFunc(d.Pollers, func(a, b pollerCard) int { return cmp.Compare(urgency(a.Row), urgency(b.Row)) })
	return d
}

// urgency ranks a row by its health, most urgent first (Healths' order).
func urgency(r Row) int {
	if i := slices.Index(Healths, r.Health); i >= 0 {
		return i
	}
	return len(Healths)
}

// errorsOnce sets the card's reason and errors so that each error is shown once: the reason's
// first, then the last tick's, the probe's and the failed batch's where they are not one already
// shown (the same text, or one quoting the other: a tick's error wraps the source's).
func (c *pollerCard) errorsOnce() {
	r := c.Row
	c.ReasonHead, c.Error = r.reason.head, r.reason.err
	if c.ReasonHead == "" { // a row read back from JSON: its reason in one piece
		c.ReasonHead = r.HealthReason
	}
	shown := []string{c.Error}
	once := func(e string) string {
		for _, s := range shown {
			if s != "" && (strings.Contains(s, e) || strings.Contains(e, s)) {
				return ""
			}
		}
		shown = append(shown, e)
		return e
	}
	if r.LastTick.Failed() {
		c.TickError = once(r.LastTick.Error)
	}
	if r.Probe != nil && !r.Probe.OK && r.Probe.Skipped == "" && r.Probe.Error != "" {
		c.ProbeError = once(r.Probe.Error)
	}
	if r.FailedAttempts > 0 && r.LastError != "" {
		c.AttemptError = once(r.LastError)
	}
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

func newSparkline(r Row) sparkline {
	s := sparkline{Ticks: len(r.History), Width: sparkWidth, Height: sparkHeight, LastLabel: "last tick"}
	if len(r.History) == 0 {
		s.Note = "no ticks recorded yet (ticks that find nothing to read are not recorded here)"
		return s
	}
	failed := failedTick
	var pts []point
	for i, t := range r.History {
		if t.LagSeconds != nil {
			pts = append(pts, point{i, *t.LagSeconds, failed(t)})
		}
	}
	format := DurationText
	s.Of = "lag"
	live := r.LagSeconds
	if len(pts) == 0 {
		for i, t := range r.History {
			if t.RowsWaiting >= 0 {
				pts = append(pts, point{i, float64(t.RowsWaiting), failed(t)})
			}
		}
		format = countText
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
	s.draw(pts, slots, format)
	return s
}

// point is a sparkline's value at slot i (a tick of the history, or the probe after them), and
// whether that tick failed.
type point struct {
	i      int
	v      float64
	failed bool
}

// failedTick says whether a history entry is of a tick that failed.
func failedTick(t state.Tick) bool { return t.Outcome == "failed" || t.Outcome == "blocked" }

// seriesSparkline charts one measure of the history (value: an entry's, false when it has none)
// as Spark charts the lag; of names it. Ticks without the measure are left out.
func seriesSparkline(r Row, of string, value func(state.Tick) (float64, bool), format func(float64) string) sparkline {
	s := sparkline{Ticks: len(r.History), Width: sparkWidth, Height: sparkHeight, LastLabel: "last tick"}
	var pts []point
	for i, t := range r.History {
		if v, ok := value(t); ok {
			pts = append(pts, point{i, v, failedTick(t)})
		}
	}
	if len(pts) == 0 {
		s.Note = "no " + of + " recorded yet"
		return s
	}
	s.Of = of
	s.draw(pts, len(r.History), format)
	return s
}

// countText shows a count.
func countText(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

// draw lays pts out over slots places: the polyline, the failed ticks' dots, the last point and
// the legend's figures (format renders a value).
func (s *sparkline) draw(pts []point, slots int, format func(float64) string) {
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
}

func coord(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// opOrder is the order ops are shown in.
var opOrder = []string{"insert", "update", "delete", "upsert"}

// OpsText renders counts by op: "120 insert · 30 update · 4 delete"; "" when there are none.
func OpsText(ops map[string]int) string {
	var parts []string
	for _, op := range opOrder {
		if n, ok := ops[op]; ok {
			parts = append(parts, strconv.Itoa(n)+" "+op)
		}
	}
	var other []string
	for op := range ops {
		if !slices.Contains(opOrder, op) {
			other = append(other, op)
		}
	}
	slices.Sort(other)
	for _, op := range other {
		parts = append(parts, strconv.Itoa(ops[op])+" "+op)
	}
	return strings.Join(parts, " · ")
}
