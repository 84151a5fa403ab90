// Package drivers is the one place that lists the databases a poller can read, by the name its
// {P}_DB_DRIVER setting gives, and opens a source with the one a poller's settings name. Each
// database is a package of its own under internal/source; nothing registers itself.
package drivers

import (
	"context"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
)

// All returns every driver.
func All() source.Drivers { return source.Builtin() }

// Names lists the drivers' names, sorted: what {P}_DB_DRIVER may say.
func Names() []string { return All().Names() }

// Open opens the source cfg describes with the driver cfg.Driver names (source.Open).
func Open(ctx context.Context, cfg source.Config) (*source.Source, error) {
	return source.Open(ctx, All(), cfg)
}

// ParseLocation reads the server and database out of a DSN of the named driver.
func ParseLocation(driver, dsn string) (source.Location, error) {
	return All().Location(driver, dsn)
}

// ForKind returns the driver that alone reads cursor kind (a change stream's kind, xid,
// rowversion); false when none does, or several do.
func ForKind(kind string) (source.Driver, bool) {
	var found source.Driver
	for _, d := range All() {
		if d.Supports(kind) {
			if found != nil {
				return nil, false
			}
			found = d
		}
	}
	return found, found != nil
}
