package appsettings

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

func TestCDCSettings(t *testing.T) {
	logical := pollerdef.Of(poller.New("Orders-CDC", "orders", poller.Logical, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
		poller.WithColumns("id"), poller.WithKey("id")))
	keyset := pollerdef.Of(poller.New("orders", "orders", poller.Integer, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
		poller.WithColumns("id"), poller.WithKey("id"), poller.WithCursorColumn("id")))
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	base := []string{"ORDERS_CDC_DB_DRIVER", "postgres", "ORDERS_CDC_DB_CONNECTION", "postgres://x/y", "POLLER_APP_NAME", "shop-prod"}
	s, err := Load(logical, env(base...))
	if err != nil || s.Slot != "pseudotrigger_shop_prod_orders_cdc" || s.Publication != s.Slot {
		t.Errorf("defaults: slot %q, publication %q, %v", s.Slot, s.Publication, err)
	}
	s, err = Load(logical, env(append(base, "ORDERS_CDC_CDC_SLOT", "mine", "ORDERS_CDC_CDC_PUBLICATION", "pub")...))
	if err != nil || s.Slot != "mine" || s.Publication != "pub" {
		t.Errorf("set: slot %q, publication %q, %v", s.Slot, s.Publication, err)
	}
	if _, err := Load(logical, env(append(base, "ORDERS_CDC_CDC_SLOT", "Bad-Name")...)); err == nil || !strings.Contains(err.Error(), "ORDERS_CDC_CDC_SLOT") {
		t.Errorf("a bad slot name: %v", err)
	}
	_, err = Load(keyset, env("ORDERS_DB_DRIVER", "postgres", "ORDERS_DB_CONNECTION", "postgres://x/y", "ORDERS_CDC_SLOT", "s"))
	if err == nil || !strings.Contains(err.Error(), "ORDERS_CDC_SLOT: applies to logical cursors only") {
		t.Errorf("a slot for an integer cursor: %v", err)
	}
	long := SlotName(strings.Repeat("a", 40), strings.Repeat("b", 40))
	if len(long) != 63 || long == SlotName(strings.Repeat("a", 40), strings.Repeat("b", 39)+"c") {
		t.Errorf("long names: %q (%d)", long, len(long))
	}
}

// TestCDCNames: the slot and publication of a poller this build may not have are read, checked
// and defaulted as Load reads them for one it has.
func TestCDCNames(t *testing.T) {
	logical := pollerdef.Of(poller.New("orders-cdc", "orders", poller.Logical, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
		poller.WithColumns("id"), poller.WithKey("id")))
	for _, kv := range []map[string]string{
		{"POLLER_APP_NAME": "shop"},
		{"POLLER_APP_NAME": "shop", "ORDERS_CDC_CDC_SLOT": "mine"},
		{"POLLER_APP_NAME": "shop", "ORDERS_CDC_CDC_SLOT": "mine", "ORDERS_CDC_CDC_PUBLICATION": "pub"},
		{"ORDERS_CDC_CDC_PUBLICATION": " pub "},
	} {
		getenv := func(k string) string { return kv[k] }
		s, _ := Load(logical, getenv)
		slot, pub, err := cdcNames("orders-cdc", getenv)
		if err != nil || slot != s.Slot || pub != s.Publication {
			t.Errorf("%v: cdcNames %q %q %v, Load %q %q", kv, slot, pub, err, s.Slot, s.Publication)
		}
	}
	_, _, err := cdcNames("orders-cdc", func(k string) string {
		return map[string]string{"ORDERS_CDC_CDC_SLOT": "Bad-Name", "ORDERS_CDC_CDC_PUBLICATION": "also bad"}[k]
	})
	if !errors.Is(err, ErrSetting) || !strings.Contains(err.Error(), "ORDERS_CDC_CDC_SLOT: ") || !strings.Contains(err.Error(), "ORDERS_CDC_CDC_PUBLICATION: ") {
		t.Errorf("bad names: %v, want both settings named", err)
	}
}
