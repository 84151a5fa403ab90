package tick

import (
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
)

// TestFollowLatencySpansTicks: a following tick's latency percentiles are its runner's following
// ticks' over the last minute, the ticks before it included (a tick following a few seconds of
// every few would show only its own first batches, those that waited for it), and none older.
func TestFollowLatencySpansTicks(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	r := &Runner{}
	tickAt := func() *tickRun {
		tr := &tickRun{r: r, clk: clk, followUntil: clk.Now().Add(5 * time.Second)}
		tr.caughtUp()
		return tr
	}
	old := tickAt()
	old.fol.lat.add(clk.Now(), 9_000) // more than a minute before the last tick: not counted
	clk.Advance(2 * time.Minute)
	first := tickAt()
	for range 19 {
		first.fol.lat.add(clk.Now(), 2)
	}
	clk.Advance(5 * time.Second)
	second := tickAt()
	second.fol.lat.add(clk.Now(), 800) // its first batch, which waited for it
	s := second.fol.state(second.followUntil, clk.Now())
	if s.LatencyP50MS == nil || *s.LatencyP50MS != 2 || *s.LatencyP95MS != 2 {
		t.Fatalf("the second tick's p50/p95: %v/%v, want 2/2 (its runner's last minute: 19 batches at 2 ms, one at 800)", s.LatencyP50MS, s.LatencyP95MS)
	}
	clk.Advance(time.Minute)
	if s := second.fol.state(second.followUntil, clk.Now()); s.LatencyP50MS == nil || *s.LatencyP50MS != 800 {
		t.Fatalf("a minute on: p50 %v, want 800 (the older batches are out of the window)", s.LatencyP50MS)
	}
}
