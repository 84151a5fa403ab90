package tick

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pseudotrigger/pseudotrigger/internal/faultpoint"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// backfillStep runs one chunk of the backfill in progress, if there is one, and reports whether
// another follows. A keyset cursor's chunk (keysetChunk) is read and delivered at once; a change
// stream's (streamChunk) is read now and delivered once the live batches pass its watermark.
// Either way a chunk's reads are handed to the handler between live batches, as one batch, and
// the backfill's progress is queued for the lease's next write (the chunk's rows are delivered
// by then). No read is delivered after a newer change of its row (internal/model/backfill.pml
// proves it). A chunk that fails is recorded and tried again by the next tick (chunkFailed):
// this one goes on with its live batches only. behind says the last live batch was full (more
// waits).
func (t *tickRun) backfillStep(behind bool) (more bool, err error) {
	b := t.l.Backfill()
	if b == nil {
		return false, nil
	}
	if b.Cancel {
		t.l.SetBackfill(nil)
		t.pending = nil
		t.log.Info("backfill cancelled", "backfill_id", b.ID, "rows", b.Rows, "left", b.Left)
		return false, nil
	}
	cr := t.r.Source
	if err := cr.Backfills(); err != nil {
		if !t.backfillFailed {
			t.backfillFailed = true
			t.log.Warn("backfill waiting: this source cannot run it", "backfill_id", b.ID, "error", err.Error(),
				"cancel", "pollerctl backfill "+t.r.Poller.Name()+" --cancel --yes")
		}
		return false, nil
	}
	if t.backfillFailed {
		return false, nil // once a tick: the live batches go on
	}
	if b.Kind == state.BackfillSnapshot && b.Estimate == 0 && b.Rows == 0 && b.After == nil && !t.counted {
		// An initial snapshot's estimate, which no operator's command counted: before its first
		// chunk, once a tick (a count that fails, or an empty table, leaves it unknown).
		t.counted = true
		if n, err := cr.CountChunkRows(t.fctx, b.Where, source.CountCap); err == nil {
			b.Estimate = n
			t.l.SetBackfill(b)
		}
	}
	var c *source.Chunk
	if t.r.Poller.Source().Changes() {
		if c, more, err = t.streamChunk(cr, b, behind); c == nil {
			return more, err
		}
	} else {
		if t.ahead == nil && !t.liveQuiet() {
			// The next live batch is read while the chunk is: its round trip overlaps the chunk's.
			// The chunk is compared with the position delivered, not with what is read ahead
			// (the model's -DKEYSET).
			t.ahead = t.r.readAhead(t.fctx, t.cursor)
		}
		if c, err = cr.ReadChunk(t.fctx, b.After, b.Where, t.cursor, b.Chunk); err != nil {
			return false, t.chunkFailed(b, "reading the chunk after "+keyText(b.After), err)
		}
		t.settleAhead() // no read of the source while the handler runs (SQLite: it may write)
	}
	if len(c.Rows) > 0 {
		name := t.r.Poller.Name()
		from, to := "backfill "+b.ID+" after "+keyText(b.After), keyText(c.Next)
		pb := &pollerdef.Batch{Poller: name, ID: batchID(name, t.r.Source.Fingerprint(), from, to), FencingToken: t.l.Token(),
			Attempt: 1, From: t.cursor, To: t.cursor, Rows: c.Rows}
		faultpoint.Hit(faultpoint.InBackfill)
		if err := t.trusted("backfill batch", pb.ID); err != nil {
			return false, err
		}
		t0 := t.clk.Now()
		if herr := t.handle(pb); herr != nil {
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

// streamChunk is a change-stream cursor's chunk: the one read earlier in this tick once the live
// batches have passed its watermark, its reads of keys that a newer change touched meanwhile
// dropped (counted as left: the live batches delivered them); else nil, after reading the next
// chunk if none waits and the live batches are caught up (not behind: else the watermark, at the
// stream's end, would wait behind the whole backlog, and a tick that ends first reads the chunk
// in vain). more says the tick should go on for it: a chunk was just read (its watermark
// follows in the stream), or the live batches moved since the last look. A chunk not delivered
// by the end of the tick is read again by the next (the progress moves only with one
// delivered).
func (t *tickRun) streamChunk(cr Source, b *state.Backfill, behind bool) (c *source.Chunk, more bool, err error) {
	if p := t.pending; p != nil {
		if p.c.Watermark.Reached(t.cursor) {
			t.pending = nil
			if p.bad != nil {
				return nil, false, t.chunkFailed(b, "matching the chunk after "+keyText(b.After)+" with the live changes", p.bad)
			}
			return p.deliverable(), false, nil
		}
		moved := t.fromText != p.seenAt
		p.seenAt = t.fromText
		return nil, moved, nil
	}
	if behind {
		return nil, false, nil
	}
	c, err = cr.ReadChunk(t.fctx, b.After, b.Where, nil, b.Chunk)
	if errors.Is(err, source.ErrChunkAgain) {
		t.chunkAgain++
		t.log.Info("backfill chunk read again later: a transaction had committed but was not yet visible to its snapshot", "backfill_id", b.ID, "tries", t.chunkAgain)
		return nil, t.chunkAgain < 3, nil
	}
	if err != nil {
		return nil, false, t.chunkFailed(b, "reading the chunk after "+keyText(b.After), err)
	}
	p, err := newPending(c)
	if err != nil {
		return nil, false, t.chunkFailed(b, "matching the chunk after "+keyText(b.After)+" with the stream", err)
	}
	p.seenAt = t.fromText
	t.pending, t.pendingGrace = p, 0
	return nil, true, nil
}

// A pendingChunk is a change-stream backfill's chunk read and not yet delivered: it waits for
// the live batches to pass its watermark, and loses each read whose key a newer change touches
// meanwhile (see, called on every live batch before it is handed over).
type pendingChunk struct {
	c      *source.Chunk
	keys   map[string]int // each read's key (Row.BackfillKey): its index in c.Rows
	drop   []bool         // by index in c.Rows
	seenAt string         // the live cursor at the last look (streamChunk)
	bad    error          // a change's key could not be rendered: the chunk is not delivered
}

func newPending(c *source.Chunk) (*pendingChunk, error) {
	p := &pendingChunk{c: c, keys: make(map[string]int, len(c.Rows)), drop: make([]bool, len(c.Rows))}
	for i, r := range c.Rows {
		k, err := r.BackfillKey()
		if err != nil {
			return nil, err
		}
		p.keys[k] = i
	}
	return p, nil
}

// see drops the reads of the keys that rows' newer changes touch.
func (p *pendingChunk) see(rows []row.Row) {
	for _, r := range rows {
		if !p.c.Watermark.Newer(r) {
			continue
		}
		k, err := r.BackfillKey()
		if err != nil {
			p.bad = err
			continue
		}
		if i, ok := p.keys[k]; ok {
			p.drop[i] = true
		}
	}
}

// deliverable is the chunk with its dropped reads moved to Left.
func (p *pendingChunk) deliverable() *source.Chunk {
	c := *p.c
	c.Rows = c.Rows[:0:0]
	for i, r := range p.c.Rows {
		if p.drop[i] {
			c.Left++
			continue
		}
		c.Rows = append(c.Rows, r)
	}
	return &c
}

// settleAhead waits for the batch being read ahead, if any, and keeps it for next().
func (t *tickRun) settleAhead() {
	if t.ahead == nil {
		return
	}
	f := <-t.ahead
	ch := make(chan fetched, 1)
	ch <- f
	t.ahead = ch
}

// canBackfill says whether the tick runs a backfill of src.
func canBackfill(src Source) bool {
	return src.Backfills() == nil
}

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
