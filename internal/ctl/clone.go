package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// clone starts a new poller (a backfill under its own name) at an existing poller's checkpoint.
func clone(fs *flag.FlagSet) runner {
	to := fs.String("to", "", "the new poller's name, `NEW`")
	var yes yesFlag
	fs.Var(&yes, "yes", "write (default: dry run)")
	force := fs.Bool("force", false, "clone to a poller folder this pollerctl's build does not have")
	fromSlotStart := fs.Bool("from-slot-start", false, "logical pollers: start the clone where its own slot is, accepting that it misses the changes the original has not delivered yet")
	return func(ctx context.Context, pos []string, env Env) error {
		if len(pos) != 1 || *to == "" {
			return usagef("clone POLLER --to NEW")
		}
		from := pos[0]
		if err := env.knownPoller(ctx, from); err != nil {
			return err
		}
		if err := pollerdef.CheckName(*to); err != nil {
			return usagef("--to: %v", err)
		}
		if *to == from {
			return usagef("--to %q is the poller being cloned", *to)
		}
		if slices.Contains(env.Seen, *to) {
			if err := env.refuseUnknown(*to, "Cloning over it", *force, nil); err != nil {
				return err
			}
		}
		st, err := env.store()
		if err != nil {
			return err
		}
		cur, err := env.operator(st, from).Read(ctx)
		switch {
		case err != nil:
			return err
		case cur.Blob == nil:
			return usagef("%s has no state to clone (%s does not exist)", from, env.blob(from))
		case cur.Problem != nil:
			return refusedf("%v: not cloned", cur.Problem)
		}
		d := cur.Doc
		// The cursor must fit the table the clone will read: the new poller's, when this build has
		// it, else the original's (the clone reads the same source).
		target, ok := env.definition(*to)
		if !ok {
			target, ok = env.definition(from)
		}
		orig, origOK := env.definition(from)
		stream := false // the original's change stream reads a set-up of its own: so does the clone's
		if origOK {
			_, stream = cdcAdmin(orig)
		}
		if ok && !stream {
			if err := env.checkCursor(ctx, target, d.Checkpoint.Cursor, "the cloned cursor"); err != nil {
				return err
			}
		}
		fingerprint, source, cp, reads := d.SourceFingerprint, d.Source, d.Checkpoint, "the same source"
		if stream { // its own slot: the clone's first tick records its parts
			source = nil
			if fingerprint, cp.Cursor, reads, err = env.cloneStream(ctx, orig, *to, d, *fromSlotStart); err != nil {
				return err
			}
		}
		op := env.operator(st, *to)
		plan := op.Create(func(next *state.Doc, now time.Time) {
			next.SourceFingerprint, next.Source, next.Checkpoint = fingerprint, source, cp
			next.Checkpoint.UpdatedAt = state.At(now)
			// No tick of the clone has committed: its history says where it came from, so the status
			// does not show the original's last commit as the clone's.
			next.AddHistory(state.Tick{At: state.At(now), Outcome: "clone", RowsWaiting: -1})
		})
		next := plan.Doc()
		fmt.Fprintf(env.Out, "clone %s -> %s (%s)\n  cursor %s\n  fingerprint %s (%s)\n", from, *to, env.blob(*to), next.Checkpoint.Cursor.Text(), next.SourceFingerprint, reads)
		if !yes.given() {
			fmt.Fprintln(env.Out, nothingWritten)
			return nil
		}
		if _, err := op.Write(ctx, plan); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return refusedf("%s already has state (%s): not overwritten", *to, env.blob(*to))
			}
			return err
		}
		if _, registered := env.definition(*to); registered {
			fmt.Fprintf(env.Out, "cloned: %s is in this build; set its %s_* settings to run it\n", *to, appsettings.Prefix(*to))
		} else {
			fmt.Fprintf(env.Out, "cloned: make %s a poller of this build (copy the folder %s/ to %s/ for a declared poller, or add it to package pollers) and set its %s_* settings to run it\n",
				*to, from, *to, appsettings.Prefix(*to))
		}
		return nil
	}
}
