package tick

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// A chunkReader reads a backfill's chunks (source.Source's ReadChunk).
type chunkReader interface {
	ReadChunk(ctx context.Context, after map[string]json.RawMessage, where string, position *state.Cursor, limit int) (*source.Chunk, error)
}

// backfillStep runs one chunk of the backfill in progress, if there is one: it reads the next
// rows in key order, compared with the live position the tick has delivered up to (t.cursor), and
// hands those at or before it to the handler as reads, then queues the backfill's progress for the
// lease's next write (the chunk's rows are delivered by then). No read is delivered after a newer
// change of its row (internal/model/backfill.pml proves it): the chunk is read and handed over
// with no live batch delivered between; and a row after the position is left to the live batches,
// because a batch already read ahead may hold an older version of it, which would arrive after
// the read. more says another chunk follows. A chunk that fails is recorded and tried again by
// the next tick (chunkFailed): this one goes on with its live batches only.
func (t *tickRun) backfillStep() (more bool, err error) {
	b := t.l.Backfill()
	if b == nil {
		return false, nil
	}
	if b.Cancel {
		t.l.SetBackfill(nil)
		t.log.Info("backfill cancelled", "backfill_id", b.ID, "rows", b.Rows, "left", b.Left)
		return false, nil
	}
	cr, ok := t.r.Source.(chunkReader)
	if !ok || !canBackfill(t.r.Poller) {
		t.log.Warn("backfill waiting: a change-stream cursor's backfill (the stream's watermarks) is not built yet", "backfill_id", b.ID)
		return false, nil
	}
	if t.backfillFailed {
		return false, nil // once a tick: the live batches go on
	}
	c, err := cr.ReadChunk(t.fctx, b.After, b.Where, t.cursor, b.Chunk)
	if err != nil {
		return false, t.chunkFailed(b, "reading the chunk after "+keyText(b.After), err)
	}
	if len(c.Rows) > 0 {
		name := t.r.Poller.Name()
		from, to := "backfill "+b.ID+" after "+keyText(b.After), keyText(c.Next)
		pb := &pollerdef.Batch{Poller: name, ID: batchID(name, t.r.Source.Fingerprint(), from, to), FencingToken: t.l.Token(),
			Attempt: 1, From: t.cursor, To: t.cursor, Rows: c.Rows}
		if err := t.trusted("backfill batch", pb.ID); err != nil {
			return false, err
		}
		t0 := t.clk.Now()
		if herr := t.r.handle(t.wctx, pb); herr != nil {
			return false, t.chunkFailed(b, "handling batch "+pb.ID+", the chunk after "+keyText(b.After), herr)
		}
		t.sum.Rows += len(c.Rows)
		t.countOps(c.Rows)
		t.log.Info("backfill batch", "batch_id", pb.ID, "backfill_id", b.ID, "rows", len(c.Rows), "left", c.Left, "after", to,
			"fencing_token", pb.FencingToken, "duration_ms", t.clk.Now().Sub(t0).Milliseconds())
	}
	t.sum.Batches++ // a chunk is progress to commit, rows sent or not
	b.Rows += int64(len(c.Rows))
	b.Left += int64(c.Left)
	b.Failures, b.LastError = 0, ""
	if c.Next != nil {
		b.After = c.Next
	}
	if !c.Full {
		t.l.SetBackfill(nil)
		t.log.Info("backfill done", "backfill_id", b.ID, "kind", b.Kind, "rows", b.Rows, "left", b.Left,
			"seconds", t.clk.Now().Sub(b.StartedAt.Time).Seconds())
		return false, nil
	}
	t.l.SetBackfill(b)
	return true, nil
}

// canBackfill says whether the tick runs p's backfill: keyset cursors only, so far (a
// change-stream cursor's needs the stream's watermarks).
func canBackfill(p *pollerdef.Def) bool { return !p.Source().Changes() }

// chunkFailed records a chunk that failed (what, with err) in the backfill's progress and logs
// it; the tick runs no more chunks and goes on with its live batches, which a backfill never
// holds up. A lost lease ends the tick.
func (t *tickRun) chunkFailed(b *state.Backfill, what string, err error) error {
	if lerr := t.l.Err(); lerr != nil || errors.Is(err, lease.ErrLost) {
		return fmt.Errorf("backfill %s, %s: %w", b.ID, what, err)
	}
	t.backfillFailed = true
	b.Failures++
	b.LastError = what + ": " + err.Error()
	t.l.SetBackfill(b)
	t.log.Warn("backfill chunk failed: the live batches go on, the chunk is tried again next tick", "backfill_id", b.ID,
		"failures", b.Failures, "error", b.LastError, "cancel", "pollerctl backfill "+t.r.Poller.Name()+" --cancel --yes")
	return nil
}

// keyText renders a backfill's key for logs and batch ids ("<first>" for nil); json.Marshal
// sorts its columns.
func keyText(k map[string]json.RawMessage) string {
	if k == nil {
		return "<first>"
	}
	b, err := json.Marshal(k)
	if err != nil {
		return fmt.Sprint(k)
	}
	return string(b)
}
