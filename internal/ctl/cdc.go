package ctl

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// cdcCmd is `pollerctl cdc enable|disable POLLER`: it creates (or drops) what a logical poller
// reads, its publication and its replication slot, with the poller's own settings
// ({P}_DB_CONNECTION, {P}_CDC_SLOT, {P}_CDC_PUBLICATION). The SQL is package source's
// (source.CDC); this is the plan shown, the guardrails and the messages.
func cdcCmd(ctx context.Context, args []string, env Env) error {
	if len(args) == 0 {
		return usagef("cdc needs a subcommand: enable or disable (pollerctl cdc enable POLLER [--yes])")
	}
	switch args[0] {
	case "enable":
		return cdcEnable(ctx, args[1:], env)
	case "disable":
		return cdcDisable(ctx, args[1:], env)
	}
	return usagef("unknown cdc subcommand %q (enable, disable)", args[0])
}

// openCDC connects to a logical poller's database with pollerctl's settings.
func (env Env) openCDC(ctx context.Context, name, cmd string) (*poller.Poller, *source.CDC, appsettings.Settings, error) {
	d, ok := env.definition(name)
	if !ok {
		return nil, nil, appsettings.Settings{}, usagef("poller %q is not registered in this build", name)
	}
	if err := d.Err(); err != nil {
		return nil, nil, appsettings.Settings{}, usagef("%v", err)
	}
	if kind := d.Source().Cursor.Kind; kind != state.KindLogical {
		return nil, nil, appsettings.Settings{}, usagef("poller %q has a %s cursor: cdc %s is for pollers whose cursor kind is logical (PostgreSQL logical decoding)", name, kind, cmd)
	}
	s, err := appsettings.Load(d, env.Getenv)
	if err != nil && (s.Driver == "" || s.DSN == "" || s.Slot == "" || s.Publication == "") {
		return nil, nil, s, usagef("cdc %s uses the poller's settings: %v", cmd, err)
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cdc, err := source.OpenCDC(octx, s.Config(d))
	if err != nil {
		return nil, nil, s, refusedf("%v; nothing was changed", err)
	}
	return d, cdc, s, nil
}

func cdcEnable(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("cdc enable", flag.ContinueOnError)
	var yes yesFlag
	fs.Var(&yes, "yes", "create the publication and the slot (default: dry run)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("cdc enable takes one poller name")
	}
	name := pos[0]
	_, cdc, _, err := env.openCDC(ctx, name, "enable")
	if err != nil {
		return err
	}
	defer cdc.Close()
	info, err := cdc.Inspect(ctx)
	if err != nil {
		return err
	}
	plan := cdc.PlanEnable(info)
	fmt.Fprintf(env.Out, "cdc enable %s (%s)\n", name, cdc)
	printCDCInfo(env, cdc, info)
	fmt.Fprintln(env.Out, "  steps:")
	if len(plan.Steps) == 0 {
		fmt.Fprintln(env.Out, "    none: the publication and the slot exist and fit")
	}
	for _, s := range plan.Steps {
		fmt.Fprintf(env.Out, "    %s\n", s)
	}
	if len(plan.Problems) > 0 {
		fmt.Fprintln(env.Out, "  refused:")
		for _, p := range plan.Problems {
			fmt.Fprintf(env.Out, "    - %s\n", p)
		}
		return refusedf("cdc enable %s: %d problem(s) above; nothing was created", name, len(plan.Problems))
	}
	if len(plan.Steps) == 0 {
		fmt.Fprintf(env.Out, "%s is enabled already: nothing to do\n", name)
		return nil
	}
	if !info.Slot.Exists {
		fmt.Fprintf(env.Out, "  note: from the moment the slot exists PostgreSQL keeps every WAL segment it has not confirmed. The poller\n"+
			"  advances it after each commit; a slot nobody advances fills the server's disk. If %s goes away, run\n"+
			"  `pollerctl cdc disable %s --yes` first.\n", name, name)
	}
	if !yes.given() {
		fmt.Fprintln(env.Out, "dry run: nothing created. Add --yes to create.")
		return nil
	}
	done, err := cdc.Enable(ctx)
	if done.CreatedPublication {
		fmt.Fprintf(env.Out, "created publication %s\n", cdc.Publication())
	}
	if err != nil {
		return refusedf("%v", err)
	}
	if done.CreatedSlot {
		fmt.Fprintf(env.Out, "created replication slot %s at %s\n", cdc.Slot(), done.Slot.ConfirmedFlush)
	}
	env.warnBehindSlot(ctx, name, done.Slot)
	return nil
}

// warnBehindSlot says when the poller's checkpoint is behind its slot (a new slot starts at the
// current WAL): the poller cannot read from its checkpoint, and a reset starts it at the slot.
func (env Env) warnBehindSlot(ctx context.Context, name string, slot source.SlotState) {
	st, err := env.store()
	if err != nil {
		return
	}
	_, doc, _, err := current(ctx, st, env.blob(name), name)
	if err != nil || doc == nil || doc.Checkpoint.Cursor == nil {
		fmt.Fprintf(env.Out, "%s has no checkpoint yet: its first tick reads from the slot's position, the changes committed from now on\n", name)
		return
	}
	at, err := source.CursorPosition(doc.Checkpoint.Cursor)
	confirmed, ok := slot.Confirmed()
	if err != nil || !ok || !at.Before(confirmed) {
		return
	}
	fmt.Fprintf(env.Out, "warning: %s's checkpoint %s is before the slot's position %s: the changes between cannot be read.\n"+
		"To start it at the slot: pollerctl reset %s --to-beginning --yes\n", name, at, confirmed, name)
}

func cdcDisable(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("cdc disable", flag.ContinueOnError)
	g := guardFlags(fs, "drop the slot and the publication")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("cdc disable takes one poller name")
	}
	name := pos[0]
	_, cdc, _, err := env.openCDC(ctx, name, "disable")
	if err != nil {
		return err
	}
	defer cdc.Close()
	// The lease: a tick reading the slot while it goes would fail; refuse, as a reset does.
	var doc *state.Doc
	if st, err := env.store(); err == nil {
		blob := env.blob(name)
		old, d, derr, err := current(ctx, st, blob, name)
		if err != nil {
			return err
		}
		if _, doc, _, err = awaitFree(ctx, env, st, blob, name, "dropping its slot", *g.wait, *g.waitTimeout, old, d, derr); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(env.Out, "note: %v: the poller's lease cannot be checked\n", err)
	}
	info, err := cdc.Inspect(ctx)
	if err != nil {
		return err
	}
	plan := cdc.PlanDisable(info)
	fmt.Fprintf(env.Out, "cdc disable %s (%s)\n", name, cdc)
	printCDCInfo(env, cdc, info)
	fmt.Fprintln(env.Out, "  steps:")
	if len(plan.Steps) == 0 {
		fmt.Fprintln(env.Out, "    none")
	}
	for _, s := range plan.Steps {
		fmt.Fprintf(env.Out, "    %s\n", s)
	}
	if plan.Keep != "" {
		fmt.Fprintf(env.Out, "  kept: %s\n", plan.Keep)
	}
	if len(plan.Problems) > 0 {
		fmt.Fprintln(env.Out, "  refused:")
		for _, p := range plan.Problems {
			fmt.Fprintf(env.Out, "    - %s\n", p)
		}
		return refusedf("cdc disable %s: %d problem(s) above; nothing was dropped", name, len(plan.Problems))
	}
	if len(plan.Steps) == 0 {
		fmt.Fprintf(env.Out, "%s has no slot or publication of its own to drop: nothing to do\n", name)
		return nil
	}
	if info.Slot.Exists {
		at := "(no checkpoint yet)"
		if doc != nil && doc.Checkpoint.Cursor != nil {
			at = cursorText(doc.Checkpoint.Cursor)
		}
		fmt.Fprintf(env.Out, "  lost: the slot's stream. Every change after the poller's checkpoint %s that it has not delivered\n"+
			"  can no longer be read, and PostgreSQL frees the WAL the slot keeps (%s). %s's ticks fail until\n"+
			"  `pollerctl cdc enable %s --yes` makes a new slot, which starts at the WAL of that moment: then\n"+
			"  `pollerctl reset %s --to-beginning --yes` starts the poller there (the changes in between are not delivered).\n",
			at, bytesText(info.Slot.RetainedBytes), name, name, name)
	}
	if !g.yes.given() {
		fmt.Fprintln(env.Out, "dry run: nothing dropped. Add --yes to drop.")
		return nil
	}
	if err := confirm(env, name, string(*g.yes), *g.production); err != nil {
		return err
	}
	done, err := cdc.Disable(ctx)
	if done.DroppedSlot {
		fmt.Fprintf(env.Out, "dropped replication slot %s\n", cdc.Slot())
	}
	if err != nil {
		return refusedf("%v", err)
	}
	if done.DroppedPublication {
		fmt.Fprintf(env.Out, "dropped publication %s\n", cdc.Publication())
	}
	return nil
}

