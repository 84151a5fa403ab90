package ctl

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
)

func deadLetterList(fs *flag.FlagSet) runner {
	asJSON := fs.Bool("json", false, "JSON instead of a table")
	return func(ctx context.Context, pos []string, env Env) error {
		if len(pos) != 1 {
			return usagef("deadletter list takes one poller name")
		}
		st, err := env.store()
		if err != nil {
			return err
		}
		if err := env.knownPoller(ctx, pos[0]); err != nil {
			return err
		}
		ids, err := deadletter.List(ctx, st, env.App, pos[0])
		if err != nil {
			return err
		}
		letters := make([]*deadletter.Letter, 0, len(ids))
		for _, id := range ids {
			l, _, err := deadletter.Read(ctx, st, env.App, pos[0], id)
			if err != nil {
				return err
			}
			letters = append(letters, l)
		}
		if *asJSON {
			enc := json.NewEncoder(env.Out)
			enc.SetIndent("", "  ")
			return enc.Encode(letters)
		}
		if len(letters) == 0 {
			fmt.Fprintf(env.Out, "no dead letters for %s (under %s)\n", pos[0], blobpath.DeadLetters(env.App, pos[0]))
			return nil
		}
		tw := tabwriter.NewWriter(env.Out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "BATCH\tCREATED\tROWS DEAD\tOF\tFIRST KEY\tERROR")
		for _, l := range letters {
			first, errText := "-", "-"
			if len(l.Rows) > 0 {
				k, _ := json.Marshal(l.Rows[0].Key)
				first, errText = string(k), truncate(l.Rows[0].Error, 60)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", l.BatchID, l.CreatedAt.UTC().Format(time.RFC3339), len(l.Rows), l.BatchRows, first, errText)
		}
		return tw.Flush()
	}
}

func deadLetterShow(fs *flag.FlagSet) runner {
	return func(ctx context.Context, pos []string, env Env) error {
		name, id, err := letterArgs(ctx, "show", pos, env)
		if err != nil {
			return err
		}
		st, err := env.store()
		if err != nil {
			return err
		}
		_, b, err := deadletter.Read(ctx, st, env.App, name, id)
		if err != nil {
			return letterErr(err)
		}
		_, err = env.Out.Write(b.Data)
		fmt.Fprintln(env.Out)
		return err
	}
}

// letterArgs takes show's, replay's and discard's POLLER BATCH_ID.
func letterArgs(ctx context.Context, cmd string, pos []string, env Env) (string, string, error) {
	if len(pos) != 2 {
		return "", "", usagef("deadletter %s takes a poller name and a batch id (pollerctl deadletter list POLLER shows them)", cmd)
	}
	return pos[0], pos[1], env.knownPoller(ctx, pos[0])
}

func letterErr(err error) error {
	if errors.Is(err, deadletter.ErrNotFound) {
		return usagef("%v", err)
	}
	return err
}

func deadLetterDiscard(fs *flag.FlagSet) runner {
	var yes yesFlag
	fs.Var(&yes, "yes", "discard the dead letter (default: dry run)")
	return func(ctx context.Context, pos []string, env Env) error {
		name, id, err := letterArgs(ctx, "discard", pos, env)
		if err != nil {
			return err
		}
		st, err := env.store()
		if err != nil {
			return err
		}
		l, b, err := deadletter.Read(ctx, st, env.App, name, id)
		if err != nil {
			return letterErr(err)
		}
		fmt.Fprintf(env.Out, "discard %s: %d dead row(s) of batch %s; they will not be delivered\n", blobpath.DeadLetter(env.App, name, id), len(l.Rows), id)
		if !yes.given() {
			fmt.Fprintln(env.Out, "dry run: nothing deleted. Add --yes to discard.")
			return nil
		}
		if _, err := backup(ctx, env, st, name, "deadletter-"+id+"-", b.Data); err != nil {
			return err
		}
		if err := deadletter.Delete(ctx, st, env.App, name, id, b.ETag); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return refusedf("the dead letter changed or went since it was read: nothing deleted")
			}
			return err
		}
		fmt.Fprintf(env.Out, "discarded %s\n", blobpath.DeadLetter(env.App, name, id))
		return nil
	}
}

