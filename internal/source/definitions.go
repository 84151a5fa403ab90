package source

import (
	"fmt"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// validate checks the definition d for the driver of ds named driver, which it returns: the rules
// of every definition (Check), the driver's support of its cursor kind and the driver's own
// rules (Driver.CheckDefinition). Errors wrap ErrDefinition and name the poller and the part at
// fault; a broken rule's wraps its *FieldError.
func validate(d sourcedef.Definition, poller string, ds Drivers, driver string) (Driver, error) {
	fail := func(format string, args ...any) (Driver, error) {
		return nil, fmt.Errorf("source: poller %q: %w: %s", poller, sourcedef.ErrDefinition, fmt.Sprintf(format, args...))
	}
	dl, ok := ds.Lookup(driver)
	if !ok {
		return fail("driver %q is not one of %s", driver, strings.Join(ds.Names(), ", "))
	}
	if err := d.Check(); err != nil {
		return nil, d.OpenError(poller, err)
	}
	if !dl.Supports(d.Cursor.Kind) {
		return fail("%s: cursor kind %s needs %s, not %s", d.Label(), d.Cursor.Kind, strings.Join(ds.reading(d.Cursor.Kind), " or "), driver)
	}
	if err := dl.CheckDefinition(d); err != nil {
		return nil, d.OpenError(poller, err)
	}
	return dl, nil
}
