package pollerstatus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// ProbeTimeout bounds one poller's probe.
const ProbeTimeout = 10 * time.Second

// ProbeCap bounds the rows a probe counts.
const ProbeCap = 10_000

// Source is what a probe reads of an open source (source.Source has it). It only reads.
type Source interface {
	Fingerprint() string
	CheckCursor(c *state.Cursor) error
	Backlog(ctx context.Context, after *state.Cursor, limit int) (source.Stats, error)
}

// slotReader is the optional look at a logical poller's replication slot (source.Source has it).
type slotReader interface {
	SlotStatus(ctx context.Context) (source.SlotState, bool, error)
}

// openTrxReader is the optional look at how a MySQL timestamp+pk source's reads are bounded
// (source.Source has it).
type openTrxReader interface {
	OpenTrxBound() (source.OpenTrx, bool)
}

// stampChecker is the optional check for rows the cursor can never reach (source.Source has it).
type stampChecker interface {
	CheckStamps(ctx context.Context) error
}

// ProbeSource looks at an open source the way the next tick will, without writing anything: the
// state document (doc, nil when none, stored as blob) must be this source's (fingerprint), its
// cursor must fit the source's key types, no row may sit where the cursor can never reach it, and
// it measures what waits: the count (up to ProbeCap) and the lag at now.
func ProbeSource(ctx context.Context, src Source, blob string, doc *state.Doc, now func() time.Time) Probe {
	start := now()
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	var slot *source.SlotState
	p := func() Probe {
		var cursor *state.Cursor
		if doc != nil {
			if err := state.CheckFingerprint(blob, doc, src.Fingerprint()); err != nil {
				return ProbeFailed(err)
			}
			cursor = doc.Checkpoint.Cursor
			if err := src.CheckCursor(cursor); err != nil {
				return ProbeFailed(err)
			}
		}
		if sr, ok := src.(slotReader); ok {
			st, logical, err := sr.SlotStatus(ctx)
			if err != nil {
				return ProbeFailed(err)
			}
			if logical {
				slot = &st
				if err := checkSlot(st, doc); err != nil {
					return ProbeFailed(err)
				}
			}
		}
		if sc, ok := src.(stampChecker); ok {
			if err := sc.CheckStamps(ctx); err != nil {
				return ProbeFailed(err)
			}
		}
		b, err := src.Backlog(ctx, cursor, ProbeCap)
		if err != nil {
			return ProbeFailed(err)
		}
		p := Probe{OK: true, RowsWaiting: b.Rows, LagSeconds: b.LagSeconds(now())}
		if or, ok := src.(openTrxReader); ok {
			if o, ok := or.OpenTrxBound(); ok {
				p.OpenTrx = &o
			}
		}
		return p
	}()
	p.DurationMS = now().Sub(start).Milliseconds()
	p.Slot = slot
	return p
}

// errSlot: a logical poller's replication slot cannot serve its checkpoint (missing, another
// kind of slot, lost WAL, or past the checkpoint: slotAhead); the message names the fix.
var errSlot = errors.New("replication slot")

// checkSlot says what is wrong with a logical poller's slot itself (doc, nil when none yet,
// names the poller in the fixes). Whether it is past the checkpoint is Read's to judge (slotAhead),
// with a document read after the slot.
func checkSlot(s source.SlotState, doc *state.Doc) error {
	name := "POLLER"
	if doc != nil {
		name = doc.PollerName
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", errSlot, s.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case !s.Exists:
		return fail("does not exist, so the poller cannot read its changes: pollerctl cdc enable %s --yes creates it (it starts at the WAL of that moment: a checkpoint before it then needs pollerctl reset %s --to-beginning --yes)", name, name)
	case s.Type != "logical" || s.Plugin != "pgoutput" || !s.Here:
		return fail("is a %s slot with plugin %q on database %q, not a logical pgoutput slot of the poller's database: set {P}_CDC_SLOT to another name and run pollerctl cdc enable %s --yes", s.Type, s.Plugin, s.Database, name)
	case s.WALStatus == "lost":
		return fail("lost WAL it needs (wal_status lost: max_slot_wal_keep_size removed it); it cannot be read any more: pollerctl cdc disable %s --yes, pollerctl cdc enable %s --yes, then pollerctl reset %s --to-beginning --yes (the changes in between are not delivered)", name, name, name)
	}
	return nil
}

// slotAhead says when a logical poller's slot is past its checkpoint (doc nil or without a
// checkpoint: never). Only a state document read after the slot may be compared with it: a tick
// advances the slot after it commits, so a document read before the slot may be one commit old.
func slotAhead(s source.SlotState, doc *state.Doc) error {
	if doc == nil || doc.Checkpoint.Cursor == nil {
		return nil
	}
	at, err := source.CursorPosition(doc.Checkpoint.Cursor)
	confirmed, ok := s.Confirmed()
	if err != nil || !ok || !at.Before(confirmed) {
		return nil
	}
	return fmt.Errorf("%w %s: is at %s, past the checkpoint %s: the changes between were consumed by another reader, or the slot was made anew, and cannot be read again. "+
		"Deliver them from elsewhere if they matter, then pollerctl reset %s --to-beginning --yes goes on from the slot's position", errSlot, s.Name, confirmed, at, doc.PollerName)
}

// Skip is what an opener (OpenAndProbe) returns when the source is not to be probed: the probe
// is then Skipped with this text, which is not a verdict.
type Skip string

func (s Skip) Error() string { return string(s) }

// OpenAndProbe opens a poller's source with open and probes it (ProbeSource), all within
// ProbeTimeout. open returns the source, the blob of its state document and a function that
// closes the source (nil when it stays open); an error is the probe's failure, timed, unless it
// is a Skip.
func OpenAndProbe(ctx context.Context, doc *state.Doc, now func() time.Time,
	open func(ctx context.Context) (src Source, blob string, done func(), err error)) Probe {
	start := now()
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	src, blob, done, err := open(ctx)
	if skip, ok := errors.AsType[Skip](err); ok {
		return Probe{Skipped: string(skip), RowsWaiting: -1}
	}
	if err != nil {
		p := ProbeFailed(err)
		p.DurationMS = now().Sub(start).Milliseconds()
		return p
	}
	if done != nil {
		defer done()
	}
	return ProbeSource(ctx, src, blob, doc, now)
}

// ProbeFailed is the probe of a source that could not be opened or read: Misconfigured when the
// error needs a change (settings, schema, the checkpoint: a cursor that does not fit, another
// source's fingerprint), not a retry (a database that cannot be reached, a row the cursor can
// never reach).
func ProbeFailed(err error) Probe {
	return Probe{Error: redact.Text(err.Error()), RowsWaiting: -1,
		Misconfigured: errors.Is(err, source.ErrSchema) || errors.Is(err, source.ErrCursor) ||
			errors.Is(err, state.ErrFingerprintMismatch) || errors.Is(err, appsettings.ErrSetting) ||
			errors.Is(err, source.ErrNotEnabled) || errors.Is(err, source.ErrSlotAhead) || errors.Is(err, errSlot) ||
			errors.Is(err, source.ErrNotTracked) || errors.Is(err, source.ErrTruncate)}
}