// deadLetterReplay hands a dead letter's rows, as they are now in the source, to the poller's
// handler again, under the poller's lease (its ticks wait meanwhile). On success the letter is
// deleted; on failure it stays.
func deadLetterReplay(fs *flag.FlagSet) runner {
	var yes yesFlag
	fs.Var(&yes, "yes", "replay the rows (default: dry run)")
	return func(ctx context.Context, pos []string, env Env) error {
		name, id, err := letterArgs(ctx, "replay", pos, env)
		if err != nil {
			return err
		}
		d, ok := env.definition(name)
		if !ok {
			return usagef("poller %q is not registered in this build: its handler is needed to replay", name)
		}
		st, err := env.store()
		if err != nil {
			return err
		}
		letter, b, err := deadletter.Read(ctx, st, env.App, name, id)
		if err != nil {
			return letterErr(err)
		}
		outbox := d.Source().Outbox != nil
		if outbox {
			fmt.Fprintf(env.Out, "replay %s: %d event(s) to %s's handler, as the dead letter holds them (an outbox's event does not change, "+
				"and the cleanup may have deleted its row)\n", blobpath.DeadLetter(env.App, name, id), len(letter.Rows), name)
		} else {
			fmt.Fprintf(env.Out, "replay %s: %d row(s) to %s's handler, read again from the source by key\n", blobpath.DeadLetter(env.App, name, id), len(letter.Rows), name)
		}
		if d.Source().Changes() && !outbox {
			fmt.Fprintln(env.Out, "  each as the row is now: an insert or update whose row exists goes as an update of the current row; a delete whose row is\n"+
				"  still gone goes as a delete of the key (key only); a change that a later one of the same key undid is not replayed")
		}
		if !yes.given() {
			fmt.Fprintln(env.Out, "dry run: nothing replayed. Add --yes to replay.")
			return nil
		}
		settings, err := appsettings.Load(d, env.Getenv)
		if err != nil {
			return usagef("%v", err)
		}
		if err := d.Setup(env.Getenv); err != nil {
			return usagef("poller %s setup: %v", name, err)
		}
		r, err := tick.Open(ctx, tick.Config{Poller: d, Settings: settings, Store: st, App: env.App, Owner: env.Actor, Clock: env.Clock})
		if err != nil {
			return err
		}
		defer r.Close()
		src, m := r.Source, r.Lease
		// A letter written before the fingerprint's second form carries the first (FingerprintV1).
		if id := src.Identity(); letter.SourceFingerprint != id.Fingerprint() && letter.SourceFingerprint != id.FingerprintV1() {
			return refusedf("the dead letter was written for source %s, but %s is now configured for %s", letter.SourceFingerprint, name, src.Fingerprint())
		}
		snap, err := m.Read(ctx)
		if err != nil {
			return err
		}
		if snap.Doc == nil {
			return refusedf("%s has no state yet: nothing to replay under", name)
		}
		res, err := m.Acquire(ctx, snap)
		if err != nil {
			return err
		}
		if !res.Won() {
			return refusedf("%s holds the lease on %s: run the replay again when its tick is over", res.Holder, name)
		}
		l := res.Lease
		l.KeepAlive()
		defer func() {
			if l.Err() == nil {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer cancel()
				_ = l.Release(rctx)
			}
		}()

		var rows []row.Row
		var gone []string
		attempts := int64(0)
		stream := d.Source().Changes()
		for _, r := range letter.Rows {
			k, _ := json.Marshal(r.Key)
			if outbox {
				row, err := src.ReplayEvent(r.Table, r.Op, r.Data, r.Cursor)
				if err != nil {
					return err
				}
				rows = append(rows, *row)
				attempts = max(attempts, r.Attempts)
				continue
			}
			if stream {
				// A change-stream row's cursor is a position in the stream, not its key: the
				// letter's key finds the row, replayed as its current state (source.ReplayChange).
				row, why, err := src.ReplayChange(ctx, r.Table, r.Op, r.Key, r.Cursor)
				if err != nil {
					return err
				}
				if row == nil {
					gone = append(gone, fmt.Sprintf("%s %s (%s)", cmp.Or(r.Op, "?"), k, why))
					continue
				}
				rows = append(rows, *row)
				attempts = max(attempts, r.Attempts)
				continue
			}
			c := r.Cursor
			batch, err := src.FetchKeyOf(ctx, &c)
			if err != nil {
				return err
			}
			if len(batch.Rows) == 0 {
				gone = append(gone, string(k))
				continue
			}
			rows = append(rows, batch.Rows...)
			attempts = max(attempts, r.Attempts)
		}
		if len(gone) > 0 && stream {
			fmt.Fprintf(env.Out, "superseded by a later change of the same key, which the poller delivers in order (not replayed): %s\n", strings.Join(gone, ", "))
		} else if len(gone) > 0 {
			fmt.Fprintf(env.Out, "no longer in the source (deleted, or outside the filter): %s\n", strings.Join(gone, ", "))
		}
		if len(rows) > 0 {
			last, _ := rows[len(rows)-1].Cursor()
			pb := &pollerdef.Batch{Poller: name, ID: letter.BatchID, FencingToken: l.Token(), Attempt: attempts + 1, From: letter.From, To: &last, Rows: rows}
			if err := d.Handle(l.Context(), pb); err != nil {
				return refusedf("the handler failed again (the dead letter is kept): %v", err)
			}
			if err := l.Err(); err != nil {
				return fmt.Errorf("replay: %w (the rows were handed over; the dead letter is kept)", err)
			}
			fmt.Fprintf(env.Out, "replayed %d row(s) of %s under fencing token %d\n", len(rows), id, l.Token())
		}
		if err := deadletter.Delete(ctx, st, env.App, name, id, b.ETag); err != nil {
			return fmt.Errorf("the rows were replayed, but deleting the dead letter failed: %w; discard it with pollerctl deadletter discard %s %s --yes", err, name, id)
		}
		fmt.Fprintf(env.Out, "deleted %s\n", blobpath.DeadLetter(env.App, name, id))
		return nil
	}
}

