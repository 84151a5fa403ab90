package postgres

// The logical cursor's rules that the driver answers for: where a poller starts again when its
// state is deleted, and what names its slot and publication may have. The slot and the
// publication themselves, and making and dropping them, are package pgcdc's.

import (
	"errors"
	"fmt"

	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Restart says where a logical poller starts again when its state is deleted: where its
// replication slot is, which a delete leaves behind.
func (Driver) Restart(kind, poller string) string {
	if kind != state.KindLogical {
		return ""
	}
	return fmt.Sprintf("WARNING: %s is in this build: its next tick starts where its replication slot is, and delivers again the changes the slot still holds.\n"+
		"Its slot and publication are not dropped by a delete and keep WAL while nothing reads them: to remove the poller, run `pollerctl cdc disable %s --yes` first.\n", poller, poller)
}

// CheckDefinition checks PostgreSQL's rules of a definition: a logical cursor's slot and
// publication names (CheckSlotName), each broken one a *sourcedef.FieldError (both joined when both
// are). The names come from the poller's settings, not its declaration.
func (Driver) CheckDefinition(d sourcedef.Definition) error {
	if d.Cursor.Kind != state.KindLogical {
		return nil
	}
	var errs []error
	if err := CheckSlotName("slot", d.Slot); err != nil {
		errs = append(errs, &sourcedef.FieldError{Field: sourcedef.FieldSlot, Err: err})
	}
	if err := CheckSlotName("publication", d.Publication); err != nil {
		errs = append(errs, &sourcedef.FieldError{Field: sourcedef.FieldPublication, Err: err})
	}
	return errors.Join(errs...)
}

// CheckSlotName (what: "slot" or "publication") accepts what PostgreSQL accepts as a replication slot name (lower-case letters,
// digits and '_', at most 63), which this package also asks of publication names so that both
// can be written into SQL without quoting surprises.
func CheckSlotName(what, name string) error {
	if name == "" {
		return fmt.Errorf("no %s name", what)
	}
	if len(name) > 63 {
		return fmt.Errorf("%s name %q is longer than 63 bytes", what, name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return fmt.Errorf("%s name %q may hold only lower-case letters, digits and '_'", what, name)
		}
	}
	return nil
}
