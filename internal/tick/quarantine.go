package tick

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/faultpoint"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// quarantined is what quarantining a batch did.
type quarantined struct {
	name  string      // the dead letter's blob ("" when every row went through alone)
	dead  int         // rows dead-lettered
	calls int         // handler calls made
	parts [][]row.Row // the parts the handler took

	rows []deadletter.Row // the rows that failed alone, for the letter
}

// delivered counts the rows the handler took.
func (q *quarantined) delivered() int {
	n := 0
	for _, part := range q.parts {
		n += len(part)
	}
	return n
}

// quarantine isolates the rows of pb that fail on their own: it hands the handler halves of the
// batch, and halves of the halves that fail, down to single rows. Every part that succeeds is
// delivered; every single row that fails is written, with its error, to a dead letter. It returns
// once the letter is stored, so the caller may then move the checkpoint past the batch: a crash
// before that re-runs the batch and writes the letter again, never leaving a gap.
//
// A batch of n rows with k poison rows costs about 2k·log2(n) handler calls.
func (t *tickRun) quarantine(pb *pollerdef.Batch) (quarantined, error) {
	r, l := t.r, t.l
	var q quarantined
	if r.DeadLetters == nil {
		return q, errors.New("no dead letter store is configured")
	}
	if err := t.bisect(pb, pb.From, pb.Rows, &q); err != nil {
		return q, err
	}
	q.dead = len(q.rows)
	if len(q.rows) == 0 {
		return q, nil // every part went through on its own: nothing to dead-letter
	}
	if !l.Trusted() {
		return q, fmt.Errorf("%w: the trust window passed while quarantining batch %s", lease.ErrLost, pb.ID)
	}
	letter := &deadletter.Letter{
		Poller: r.Poller.Name(), BatchID: pb.ID, SourceFingerprint: r.Source.Fingerprint(), From: pb.From, To: pb.To,
		FencingToken: pb.FencingToken, CreatedAt: state.At(t.clk.Now()), BatchRows: len(pb.Rows), Delivered: q.delivered(), Rows: q.rows,
	}
	name, err := r.DeadLetters(context.WithoutCancel(t.wctx), letter)
	if err != nil {
		return q, err
	}
	q.name = name
	faultpoint.Hit(faultpoint.AfterDeadLetter)
	return q, nil
}

// bisect tries each half of rows (read after from) on its own, and bisects the halves that
// fail. The handler runs on the tick's handler context, which a lost lease cancels.
func (t *tickRun) bisect(pb *pollerdef.Batch, from *state.Cursor, rows []row.Row, q *quarantined) error {
	r, l := t.r, t.l
	mid := len(rows) / 2
	for _, part := range [][]row.Row{rows[:mid], rows[mid:]} {
		if len(part) == 0 {
			continue
		}
		to, err := part[len(part)-1].Cursor()
		if err != nil {
			return err
		}
		if !l.Trusted() {
			return fmt.Errorf("%w: the trust window passed while quarantining batch %s", lease.ErrLost, pb.ID)
		}
		sub := &pollerdef.Batch{
			Poller: pb.Poller, ID: batchID(r.Poller.Name(), r.Source.Fingerprint(), from.JSON(), to.JSON()),
			FencingToken: pb.FencingToken, Attempt: pb.Attempt, From: from, To: &to, Rows: part,
		}
		q.calls++
		faultpoint.Hit(faultpoint.QuarantineTry)
		herr := t.handle(sub)
		if lerr := l.Err(); lerr != nil {
			return lerr
		}
		switch {
		case herr == nil:
			q.parts = append(q.parts, part)
		case len(part) == 1:
			dead, err := deadRow(part[0], to, herr, pb.Attempt)
			if err != nil {
				return err
			}
			q.rows = append(q.rows, dead)
		default:
			if err := t.bisect(pb, from, part, q); err != nil {
				return err
			}
		}
		from = &to
	}
	return nil
}

func deadRow(r row.Row, cursor state.Cursor, herr error, attempts int64) (deadletter.Row, error) {
	key := map[string]json.RawMessage{}
	for k, v := range r.Key() {
		b, err := json.Marshal(v)
		if err != nil {
			return deadletter.Row{}, err
		}
		key[k] = b
	}
	data, err := json.Marshal(r)
	if err != nil {
		return deadletter.Row{}, err
	}
	msg := herr.Error()
	if len(msg) > 2000 {
		msg = msg[:2000] + "..."
	}
	return deadletter.Row{Table: r.Table(), Op: r.Op(), Key: key, Cursor: cursor, Data: data, Error: msg, Attempts: attempts}, nil
}
