package poller

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

func TestSettingsDefaults(t *testing.T) {
	d := Definition{Name: "my-orders", Source: source.Definition{SettleLag: 7 * time.Second}}
	env := map[string]string{"MY_ORDERS_DB_DRIVER": "postgres", "MY_ORDERS_DB_CONNECTION": "postgres://x/y"}
	s, err := LoadSettings(d, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{Driver: "postgres", DSN: "postgres://x/y", Schedule: DefaultSchedule, BatchSize: 500, LeaseTTL: 60 * time.Second,
		HeartbeatInterval: 15 * time.Second, TickBudget: 4 * time.Minute, CheckpointInterval: 2 * time.Second, SettleLag: 7 * time.Second,
		MaxAttempts: 5, OnPoison: Block, LivenessInterval: 5 * time.Minute, MaxLag: 5 * time.Minute}
	if s != want {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
	env["MY_ORDERS_SETTLE_LAG"] = "0s"
	env["MY_ORDERS_SCHEDULE"] = "0 */5 * * * *"
	env["MY_ORDERS_BATCH_SIZE"] = "1000"
	env["MY_ORDERS_CHECKPOINT_INTERVAL"] = "0s"
	env["MY_ORDERS_MAX_ATTEMPTS"] = "3"
	env["MY_ORDERS_ON_POISON"] = "Quarantine"
	s, err = LoadSettings(d, func(k string) string { return env[k] })
	if err != nil || s.SettleLag != source.NoSettleLag || s.Schedule != "0 */5 * * * *" || s.BatchSize != 1000 || s.CheckpointInterval != 0 ||
		s.MaxAttempts != 3 || s.OnPoison != Quarantine {
		t.Fatalf("%+v %v", s, err)
	}
}

func TestSettingsErrorsNameTheSetting(t *testing.T) {
	cases := map[string]map[string]string{
		"ORDERS_DB_DRIVER":           {"ORDERS_DB_CONNECTION": "x"},
		"ORDERS_DB_CONNECTION":       {"ORDERS_DB_DRIVER": "sqlite"},
		"ORDERS_BATCH_SIZE":          {"ORDERS_BATCH_SIZE": "lots"},
		"ORDERS_LEASE_TTL":           {"ORDERS_LEASE_TTL": "1s"},
		"ORDERS_HEARTBEAT_INTERVAL":  {"ORDERS_HEARTBEAT_INTERVAL": "30s"},
		"ORDERS_TICK_BUDGET":         {"ORDERS_TICK_BUDGET": "-1m"},
		"ORDERS_SCHEDULE":            {"ORDERS_SCHEDULE": "*/5 * * * *"},
		"ORDERS_SETTLE_LAG":          {"ORDERS_SETTLE_LAG": "soon"},
		"ORDERS_CHECKPOINT_INTERVAL": {"ORDERS_CHECKPOINT_INTERVAL": "45s"},
		"ORDERS_MAX_ATTEMPTS":        {"ORDERS_MAX_ATTEMPTS": "0"},
		"ORDERS_ON_POISON":           {"ORDERS_ON_POISON": "skip"},
	}
	for setting, env := range cases {
		full := map[string]string{"ORDERS_DB_DRIVER": "sqlite", "ORDERS_DB_CONNECTION": "x"}
		if setting == "ORDERS_DB_DRIVER" {
			delete(full, "ORDERS_DB_DRIVER")
		}
		if setting == "ORDERS_DB_CONNECTION" {
			delete(full, "ORDERS_DB_CONNECTION")
		}
		for k, v := range env {
			full[k] = v
		}
		_, err := LoadSettings(Definition{Name: "orders"}, func(k string) string { return full[k] })
		var se *SettingError
		if !errors.Is(err, ErrSetting) || !errors.As(err, &se) || !strings.Contains(err.Error(), setting+":") {
			t.Errorf("%s: got %v", setting, err)
		}
	}
	// Every problem is reported at once.
	_, err := LoadSettings(Definition{Name: "orders"}, func(string) string { return "" })
	if !strings.Contains(err.Error(), "ORDERS_DB_DRIVER") || !strings.Contains(err.Error(), "ORDERS_DB_CONNECTION") {
		t.Errorf("both missing settings should be named: %v", err)
	}
}

func TestNamesAndRegistry(t *testing.T) {
	if Prefix("my-orders") != "MY_ORDERS" || !ValidName("orders_2") || ValidName("2orders") || ValidName("a/b") || ValidName("") {
		t.Fatal("names")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering a poller without a handler did not panic")
		}
	}()
	Register(Definition{Name: "nohandler"})
}

func TestAppName(t *testing.T) {
	for env, want := range map[[2]string]string{{"", ""}: "local", {"", "site1"}: "site1", {"mine", "site1"}: "mine", {" ", ""}: "local"} {
		got := AppName(func(k string) string {
			return map[string]string{"POLLER_APP_NAME": env[0], "WEBSITE_SITE_NAME": env[1]}[k]
		})
		if got != want {
			t.Errorf("%v: %q, want %q", env, got, want)
		}
	}
}

// TestSettleLagOnlyForTimestampCursors: a settle lag on a cursor that has no age is refused,
// naming the setting, rather than silently ignored.
func TestSettleLagOnlyForTimestampCursors(t *testing.T) {
	env := map[string]string{"ORDERS_DB_DRIVER": "postgres", "ORDERS_DB_CONNECTION": "x", "ORDERS_SETTLE_LAG": "30s"}
	for _, kind := range []string{state.KindInteger, state.KindXID, state.KindRowversion} {
		d := Definition{Name: "orders", Source: source.Definition{Cursor: source.Cursor{Kind: kind, Column: "c"}}}
		_, err := LoadSettings(d, func(k string) string { return env[k] })
		if !errors.Is(err, ErrSetting) || !strings.Contains(err.Error(), "ORDERS_SETTLE_LAG:") || !strings.Contains(err.Error(), kind) {
			t.Errorf("%s cursor with a settle lag: %v", kind, err)
		}
	}
	d := Definition{Name: "orders", Source: source.Definition{Cursor: source.Cursor{Kind: state.KindTimestampPK, Column: "c"}}}
	if s, err := LoadSettings(d, func(k string) string { return env[k] }); err != nil || s.SettleLag != 30*time.Second {
		t.Errorf("timestamp+pk cursor: %+v %v", s, err)
	}
}
