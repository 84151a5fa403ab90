package tick_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
)

// TestOpenLogsSetupProblems: opening a poller's runner checks its source's set-up and logs each
// problem once, as a JSON warning with its fix (the tests' orders table has an updated_at that
// nothing stamps); its ticks check nothing.
func TestOpenLogsSetupProblems(t *testing.T) {
	e := newEnv(t, 10)
	var out testenv.Buffer
	r, err := tick.Open(ctx, tick.Config{Poller: pollerdef.Of(ordersPoller((&recorder{}).handle)), Store: e.st, App: "test", Owner: "o/1", Source: e.src,
		Logger:   slog.New(slog.NewJSONHandler(&out, nil)),
		Settings: appsettings.Settings{BatchSize: 10, LeaseTTL: lease.DefaultTTL, HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var stamped int
	for line := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		if m["check"] == "stamped on insert and update" {
			stamped++
			if m["level"] != "WARN" || m["poller"] != "orders" || !strings.Contains(m["fix"].(string), `CREATE TRIGGER "orders_stamp_updated_at_update" AFTER UPDATE ON "orders"`) ||
				!strings.Contains(m["detail"].(string), "never delivered") {
				t.Errorf("the warning lacks its level, poller, detail or fix: %s", line)
			}
		}
	}
	if stamped != 1 {
		t.Fatalf("%d warnings about the unstamped cursor column, want 1:\n%s", stamped, out.String())
	}
	before := out.String()
	if _, err := r.Tick(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.TrimPrefix(out.String(), before), "set-up") {
		t.Errorf("a tick checked the set-up again:\n%s", out.String())
	}
}
