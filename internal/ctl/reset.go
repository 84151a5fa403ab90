package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"

	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

type pkFlags []string

func (p *pkFlags) String() string     { return strings.Join(*p, ",") }
func (p *pkFlags) Set(v string) error { *p = append(*p, v); return nil }

func reset(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("reset", flag.ContinueOnError)
	toBeginning := fs.Bool("to-beginning", false, "start over from the first row")
	toCursor := fs.String("to-cursor", "", "the cursor value to resume after")
	var pks pkFlags
	fs.Var(&pks, "pk", "COLUMN=VALUE of the cursor's tiebreaker (repeat for a composite key)")
	fromFile := fs.String("from-file", "", "a state document saved earlier (e.g. a backup)")
	fromBackup := fs.String("from-backup", "", "a backup in the state container: a name `pollerctl backups` lists, or latest")
	g := guardFlags(fs, "write")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("reset takes one poller name")
	}
	name := pos[0]
	modes := 0
	for _, set := range []bool{*toBeginning, *toCursor != "", *fromFile != "", *fromBackup != ""} {
		if set {
			modes++
		}
	}
	if modes != 1 {
		return usagef("give exactly one of --to-beginning, --to-cursor VALUE, --from-file FILE, --from-backup NAME|latest")
	}
	if len(pks) > 0 && *toCursor == "" {
		return usagef("--pk goes with --to-cursor")
	}
	st, err := env.store()
	if err != nil {
		return err
	}
	blob := env.blob(name)
	d, registered := env.definition(name)
	if !registered && *fromFile == "" && *fromBackup == "" {
		return usagef("poller %q is not registered in this build: only --from-file or --from-backup can reset it", name)
	}

	// The new checkpoint and fingerprint.
	var (
		cp          state.Checkpoint
		fingerprint string
		fileDoc     *state.Doc
	)
	switch {
	case *fromFile != "" || *fromBackup != "":
		var data []byte
		origin := *fromFile
		if *fromFile != "" {
			if data, err = os.ReadFile(*fromFile); err != nil {
				return usagef("--from-file: %v", err)
			}
		} else if origin, data, err = readBackup(ctx, env, st, name, *fromBackup); err != nil {
			return err
		}
		*fromFile = origin // what the messages below name
		if fileDoc, err = state.Decode(origin, name, data); err != nil {
			return usagef("%s: %v", origin, err)
		}
		cp, fingerprint = fileDoc.Checkpoint, fileDoc.SourceFingerprint
		if registered {
			if want, err := env.fingerprint(d); err == nil && want != fingerprint {
				return refusedf("%s was saved for source %s, but the poller is now configured for %s: restoring it would read another source from a foreign cursor", *fromFile, fingerprint, want)
			}
			if err := env.checkCursor(ctx, d, cp.Cursor, "--from-file "+*fromFile); err != nil {
				return err
			}
		}
	default:
		if fingerprint, err = env.fingerprint(d); err != nil {
			return err
		}
		if *toCursor != "" {
			c, err := env.cursorFromText(ctx, d, *toCursor, pks)
			if err != nil {
				return err
			}
			cp.Cursor = c
		}
	}
	if registered {
		what := "--to-beginning"
		switch {
		case *toCursor != "":
			what = "--to-cursor " + *toCursor
		case *fromFile != "":
			what = *fromFile
		}
		if err := env.checkStreamReset(ctx, d, cp.Cursor, what); err != nil {
			return err
		}
	}

	// The current document, and the guardrails.
	old, oldDoc, derr, err := current(ctx, st, blob, name)
	if err != nil {
		return err
	}
	if derr != nil && fileDoc == nil {
		return refusedf("%v\nIt is not overwritten; to replace it, restore a document you trust: pollerctl backups %s lists the backups, pollerctl reset %s --from-backup latest restores the newest (or --from-file FILE)", derr, name, name)
	}
	if old, oldDoc, derr, err = awaitFree(ctx, env, st, blob, name, "a reset", *g.wait, *g.waitTimeout, old, oldDoc, derr); err != nil {
		return err
	}

	now := env.Clock.Now()
	next := &state.Doc{Version: state.Version, PollerName: name}
	token := int64(0)
	switch {
	case oldDoc != nil:
		token = oldDoc.Lease.FencingToken
	case fileDoc != nil:
		token = fileDoc.Lease.FencingToken // the current blob is corrupt or gone: continue from the file's
	}
	if token >= state.MaxFencingToken {
		return refusedf("the fencing token is exhausted (%d): run this poller under a new name", token)
	}
	next.SourceFingerprint = fingerprint
	next.Checkpoint = cp
	next.Checkpoint.UpdatedAt = state.At(now)
	// The tick history goes on across the reset, which it records, so the status page's
	// sparkline and "last commit" tell what happened.
	switch {
	case oldDoc != nil:
		next.History = append([]state.Tick(nil), oldDoc.History...)
	case fileDoc != nil:
		next.History = append([]state.Tick(nil), fileDoc.History...)
	}
	next.AddHistory(state.Tick{At: state.At(now), Outcome: "reset", RowsWaiting: -1})
	next.Lease = state.Lease{OwnerID: env.Actor, FencingToken: token + 1, AcquiredAt: state.At(now), HeartbeatAt: state.At(now),
		ExpiresAt: state.At(now), TTLSeconds: int64(lease.DefaultTTL / time.Second), ReleasedAt: state.At(now)}

	var oldCP *state.Checkpoint
	if oldDoc != nil {
		oldCP = &oldDoc.Checkpoint
	}
	printPlan(env, name, blob, oldCP, derr, &next.Checkpoint, oldDoc, next)
	if !g.yes.given() {
		fmt.Fprintln(env.Out, "dry run: nothing written. Add --yes to write.")
		return nil
	}
	if err := confirm(env, name, string(*g.yes), *g.production); err != nil {
		return err
	}
	if _, err := state.Encode(next); err != nil {
		return err // before the backup, as before: a document that does not encode changes nothing
	}
	w := lease.Writer{Store: st}
	if old != nil {
		if _, err := backup(ctx, env, st, name, "", old.Data); err != nil {
			return err
		}
		_, err = w.Replace(ctx, blob, old.ETag, next)
	} else {
		_, err = w.Create(ctx, blob, next)
	}
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return refusedf("the state blob changed since it was read (a tick or another operator wrote it): nothing was overwritten; run the reset again")
		}
		return err
	}
	fmt.Fprintf(env.Out, "reset %s: fencing token %d; a holder of an older lease can no longer commit\n", name, next.Lease.FencingToken)
	return nil
}

