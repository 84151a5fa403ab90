// Package drivers is the one place that lists the databases a poller can read, by the name its
// {P}_DB_DRIVER setting gives, and opens a source with the one a poller's settings name. Each
// database is a package of its own under internal/source; nothing registers itself.
package drivers

import (
	"context"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlserver"
)

// All returns every driver.
func All() driver.Drivers {
	return driver.Drivers{postgres.Driver{}, mysql.Driver{}, sqlserver.Driver{}, sqlite.Driver{}}
}

// Names lists the drivers' names, sorted: what {P}_DB_DRIVER may say.
func Names() []string { return All().Names() }

// Open opens the source cfg describes with the driver cfg.Driver names (source.Open).
func Open(ctx context.Context, cfg source.Config) (*source.Source, error) {
	return source.Open(ctx, All(), cfg)
}

// ParseLocation reads the server and database out of a DSN of the named driver.
func ParseLocation(driver, dsn string) (driver.Location, error) {
	return All().Location(driver, dsn)
}

// ForKind returns the driver that alone reads cursor kind (a change stream's kind, xid,
// rowversion); false when none does, or several do.
func ForKind(kind string) (driver.Driver, bool) {
	var found driver.Driver
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

// CheckDefinition checks d by the rules of the database that alone reads its cursor kind (its
// driver's CheckDefinition), for a definition whose driver is not known yet, which its settings
// name (poller.json's): none when several databases read the kind. The source checks them again
// with its driver when it opens, and d's settings' part (a slot's name) only then.
func CheckDefinition(d sourcedef.Definition) error {
	dl, ok := ForKind(d.Cursor.Kind)
	if !ok {
		return nil
	}
	return dl.CheckDefinition(d)
}

// CDCAdmin returns the driver that administers the change-stream set-up of cursor kind
// (pollerctl cdc), when one does.
func CDCAdmin(kind string) (driver.Driver, bool) { return All().CDCAdmin(kind) }

// OpenCDC connects to the database of a poller whose cursor kind has a set-up pollerctl cdc
// administers (CDCAdmin), with the driver its settings name (source.OpenCDC).
func OpenCDC(ctx context.Context, cfg source.Config) (driver.CDCSetup, error) {
	return source.OpenCDC(ctx, All(), cfg)
}

// CDCKinds names the cursor kinds whose set-up pollerctl cdc administers, for messages:
// "logical (PostgreSQL logical decoding)".
func CDCKinds() string {
	var out []string
	for _, d := range All() {
		if kind, what := d.CDCKind(); kind != "" {
			out = append(out, kind+" ("+what+")")
		}
	}
	return strings.Join(out, ", ")
}

// CheckSetup connects to the database of the poller cfg describes and checks its table set-up
// (source.CheckSetup), with the driver cfg.Driver names.
func CheckSetup(ctx context.Context, cfg source.Config) (*source.Setup, error) {
	return source.CheckSetup(ctx, All(), cfg)
}
