package postgres

// What the status shows of a logical poller's replication slot: the probe reads it here, and
// package pgcdc shows and judges it.

import (
	"context"
	"fmt"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Inspect reads the slot for the status: its detail, and what is wrong with the slot itself
// (pgcdc.ProbeDetails).
func (l *logical) Inspect(ctx context.Context, poller string) ([]driver.Detail, error) {
	st, err := pgcdc.SlotStatus(ctx, l.lay.DB(), l.slot)
	if err != nil {
		return nil, fmt.Errorf("source: poller %q: %w", l.poller, err)
	}
	return pgcdc.ProbeDetails(st, poller)
}

// CheckProbe says when the slot a probe found is past the checkpoint (pgcdc.CheckProbe).
func (Driver) CheckProbe(details []driver.Detail, checkpoint *state.Cursor, poller string) error {
	return pgcdc.CheckProbe(details, checkpoint, poller)
}

// StatusDetails shows the slot (pgcdc.StatusDetails).
func (Driver) StatusDetails(in driver.StatusInput) []driver.Detail {
	return pgcdc.StatusDetails(in)
}
