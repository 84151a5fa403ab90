package pgcdc

// What the status shows of a logical poller's replication slot, and how it judges it: the slot
// as a probe reads it (ProbeDetails), or the WAL it kept at the last tick that measured it,
// against the poller's {P}_CDC_MAX_RETAINED.

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// errSlot: a logical poller's replication slot cannot serve its checkpoint (missing, another
// kind of slot, lost WAL, or past the checkpoint: CheckProbe); the message names the fix.
var errSlot = source.Mark(errors.New("replication slot"), source.ErrMisconfigured)

// slotView is a logical poller's replication slot on its status row.
type slotView struct {
	// SlotState is the slot as the probe read it (pg_replication_slots); when From is "last
	// tick" only Exists and RetainedBytes are known.
	SlotState
	// From is "probe" (read now) or "last tick" (the WAL kept when the newest tick that measured
	// it ended).
	From string `json:"from"`
	// MaxRetainedBytes is {P}_CDC_MAX_RETAINED: more retained WAL than this is not ok.
	MaxRetainedBytes int64 `json:"max_retained_bytes,omitempty"`
}

// ProbeDetails are the details of a probe that read the slot st (the stream's Inspect): the
// slot, and what is wrong with the slot itself (checkSlot).
func ProbeDetails(st SlotState, poller string) ([]driver.Detail, error) {
	d := slotView{SlotState: st, From: "probe"}.detail()
	d.Value = st // the probe shows the slot as it read it
	return []driver.Detail{d}, checkSlot(st, poller)
}

// checkSlot says what is wrong with a logical poller's slot itself (poller, "" when unknown, is
// named in the fixes). Whether it is past the checkpoint is CheckProbe's to judge, with a
// document read after the slot.
func checkSlot(s SlotState, poller string) error {
	name := cmp.Or(poller, "POLLER")
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", errSlot, s.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case !s.Exists:
		return fail("does not exist, so the poller cannot read its changes: pollerctl cdc enable %s --yes creates it (it starts at the WAL of that moment: a checkpoint before it then needs pollerctl reset %s --to-beginning --yes)", name, name)
	case s.Type != "logical" || s.Plugin != "pgoutput" || !s.Here:
		return fail("is a %s slot with plugin %q on database %q, not a logical pgoutput slot of the poller's database: set {P}_CDC_SLOT to another name and run pollerctl cdc enable %s --yes", s.Type, s.Plugin, s.Database, name)
	case s.WALStatus == "lost":
		return fail("lost WAL it needs (wal_status lost: max_slot_wal_keep_size removed it); it cannot be read any more: pollerctl cdc disable %s --yes, pollerctl cdc enable %s --yes, then pollerctl reset %s --to-beginning --yes (the changes in between are not delivered)", name, name, name)
	}
	return nil
}

// CheckProbe says when the slot a probe found is past the checkpoint (nil: never). Only a state
// document read after the slot may be compared with it: a tick advances the slot after it
// commits, so a document read before the slot may be one commit old.
func CheckProbe(details []driver.Detail, checkpoint *state.Cursor, poller string) error {
	s, ok := probedSlot(details)
	if !ok || checkpoint == nil {
		return nil
	}
	at, err := CursorPosition(checkpoint)
	confirmed, known := s.Confirmed()
	if err != nil || !known || !at.Before(confirmed) {
		return nil
	}
	return fmt.Errorf("%w %s: is at %s, past the checkpoint %s: the changes between were consumed by another reader, or the slot was made anew, and cannot be read again. "+
		"Deliver them from elsewhere if they matter, then pollerctl reset %s --to-beginning --yes goes on from the slot's position", errSlot, s.Name, confirmed, at, poller)
}

// StatusDetails shows the slot: as the probe read it, else the WAL it kept at the newest tick
// that measured it; nothing when neither says.
func StatusDetails(in driver.StatusInput) []driver.Detail {
	v := slotView{From: "probe"}
	if s, ok := probedSlot(in.Probe); ok {
		v.SlotState = s
	} else if n := lastRetained(in.History); n != nil {
		v = slotView{SlotState: SlotState{Exists: true, RetainedBytes: n}, From: "last tick"}
	} else {
		return nil
	}
	v.MaxRetainedBytes = in.MaxRetained
	d := v.detail()
	d.Health, d.Reason = v.verdict(in)
	return []driver.Detail{d}
}

