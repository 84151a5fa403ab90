package ctl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// backfillCmd is `pollerctl backfill POLLER`: it asks the poller to send its table's current rows
// (or those --where selects) again, as reads, a chunk at a time beside its live changes; or with
// --cancel, to stop the backfill that runs. The poller's ticks do the work: the command writes
// the request into the state document, then follows the progress until the backfill ends
// (--detach: it returns at once).
func backfillCmd(fs *flag.FlagSet) runner {
	where := fs.String("where", "", "send only the rows this `SQL` condition selects (besides the poller's own filter)")
	chunk := fs.Int("chunk", 0, "`N` rows a chunk (default: the poller's batch size)")
	cancel := fs.Bool("cancel", false, "stop the backfill that runs (its next tick ends it)")
	detach := fs.Bool("detach", false, "return once the request is written, without following its progress")
	g := guardFlags(fs, "write the request")
	return func(ctx context.Context, pos []string, env Env) error {
		name, err := env.knownPollerArg(ctx, "backfill", pos)
		if err != nil {
			return err
		}
		d, ok := env.definition(name)
		if !ok {
			return refusedf("%s is not a poller of this build (pollerctl %s): its ticks would not know a backfill", name, env.version())
		}
		if *cancel && (*where != "" || *chunk != 0) {
			return usagef("--cancel takes no --where or --chunk")
		}
		op, cur, err := env.readRequest(ctx, name)
		switch {
		case err != nil:
			return err
		case cur.Doc == nil:
			return refusedf("%s has no state yet: its first tick delivers every row there is; backfill once it has run", name)
		case *cancel && cur.Doc.Backfill == nil:
			return refusedf("%s runs no backfill: nothing to cancel", name)
		case *cancel:
			return env.cancelBackfill(ctx, op, cur, g)
		case cur.Doc.Backfill != nil:
			b := cur.Doc.Backfill
			return refusedf("%s already runs backfill %s (%d rows sent since %s): one at a time; stop it with pollerctl backfill %s --cancel --yes",
				name, b.ID, b.Rows, b.StartedAt.UTC().Format(time.RFC3339), name)
		case cur.Doc.Failure != nil:
			f := cur.Doc.Failure
			return refusedf("%s is failing on batch %s (%d attempt(s); last error: %s): a backfill would wait behind it; fix what fails it, or pollerctl quarantine %s",
				name, f.BatchID, f.Attempts, truncate(f.LastError, 200), name)
		}
		s, err := appsettings.Load(d, env.Getenv)
		if err != nil && (s.Driver == "" || s.DSN == "") {
			return usagef("the backfill's --where is checked against the source, which needs its settings: %v", err)
		}
		if *chunk == 0 {
			*chunk = s.BatchSize
		}
		if *chunk < 1 || *chunk > appsettings.MaxBatchSize {
			return usagef("--chunk %d: a chunk reads 1 to %d rows", *chunk, appsettings.MaxBatchSize)
		}
		// The rows are counted with the condition, so that the database says now what it would say
		// at every tick.
		src, err := env.openSource(ctx, d, "the backfill's --where")
		if err != nil {
			return err
		}
		if err := src.Backfills(); err != nil {
			src.Close()
			return refusedf("%s cannot run a backfill here: %v; nothing written", name, err)
		}
		estimate, err := src.CountChunkRows(ctx, *where, source.CountCap)
		src.Close()
		if err != nil {
			return usagef("the database refuses the backfill's --where %q: %v; nothing written", *where, err)
		}
		what := "all of its rows"
		if strings.TrimSpace(*where) != "" {
			what = "its rows where " + *where
		}
		fmt.Fprintf(env.Out, "backfill %s: send %s again as reads (%s now), %d a chunk, beside its live changes (a chunk after each live batch)\n",
			name, what, pollerstatus.EstimateText(estimate), *chunk)
		if !g.yes.given() {
			fmt.Fprintln(env.Out, nothingWritten)
			return nil
		}
		if cur, err = awaitFree(ctx, env, op, cur, "a backfill request", *g.wait, *g.waitTimeout); err != nil {
			return err
		}
		if cur.Doc == nil || cur.Doc.Backfill != nil {
			return refusedf("%s's state changed while waiting (a backfill started, or the state was deleted): nothing written; run it again", name)
		}
		b := &state.Backfill{ID: backfillID(env.Clock.Now()), Kind: state.BackfillRequested, Where: strings.TrimSpace(*where), Chunk: *chunk,
			Estimate: estimate, StartedAt: state.At(env.Clock.Now())}
		if err := env.writeRequest(ctx, op, cur, func(next *state.Doc) { next.Backfill = b }); err != nil {
			return err
		}
		fmt.Fprintf(env.Out, "%s: backfill %s requested; its next ticks send the rows\n", name, b.ID)
		if *detach {
			fmt.Fprintf(env.Out, "follow it with pollerctl status %s; stop it with pollerctl backfill %s --cancel --yes\n", name, name)
			return nil
		}
		return env.followBackfill(ctx, op, b.ID, b.StartedAt.Time)
	}
}