// quarantineCmd is `pollerctl quarantine POLLER`: it asks the poller's next tick to quarantine
// the batch it is blocked on (dead-letter the rows that fail alone, deliver the rest, go on),
// whatever {P}_ON_POISON says.
func quarantineCmd(fs *flag.FlagSet) runner {
	var yes yesFlag
	fs.Var(&yes, "yes", "write (default: dry run)")
	wait := fs.Bool("wait", false, "wait for another owner's live lease to end")
	waitTimeout := fs.Duration("wait-timeout", 2*time.Minute, "how long --wait waits")
	return func(ctx context.Context, pos []string, env Env) error {
		name, err := env.knownPollerArg(ctx, "quarantine", pos)
		if err != nil {
			return err
		}
		op, cur, err := env.readRequest(ctx, name)
		switch {
		case err != nil:
			return err
		case cur.Doc == nil:
			return refusedf("%s has no state yet: nothing is blocked", name)
		case cur.Doc.Failure == nil:
			return refusedf("%s has no failed batch: nothing to quarantine", name)
		}
		if cur, err = awaitFree(ctx, env, op, cur, "a quarantine request", *wait, *waitTimeout); err != nil {
			return err
		}
		if cur.Doc == nil || cur.Doc.Failure == nil {
			return refusedf("%s has no failed batch any more: nothing to quarantine", name)
		}
		f := cur.Doc.Failure
		fmt.Fprintf(env.Out, "quarantine %s: batch %s (keys %s) failed %d time(s); last error: %s\n"+
			"its next tick will hand the batch's halves to the handler, down to single rows, dead-letter the rows that fail alone\n"+
			"under %s and move on\n", name, f.BatchID, orDash(f.Keys), f.Attempts, truncate(f.LastError, 200), blobpath.DeadLetters(env.App, name))
		if !yes.given() {
			fmt.Fprintln(env.Out, nothingWritten)
			return nil
		}
		if err := env.writeRequest(ctx, op, cur, func(next *state.Doc) {
			nf := *f
			nf.Quarantine = true
			next.Failure = &nf
		}); err != nil {
			return err
		}
		fmt.Fprintf(env.Out, "%s will quarantine batch %s at its next tick\n", name, f.BatchID)
		return nil
	}
}
