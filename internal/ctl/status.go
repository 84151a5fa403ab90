package ctl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/suggest"
)

// Row is one poller in `status`: pollerstatus computes it, for this command and for the
// handler's status page alike.
type Row = pollerstatus.Row

// unhealthy is status's answer when a poller shown is not ok: exit ExitUnhealthy, so that
// scripts and alerts can use it.
type unhealthy struct{ n, of int }

func (u unhealthy) Error() string { return fmt.Sprintf("%d of %d pollers not ok", u.n, u.of) }

func status(fs *flag.FlagSet) runner {
	asJSON := fs.Bool("json", false, "JSON instead of a table")
	noProbe := fs.Bool("no-probe", false, "do not open the sources (the health then rests on the state and liveness marks)")
	return func(ctx context.Context, pos []string, env Env) error {
		if len(pos) > 1 {
			return usagef("status takes at most one poller name")
		}
		st, err := env.store()
		if err != nil {
			return err
		}
		cfg := env.statusConfig(!*noProbe)
		pollers, err := pollerstatus.Pollers(ctx, st, cfg)
		if err != nil {
			return err
		}
		if len(pos) == 1 {
			if !slices.Contains(pollers, pos[0]) {
				return usagef("no poller %q: it is neither registered in this build, nor a poller folder here, nor has state under state/%s/%s", pos[0], env.App,
					suggest.DidYouMean(pos[0], pollers, strconv.Quote))
			}
			pollers = []string{pos[0]}
		}
		rows := pollerstatus.ReadAll(ctx, st, cfg, pollers)
		if *asJSON {
			enc := json.NewEncoder(env.Out)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rows); err != nil {
				return err
			}
		} else if err := statusTable(env, rows); err != nil {
			return err
		}
		if bad := pollerstatus.NotOK(rows); bad > 0 {
			return unhealthy{bad, len(rows)}
		}
		return nil
	}
}

// statusTable prints the rows as a table, each row's figures in the words of the status page
// (pollerstatus.Figures), then what more there is to say of each.
func statusTable(env Env, rows []Row) error {
	tw := tabwriter.NewWriter(env.Out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POLLER\tHEALTH\tLAST TICK\tLAG\tWAITING\tMEASURED\tCURSOR\tTOKEN\tLEASE\tLAST BATCH\tFAILURES")
	for _, r := range rows {
		f := r.Figures()
		cursor, token, leaseText, batch, failures := "("+r.State+")", "-", "-", "-", "-"
		if r.State == pollerstatus.StateOK {
			cursor, token, batch = r.Cursor.Text(), fmt.Sprint(r.FencingToken), orDash(r.LastBatchID)
			leaseText = "free"
			if r.LeaseOwner != "" {
				leaseText = "expired: " + r.LeaseOwner
				if r.LeaseLive {
					leaseText = "LIVE: " + r.LeaseOwner
				}
			}
			if r.FailedAttempts > 0 {
				failures = fmt.Sprintf("%d (%s)", r.FailedAttempts, truncate(r.LastError, 60))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Poller, healthCell(f), f.LastTick, f.Lag, f.Waiting, orDash(f.Measured),
			cursor, token, leaseText, batch, failures)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.HealthReason != "" {
			fmt.Fprintf(env.Out, "%s: %s: %s\n", r.Poller, r.Health, r.HealthReason)
		}
		for _, w := range r.SetupWarnings {
			fmt.Fprintf(env.Out, "%s: set-up problem: %s: %s\n", r.Poller, w.Check, w.Detail)
			for _, q := range w.Fix {
				fmt.Fprintf(env.Out, "%s:   fix: %s\n", r.Poller, oneLine(q))
			}
		}
		if r.Registered && r.HandlerVersion != "" && env.Version != "" && r.HandlerVersion != env.Version {
			fmt.Fprintf(env.Out, "%s: its state was last written by handler %s; this pollerctl is %s\n", r.Poller, r.HandlerVersion, env.Version)
		}
		if r.Probe != nil && r.Probe.Skipped != "" {
			fmt.Fprintf(env.Out, "%s: the source was not probed: %s\n", r.Poller, r.Probe.Skipped)
		}
		if r.DeliversTo != "" {
			fmt.Fprintf(env.Out, "%s: delivers to %s\n", r.Poller, r.DeliversTo)
		}
		if c := r.Figures().Cleanup; c != "" {
			fmt.Fprintf(env.Out, "%s: cleanup: %s\n", r.Poller, c)
		}
		for _, d := range r.Shown() { // what the source's driver says of it: a replication slot, ...
			if d.Text != "" {
				fmt.Fprintf(env.Out, "%s: %s\n", r.Poller, d.Line)
			}
		}
		if f := r.Following; f != nil {
			fmt.Fprintf(env.Out, "%s: %s\n", r.Poller, pollerstatus.FollowText(f, env.Clock.Now()))
		}
		if b := r.Backfill; b != nil {
			fmt.Fprintf(env.Out, "%s: %s\n", r.Poller, pollerstatus.BackfillText(b, env.Clock.Now()))
		}
		if ops := pollerstatus.OpsText(r.HistoryOps); ops != "" {
			fmt.Fprintf(env.Out, "%s: changes delivered in the last %d ticks: %s\n", r.Poller, len(r.History), ops)
		}
	}
	return nil
}

// statusConfig describes this build's pollers to pollerstatus, with the probe when asked for.
// Settings problems here are pollerctl's own environment's (its shell, its local.settings.json),
// not necessarily the app's: they never make a poller misconfigured, they only skip its probe
// and say so. A definition that cannot be read (a declared poller's bad poller.json) is the
// app's own, wherever it is read: that poller is misconfigured, as the status function says.
func (env Env) statusConfig(probe bool) pollerstatus.Config {
	cfg := pollerstatus.Config{App: env.App, Margin: env.Margin, Now: env.Clock.Now, Elsewhere: env.version(), Seen: env.Seen}
	for _, d := range env.Pollers {
		s, _ := appsettings.Load(d, env.Getenv)
		cfg.Registered = append(cfg.Registered, pollerstatus.RegisteredFrom(d, s, d.Err()))
	}
	if probe {
		cfg.Probe = env.probe
	}
	return cfg
}

// probe opens a poller's source with pollerctl's settings, read-only, and looks at it.
func (env Env) probe(ctx context.Context, name string, doc *state.Doc) pollerstatus.Probe {
	return pollerstatus.OpenAndProbe(ctx, doc, env.Clock.Now, func(ctx context.Context) (pollerstatus.Source, string, func(), error) {
		d, ok := env.definition(name)
		if !ok {
			return nil, "", nil, pollerstatus.Skip("not in this build")
		}
		if d.Err() != nil {
			return nil, "", nil, pollerstatus.Skip("its definition cannot be read")
		}
		s, err := appsettings.Load(d, env.Getenv)
		if err != nil && (s.Driver == "" || s.DSN == "") {
			return nil, "", nil, pollerstatus.Skip(fmt.Sprintf("%v in pollerctl's environment (the shell, or local.settings.json in this folder); the app's own settings may differ", err))
		}
		cfg := s.Config(d)
		cfg.MaxOpenConns = 1
		src, err := drivers.Open(ctx, cfg)
		if err != nil {
			return nil, "", nil, err
		}
		return src, env.blob(name), func() { src.Close() }, nil
	})
}

// healthCell is the health in capitals (the exit code's concern), with "(not probed)" where
// no probe took part (pollerstatus.Figures.NotProbed).
func healthCell(f pollerstatus.Figures) string {
	h := strings.ToUpper(f.Health)
	if f.NotProbed {
		h += " (not probed)"
	}
	return h
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