// probedSlot is the slot among a probe's details.
func probedSlot(details []driver.Detail) (SlotState, bool) {
	for _, d := range details {
		if s, ok := d.Value.(SlotState); ok {
			return s, true
		}
	}
	return SlotState{}, false
}

// lastRetained is the WAL the slot kept at the newest tick that measured it; nil when none did.
func lastRetained(history []state.Tick) *int64 {
	for i := len(history) - 1; i >= 0; i-- {
		if n := history[i].RetainedBytes; n != nil {
			return n
		}
	}
	return nil
}

// SlotDetail is the member of the status JSON (a poller's row and its probe) that holds a
// logical poller's replication slot.
const SlotDetail = "slot"

// detail is the slot as the page's card and pollerctl status show it, marked when it keeps more
// WAL than its limit.
func (v slotView) detail() driver.Detail {
	text, bad := v.text()
	line := "replication slot " + text
	if bad {
		line += " (PAST THE LIMIT)"
	}
	return driver.Detail{Key: SlotDetail, Value: v, Label: "replication slot", Class: "slot", Text: text, Line: line, Bad: bad}
}

// text describes the slot, and says whether it keeps more WAL than its limit.
func (v slotView) text() (string, bool) {
	if !v.Exists {
		return v.Name + ": does not exist", true
	}
	kept := "unknown WAL"
	bad := false
	if v.RetainedBytes != nil {
		kept = bytesText(*v.RetainedBytes) + " of WAL"
		bad = v.MaxRetainedBytes > 0 && *v.RetainedBytes > v.MaxRetainedBytes
	}
	text := "keeps " + kept
	if v.MaxRetainedBytes > 0 {
		text += " (limit " + bytesText(v.MaxRetainedBytes) + ")"
	}
	if v.From == "last tick" {
		return text + " · at the last tick", bad
	}
	active := "inactive"
	if v.Active {
		active = "active: being read by a tick (a following tick streams it, or holds its stream for the next tick)"
	}
	return v.Name + ": " + text + " · confirmed " + cmp.Or(v.ConfirmedFlush, "-") + " · " + active, bad
}

// verdict judges the slot once the poller's ticks are otherwise fine: a slot that keeps more
// WAL than {P}_CDC_MAX_RETAINED is failing when nothing reads it and it still grows (inactive,
// and more than at the last tick that measured it), lagging otherwise. (A missing slot, or one
// past the checkpoint, fails the probe: misconfigured, before this.)
func (v slotView) verdict(in driver.StatusInput) (driver.Health, string) {
	if v.RetainedBytes == nil || v.MaxRetainedBytes <= 0 || *v.RetainedBytes <= v.MaxRetainedBytes {
		return driver.Fine, ""
	}
	p := in.SettingPrefix
	name := cmp.Or(v.Name, "the poller's slot")
	kept := fmt.Sprintf("replication slot %s keeps %s of WAL, more than %s_CDC_MAX_RETAINED (%s)", name, bytesText(*v.RetainedBytes), p, bytesText(v.MaxRetainedBytes))
	if v.From == "last tick" {
		kept = "at the last tick that measured it, " + kept
	}
	fix := "the server's disk fills with it. Let the poller catch up (rows waiting: " + waitingText(in.RowsWaiting) + "); a table that is not written while the database is, " +
		"keeps the slot where it is until the next change of the table (any write to it lets the next tick advance it)"
	if prev := lastRetained(in.History); v.From == "probe" && !v.Active && prev != nil && *v.RetainedBytes > *prev {
		return driver.Failing, kept + ", and it grows while nothing reads it (inactive, " + bytesText(*prev) + " at the last tick): " + fix +
			fmt.Sprintf(". If the poller is gone for good: pollerctl cdc disable %s --yes drops the slot", in.Poller)
	}
	return driver.Lagging, kept + ": " + fix
}

func waitingText(n int64) string {
	if n < 0 {
		return "unknown"
	}
	return fmt.Sprint(n)
}

// bytesText renders a byte count for people, in binary units ("1.5 GiB", "512 B").
func bytesText(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), 0
	for ; (f >= unit || f <= -unit) && i < 5; i++ {
		f /= unit
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}[i]
}
