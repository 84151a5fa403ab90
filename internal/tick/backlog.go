package tick

import (
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// checkStamps runs the source's CheckStamps when it has not passed within StampCheckEvery.
func (t *tickRun) checkStamps() error {
	r := t.r
	r.stampMu.Lock()
	due := r.stampChecked.IsZero() || t.clk.Now().Sub(r.stampChecked) >= StampCheckEvery
	r.stampMu.Unlock()
	if !due {
		return nil
	}
	if err := r.Source.CheckStamps(t.ctx); err != nil {
		return err
	}
	r.stampMu.Lock()
	r.stampChecked = t.clk.Now()
	r.stampMu.Unlock()
	return nil
}

// observe measures the backlog after cursor (the rows waiting and the lag) into the summary,
// and queues the history entry that the tick's last write carries.
func (t *tickRun) observe(cursor *state.Cursor, outcome Outcome) {
	sum := &t.sum
	b, err := t.r.Source.Backlog(t.ctx, cursor, WaitingCap)
	if err != nil {
		sum.RowsWaiting = -1
	} else {
		sum.RowsWaiting, sum.LagSeconds, sum.RetainedBytes = b.Rows, b.LagSeconds(t.clk.Now()), b.RetainedBytes
	}
	now := t.clk.Now()
	ms := now.Sub(t.start).Milliseconds()
	t.l.AddHistory(state.Tick{At: state.At(now), Outcome: string(outcome), Rows: sum.Rows, LagSeconds: sum.LagSeconds,
		RowsWaiting: sum.RowsWaiting, Ops: sum.Ops, RetainedBytes: sum.RetainedBytes, DurationMS: &ms})
}
