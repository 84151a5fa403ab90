package pollerstatus_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/liveness"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// TestSetupWarningDegrades: a probe whose setup check finds a problem makes a ticking poller
// degraded, with the problem and its fix in the row (JSON setup_warnings), the reason and the
// page; once the check is clean it is ok again.
func TestSetupWarningDegrades(t *testing.T) {
	ctx := context.Background()
	_, clk, st, marker := markedStore()
	warning := setup.Finding{Check: setup.CheckStamped, Verdict: setup.VerdictProblem,
		Detail: "column txid: only a default stamps it, on INSERT; every UPDATE after the insert is never delivered",
		Fix:    []string{`CREATE TRIGGER "orders_stamp_txid" BEFORE UPDATE ON "orders" FOR EACH ROW EXECUTE FUNCTION "orders_stamp_txid"()`}}
	probe := pollerstatus.Probe{OK: true, RowsWaiting: 0, LagSeconds: ptr(0), SetupWarnings: []setup.Finding{warning}}
	cfg := pollerstatus.Config{App: "test", Now: clk.Now,
		Registered: []pollerstatus.Registered{{Name: "orders", Schedule: "*/10 * * * * *", LivenessInterval: time.Minute}},
		Probe:      func(context.Context, string, *state.Doc) pollerstatus.Probe { return probe },
	}
	marker.Record(ctx, liveness.Tick{Poller: "orders", Outcome: "idle", RowsWaiting: 0, LagSeconds: ptr(0), Interval: time.Minute})

	r := pollerstatus.Read(ctx, st, cfg, "orders")
	if r.Health != pollerstatus.HealthDegraded {
		t.Fatalf("health %q (%s), want degraded", r.Health, r.HealthReason)
	}
	for _, s := range []string{"never delivered", "pollerctl check orders --fix"} {
		if !strings.Contains(r.HealthReason, s) {
			t.Errorf("the reason %q does not say %q", r.HealthReason, s)
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"setup_warnings":[{"check":"stamped on insert and update","verdict":"problem"`) || !strings.Contains(string(b), `orders_stamp_txid`) {
		t.Errorf("the JSON lacks the setup warning and its fix: %s", b)
	}
	var page strings.Builder
	if err := pollerstatus.RenderPage(&page, pollerstatus.NewPage(pollerstatus.Report{Pollers: []pollerstatus.Row{r}})); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), `class="setup-warning bad"`) || !strings.Contains(page.String(), "orders_stamp_txid") {
		t.Errorf("the page lacks the setup warning and its fix")
	}

	probe.SetupWarnings = nil
	if r := pollerstatus.Read(ctx, st, cfg, "orders"); r.Health != pollerstatus.HealthOK || len(r.SetupWarnings) != 0 {
		t.Fatalf("after the fix: health %q (%s), warnings %v", r.Health, r.HealthReason, r.SetupWarnings)
	}
}
