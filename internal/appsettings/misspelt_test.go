package appsettings_test

import (
	"slices"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
)

// TestMisspelt: a slip in a setting's name is named with the setting meant; the right names,
// other programs' settings and a connection's settings are left alone.
func TestMisspelt(t *testing.T) {
	keys := []string{
		"ORDERS_BATCH_SIZE", "ORDERS_DB_DRIVER", "ORDERS_SINK", "ORDERS_SINK__queueServiceUri", "PATH", "StateStorage", "FUNCTIONS_WORKER_RUNTIME",
		"ORDERS_BATCHSIZE", "ORDERS_MAX_ATTEMTPS", "ORDRES_SCHEDULE", "INVOICES_DB_CONNECTION", "ORDERS_EU_MAX_LAG",
	}
	got := appsettings.Misspelt(keys, []string{"orders", "orders-eu"})
	want := []string{
		"INVOICES_DB_CONNECTION is set, but no poller's settings start with INVOICES_ (the pollers' prefixes: ORDERS, ORDERS_EU)",
		"ORDERS_BATCHSIZE is not a setting: did you mean ORDERS_BATCH_SIZE?",
		"ORDERS_MAX_ATTEMTPS is not a setting: did you mean ORDERS_MAX_ATTEMPTS?",
		"ORDRES_SCHEDULE is set, but no poller's settings start with ORDRES_: did you mean ORDERS_SCHEDULE?",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Misspelt:\n got %q\nwant %q", got, want)
	}
}
