package pollerstatus

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
)

// Backlog is what waits behind a poller as one measure found it (driver.Stats, through the probe
// or a tick): the rows waiting and the lag, with the cursor kind that says whether a lag can be
// known. Every view words it with its methods: the status page, pollerctl status and
// scripts/dev.sh's progress lines (a tick's own measure, at its end).
type Backlog struct {
	// RowsWaiting counts the rows after the cursor, up to tick.WaitingCap (the probe's cap is
	// the same); -1 when not counted.
	RowsWaiting int64
	// LagSeconds is the age of the oldest row not yet delivered (driver.Stats.LagSeconds): 0
	// when nothing waits, nil when unknown.
	LagSeconds *float64
	// CursorKind is the poller's cursor kind; "" when not known.
	CursorKind string
}

// Backlog is the row's measure of what waits (Row.LagFrom says where it was taken).
func (r Row) Backlog() Backlog {
	b := Backlog{RowsWaiting: r.RowsWaiting, LagSeconds: r.LagSeconds}
	if r.Cursor != nil {
		b.CursorKind = r.Cursor.Kind
	}
	return b
}

// LagText renders the lag for people: "0s (nothing waits)", the age of the oldest row waiting,
// "unknown" with why when rows wait behind a cursor with no clock in it (integer, xid,
// rowversion, a change stream's position: the rows waiting say how far behind it is), and "-"
// when nothing measured it. Never a made-up 0.
func (b Backlog) LagText() string {
	switch {
	case b.LagSeconds != nil && *b.LagSeconds == 0 && b.RowsWaiting == 0:
		return "0s (nothing waits)"
	case b.LagSeconds != nil:
		return DurationText(*b.LagSeconds)
	case b.CursorKind != "" && b.CursorKind != state.KindTimestampPK && b.RowsWaiting != 0:
		return "unknown (the " + b.CursorKind + " cursor has no clock: see the rows waiting)"
	}
	return "-"
}

// WaitingText renders the rows waiting for people: the count, "at least 10000" at the cap,
// "not counted" when unknown.
func (b Backlog) WaitingText() string { return WaitingText(b.RowsWaiting) }

// WaitingText renders a count of rows waiting (-1: not counted) for people.
func WaitingText(n int64) string {
	switch {
	case n < 0:
		return "not counted"
	case n >= tick.WaitingCap:
		return "at least " + strconv.Itoa(tick.WaitingCap)
	}
	return strconv.FormatInt(n, 10)
}

// The words for where a row's lag and rows waiting were measured (Row.LagFrom), the same in
// every view; MeasuredAtTickEnd is a tick's own (scripts/dev.sh's progress line).
const (
	MeasuredNow       = "measured now"
	MeasuredLastTick  = "at the last tick"
	MeasuredAtTickEnd = "at the tick's end"
)

// Figures are a row's headline figures in words, one rendering for every view: the status
// page's table and cards and pollerctl status's table.
type Figures struct {
	Health string
	// NotProbed: no probe of the source took part (pollerctl status --no-probe, a probe
	// skipped), and the health is one a probe could have changed (ok, lagging, degraded); the
	// views say "not probed" beside it rather than claim more than they know.
	NotProbed bool
	Lag       string
	Waiting   string
	// Measured says where the lag and rows waiting come from (MeasuredNow, MeasuredLastTick);
	// "" when nothing measured them.
	Measured string
	LastTick string
	// Problem is the first words of the health reason: what is wrong ("" when nothing).
	Problem string
	// Cleanup says how many delivered rows await the poller's cleanup and what it deletes
	// (Cleanup.Text); "" when it has none.
	Cleanup string
}

// Figures returns the row's figures in words.
func (r Row) Figures() Figures {
	b := r.Backlog()
	f := Figures{Health: r.Health, Lag: b.LagText(), Waiting: b.WaitingText(), LastTick: r.LastTick.Text(), Problem: Headline(r.problem()),
		Cleanup: r.Cleanup.Text()}
	switch r.LagFrom {
	case "probe":
		f.Measured = MeasuredNow
	case "last tick":
		f.Measured = MeasuredLastTick
	}
	f.NotProbed = r.Registered && (r.Probe == nil || r.Probe.Skipped != "") &&
		slices.Contains([]string{HealthOK, HealthLagging, HealthDegraded}, r.Health)
	return f
}

// problem is what the health reason says is wrong: the error it quotes, else its headline (the
// whole reason for a row read back from JSON).
func (r Row) problem() string {
	if r.reason.err != "" {
		return r.reason.err
	}
	return r.HealthReason
}

// headlineLen bounds Headline, in characters.
const headlineLen = 90

// Headline is the first words of a text: its first line, up to headlineLen characters, cut at a
// word and marked "…" when cut.
func Headline(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if utf8.RuneCountInString(s) <= headlineLen {
		return s
	}
	cut := []rune(s)[:headlineLen]
	if i := strings.LastIndexByte(string(cut), ' '); i > headlineLen/2 {
		return strings.TrimRight(string(cut)[:i], " ,.;:") + " …"
	}
	return string(cut) + "…"
}
