package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// deleteCmd removes a poller's state document (backed up first) and its liveness mark, so that a
// clone or an experiment leaves the status. It refuses while another owner's lease is live and
// while the poller has dead letters (they hold rows never delivered).
func deleteCmd(fs *flag.FlagSet) runner {
	g := guardFlags(fs, "delete")
	return func(ctx context.Context, pos []string, env Env) error {
		name, err := env.knownPollerArg(ctx, "delete", pos)
		if err != nil {
			return err
		}
		st, err := env.store()
		if err != nil {
			return err
		}
		blob, markBlob := env.blob(name), blobpath.Liveness(env.App, name)
		// Dead letters first, so as not to wait for a lease only to refuse then; and again after a
		// wait, in which a tick may have dead-lettered a batch.
		deadLetters := func() error {
			letters, err := deadletter.List(ctx, st, env.App, name)
			if err != nil {
				return fmt.Errorf("listing %s's dead letters: %w", name, err)
			}
			if len(letters) > 0 {
				return refusedf("%s has %d dead letter(s) (%s): they hold rows that were never delivered; replay them (pollerctl deadletter replay %s BATCH_ID) or discard them (pollerctl deadletter discard %s BATCH_ID) first",
					name, len(letters), strings.Join(letters, ", "), name, name)
			}
			return nil
		}
		if err := deadLetters(); err != nil {
			return err
		}
		op := env.operator(st, name)
		cur, err := op.Read(ctx)
		if err != nil {
			return err
		}
		if cur, err = awaitFree(ctx, env, op, cur, "a delete", *g.wait, *g.waitTimeout); err != nil {
			return err
		}
		if *g.wait {
			if err := deadLetters(); err != nil {
				return err
			}
		}
		// The mark as it is after any wait: the owner's last tick may have rewritten it.
		mark, merr := st.Get(ctx, markBlob)
		hasMark := merr == nil
		if merr != nil && !errors.Is(merr, store.ErrNotFound) {
			return merr
		}
		if cur.Blob == nil && !hasMark {
			return usagef("%s has nothing to delete: neither %s nor %s exists", name, blob, markBlob)
		}

		fmt.Fprintf(env.Out, "delete %s\n", name)
		switch {
		case cur.Doc != nil:
			fmt.Fprintf(env.Out, "  %s: cursor %s, fencing token %d\n", blob, cur.Doc.Checkpoint.Cursor.Text(), cur.Doc.Lease.FencingToken)
		case cur.Blob != nil:
			fmt.Fprintf(env.Out, "  %s (corrupt: %v)\n", blob, cur.Problem)
		}
		if hasMark {
			fmt.Fprintf(env.Out, "  %s (its liveness mark)\n", markBlob)
		}
		if d, registered := env.definition(name); registered && cur.Blob != nil {
			fmt.Fprint(env.Out, restartWarning(d.Source().Cursor.Kind, name))
		}
		unknown := env.refuseUnknown(name, "Deleting its state", *g.force, cur.Doc)
		if done, err := env.dryRun(g.yes.given(), unknown, "dry run: nothing deleted. Add --yes to delete."); done {
			return err
		}
		if err := confirm(env, name, string(*g.yes), *g.production); err != nil {
			return err
		}
		if cur.Blob != nil {
			if err := op.Remove(ctx, cur); err != nil {
				if errors.Is(err, store.ErrConflict) {
					return refusedf("the state blob changed since it was read (a tick or another operator wrote it): nothing deleted; run the delete again")
				}
				return err
			}
			fmt.Fprintf(env.Out, "deleted %s\n", blob)
		}
		if hasMark {
			switch err := st.Delete(ctx, markBlob, store.IfMatch(mark.ETag)); {
			case errors.Is(err, store.ErrConflict):
				// Another ETag, or no blob: absent is what the delete wants.
				if _, gerr := st.Get(ctx, markBlob); errors.Is(gerr, store.ErrNotFound) {
					fmt.Fprintf(env.Out, "%s was already gone\n", markBlob)
					break
				}
				fmt.Fprintf(env.Out, "kept %s: a tick wrote it again meanwhile, so the poller still runs somewhere\n", markBlob)
			case err != nil:
				return err
			default:
				fmt.Fprintf(env.Out, "deleted %s\n", markBlob)
			}
		}
		return nil
	}
}

// restartWarning says where a poller of this build starts again once its state is deleted: where
// its driver says for a kind of its own (a change stream), else at the beginning of its table.
func restartWarning(kind, name string) string {
	if drv, ok := drivers.ForKind(kind); ok {
		if w := drv.Restart(kind, name); w != "" {
			return w
		}
	}
	return fmt.Sprintf("WARNING: %s is in this build: its next tick starts over from the beginning of its table and delivers every row again.\n", name)
}
