package pollerstatus

import (
	"github.com/pseudotrigger/pseudotrigger/internal/liveness"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// Cleanup is what a poller that deletes its delivered rows (poller.json's "cleanup") shows of
// it: what it deletes, how many rows await it now, and why the last cleanup failed.
type Cleanup struct {
	// Rule says what it deletes ("delete delivered rows older than 168h0m0s").
	Rule string `json:"rule"`
	// RowsAwaiting counts the delivered rows behind the checkpoint that it deletes (by its
	// older_than), as the probe found them, up to ProbeCap; -1 when not counted.
	RowsAwaiting int64 `json:"rows_awaiting"`
	// Error is why the last tick's cleanup failed (its liveness mark, when no later state write
	// replaced it), redacted; "" when it did not.
	Error string `json:"error,omitempty"`
}

// cleanupOf is a registered poller's cleanup as the probe p (nil: none) and its liveness mark m
// (blob mb; nil: none) found it, against the state document's blob sb; nil when it has no
// cleanup. The mark's error counts only when the mark is not older than the state document: a
// tick whose cleanup fails writes its mark after its commit, and a later tick that committed
// without a mark had its cleanup succeed.
func cleanupOf(reg Registered, p *Probe, m *liveness.Mark, mb, sb store.Blob) *Cleanup {
	if reg.Cleanup == "" {
		return nil
	}
	c := &Cleanup{Rule: reg.Cleanup, RowsAwaiting: -1}
	if p != nil && p.OK && p.RowsAwaitingCleanup != nil {
		c.RowsAwaiting = *p.RowsAwaitingCleanup
	}
	if m != nil && m.CleanupError != "" && !mb.LastModified.Before(sb.LastModified) {
		c.Error = redact.Text(m.CleanupError)
	}
	return c
}

// Text says how many rows await the cleanup and what it deletes, and that it fails when it
// does, for the views (Figures.Cleanup).
func (c *Cleanup) Text() string {
	if c == nil {
		return ""
	}
	s := WaitingText(c.RowsAwaiting) + " rows awaiting cleanup (" + c.Rule + ")"
	if c.Error != "" {
		s += "; the last cleanup failed"
	}
	return s
}

// cleanupReason is the health reason of a poller whose cleanup fails.
func cleanupReason(name string) string {
	return "its cleanup of delivered rows fails: they stay in the table behind the checkpoint (never sent again) and each tick tries again. " +
		"Fix the cause (pollerctl check " + name + " names a missing DELETE privilege with its GRANT)"
}
