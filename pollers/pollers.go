// Package pollers lists the app's pollers: the one place the handler, pollerctl and the tests
// learn which pollers this build has. `pollerctl new NAME` adds its line to All; pollers_test.go
// fails when All, the pollers/<name> folders and the <name>/function.json folders disagree.
package pollers

import (
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/pollers/orders"
)

// All returns a new instance of every poller of the app.
func All() []*poller.Poller {
	return []*poller.Poller{
		orders.New(),
	}
}