// printCDCInfo shows the set-up: server, role and privileges, table and replica identity, the
// publication and the slot.
func printCDCInfo(env Env, cdc *source.CDC, info source.CDCInfo) {
	yn := func(b bool) string {
		if b {
			return "yes"
		}
		return "NO"
	}
	fmt.Fprintf(env.Out, "  %-12s %s\n", "wal_level", info.WALLevel)
	fmt.Fprintf(env.Out, "  %-12s %s (superuser %s, REPLICATION %s)\n", "role", info.User, yn(info.Superuser), yn(info.Replication))
	fmt.Fprintln(env.Out, "  privileges:")
	if info.TableExists {
		for _, n := range info.Needs() {
			line := fmt.Sprintf("    [%s] %s, %s", map[bool]string{true: "ok", false: "missing"}[n.Has], n.What, n.For)
			if !n.Has {
				line += ": " + n.Fix
			}
			fmt.Fprintln(env.Out, line)
		}
		fmt.Fprintf(env.Out, "  %-12s %s: %s\n", "table", info.TableName, info.IdentityMeaning())
	} else {
		fmt.Fprintf(env.Out, "  %-12s %s does not exist (or the role cannot see it)\n", "table", cdc.Table())
	}
	pub := info.Publication
	switch {
	case !pub.Exists:
		fmt.Fprintf(env.Out, "  %-12s %s: does not exist\n", "publication", pub.Name)
	default:
		fmt.Fprintf(env.Out, "  %-12s %s: exists, publishes %s of %s\n", "publication", pub.Name, strings.Join(pub.Publishes, ", "),
			map[bool]string{true: "this table", false: "other tables, not this one"}[pub.Covers])
	}
	fmt.Fprintf(env.Out, "  %-12s %s\n", "slot", slotText(info.Slot))
}

// slotText describes a slot in one line.
func slotText(s source.SlotState) string {
	if !s.Exists {
		return s.Name + ": does not exist"
	}
	active := "inactive"
	if s.Active {
		active = "active"
	}
	return fmt.Sprintf("%s: %s slot, plugin %s, database %s, %s, confirmed %s, retains %s", s.Name, s.Type, s.Plugin, s.Database, active,
		orDash(s.ConfirmedFlush), bytesText(s.RetainedBytes))
}

// bytesText renders a byte count for people (binary units).
func bytesText(n *int64) string {
	if n == nil {
		return "an unknown amount of WAL"
	}
	return source.BytesText(*n)
}
