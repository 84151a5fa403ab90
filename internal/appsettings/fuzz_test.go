package appsettings

import (
	"errors"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/poller"
)

// FuzzSettings: any value of any setting either loads or fails with errors that each name a
// setting of the poller. Never a panic.
func FuzzSettings(f *testing.F) {
	for _, s := range []struct{ suffix, value string }{
		{"BATCH_SIZE", "500"}, {"BATCH_SIZE", "-1"}, {"LEASE_TTL", "1h"}, {"LEASE_TTL", "9999999999h"},
		{"HEARTBEAT_INTERVAL", "0"}, {"SCHEDULE", "*/5 * * * * *"}, {"SCHEDULE", "@every 1s"}, {"SETTLE_LAG", "0s"},
		{"DB_DRIVER", "postgres"}, {"CHECKPOINT_INTERVAL", "1ns"}, {"TICK_BUDGET", "1e9h"},
	} {
		f.Add(s.suffix, s.value)
	}
	f.Fuzz(func(t *testing.T, suffix, value string) {
		env := map[string]string{"ORDERS_DB_DRIVER": "sqlite", "ORDERS_DB_CONNECTION": "x.db", "ORDERS_" + suffix: value}
		s, err := Load(testPoller("orders", poller.TimestampPK), func(k string) string { return env[k] })
		if err == nil {
			if s.BatchSize < 1 || s.LeaseTTL < 4e9 || 3*s.HeartbeatInterval >= s.LeaseTTL || s.TickBudget <= 0 {
				t.Fatalf("accepted settings that do not hold together: %+v", s)
			}
			return
		}
		for _, e := range flatten(err) {
			var se *SettingError
			if !errors.As(e, &se) || !strings.HasPrefix(se.Setting, "ORDERS_") || se.Problem == "" {
				t.Fatalf("an error that names no setting: %v", e)
			}
		}
	})
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
