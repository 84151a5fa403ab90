package postgres

// pollerctl cdc, reset and clone for the logical cursor (Drivers.CDCAdmin finds this driver):
// package pgcdc administers the slot and the publication.

import (
	"context"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// CDCKind: the logical cursor reads a slot and a publication made on purpose.
func (Driver) CDCKind() (kind, what string) {
	return state.KindLogical, "PostgreSQL logical decoding"
}

// OpenCDC administers a logical poller's slot and publication for pollerctl (see pgcdc.New).
func (Driver) OpenCDC(_ context.Context, conn driver.Conn) (driver.CDCSetup, error) {
	c, err := pgcdc.New(conn)
	if err != nil {
		return nil, err
	}
	return c.Setup(), nil
}
