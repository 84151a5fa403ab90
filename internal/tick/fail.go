package tick

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
)

// failed applies the poison policy to pb, which the handler failed with herr. A batch is
// quarantined when it is poison ({P}_MAX_ATTEMPTS reached) and {P}_ON_POISON is quarantine, or
// when it is the recorded failing batch (the tick's first, retried) and the failure asks for
// quarantine (pollerctl quarantine); otherwise the failure is recorded and the tick ends. It
// returns nil when the batch was quarantined: the tick goes on past it.
func (t *tickRun) failed(pb *pollerdef.Batch, herr error) error {
	l, s := t.l, t.r.Settings
	t.awaitAhead() // let the read-ahead finish before the lease goes
	if lerr := l.Err(); lerr != nil {
		return fmt.Errorf("batch %s: %w (the handler returned: %v)", pb.ID, lerr, herr)
	}
	forced := t.attempt > 1 && l.Failure() != nil && l.Failure().Quarantine && t.sum.Batches == 0
	poisoned := s.Poison().Poisoned(t.attempt)
	if !forced && !s.Poison().Quarantines(t.attempt) {
		return t.fail(pb, herr, poisoned)
	}
	q, qerr := t.quarantine(pb)
	if qerr != nil {
		if lerr := l.Err(); lerr != nil {
			return fmt.Errorf("quarantining batch %s: %w (%v)", pb.ID, lerr, qerr)
		}
		return t.fail(pb, fmt.Errorf("quarantine: %w (the batch first failed with: %v)", qerr, herr), poisoned)
	}
	t.sum.Rows += q.delivered()
	for _, part := range q.parts {
		t.countOps(part)
	}
	t.sum.DeadLettered += q.dead
	t.sum.DeadLetter = q.name
	t.log.Warn("batch quarantined", "batch_id", pb.ID, "dead_letter", q.name, "rows_dead", q.dead, "rows_delivered", q.delivered(),
		"attempt", t.attempt, "fencing_token", pb.FencingToken, "handler_calls", q.calls)
	return nil
}

// fail records a failed attempt at pb and releases the lease, in one write; when poisoned (the
// attempts reached {P}_MAX_ATTEMPTS) it says loudly that the poller is blocked and how to unblock it.
func (t *tickRun) fail(pb *pollerdef.Batch, herr error, poisoned bool) error {
	name := t.r.Poller.Name()
	keys := keyRange(pb.Rows)
	t.sum.BatchID = pb.ID
	failure := fmt.Errorf("%w: batch %s (attempt %d, %d rows, keys %s): %w", ErrBatchFailed, pb.ID, pb.Attempt, len(pb.Rows), keys, herr)
	if poisoned {
		p := appsettings.Prefix(name)
		unblock := appsettings.UnblockHint(name)
		t.sum.Outcome = Blocked
		failure = fmt.Errorf("%w: %s has failed batch %s %d times (%s_MAX_ATTEMPTS=%d; %s_ON_POISON=block retries it every tick and never skips it): keys %s; last error: %v. To unblock: %s",
			ErrBlocked, name, pb.ID, pb.Attempt, p, t.r.Settings.Poison().Limit(), p, keys, herr, unblock)
		t.log.Error("poller blocked", "batch_id", pb.ID, "keys", keys, "attempts", pb.Attempt, "last_error", herr.Error(), "unblock", unblock)
	}
	outcome := Failed
	if poisoned {
		outcome = Blocked
	}
	cursor := t.l.Checkpoint().Cursor
	if t.uncommitted != nil {
		cursor = t.uncommitted.Cursor
	}
	t.observe(cursor, outcome)
	if ferr := t.write("commit", true, func(ctx context.Context) error {
		return t.l.FailAndRelease(ctx, t.uncommitted, pb.ID, keys, herr)
	}); ferr != nil {
		return errors.Join(failure, fmt.Errorf("recording the failure: %w", ferr))
	}
	return failure
}

// keyRange names the first and last rows' keys, for error messages.
func keyRange(rows []row.Row) string {
	if len(rows) == 0 {
		return "none"
	}
	first, _ := json.Marshal(rows[0].Key())
	if len(rows) == 1 {
		return string(first)
	}
	last, _ := json.Marshal(rows[len(rows)-1].Key())
	return string(first) + ".." + string(last)
}
