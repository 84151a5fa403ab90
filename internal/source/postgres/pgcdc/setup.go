package pgcdc

// pollerctl cdc, reset and clone for the logical cursor (the postgres driver's OpenCDC): what
// they print of the slot and the publication, and the rules a reset and a clone keep with them.

import (
	"context"
	"fmt"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Setup is c as pollerctl administers it: its plans and what they did, as text.
func (c *Admin) Setup() driver.CDCSetup { return &cdcSetup{Admin: c} }

// cdcSetup is an Admin as pollerctl uses it: its plans and what they did, as text.
type cdcSetup struct {
	*Admin
	enabled SlotState // the slot after Enable
}

func (c *cdcSetup) PlanEnable(ctx context.Context) (driver.CDCPlan, error) {
	info, err := c.Inspect(ctx)
	if err != nil {
		return driver.CDCPlan{}, err
	}
	p := c.Admin.PlanEnable(info)
	plan := driver.CDCPlan{Info: infoLines(c.Admin, info), Steps: p.Steps, None: "the publication and the slot exist and fit", Problems: p.Problems, Nothing: "is enabled already"}
	if !info.Slot.Exists {
		plan.Note = fmt.Sprintf("  note: from the moment the slot exists PostgreSQL keeps every WAL segment it has not confirmed. The poller\n"+
			"  advances it after each commit; a slot nobody advances fills the server's disk. If %s goes away, run\n"+
			"  `pollerctl cdc disable %s --yes` first.\n", c.poller, c.poller)
	}
	return plan, nil
}

func (c *cdcSetup) PlanDisable(ctx context.Context, checkpoint string) (driver.CDCPlan, error) {
	info, err := c.Inspect(ctx)
	if err != nil {
		return driver.CDCPlan{}, err
	}
	p := c.Admin.PlanDisable(info)
	plan := driver.CDCPlan{Info: infoLines(c.Admin, info), Steps: p.Steps, Kept: p.Keep, Problems: p.Problems, Nothing: "has no slot or publication of its own to drop"}
	if info.Slot.Exists {
		name := c.poller
		plan.Note = fmt.Sprintf("  lost: the slot's stream. Every change after the poller's checkpoint %s that it has not delivered\n"+
			"  can no longer be read, and PostgreSQL frees the WAL the slot keeps (%s). %s's ticks fail until\n"+
			"  `pollerctl cdc enable %s --yes` makes a new slot, which starts at the WAL of that moment: then\n"+
			"  `pollerctl reset %s --to-beginning --yes` starts the poller there (the changes in between are not delivered).\n",
			checkpoint, walText(info.Slot.RetainedBytes), name, name, name)
	}
	return plan, nil
}

func (c *cdcSetup) Enable(ctx context.Context) ([]string, error) {
	done, err := c.Admin.Enable(ctx)
	var lines []string
	if done.CreatedPublication {
		lines = append(lines, "created publication "+c.Publication())
	}
	if done.AlteredPublication {
		lines = append(lines, "changed publication "+c.Publication()+": it publishes "+map[bool]string{false: "the table", true: "the tables"}[len(c.parts) > 0]+" as the poller needs")
	}
	if err != nil {
		return lines, err
	}
	if done.CreatedSlot {
		lines = append(lines, fmt.Sprintf("created replication slot %s at %s", c.Slot(), done.Slot.ConfirmedFlush))
	}
	c.enabled = done.Slot
	return lines, nil
}

func (c *cdcSetup) Disable(ctx context.Context) ([]string, error) {
	done, err := c.Admin.Disable(ctx)
	var lines []string
	if done.DroppedSlot {
		lines = append(lines, "dropped replication slot "+c.Slot())
	}
	if err != nil {
		return lines, err
	}
	if done.DroppedPublication {
		lines = append(lines, "dropped publication "+c.Publication())
	}
	return lines, nil
}

// Enabled says where a poller without a checkpoint starts (its initial mode: the changes
// committed from now on, or the table's rows first), and when the poller's checkpoint is behind
// its slot (a new slot starts at the current WAL): the poller cannot read from its checkpoint,
// and a reset starts it at the slot.
func (c *cdcSetup) Enabled(checkpoint *state.Cursor) string {
	name := c.poller
	switch {
	case checkpoint == nil && c.def.Initial == sourcedef.InitialSnapshot:
		return name + " has no checkpoint yet and starts with a snapshot (\"initial\": \"snapshot\"): its first tick reads the table's rows first, " +
			"sent as reads a chunk after each batch of the changes committed from now on, from the slot's position\n"
	case checkpoint == nil:
		return name + " has no checkpoint yet: its first tick reads from the slot's position, the changes committed from now on\n"
	}
	at, err := CursorPosition(checkpoint)
	confirmed, ok := c.enabled.Confirmed()
	if err != nil || !ok || !at.Before(confirmed) {
		return ""
	}
	return fmt.Sprintf("warning: %s's checkpoint %s is before the slot's position %s: the changes between cannot be read.\n"+
		"To start it at the slot: pollerctl reset %s --to-beginning --yes\n", name, at, confirmed, name)
}

// CheckReset applies a logical poller's reset rule: the new checkpoint c (nil: the beginning)
// may not be before its replication slot's confirmed position, since the WAL before it is gone
// and the changes there can no longer be read. For a logical poller the beginning is where the
// slot is now; the note says so.
func (c *cdcSetup) CheckReset(ctx context.Context, cur *state.Cursor, what string) (string, error) {
	slot, err := SlotStatus(ctx, c.DB(), c.Slot())
	if err != nil {
		return "", err
	}
	name := c.poller
	confirmed, known := slot.Confirmed()
	switch {
	case !slot.Exists && cur == nil:
		return fmt.Sprintf("replication slot %s does not exist yet: %s starts where `pollerctl cdc enable %s --yes` makes it (the WAL of that moment)", slot.Name, name, name), nil
	case !slot.Exists:
		return "", fmt.Errorf("%s: replication slot %s does not exist, so no position can be served: run `pollerctl cdc enable %s --yes`, then reset with --to-beginning (a new slot starts at the WAL of that moment); nothing written", what, slot.Name, name)
	case !known:
		return "", fmt.Errorf("%s: replication slot %s has no confirmed position yet; run the reset again in a moment; nothing written", what, slot.Name)
	case cur == nil:
		return fmt.Sprintf("for a logical poller the beginning is where its slot %s is now, %s: the changes before it are gone from the slot and are not delivered", slot.Name, confirmed), nil
	}
	at, err := CursorPosition(cur)
	if err != nil {
		return "", source.Mark(fmt.Errorf("%s: %v; nothing written", what, err), source.ErrCursor)
	}
	if at.Before(confirmed) {
		return "", fmt.Errorf("%s: position %s is before replication slot %s's confirmed position %s: that WAL is gone, and the changes before it can no longer be read. "+
			"The earliest position is %s (pollerctl reset %s --to-cursor %s), which --to-beginning also means for a logical poller; nothing written",
			what, at, slot.Name, confirmed, confirmed, name, confirmed)
	}
	if end, err := ParsePosition(slot.WALEnd); err == nil && end.LSN < at.LSN {
		return "", fmt.Errorf("%s: position %s is past the end of the WAL (%s): no change is there yet, and every change committed before it would be skipped without a word; "+
			"positions come from the poller's checkpoints, its tick errors and pollerctl status; nothing written", what, at, end)
	}
	return fmt.Sprintf("position %s is at or after replication slot %s's confirmed position %s: it can be read", at, slot.Name, confirmed), nil
}

// Clone decides a logical poller's clone: it reads its own replication slot and publication
// (this Admin's), which `pollerctl cdc enable NEW --yes` makes, starting at the WAL of that moment.
// The original's checkpoint is copied only when the new slot can serve it (its confirmed
// position is at or before it): the clone then goes on exactly where the original is.
// Otherwise copying it would be a silent gap (the changes between are in no slot the clone can
// read), so the clone is refused, unless fromStart: then the clone starts where its slot is (a
// nil checkpoint), and the gap is said aloud.
func (c *cdcSetup) Clone(ctx context.Context, from driver.Original, fromStart bool) (driver.Cloned, error) {
	to, orig, checkpoint := c.poller, from.Poller, from.Checkpoint
	out := driver.Cloned{Reads: "the same table, read through " + to + "'s own slot"}
	newSlot, err := SlotStatus(ctx, c.DB(), c.Slot())
	if err != nil {
		return out, err
	}
	// Where the original is: its checkpoint, or without one, where its own slot is.
	var at Position
	atKnown := false
	if checkpoint != nil {
		if at, err = CursorPosition(checkpoint); err != nil {
			return out, fmt.Errorf("%s's checkpoint: %v; not cloned", orig, err)
		}
		atKnown = true
	} else if origSlot, err := SlotStatus(ctx, c.DB(), from.Definition.Slot); err == nil {
		at, atKnown = origSlot.Confirmed()
	}
	startHere := func(why string) (driver.Cloned, error) {
		out.Notes = append(out.Notes, fmt.Sprintf("note: --from-slot-start: %s starts where its own slot %s is%s; %s", to, c.Slot(), why,
			"the changes "+orig+" has not delivered yet at that point are not delivered to "+to))
		return out, nil
	}
	confirmed, known := newSlot.Confirmed()
	switch {
	case !newSlot.Exists && fromStart:
		return startHere(" (made by `pollerctl cdc enable " + to + " --yes`, at the WAL of that moment)")
	case !newSlot.Exists:
		return out, fmt.Errorf("%s reads its own replication slot %s and publication %s, which do not exist yet: run `pollerctl cdc enable %s --yes` first "+
			"(%s must be a poller of this build: copy the folder %s/ to %s/ for a declared poller, or add it to package pollers), then this clone again: it copies %s's checkpoint once the new slot can serve it; nothing written",
			to, c.Slot(), c.Publication(), to, to, orig, to, orig)
	case !known:
		return out, fmt.Errorf("replication slot %s has no confirmed position yet; run the clone again in a moment; nothing written", c.Slot())
	case atKnown && !at.Before(confirmed):
		out.Notes = append(out.Notes, fmt.Sprintf("note: %s's slot %s is at %s, at or before %s's position %s: %s goes on exactly where %s is", to, c.Slot(), confirmed, orig, at, to, orig))
		cur := at.Cursor()
		out.Cursor = &cur
		return out, nil
	case fromStart:
		return startHere(", " + confirmed.String())
	}
	where := "its position is unknown (no checkpoint, and its slot cannot be read)"
	if atKnown {
		where = "its checkpoint is " + at.String()
	}
	return out, fmt.Errorf("%s's slot %s starts at %s, after where %s is (%s): the changes between are in no slot %s can read, and copying the checkpoint would skip them silently. "+
		"Either wait until %s's checkpoint passes %s (its next ticks; pollerctl status %s shows it) and clone again, so that %s goes on exactly where %s is; "+
		"or pass --from-slot-start to start %s at %s, without those changes; nothing written",
		to, c.Slot(), confirmed, orig, where, to, orig, confirmed, orig, to, orig, to, confirmed)
}

// infoLines show the set-up: server, role and privileges, table and replica identity, the
// publication and the slot.
func infoLines(cdc *Admin, info Info) []string {
	yn := func(b bool) string {
		if b {
			return "yes"
		}
		return "NO"
	}
	lines := []string{
		fmt.Sprintf("  %-12s %s", "wal_level", info.WALLevel),
		fmt.Sprintf("  %-12s %s (superuser %s, REPLICATION %s)", "role", info.User, yn(info.Superuser), yn(info.Replication)),
		"  privileges:",
	}
	if cdc.def.ReadsMessages() {
		for _, n := range info.Needs()[:2] { // no table: its ownership and SELECT are not needed
			lines = append(lines, needLine(n))
		}
		lines = append(lines, fmt.Sprintf("  %-12s none: the transactional messages of prefix %q (pg_logical_emit_message)", "table", cdc.def.Outbox.Messages))
	} else if info.TableExists {
		for _, n := range info.Needs() {
			lines = append(lines, needLine(n))
		}
		lines = append(lines, fmt.Sprintf("  %-12s %s: %s", "table", info.TableName, info.IdentityMeaning()))
	} else {
		lines = append(lines, fmt.Sprintf("  %-12s %s does not exist (or the role cannot see it)", "table", cdc.Table()))
	}
	pub := info.Publication
	if !pub.Exists {
		lines = append(lines, fmt.Sprintf("  %-12s %s: does not exist", "publication", pub.Name))
	} else {
		what := map[bool]string{true: "this table", false: "other tables, not this one"}[pub.Covers]
		if cdc.def.ReadsMessages() {
			what = fmt.Sprintf("%d tables (the messages come whatever it publishes)", pub.Tables)
		}
		lines = append(lines, fmt.Sprintf("  %-12s %s: exists, publishes %s of %s", "publication", pub.Name, strings.Join(pub.Publishes, ", "), what))
		if pub.Covers && info.ServerVersion >= filtersSince {
			lines = append(lines, fmt.Sprintf("  %-12s the table with %s", "", info.Published))
		}
	}
	if info.ServerVersion >= filtersSince && (info.Want.Filter != "" || info.Want.Columns != nil) {
		lines = append(lines, fmt.Sprintf("  %-12s the table with %s", "the poller", info.Want))
	}
	for i, mi := range info.More { // a poller of several tables: the others, in the same publication
		if !mi.TableExists {
			lines = append(lines, fmt.Sprintf("  %-12s %s does not exist (or the role cannot see it)", "table", cdc.parts[i].Table()))
			continue
		}
		lines = append(lines, fmt.Sprintf("  %-12s %s: %s", "table", mi.TableName, mi.IdentityMeaning()))
		for _, n := range mi.Needs()[2:] { // the table's own: its ownership, SELECT on it
			lines = append(lines, needLine(n))
		}
		switch {
		case !pub.Exists:
		case !mi.Publication.Covers:
			lines = append(lines, fmt.Sprintf("  %-12s %s does not publish it", "publication", pub.Name))
		case info.ServerVersion >= filtersSince:
			lines = append(lines, fmt.Sprintf("  %-12s the table with %s", "publication", mi.Published))
		}
		if info.ServerVersion >= filtersSince && (mi.Want.Filter != "" || mi.Want.Columns != nil) {
			lines = append(lines, fmt.Sprintf("  %-12s the table with %s", "the poller", mi.Want))
		}
	}
	return append(lines, fmt.Sprintf("  %-12s %s", "slot", slotLine(info.Slot)))
}

// needLine shows a privilege the set-up needs, whether the role has it, and the fix.
func needLine(n Need) string {
	line := fmt.Sprintf("    [%s] %s, %s", map[bool]string{true: "ok", false: "missing"}[n.Has], n.What, n.For)
	if !n.Has {
		line += ": " + n.Fix
	}
	return line
}

// slotLine describes a slot in one line.
func slotLine(s SlotState) string {
	if !s.Exists {
		return s.Name + ": does not exist"
	}
	active := "inactive"
	if s.Active {
		active = "active"
	}
	return fmt.Sprintf("%s: %s slot, plugin %s, database %s, %s, confirmed %s, retains %s", s.Name, s.Type, s.Plugin, s.Database, active,
		orDash(s.ConfirmedFlush), walText(s.RetainedBytes))
}

// walText renders a slot's retained WAL for people.
func walText(n *int64) string {
	if n == nil {
		return "an unknown amount of WAL"
	}
	return bytesText(*n)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