// guards are the guardrail flags of the commands that write a poller's state.
type guards struct {
	yes         *yesFlag
	wait        *bool
	waitTimeout *time.Duration
	production  *bool
}

// guardFlags defines --yes (what says what --yes does), --wait, --wait-timeout and --production.
func guardFlags(fs *flag.FlagSet, what string) guards {
	g := guards{yes: new(yesFlag)}
	fs.Var(g.yes, "yes", what+" (default: dry run); --yes=POLLER confirms a production app without a terminal")
	g.wait = fs.Bool("wait", false, "wait for another owner's live lease to end")
	g.waitTimeout = fs.Duration("wait-timeout", 2*time.Minute, "how long --wait waits")
	g.production = fs.Bool("production", false, "treat the app as production")
	return g
}

// awaitFree refuses while another owner's lease on the poller is live, or with wait, waits for it
// to end; it returns the document as last read.
func awaitFree(ctx context.Context, env Env, st store.Store, blob, name, what string, wait bool, timeout time.Duration,
	old *store.Blob, oldDoc *state.Doc, derr error) (*store.Blob, *state.Doc, error, error) {
	deadline := env.Clock.Now().Add(timeout)
	for oldDoc != nil {
		owner, live := lease.Live(oldDoc.Lease, old.LastModified, old.Date, env.Margin)
		if !live {
			break
		}
		if !wait {
			return old, oldDoc, derr, refusedf("%s holds a live lease on %s: %s now could race its tick; run again with --wait to wait for it to end", owner, name, what)
		}
		if !env.Clock.Now().Before(deadline) {
			return old, oldDoc, derr, refusedf("%s still holds a live lease on %s after %v", owner, name, timeout)
		}
		fmt.Fprintf(env.Out, "waiting for %s's lease on %s to end ...\n", owner, name)
		<-env.Clock.After(2 * time.Second)
		var err error
		if old, oldDoc, derr, err = current(ctx, st, blob, name); err != nil {
			return old, oldDoc, derr, err
		}
	}
	return old, oldDoc, derr, nil
}

