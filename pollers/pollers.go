// Package pollers lists the app's Go pollers: the one place the handler, pollerctl and the tests
// learn which Go pollers this build has (no init(), no registry). A poller is in the app when
// All names it:
//
//	func All() []*poller.Poller {
//		return []*poller.Poller{
//			orders.New(),
//			shipments.New(), // pollers/shipments, its timer in shipments/function.json
//		}
//	}
//
// `pollerctl new NAME` adds its line to All, with the package and the function folder;
// pollers_test.go fails when All, the pollers/<name> folders and the <name>/function.json
// folders disagree. Declared pollers (a folder with poller.json, no Go) are not listed here: the
// handler finds them when it starts (internal/declared), and refuses a name declared both ways.
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
