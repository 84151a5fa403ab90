package tick

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/telemetry"
)

// Config is what Open assembles a poller's runner from.
type Config struct {
	Poller   *pollerdef.Def
	Settings appsettings.Settings // the source's driver, DSN and settle lag, the lease's timings, the tick's limits
	Store    lease.Store          // the state store
	App      string               // {app} in state/{app}/{poller}.json
	Owner    string               // this process's lease owner id (lease.NewOwnerID)
	Clock    clock.Clock          // default clock.System
	Logger   *slog.Logger         // default: discard
	// Version is the handler's version (package version), recorded in the state document by every
	// acquire; "" records none (pollerctl's dead-letter replay, tests).
	Version string
	// Source, if set, is an open source to share (tests that run several owners over one);
	// otherwise Open opens the poller's source and Close closes it.
	Source *source.Source
	// Pools, if set, are the connection pools the process's pollers share, one per database
	// (source.Pools); otherwise the source has a pool of its own.
	Pools *source.Pools
	// Tracer and Metrics receive the ticks' telemetry (Runner's fields of those names).
	Tracer  trace.Tracer
	Metrics *telemetry.Metrics
	// Draining, DeadLetters, Requests and Observe are the Runner's fields of those names.
	Draining    <-chan struct{}
	DeadLetters func(ctx context.Context, l *deadletter.Letter) (string, error)
	Requests    func() (requests, conflicts int64)
	Observe     func(b *pollerdef.Batch, err error)
}

// Open opens the poller's source and its lease and returns its runner: the one place the
// handler, the dead-letter replay, pollertest, the soak and the tests assemble them, from c
// whole. The caller closes it.
func Open(ctx context.Context, c Config) (*Runner, error) {
	name := c.Poller.Name()
	// open opens the poller's source: now, unless given one, and again when its table's columns
	// change (Runner.reopen).
	open := func(ctx context.Context) (*source.Source, error) {
		cfg := c.Settings.Config(c.Poller)
		cfg.Pools = c.Pools
		return drivers.Open(ctx, cfg)
	}
	src := c.Source
	if src == nil {
		var err error
		if src, err = open(ctx); err != nil {
			return nil, err
		}
	}
	if initialBackfill(c.Poller, c.Settings.BatchSize) != nil {
		if err := src.Backfills(); err != nil { // its first tick would start a snapshot that never runs
			if c.Source == nil {
				src.Close()
			}
			return nil, fmt.Errorf("poller %s: \"initial\": \"snapshot\" cannot run here: %w", name, err)
		}
	}
	id := src.Identity()
	m, err := lease.New(c.Store, lease.Config{
		Poller: name, Blob: blobpath.State(c.App, name), Owner: c.Owner, Source: &id, Version: c.Version, Initial: initialBackfill(c.Poller, c.Settings.BatchSize),
		TTL: c.Settings.LeaseTTL, HeartbeatInterval: c.Settings.HeartbeatInterval, Clock: c.Clock, Logger: c.Logger,
	})
	if err != nil {
		if c.Source == nil {
			src.Close()
		}
		return nil, fmt.Errorf("poller %s: %w", name, err)
	}
	r := &Runner{Poller: c.Poller, Settings: c.Settings, Lease: m, Source: src, Clock: c.Clock, Logger: c.Logger,
		Tracer: c.Tracer, Metrics: c.Metrics, Draining: c.Draining, DeadLetters: c.DeadLetters, Requests: c.Requests, Observe: c.Observe}
	if c.Source == nil {
		r.close, r.reopen = src.Close, open
	}
	logSetup(ctx, src, name, c.Logger)
	return r, nil
}

// logSetup checks the source's set-up once, as the source is opened in this process (never on a
// tick), and logs what is not ok: a problem as a warning with its fix, what it cannot tell as
// information. The status shows the problems too (pollerstatus, through the probe). A check
// that fails is logged and changes nothing.
func logSetup(ctx context.Context, src *source.Source, poller string, log *slog.Logger) {
	if log == nil {
		return
	}
	found, checked, err := src.SetupProblems(ctx)
	if err != nil {
		log.Warn("the source's set-up could not be checked", "poller", poller, "error", err.Error())
		return
	}
	if !checked {
		return
	}
	for _, f := range found {
		switch f.Verdict {
		case setup.VerdictProblem:
			log.Warn("source set-up problem: "+f.Check, "poller", poller, "check", f.Check, "detail", f.Detail,
				"fix", strings.Join(f.Fix, ";\n"), "see", "pollerctl check "+poller+" --fix")
		case setup.VerdictUnknown:
			log.Info("source set-up: cannot tell "+f.Check, "poller", poller, "check", f.Check, "detail", f.Detail)
		}
	}
}

// Close closes the source Open opened.
func (r *Runner) Close() error {
	r.srcMu.Lock()
	defer r.srcMu.Unlock()
	if r.close == nil {
		return nil
	}
	return r.close()
}

// initialBackfill is the backfill p's state document starts with: its initial snapshot, in
// chunks of a batch, when it asks for one (sourcedef.InitialSnapshot); else none.
func initialBackfill(p *pollerdef.Def, batch int) *state.Backfill {
	if p.Source().Initial != sourcedef.InitialSnapshot {
		return nil
	}
	return &state.Backfill{ID: "snapshot", Kind: state.BackfillSnapshot, Chunk: batch}
}