// backup saves a blob's bytes under backups/{app}/{poller}/{what}{utc}.json before a change.
func backup(ctx context.Context, env Env, st store.Store, name, what string, data []byte) (string, error) {
	b := fmt.Sprintf("backups/%s/%s/%s%s.json", env.App, name, what, env.Clock.Now().UTC().Format("20060102T150405.000000000Z"))
	if _, err := st.Put(ctx, b, data, store.IfNotExists()); err != nil {
		return b, fmt.Errorf("backing up to %s: %w (nothing was changed)", b, err)
	}
	fmt.Fprintf(env.Out, "backed up to %s\n", b)
	return b, nil
}

// openSource opens a poller's source read-only with pollerctl's settings, to check values
// against its column types. A source that cannot be opened refuses the command (exit 2): a value
// is never written unchecked.
func (env Env) openSource(ctx context.Context, d *poller.Poller, what string) (*source.Source, error) {
	s, err := appsettings.Load(d, env.Getenv)
	if err != nil && (s.Driver == "" || s.DSN == "") {
		return nil, usagef("%s is checked against the source's column types, which needs its settings: %v", what, err)
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cfg := s.Config(d)
	cfg.MaxOpenConns = 1
	src, err := drivers.Open(octx, cfg)
	if err != nil {
		return nil, usagef("%s is checked against the source's column types, but the source cannot be opened: %v; nothing written", what, err)
	}
	return src, nil
}

// cursorFromText builds the cursor of --to-cursor and --pk, each value read as its column's type
// in the poller's table (an integer key takes digits, a timestamp RFC 3339, ...).
func (env Env) cursorFromText(ctx context.Context, d *poller.Poller, value string, pks []string) (*state.Cursor, error) {
	keys := map[string]string{}
	for _, pk := range pks {
		col, v, ok := strings.Cut(pk, "=")
		if !ok || col == "" {
			return nil, usagef("--pk %q: give COLUMN=VALUE", pk)
		}
		if _, dup := keys[col]; dup {
			return nil, usagef("--pk %s is given twice", col)
		}
		keys[col] = v
	}
	src, err := env.openSource(ctx, d, "--to-cursor")
	if err != nil {
		return nil, err
	}
	defer src.Close()
	c, err := src.CursorFromText(value, keys)
	if err != nil {
		return nil, usagef("--to-cursor/--pk: %v; nothing written", err)
	}
	return c, nil
}

// checkCursor refuses a cursor the poller's source cannot hold (exit 2).
func (env Env) checkCursor(ctx context.Context, d *poller.Poller, c *state.Cursor, what string) error {
	if c == nil {
		return nil
	}
	src, err := env.openSource(ctx, d, what)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := src.CheckCursor(c); err != nil {
		return usagef("%s: %v; nothing written", what, err)
	}
	return nil
}

func printPlan(env Env, name, blob string, oldCP *state.Checkpoint, derr error, newCP *state.Checkpoint, oldDoc, next *state.Doc) {
	fmt.Fprintf(env.Out, "reset %s (%s)\n", name, blob)
	oldCursor, oldBatch, oldToken, oldFP := "(no state yet)", "-", "-", "-"
	if derr != nil {
		oldCursor = "(corrupt: replaced from the file)"
	}
	if oldCP != nil {
		oldCursor, oldBatch = cursorText(oldCP.Cursor), orDash(oldCP.LastSuccessfulBatchID)
		oldToken, oldFP = strconv.FormatInt(oldDoc.Lease.FencingToken, 10), oldDoc.SourceFingerprint
	}
	fmt.Fprintf(env.Out, "  %-14s %-48s %s\n", "", "OLD", "NEW")
	fmt.Fprintf(env.Out, "  %-14s %-48s %s\n", "cursor", oldCursor, cursorText(newCP.Cursor))
	fmt.Fprintf(env.Out, "  %-14s %-48s %s\n", "last batch", oldBatch, orDash(newCP.LastSuccessfulBatchID))
	fmt.Fprintf(env.Out, "  %-14s %-48s %d\n", "fencing token", oldToken, next.Lease.FencingToken)
	fmt.Fprintf(env.Out, "  %-14s %-48s %s\n", "fingerprint", truncate(oldFP, 46), next.SourceFingerprint)
}
