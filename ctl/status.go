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

	"github.com/pseudotrigger/pseudotrigger/lease"
	"github.com/pseudotrigger/pseudotrigger/state"
)

// Row is one poller in `status`.
type Row struct {
	Poller         string        `json:"poller"`
	Blob           string        `json:"blob"`
	State          string        `json:"state"` // ok, none (no state yet), corrupt
	Problem        string        `json:"problem,omitempty"`
	Cursor         *state.Cursor `json:"cursor,omitempty"`
	LagSeconds     *float64      `json:"lag_seconds,omitempty"` // timestamp cursors: service clock minus the cursor
	FencingToken   int64         `json:"fencing_token"`
	LeaseOwner     string        `json:"lease_owner,omitempty"`
	LeaseLive      bool          `json:"lease_live"`
	LastBatchID    string        `json:"last_batch_id,omitempty"`
	LastCommitAt   string        `json:"last_commit_at,omitempty"`
	FailedAttempts int64         `json:"failed_attempts,omitempty"`
	LastError      string        `json:"last_error,omitempty"`
	Registered     bool          `json:"registered"`
}

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
	prefix := "state/" + env.App + "/"
	names, err := st.List(ctx, prefix)
	if err != nil {
		return err
	}
	var pollers []string
	for _, n := range names {
		if p, ok := strings.CutSuffix(strings.TrimPrefix(n, prefix), ".json"); ok && !strings.Contains(p, "/") {
			pollers = append(pollers, p)
		}
	}
	for _, d := range env.Pollers {
		if !slices.Contains(pollers, d.Name) {
			pollers = append(pollers, d.Name)
		}
	}
	slices.Sort(pollers)
	if len(pos) == 1 {
		if !slices.Contains(pollers, pos[0]) {
			return usagef("no poller %q: it is neither registered in this build nor has state under %s", pos[0], prefix)
		}
		pollers = []string{pos[0]}
	}
	rows := make([]Row, 0, len(pollers))
	for _, p := range pollers {
		rows = append(rows, env.row(ctx, p))
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

func (env Env) row(ctx context.Context, p string) Row {
	_, registered := env.definition(p)
	r := Row{Poller: p, Blob: env.blob(p), Registered: registered}
	b, d, derr, err := current(ctx, env.Store, r.Blob, p)
	switch {
	case err != nil:
		r.State, r.Problem = "unreadable", err.Error()
		return r
	case b == nil:
		r.State, r.Problem = "none", "no state yet (the first tick creates it)"
		return r
	case derr != nil:
		r.State, r.Problem = "corrupt", derr.Error()
		return r
	}
	r.State = "ok"
	r.Cursor = d.Checkpoint.Cursor
	r.FencingToken = d.Lease.FencingToken
	r.LeaseOwner = d.Lease.OwnerID
	if d.Lease.Released() {
		r.LeaseOwner = ""
	}
	_, r.LeaseLive = lease.Live(d.Lease, b.LastModified, b.Date, env.Margin)
	r.LastBatchID = d.Checkpoint.LastSuccessfulBatchID
	if !d.Checkpoint.UpdatedAt.IsZero() {
		r.LastCommitAt = d.Checkpoint.UpdatedAt.UTC().Format(time.RFC3339)
	}
	if f := d.Failure; f != nil {
		r.FailedAttempts, r.LastError = f.Attempts, f.LastError
	}
	if c := d.Checkpoint.Cursor; c != nil && c.Kind == state.KindTimestampPK {
		var s string
		if json.Unmarshal(c.Value, &s) == nil {
			if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
				lag := b.Date.Sub(ts).Seconds()
				r.LagSeconds = &lag
			}
		}
	}
	return r
}

func cursorText(c *state.Cursor) string {
	if c == nil {
		return "(beginning)"
	}
	s := string(c.Value)
	keys := make([]string, 0, len(c.Tiebreaker))
	for k := range c.Tiebreaker {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		s += " " + k + "=" + string(c.Tiebreaker[k])
	}
	return s
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
