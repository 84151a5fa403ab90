package appsettings

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

func TestSettingsDefaults(t *testing.T) {
	d := testPoller("my-orders", poller.TimestampPK, poller.WithSettleLag(7*time.Second))
	env := map[string]string{"MY_ORDERS_DB_DRIVER": "postgres", "MY_ORDERS_DB_CONNECTION": "postgres://x/y"}
	s, err := Load(d, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{Driver: "postgres", DSN: "postgres://x/y", BatchSize: 500, LeaseTTL: 60 * time.Second,
		HeartbeatInterval: 15 * time.Second, TickBudget: 4 * time.Minute, CheckpointInterval: 2 * time.Second, SettleLag: 7 * time.Second,
		FollowInterval: 100 * time.Millisecond, FollowCommit: time.Second,
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
	s, err = Load(d, func(k string) string { return env[k] })
	if err != nil || s.SettleLag != sourcedef.NoSettleLag || s.Schedule != "0 */5 * * * *" || s.BatchSize != 1000 || s.CheckpointInterval != 0 ||
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
		_, err := Load(testPoller("orders", poller.TimestampPK), func(k string) string { return full[k] })
		var se *SettingError
		if !errors.Is(err, ErrSetting) || !errors.As(err, &se) || !strings.Contains(err.Error(), setting+":") {
			t.Errorf("%s: got %v", setting, err)
		}
	}
	// Every problem is reported at once.
	_, err := Load(testPoller("orders", poller.TimestampPK), func(string) string { return "" })
	if !strings.Contains(err.Error(), "ORDERS_DB_DRIVER") || !strings.Contains(err.Error(), "ORDERS_DB_CONNECTION") {
		t.Errorf("both missing settings should be named: %v", err)
	}
}

func TestPrefix(t *testing.T) {
	if Prefix("my-orders") != "MY_ORDERS" || Prefix("orders_2") != "ORDERS_2" {
		t.Fatal(Prefix("my-orders"), Prefix("orders_2"))
	}
}

// testPoller is a poller of Row on table t, cursor column c, key id.
func testPoller(name string, kind poller.CursorKind, opts ...poller.Option) *pollerdef.Def {
	opts = append([]poller.Option{poller.WithColumns("id", "c"), poller.WithKey("id"), poller.WithCursorColumn("c")}, opts...)
	return pollerdef.Of(poller.New(name, "t", kind, func(context.Context, *poller.Batch[poller.Row]) error { return nil }, opts...))
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
	for _, kind := range []poller.CursorKind{poller.Integer, poller.XID, poller.RowVersion} {
		d := testPoller("orders", kind)
		_, err := Load(d, func(k string) string { return env[k] })
		if !errors.Is(err, ErrSetting) || !strings.Contains(err.Error(), "ORDERS_SETTLE_LAG:") || !strings.Contains(err.Error(), string(kind)) {
			t.Errorf("%s cursor with a settle lag: %v", kind, err)
		}
	}
	d := testPoller("orders", poller.TimestampPK)
	if s, err := Load(d, func(k string) string { return env[k] }); err != nil || s.SettleLag != 30*time.Second {
		t.Errorf("timestamp+pk cursor: %+v %v", s, err)
	}
	// Settings made otherwise than by Load (a test's, a benchmark's) give the definition the lag
	// only where it applies: the source refuses a settle lag for a cursor kind without an age.
	s := Settings{Driver: "postgres", DSN: "x", SettleLag: 30 * time.Second}
	if got := s.Config(testPoller("orders", poller.Integer)).Definition; got.SettleLag != 0 || got.Check() != nil {
		t.Errorf("integer cursor: settle lag %v, %v", got.SettleLag, got.Check())
	}
	if got := s.Config(d).Definition.SettleLag; got != 30*time.Second {
		t.Errorf("timestamp+pk cursor: settle lag %v", got)
	}
}

// TestPoisonRule: a batch is poison at MAX_ATTEMPTS failures (default 5); it blocks under block
// unless a quarantine was asked for, and is quarantined under quarantine.
func TestPoisonRule(t *testing.T) {
	def := Poison{}
	if def.Limit() != 5 || def.Poisoned(4) || !def.Poisoned(5) || !def.Blocks(5, false) || def.Blocks(5, true) || def.Quarantines(9) {
		t.Errorf("defaults: limit %d", def.Limit())
	}
	q := Poison{MaxAttempts: 2, OnPoison: Quarantine}
	if q.Quarantines(1) || !q.Quarantines(2) || q.Blocks(2, false) {
		t.Error("quarantine at 2")
	}
}

// TestFollowSettings: {P}_FOLLOW is off by default, read with its interval and commit pace, and
// refused beyond the tick budget, at or above the schedule's period, and with a look or commit
// pace too fast, each error naming the setting and what bounds it.
func TestFollowSettings(t *testing.T) {
	base := map[string]string{"ORDERS_DB_DRIVER": "sqlite", "ORDERS_DB_CONNECTION": "x", "ORDERS_SCHEDULE": "0 * * * * *"}
	load := func(extra map[string]string) (Settings, error) {
		env := maps.Clone(base)
		maps.Copy(env, extra)
		return Load(testPoller("orders", poller.TimestampPK), func(k string) string { return env[k] })
	}
	s, err := load(map[string]string{"ORDERS_FOLLOW": "50s", "ORDERS_FOLLOW_INTERVAL": "20ms", "ORDERS_FOLLOW_COMMIT": "2s"})
	if err != nil || s.Follow != 50*time.Second || s.FollowInterval != 20*time.Millisecond || s.FollowCommit != 2*time.Second {
		t.Fatalf("%+v, %v", s, err)
	}
	for extra, want := range map[string]string{
		"ORDERS_FOLLOW=60s":          "ORDERS_FOLLOW: 1m0s is not below the schedule's shortest period (1m0s between firings, ORDERS_SCHEDULE \"0 * * * * *\")",
		"ORDERS_FOLLOW=5m":           "ORDERS_FOLLOW: 5m0s is more than ORDERS_TICK_BUDGET (4m0s)",
		"ORDERS_FOLLOW=soon":         "ORDERS_FOLLOW: \"soon\" is not a positive Go duration",
		"ORDERS_FOLLOW_INTERVAL=1ms": "ORDERS_FOLLOW_INTERVAL: 1ms is too short: at least 10ms",
		"ORDERS_FOLLOW_COMMIT=30s":   "ORDERS_FOLLOW_COMMIT: 30s must be less than half of ORDERS_LEASE_TTL (1m0s)",
		"ORDERS_FOLLOW_COMMIT=0s":    "ORDERS_FOLLOW_COMMIT: \"0s\" is not a positive Go duration",
	} {
		k, v, _ := strings.Cut(extra, "=")
		if _, err := load(map[string]string{k: v}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", extra, err, want)
		}
	}
	// An uneven schedule: its shortest gap bounds it (the tick fired at :00 must end by :10).
	if _, err := load(map[string]string{"ORDERS_SCHEDULE": "0,10 * * * * *", "ORDERS_FOLLOW": "45s"}); err == nil ||
		!strings.Contains(err.Error(), "ORDERS_FOLLOW: 45s is not below the schedule's shortest period (10s between firings") {
		t.Errorf("FOLLOW 45s on a schedule firing 10 s and 50 s apart: %v", err)
	}
	// Without a schedule (the host's own setting unset here) only the budget bounds it.
	delete(base, "ORDERS_SCHEDULE")
	if s, err := load(map[string]string{"ORDERS_FOLLOW": "3m"}); err != nil || s.Follow != 3*time.Minute {
		t.Errorf("%+v, %v", s, err)
	}
}
