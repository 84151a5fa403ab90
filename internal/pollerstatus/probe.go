package pollerstatus

import (
	"context"
	"errors"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// ProbeTimeout bounds one poller's probe.
const ProbeTimeout = 10 * time.Second

// ProbeCap bounds the rows a probe counts.
const ProbeCap = 10_000

// Source is what a probe reads of an open source (source.Source has it). It only reads.
type Source interface {
	Identity() state.SourceDef
	CheckCursor(c *state.Cursor) error
	Backlog(ctx context.Context, after *state.Cursor, limit int) (driver.Stats, error)
	// Inspect looks at what the source's change stream reads from besides the table: its
	// details, and what is wrong with it (none for the other sources).
	Inspect(ctx context.Context, poller string) ([]driver.Detail, error)
	// CheckStamps looks for rows the cursor can never reach.
	CheckStamps(ctx context.Context) error
	// SetupProblems is the set-up check, run when the source is first opened in a process and
	// again while it finds a problem.
	SetupProblems(ctx context.Context) ([]setup.Finding, bool, error)
	// Cleans says whether the source deletes its delivered rows, and AwaitingCleanup counts up
	// to limit of those behind the checkpoint upTo.
	Cleans() bool
	AwaitingCleanup(ctx context.Context, upTo *state.Cursor, limit int) (int64, error)
}

var _ Source = (*source.Source)(nil)

// setupWarnings are the problems of the source's set-up; nil when none (or the check failed:
// a check is advice, never the probe's failure).
func setupWarnings(ctx context.Context, src Source) []setup.Finding {
	found, _, err := src.SetupProblems(ctx)
	if err != nil {
		return nil
	}
	var out []setup.Finding
	for _, f := range found {
		if f.Verdict == setup.VerdictProblem {
			out = append(out, f)
		}
	}
	return out
}

// ProbeSource looks at an open source the way the next tick will, without writing anything: the
// state document (doc, nil when none, stored as blob) must be this source's (fingerprint), its
// cursor must fit the source's key types, no row may sit where the cursor can never reach it, and
// it measures what waits: the count (up to ProbeCap) and the lag at now.
func ProbeSource(ctx context.Context, src Source, blob string, doc *state.Doc, now func() time.Time) Probe {
	start := now()
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	var details []driver.Detail
	p := func() Probe {
		var cursor *state.Cursor
		if doc != nil {
			if _, err := state.CheckSource(blob, doc, src.Identity()); err != nil {
				return ProbeFailed(err)
			}
			cursor = doc.Checkpoint.Cursor
			if err := src.CheckCursor(cursor); err != nil {
				return ProbeFailed(err)
			}
		}
		name := ""
		if doc != nil {
			name = doc.PollerName
		}
		var err error
		if details, err = src.Inspect(ctx, name); err != nil {
			return ProbeFailed(err)
		}
		if err := src.CheckStamps(ctx); err != nil {
			return ProbeFailed(err)
		}
		b, err := src.Backlog(ctx, cursor, ProbeCap)
		if busy, ok := errors.AsType[*driver.BusyError](err); ok {
			// The change stream is held by a reader (a following tick streaming the replication
			// slot): nothing is wrong, and what waits is the last tick's to say.
			return Probe{OK: true, RowsWaiting: -1, Busy: "being read by " + busy.Holder + ": rows waiting and lag are the last tick's",
				SetupWarnings: setupWarnings(ctx, src)}
		}
		if err != nil {
			return ProbeFailed(err)
		}
		details = append(details, b.Details...)
		p := Probe{OK: true, RowsWaiting: b.Rows, LagSeconds: b.LagSeconds(now()), SetupWarnings: setupWarnings(ctx, src)}
		if src.Cleans() {
			n, err := src.AwaitingCleanup(ctx, cursor, ProbeCap)
			if err != nil {
				return ProbeFailed(err)
			}
			p.RowsAwaitingCleanup = &n
		}
		return p
	}()
	p.DurationMS = now().Sub(start).Milliseconds()
	p.Details = details
	return p
}

// Skip is what an opener (OpenAndProbe) returns when the source is not to be probed: the probe
// is then Skipped with this text, which is not a verdict.
type Skip string

func (s Skip) Error() string { return string(s) }

// OpenAndProbe opens a poller's source with open and probes it (ProbeSource), all within
// ProbeTimeout. open returns the source, the blob of its state document and a function called
// once the probe is done with the source (it closes it, or lets it be replaced; nil: nothing to
// do); an error is the probe's failure, timed, unless it is a Skip.
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

// ProbeFailed is the probe of a source that could not be opened or read, Misconfigured as the
// error is.
func ProbeFailed(err error) Probe {
	return Probe{Error: redact.Text(err.Error()), RowsWaiting: -1, Misconfigured: Misconfigured(err)}
}

// Misconfigured reports whether an error of a probe or a tick needs a change (settings, schema,
// the checkpoint: a cursor that does not fit, another source's fingerprint), not a retry (a
// database that cannot be reached, a row the cursor can never reach). A source's driver marks its
// own errors of the first kind (source.ErrMisconfigured). The probe's verdict and the tick's
// (its liveness mark's outcome, OutcomeMisconfigured) both rest on it.
func Misconfigured(err error) bool {
	return errors.Is(err, source.ErrSchema) || errors.Is(err, source.ErrCursor) ||
		errors.Is(err, state.ErrFingerprintMismatch) || errors.Is(err, appsettings.ErrSetting) ||
		errors.Is(err, source.ErrMisconfigured)
}
