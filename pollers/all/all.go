// Package all imports every poller, so that each registers itself. `pollerctl new NAME` adds its
// line here; all_test.go fails when a pollers/<name> folder is missing here or has no
// <name>/function.json, or the other way round.
package all

import (
	_ "github.com/pseudotrigger/pseudotrigger/pollers/orders" // orders
)
