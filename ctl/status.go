package ctl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/state"
)

// Row is one poller in `status`: pollerstatus computes it, for this command and for the
// handler's status page alike.
type Row = pollerstatus.Row

func status(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "JSON instead of a table")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("status takes at most one poller name")
	}
	st, err := env.store()
	if err != nil {
		return err
	}
	cfg := env.statusConfig()
	pollers, err := pollerstatus.Pollers(ctx, st, cfg)
	if err != nil {
		return err
	}
	if len(pos) == 1 {
		if !slices.Contains(pollers, pos[0]) {
			return usagef("no poller %q: it is neither registered in this build nor has state under state/%s/", pos[0], env.App)
		}
		pollers = []string{pos[0]}
	}
	rows := make([]Row, 0, len(pollers))
	for _, p := range pollers {
		rows = append(rows, pollerstatus.Read(ctx, st, cfg, p))
	}
	if *asJSON {
		enc := json.NewEncoder(env.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(env.Out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POLLER\tSTATE\tCURSOR\tLAG\tTOKEN\tLEASE\tLAST BATCH\tLAST COMMIT\tFAILURES")
	for _, r := range rows {
		if r.State != "ok" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\t\t\t\t\t\n", r.Poller, r.State, r.Problem)
			continue
		}
		lag := "-"
		if r.LagSeconds != nil {
			lag = (time.Duration(*r.LagSeconds * float64(time.Second))).Round(100 * time.Millisecond).String()
		}
		leaseText := "free"
		if r.LeaseOwner != "" {
			leaseText = "expired: " + r.LeaseOwner
			if r.LeaseLive {
				leaseText = "LIVE: " + r.LeaseOwner
			}
		}
		failures := "-"
		if r.FailedAttempts > 0 {
			failures = fmt.Sprintf("%d (%s)", r.FailedAttempts, truncate(r.LastError, 60))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Poller, r.State, cursorText(r.Cursor), lag, r.FencingToken,
			leaseText, orDash(r.LastBatchID), orDash(r.LastCommitAt), failures)
	}
	return tw.Flush()
}

// statusConfig describes this build's pollers to pollerstatus. Only the poison settings matter
// there, so a poller whose source settings are missing here still gets them.
func (env Env) statusConfig() pollerstatus.Config {
	cfg := pollerstatus.Config{App: env.App, Margin: env.Margin}
	for _, d := range env.Pollers {
		s, err := poller.LoadSettings(d, env.Getenv)
		cfg.Registered = append(cfg.Registered, pollerstatus.RegisteredFrom(d.Name, s, err))
	}
	return cfg
}

func cursorText(c *state.Cursor) string { return pollerstatus.CursorText(c) }

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
