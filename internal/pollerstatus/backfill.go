package pollerstatus

import (
	"fmt"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// BackfillProgress is a running backfill's progress at one moment, as the status shows it
// (JSON backfill_progress, the page's bar, pollerctl status and backfill).
type BackfillProgress struct {
	// Done counts the rows it has dealt with: sent as reads, or left to the live changes.
	Done int64 `json:"done"`
	// Percent is Done of the estimate (at most 100); absent without an estimate, or when the
	// estimate's count stopped at its cap.
	Percent *int64 `json:"percent,omitempty"`
	// RowsPerSecond is its rate since it started; absent before a second has passed or a row.
	RowsPerSecond *float64 `json:"rows_per_second,omitempty"`
	// SecondsLeft is the estimate's rest at that rate; absent when either is unknown.
	SecondsLeft *float64 `json:"seconds_left,omitempty"`
}

// Progress is b's progress at now.
func Progress(b *state.Backfill, now time.Time) BackfillProgress {
	p := BackfillProgress{Done: b.Rows + b.Left}
	bounded := b.Estimate > 0 && b.Estimate < source.CountCap
	if bounded {
		pct := min(100, 100*p.Done/b.Estimate)
		p.Percent = &pct
	}
	if elapsed := now.Sub(b.StartedAt.Time).Seconds(); elapsed >= 1 && p.Done > 0 {
		rate := float64(p.Done) / elapsed
		p.RowsPerSecond = &rate
		if bounded && b.Estimate > p.Done {
			left := float64(b.Estimate-p.Done) / rate
			p.SecondsLeft = &left
		}
	}
	return p
}

// EstimateText says a backfill's estimate: "N rows", or "more than N" at its cap.
func EstimateText(n int64) string {
	if n >= source.CountCap {
		return fmt.Sprintf("more than %d rows", source.CountCap)
	}
	return fmt.Sprintf("%d rows", n)
}

// BackfillText is a backfill's progress in one line: rows sent, left, of its estimate, its rate
// so far and the time left at that rate, its filter, a cancellation asked for, its failures.
func BackfillText(b *state.Backfill, now time.Time) string {
	what := "backfill"
	if b.Kind == state.BackfillSnapshot {
		what = "initial snapshot"
	}
	line := fmt.Sprintf("%s %s: %d rows sent, %d left to the live changes", what, b.ID, b.Rows, b.Left)
	p := Progress(b, now)
	if b.Estimate > 0 {
		line += " of about " + EstimateText(b.Estimate)
		if p.Percent != nil {
			line += fmt.Sprintf(" (%d%%)", *p.Percent)
		}
	}
	if p.RowsPerSecond != nil {
		line += fmt.Sprintf(", %.0f rows/s over %s", *p.RowsPerSecond, DurationText(now.Sub(b.StartedAt.Time).Seconds()))
		if p.SecondsLeft != nil {
			line += ", about " + DurationText(*p.SecondsLeft) + " left"
		}
	}
	if b.Where != "" {
		line += ", where " + b.Where
	}
	if b.Cancel {
		line += " (cancel requested)"
	}
	if b.Failures > 0 {
		line += fmt.Sprintf("; its chunk failed in %d tick(s) in a row (tried again each tick, the live batches go on): %s", b.Failures, b.LastError)
	}
	return line
}
