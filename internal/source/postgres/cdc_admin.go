package postgres

// pollerctl cdc, reset and clone for the logical cursor (Drivers.CDCAdmin finds this driver):
// package pgcdc administers the slot and the publication.

import (
	"context"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// CDCKind: the logical cursor reads a slot and a publication made on purpose.
func (Driver) CDCKind() (kind, what string) {
	return state.KindLogical, "PostgreSQL logical decoding"
}

// OpenCDC connects to a logical poller's database for pollerctl (see pgcdc.Open).
func (Driver) OpenCDC(ctx context.Context, ds source.Drivers, cfg source.Config) (source.CDCSetup, error) {
	c, err := pgcdc.Open(ctx, ds, cfg)
	if err != nil {
		return nil, err
	}
	return c.Setup(), nil
}
