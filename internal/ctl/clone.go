package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"

	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// clone starts a new poller (a backfill under its own name) at an existing poller's checkpoint.
func clone(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("clone", flag.ContinueOnError)
	to := fs.String("to", "", "the new poller's name")
	var yes yesFlag
	fs.Var(&yes, "yes", "write (default: dry run)")
	fromSlotStart := fs.Bool("from-slot-start", false, "logical pollers: start the clone where its own slot is, accepting that it misses the changes the original has not delivered yet")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *to == "" {
		return usagef("clone POLLER --to NEW")
	}
	from := pos[0]
	if err := poller.CheckNewName(*to); err != nil {
		return usagef("--to: %v", err)
	}
	if *to == from {
		return usagef("--to %q is the poller being cloned", *to)
	}
	st, err := env.store()
	if err != nil {
		return err
	}
	b, d, derr, err := current(ctx, st, env.blob(from), from)
	switch {
	case err != nil:
		return err
	case b == nil:
		return usagef("%s has no state to clone (%s does not exist)", from, env.blob(from))
	case derr != nil:
		return refusedf("%v: not cloned", derr)
	}
	// The cursor must fit the table the clone will read: the new poller's, when this build has
	// it, else the original's (the clone reads the same source).
	target, ok := env.definition(*to)
	if !ok {
		target, ok = env.definition(from)
	}
	orig, origOK := env.definition(from)
	logical := origOK && orig.Source().Cursor.Kind == state.KindLogical
	if ok && !logical {
		if err := env.checkCursor(ctx, target, d.Checkpoint.Cursor, "the cloned cursor"); err != nil {
			return err
		}
	}
	next := &state.Doc{Version: state.Version, PollerName: *to, SourceFingerprint: d.SourceFingerprint}
	next.Checkpoint = d.Checkpoint
	if logical {
		if next.SourceFingerprint, next.Checkpoint.Cursor, err = env.cloneLogical(ctx, orig, *to, d, *fromSlotStart); err != nil {
			return err
		}
	}
	next.Checkpoint.UpdatedAt = state.At(env.Clock.Now())
	// No tick of the clone has committed: its history says where it came from, so the status
	// does not show the original's last commit as the clone's.
	next.AddHistory(state.Tick{At: state.At(env.Clock.Now()), Outcome: "clone", RowsWaiting: -1})
	same := "(the same source)"
	if logical {
		same = "(the same table, read through " + *to + "'s own slot)"
	}
	fmt.Fprintf(env.Out, "clone %s -> %s (%s)\n  cursor %s\n  fingerprint %s %s\n", from, *to, env.blob(*to), cursorText(next.Checkpoint.Cursor), next.SourceFingerprint, same)
	if !yes.given() {
		fmt.Fprintln(env.Out, "dry run: nothing written. Add --yes to write.")
		return nil
	}
	if _, err := (lease.Writer{Store: st}).Create(ctx, env.blob(*to), next); err != nil {
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

// cloneLogical decides a logical poller's clone: NEW reads its own replication slot and
// publication ({NEW}_CDC_SLOT, {NEW}_CDC_PUBLICATION, by default named after NEW), which
// `pollerctl cdc enable NEW --yes` makes, starting at the WAL of that moment. The original's
// checkpoint is copied only when NEW's slot can serve it (its confirmed position is at or before
// it): NEW then goes on exactly where the original is. Otherwise copying it would be a silent
// gap (the changes between are in no slot NEW can read), so the clone is refused, unless
// fromSlotStart: then NEW starts where its slot is (a nil checkpoint), and the gap is said
// aloud. It returns NEW's fingerprint (its slot is part of it) and checkpoint cursor.
func (env Env) cloneLogical(ctx context.Context, orig *poller.Poller, to string, d *state.Doc, fromSlotStart bool) (string, *state.Cursor, error) {
	from := orig.Name()
	s, err := appsettings.Load(orig, env.Getenv)
	if err != nil && (s.Driver == "" || s.DSN == "") {
		return "", nil, usagef("cloning logical poller %s reads its slot, which needs its settings: %v", from, err)
	}
	// NEW's definition: its own when this build has it, else the original's; its own slot.
	def, p := orig.Source(), appsettings.Prefix(to)
	if t, ok := env.definition(to); ok {
		def = t.Source()
	}
	def.Slot = strings.TrimSpace(env.Getenv(p + "_CDC_SLOT"))
	if def.Slot == "" {
		def.Slot = appsettings.SlotName(env.App, to)
	}
	def.Publication = strings.TrimSpace(env.Getenv(p + "_CDC_PUBLICATION"))
	if def.Publication == "" {
		def.Publication = def.Slot
	}
	if def.Slot == s.Slot || def.Publication == s.Publication {
		return "", nil, usagef("%s would share %s's slot %s or publication %s: a slot is one reader's stream; leave %s_CDC_SLOT and %s_CDC_PUBLICATION unset (their defaults are %s's own) or name others",
			to, from, s.Slot, s.Publication, p, p, to)
	}
	loc, err := drivers.ParseLocation(s.Driver, s.DSN)
	if err != nil {
		return "", nil, usagef("%s_DB_CONNECTION: %v", appsettings.Prefix(from), err)
	}
	fingerprint := source.Fingerprint(s.Driver, loc, def)
	cdc, err := source.OpenCDC(ctx, source.Config{Poller: to, Driver: s.Driver, DSN: s.DSN, Definition: def})
	if err != nil {
		return "", nil, refusedf("%v; nothing written", err)
	}
	defer cdc.Close()
	newSlot, err := source.SlotStatus(ctx, cdc.DB(), def.Slot)
	if err != nil {
		return "", nil, err
	}
	// Where the original is: its checkpoint, or without one, where its own slot is.
	var at source.Position
	atKnown := false
	if c := d.Checkpoint.Cursor; c != nil {
		if at, err = source.CursorPosition(c); err != nil {
			return "", nil, refusedf("%s's checkpoint: %v; not cloned", from, err)
		}
		atKnown = true
	} else if origSlot, err := source.SlotStatus(ctx, cdc.DB(), s.Slot); err == nil {
		at, atKnown = origSlot.Confirmed()
	}
	startHere := func(why string) (string, *state.Cursor, error) {
		fmt.Fprintf(env.Out, "note: --from-slot-start: %s starts where its own slot %s is%s; %s\n", to, def.Slot, why,
			"the changes "+from+" has not delivered yet at that point are not delivered to "+to)
		return fingerprint, nil, nil
	}
	confirmed, known := newSlot.Confirmed()
	switch {
	case !newSlot.Exists && fromSlotStart:
		return startHere(" (made by `pollerctl cdc enable " + to + " --yes`, at the WAL of that moment)")
	case !newSlot.Exists:
		return "", nil, refusedf("%s reads its own replication slot %s and publication %s, which do not exist yet: run `pollerctl cdc enable %s --yes` first "+
			"(%s must be a poller of this build: copy the folder %s/ to %s/ for a declared poller, or add it to package pollers), then this clone again: it copies %s's checkpoint once the new slot can serve it; nothing written",
			to, def.Slot, def.Publication, to, to, from, to, from)
	case !known:
		return "", nil, refusedf("replication slot %s has no confirmed position yet; run the clone again in a moment; nothing written", def.Slot)
	case atKnown && !at.Before(confirmed):
		fmt.Fprintf(env.Out, "note: %s's slot %s is at %s, at or before %s's position %s: %s goes on exactly where %s is\n", to, def.Slot, confirmed, from, at, to, from)
		c := at.Cursor()
		return fingerprint, &c, nil
	case fromSlotStart:
		return startHere(", " + confirmed.String())
	}
	where := "its position is unknown (no checkpoint, and its slot cannot be read)"
	if atKnown {
		where = "its checkpoint is " + at.String()
	}
	return "", nil, refusedf("%s's slot %s starts at %s, after where %s is (%s): the changes between are in no slot %s can read, and copying the checkpoint would skip them silently. "+
		"Either wait until %s's checkpoint passes %s (its next ticks; pollerctl status %s shows it) and clone again, so that %s goes on exactly where %s is; "+
		"or pass --from-slot-start to start %s at %s, without those changes; nothing written",
		to, def.Slot, confirmed, from, where, to, from, confirmed, from, to, from, to, confirmed)
}