// cancelBackfill asks the poller's next tick to end its backfill.
func (env Env) cancelBackfill(ctx context.Context, op lease.Operator, cur lease.Current, g guards) error {
	b := cur.Doc.Backfill
	fmt.Fprintf(env.Out, "cancel backfill %s of %s: %d rows sent since %s; its next tick ends it\n", b.ID, op.Poller, b.Rows, b.StartedAt.UTC().Format(time.RFC3339))
	if !g.yes.given() {
		fmt.Fprintln(env.Out, nothingWritten)
		return nil
	}
	cur, err := awaitFree(ctx, env, op, cur, "a backfill's cancellation", *g.wait, *g.waitTimeout)
	if err != nil {
		return err
	}
	if cur.Doc == nil || cur.Doc.Backfill == nil || cur.Doc.Backfill.ID != b.ID {
		return refusedf("backfill %s of %s ended meanwhile: nothing written", b.ID, op.Poller)
	}
	if err := env.writeRequest(ctx, op, cur, func(next *state.Doc) {
		c := *next.Backfill
		c.Cancel = true
		next.Backfill = &c
	}); err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "%s will end backfill %s at its next tick\n", op.Poller, b.ID)
	return nil
}

// followEvery is how often followBackfill reads the state document.
const followEvery = 2 * time.Second

// followBackfill prints the backfill's progress as the poller's ticks commit it, until it ends
// (done, or cancelled) or the command is interrupted, which leaves it running.
func (env Env) followBackfill(ctx context.Context, op lease.Operator, id string, started time.Time) error {
	fmt.Fprintln(env.Out, "following its progress (Ctrl-C stops following, not the backfill) ...")
	last := ""
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(env.Out, "stopped following; backfill %s goes on\n", id)
			return nil
		case <-env.Clock.After(followEvery):
		}
		cur, err := op.Read(ctx)
		if err != nil {
			return err
		}
		if cur.Doc == nil || cur.Doc.Backfill == nil || cur.Doc.Backfill.ID != id {
			reads := 0
			if cur.Doc != nil {
				for _, h := range cur.Doc.History {
					if !h.At.Before(started.Truncate(time.Microsecond)) { // as the document keeps times
						reads += h.Ops["read"]
					}
				}
			}
			fmt.Fprintf(env.Out, "backfill %s ended: %d rows sent as reads (the ticks' history since it began; the handler's \"backfill done\" log line has its totals)\n", id, reads)
			return nil
		}
		b := cur.Doc.Backfill
		if now := fmt.Sprint(b.Rows, b.Left, b.Cancel, b.Failures); now != last { // a line when it moved
			fmt.Fprintln(env.Out, progressBar(pollerstatus.Progress(b, env.Clock.Now()))+pollerstatus.BackfillText(b, env.Clock.Now()))
			last = now
		}
	}
}

// progressBar draws a backfill's percentage as a bar of 20 cells and a space, "[#####···...] ";
// "" without an estimate. A line each, not redrawn in place: it reads the same in a terminal, a
// pipeline's log and a file.
func progressBar(p pollerstatus.BackfillProgress) string {
	if p.Percent == nil {
		return ""
	}
	const cells = 20
	full := int(*p.Percent) * cells / 100
	return "[" + strings.Repeat("#", full) + strings.Repeat(".", cells-full) + "] "
}

// backfillID is a new backfill's id: bf_, the time and 8 random hex digits.
func backfillID(now time.Time) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "bf_" + now.UTC().Format("20060102T150405Z") + "_" + hex.EncodeToString(b)
}
