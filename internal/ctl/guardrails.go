package ctl

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// operator is how pollerctl changes a poller's state document (package lease's Operator): env.Actor
// operates, and the document a write replaces or a delete removes is backed up first, to
// backups/{app}/{poller}/{utc}.json.
func (env Env) operator(st store.Store, name string) lease.Operator {
	return lease.Operator{Store: st, Blob: env.blob(name), Poller: name, Owner: env.Actor, Margin: env.Margin, Clock: env.Clock,
		Backup: func(ctx context.Context, old []byte) error {
			_, err := backup(ctx, env, st, name, "", old)
			return err
		}}
}

// backup saves a blob's bytes under backups/{app}/{poller}/{what}{utc}.json before a change.
func backup(ctx context.Context, env Env, st store.Store, name, what string, data []byte) (string, error) {
	b := blobpath.Backup(env.App, name, what, env.Clock.Now())
	if _, err := st.Put(ctx, b, data, store.IfNotExists()); err != nil {
		return b, fmt.Errorf("backing up to %s: %w (nothing was changed)", b, err)
	}
	fmt.Fprintf(env.Out, "backed up to %s\n", b)
	return b, nil
}

// awaitFree refuses while another owner's lease on the poller is live, or with wait, waits for it
// to end; it returns the document as last read.
func awaitFree(ctx context.Context, env Env, op lease.Operator, cur lease.Current, what string, wait bool, timeout time.Duration) (lease.Current, error) {
	deadline := env.Clock.Now().Add(timeout)
	for {
		owner, live := op.Holder(cur)
		switch {
		case !live:
			return cur, nil
		case !wait:
			return cur, refusedf("%s holds a live lease on %s: %s now could race its tick; run again with --wait to wait for it to end", owner, op.Poller, what)
		case !env.Clock.Now().Before(deadline):
			return cur, refusedf("%s still holds a live lease on %s after %v", owner, op.Poller, timeout)
		}
		fmt.Fprintf(env.Out, "waiting for %s's lease on %s to end ...\n", owner, op.Poller)
		<-env.Clock.After(2 * time.Second)
		var err error
		if cur, err = op.Read(ctx); err != nil {
			return cur, err
		}
	}
}

// guards are the guardrail flags of the commands that write a poller's state.
type guards struct {
	yes         *yesFlag
	wait        *bool
	waitTimeout *time.Duration
	production  *bool
	force       *bool
}

// guardFlags defines --yes (what says what --yes does), --wait, --wait-timeout and --production.
func guardFlags(fs *flag.FlagSet, what string) guards {
	g := guards{yes: new(yesFlag)}
	fs.Var(g.yes, "yes", what+" (default: dry run); --yes=POLLER confirms a production app without a terminal")
	g.wait = fs.Bool("wait", false, "wait for another owner's live lease to end")
	g.waitTimeout = fs.Duration("wait-timeout", 2*time.Minute, "how long --wait waits")
	g.production = fs.Bool("production", false, "treat the app as production")
	g.force = fs.Bool("force", false, "act on a poller this pollerctl's build does not have")
	return g
}

// refuseUnknown refuses what (a delete, a restore, a clone over it) of a poller this pollerctl's
// build does not have, unless force: pollerctl may predate the deployed app, which may run it.
// doc is its state document, if any: the handler version it records is named. A dry run shows
// the refusal and goes on; a write returns it.
func (env Env) refuseUnknown(name, what string, force bool, doc *state.Doc) error {
	if _, ok := env.definition(name); ok || force {
		return nil
	}
	handler := ""
	if doc != nil {
		handler = doc.HandlerVersion
	}
	return refusedf("%s is %s. %s is refused: pollerctl cannot tell whether the app still runs it; add --force if you know it is gone",
		name, pollerstatus.NotInBuild(name, env.version(), handler), what)
}

// nothingWritten ends the dry run of a command that writes a poller's state.
const nothingWritten = "dry run: nothing written. Add --yes to write."

// dryRun ends a command's dry run, or lets its write go on: without yes it shows refusal (a
// guardrail that --yes would meet), says nothing was written, and is done; with yes it is done
// when refusal refuses, returning it.
func (env Env) dryRun(yes bool, refusal error, nothing string) (done bool, err error) {
	if yes {
		return refusal != nil, refusal
	}
	if refusal != nil {
		fmt.Fprintln(env.Out, refusal)
	}
	fmt.Fprintln(env.Out, nothing)
	return true, nil
}

// version is pollerctl's own version (Env.Version), for messages.
func (env Env) version() string {
	if env.Version == "" {
		return "of unknown version"
	}
	return env.Version
}

// confirm applies the production guardrail: type the poller's name, or --yes=POLLER.
func confirm(env Env, pollerName, yes string, production bool) error {
	if !production && !strings.Contains(strings.ToLower(env.App), "prod") {
		return nil
	}
	if yes == pollerName {
		return nil
	}
	if !env.Terminal {
		return refusedf("%q looks like production: refusing without a terminal; pass --yes=%s to confirm", env.App, pollerName)
	}
	fmt.Fprintf(env.Out, "%q looks like production. Type the poller's name (%s) to confirm: ", env.App, pollerName)
	line, _ := bufio.NewReader(env.In).ReadString('\n')
	if strings.TrimSpace(line) != pollerName {
		return refusedf("confirmation did not match %q: nothing written", pollerName)
	}
	return nil
}

// yesFlag is --yes (true) or --yes=POLLER.
type yesFlag string

func (y *yesFlag) String() string     { return string(*y) }
func (y *yesFlag) Set(v string) error { *y = yesFlag(v); return nil }
func (y *yesFlag) IsBoolFlag() bool   { return true }
func (y yesFlag) given() bool         { return y != "" && y != "false" }

// readRequest reads a poller's state document for a command that writes a request into it
// (quarantine, backfill): a document that cannot be used refuses the command.
func (env Env) readRequest(ctx context.Context, name string) (lease.Operator, lease.Current, error) {
	st, err := env.store()
	if err != nil {
		return lease.Operator{}, lease.Current{}, err
	}
	op := env.operator(st, name)
	cur, err := op.Read(ctx)
	if err == nil && cur.Problem != nil {
		err = refusedf("%v", cur.Problem)
	}
	return op, cur, err
}

// writeRequest writes change into the document read (a compare-and-swap on it): a tick that
// wrote it meanwhile refuses the command, nothing written.
func (env Env) writeRequest(ctx context.Context, op lease.Operator, cur lease.Current, change func(next *state.Doc)) error {
	plan, err := op.Edit(cur, func(next *state.Doc, _ time.Time) { change(next) })
	if err != nil {
		return err
	}
	if _, err := op.Write(ctx, plan); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return refusedf("the state blob changed since it was read (a tick wrote it): nothing written; run it again")
		}
		return err
	}
	return nil
}
