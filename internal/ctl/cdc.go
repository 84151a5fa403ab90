package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/suggest"
)

// cdcAdmin is the administration of the poller's change-stream set-up, when its cursor kind
// has one.
func cdcAdmin(d *pollerdef.Def) (driver.Driver, bool) {
	return drivers.CDCAdmin(d.Source().Cursor.Kind)
}

// openCDC connects to the database of a poller whose change stream reads a set-up, with
// pollerctl's settings.
func (env Env) openCDC(ctx context.Context, name, cmd string) (*pollerdef.Def, driver.CDCSetup, error) {
	d, ok := env.definition(name)
	if !ok {
		return nil, nil, usagef("poller %q is not registered in this build%s", name, suggest.DidYouMean(name, env.names(), strconv.Quote))
	}
	if err := d.Err(); err != nil {
		return nil, nil, usagef("%v", err)
	}
	if _, ok := cdcAdmin(d); !ok {
		return nil, nil, usagef("poller %q has a %s cursor: cdc %s is for pollers whose cursor kind is %s", name, d.Source().Cursor.Kind, cmd, drivers.CDCKinds())
	}
	s, err := appsettings.Load(d, env.Getenv)
	if err != nil && (s.Driver == "" || s.DSN == "") {
		return nil, nil, usagef("cdc %s uses the poller's settings: %v", cmd, err)
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cdc, err := drivers.OpenCDC(octx, s.Config(d))
	if err != nil {
		return nil, nil, refusedf("%v; nothing was changed", err)
	}
	return d, cdc, nil
}

// printCDCPlan shows what enable or disable would do: the set-up, the steps, what is kept and the
// problems; problems refuse it ("nothing was <undone>").
func printCDCPlan(env Env, cmd, name string, cdc driver.CDCSetup, plan driver.CDCPlan, undone string) error {
	fmt.Fprintf(env.Out, "cdc %s %s (%s)\n", cmd, name, cdc)
	for _, l := range plan.Info {
		fmt.Fprintln(env.Out, l)
	}
	fmt.Fprintln(env.Out, "  steps:")
	if len(plan.Steps) == 0 {
		none := "    none"
		if plan.None != "" {
			none += ": " + plan.None
		}
		fmt.Fprintln(env.Out, none)
	}
	for _, s := range plan.Steps {
		fmt.Fprintf(env.Out, "    %s\n", s)
	}
	if plan.Kept != "" {
		fmt.Fprintf(env.Out, "  kept: %s\n", plan.Kept)
	}
	if len(plan.Problems) > 0 {
		fmt.Fprintln(env.Out, "  refused:")
		for _, p := range plan.Problems {
			fmt.Fprintf(env.Out, "    - %s\n", p)
		}
		return refusedf("cdc %s %s: %d problem(s) above; nothing was %s", cmd, name, len(plan.Problems), undone)
	}
	return nil
}

func cdcEnable(fs *flag.FlagSet) runner {
	var yes yesFlag
	fs.Var(&yes, "yes", "create the publication and the slot (default: dry run)")
	return func(ctx context.Context, pos []string, env Env) error {
		name, err := pollerArg("cdc enable", pos)
		if err != nil {
			return err
		}
		_, cdc, err := env.openCDC(ctx, name, "enable")
		if err != nil {
			return err
		}
		defer cdc.Close()
		plan, err := cdc.PlanEnable(ctx)
		if err != nil {
			return err
		}
		if err := printCDCPlan(env, "enable", name, cdc, plan, "created"); err != nil {
			return err
		}
		if len(plan.Steps) == 0 {
			fmt.Fprintf(env.Out, "%s %s: nothing to do\n", name, plan.Nothing)
			return nil
		}
		fmt.Fprint(env.Out, plan.Note)
		if !yes.given() {
			fmt.Fprintln(env.Out, "dry run: nothing created. Add --yes to create.")
			return nil
		}
		done, err := cdc.Enable(ctx)
		for _, l := range done {
			fmt.Fprintln(env.Out, l)
		}
		if err != nil {
			return refusedf("%v", err)
		}
		var checkpoint *state.Cursor // none, as far as the state says
		if st, err := env.store(); err != nil {
			return nil
		} else if cur, err := env.operator(st, name).Read(ctx); err == nil && cur.Doc != nil {
			checkpoint = cur.Doc.Checkpoint.Cursor
		}
		fmt.Fprint(env.Out, cdc.Enabled(checkpoint))
		return nil
	}
}

func cdcDisable(fs *flag.FlagSet) runner {
	g := guardFlags(fs, "drop the slot and the publication")
	return func(ctx context.Context, pos []string, env Env) error {
		name, err := pollerArg("cdc disable", pos)
		if err != nil {
			return err
		}
		_, cdc, err := env.openCDC(ctx, name, "disable")
		if err != nil {
			return err
		}
		defer cdc.Close()
		// The lease: a tick reading the stream while its set-up goes would fail; refuse, as a reset does.
		var doc *state.Doc
		if st, err := env.store(); err == nil {
			op := env.operator(st, name)
			cur, err := op.Read(ctx)
			if err != nil {
				return err
			}
			if cur, err = awaitFree(ctx, env, op, cur, "dropping its slot", *g.wait, *g.waitTimeout); err != nil {
				return err
			}
			doc = cur.Doc
		} else {
			fmt.Fprintf(env.Out, "note: %v: the poller's lease cannot be checked\n", err)
		}
		at := "(no checkpoint yet)"
		if doc != nil && doc.Checkpoint.Cursor != nil {
			at = doc.Checkpoint.Cursor.Text()
		}
		plan, err := cdc.PlanDisable(ctx, at)
		if err != nil {
			return err
		}
		if err := printCDCPlan(env, "disable", name, cdc, plan, "dropped"); err != nil {
			return err
		}
		if len(plan.Steps) == 0 {
			fmt.Fprintf(env.Out, "%s %s: nothing to do\n", name, plan.Nothing)
			return nil
		}
		fmt.Fprint(env.Out, plan.Note)
		if !g.yes.given() {
			fmt.Fprintln(env.Out, "dry run: nothing dropped. Add --yes to drop.")
			return nil
		}
		if err := confirm(env, name, string(*g.yes), *g.production); err != nil {
			return err
		}
		done, err := cdc.Disable(ctx)
		for _, l := range done {
			fmt.Fprintln(env.Out, l)
		}
		if err != nil {
			return refusedf("%v", err)
		}
		return nil
	}
}

// checkStreamReset applies the reset rule of a poller whose change stream reads a set-up: its
// driver says whether the new checkpoint c (nil: the beginning) can be read, and what it means.
// Other pollers pass.
func (env Env) checkStreamReset(ctx context.Context, d *pollerdef.Def, c *state.Cursor, what string) error {
	if _, ok := cdcAdmin(d); !ok {
		return nil
	}
	_, cdc, err := env.openCDC(ctx, d.Name(), "reset")
	if err != nil {
		return err
	}
	defer cdc.Close()
	note, err := cdc.CheckReset(ctx, c, what)
	switch {
	case errors.Is(err, source.ErrCursor):
		return usagef("%v", err)
	case err != nil:
		return err
	case note != "":
		fmt.Fprintf(env.Out, "note: %s\n", note)
	}
	return nil
}

// cloneStream decides the clone of a poller whose change stream reads a set-up: NEW reads its
// own ({NEW}_CDC_SLOT, {NEW}_CDC_PUBLICATION, by default named after NEW), which `pollerctl cdc
// enable NEW --yes` makes; its driver says where NEW starts (Cloned). It returns NEW's
// fingerprint (its set-up is part of it), its checkpoint cursor and what it reads.
func (env Env) cloneStream(ctx context.Context, orig *pollerdef.Def, to string, d *state.Doc, fromSlotStart bool) (string, *state.Cursor, string, error) {
	from := orig.Name()
	s, err := appsettings.Load(orig, env.Getenv)
	if err != nil && (s.Driver == "" || s.DSN == "") {
		return "", nil, "", usagef("cloning %s reads its change stream's set-up, which needs its settings: %v", from, err)
	}
	// NEW's definition: its own when this build has it, else the original's; its own set-up.
	def := orig.Source()
	if t, ok := env.definition(to); ok {
		def = t.Source()
	}
	cfg, err := s.CloneConfig(orig, to, def, env.Getenv)
	if err != nil {
		return "", nil, "", usagef("%v", err)
	}
	loc, err := drivers.ParseLocation(s.Driver, s.DSN)
	if err != nil {
		return "", nil, "", usagef("%s_DB_CONNECTION: %v", appsettings.Prefix(from), err)
	}
	fingerprint := source.Fingerprint(s.Driver, loc, cfg.Definition)
	cdc, err := drivers.OpenCDC(ctx, cfg)
	if err != nil {
		return "", nil, "", refusedf("%v; nothing written", err)
	}
	defer cdc.Close()
	origCfg := s.Config(orig)
	cloned, err := cdc.Clone(ctx, driver.Original{Poller: origCfg.Poller, Definition: origCfg.Definition, Checkpoint: d.Checkpoint.Cursor}, fromSlotStart)
	for _, n := range cloned.Notes {
		fmt.Fprintln(env.Out, n)
	}
	if err != nil {
		return "", nil, "", err
	}
	return fingerprint, cloned.Cursor, cloned.Reads, nil
}
