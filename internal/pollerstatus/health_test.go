package pollerstatus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/liveness"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
)

// TestHealth walks one poller through the verdicts, each from the signal that decides it: no
// tick yet, an idle tick's liveness mark, silence past the expected interval, a failed tick that
// wrote nothing but its mark, a probe that finds the stored cursor does not fit or the database
// gone, lag, and a newer state document overriding an older failed mark.
func TestHealth(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(now)
	st := memstore.New(clk)
	marker := &liveness.Marker{Store: st, App: "test", Owner: "test/host/1", Clock: clk}
	var probe pollerstatus.Probe
	cfg := pollerstatus.Config{App: "test", Now: clk.Now,
		Registered: []pollerstatus.Registered{{Name: "orders", Schedule: "*/10 * * * * *", LivenessInterval: time.Minute, MaxLag: 5 * time.Minute}},
		Probe:      func(_ context.Context, _ string, _ *state.Doc) pollerstatus.Probe { return probe },
	}
	probe = pollerstatus.Probe{OK: true, RowsWaiting: 0, LagSeconds: ptr(0)}
	check := func(step, want string, reason ...string) pollerstatus.Row {
		t.Helper()
		r := pollerstatus.Read(ctx, st, cfg, "orders")
		if r.Health != want {
			t.Fatalf("%s: health %q (%s), want %q", step, r.Health, r.HealthReason, want)
		}
		for _, s := range reason {
			if !strings.Contains(r.HealthReason, s) {
				t.Errorf("%s: the reason %q does not say %q", step, r.HealthReason, s)
			}
		}
		return r
	}

	check("no tick yet", pollerstatus.HealthStopped, "no tick recorded yet")

	if !marker.Record(ctx, liveness.Tick{Poller: "orders", Outcome: "idle", RowsWaiting: 0, LagSeconds: ptr(0), Interval: time.Minute}) {
		t.Fatal("the first idle tick of a process must write a mark")
	}
	clk.Advance(20 * time.Second)
	r := check("idle", pollerstatus.HealthOK)
	if r.LastTick == nil || r.LastTick.From != "liveness" || r.LastTick.AgoSeconds != 20 || r.LastTick.ExpectedWithinSeconds != 90 {
		t.Fatalf("idle: last tick %+v", r.LastTick)
	}
	if r.LagSeconds == nil || *r.LagSeconds != 0 || r.LagFrom != "probe" || r.RowsWaiting != 0 {
		t.Fatalf("idle: lag %v from %q, %d waiting", r.LagSeconds, r.LagFrom, r.RowsWaiting)
	}

	// Idle ticks every 10 s write nothing until the interval has passed since the last mark.
	for range 3 {
		if marker.Record(ctx, liveness.Tick{Poller: "orders", Outcome: "idle", RowsWaiting: 0, Interval: time.Minute}) {
			t.Fatal("an idle tick within the interval wrote a mark")
		}
		clk.Advance(10 * time.Second)
	}
	// Then the timer stops: past the interval plus three schedule periods (90 s) it is stopped.
	clk.Advance(41 * time.Second)
	check("timer stopped", pollerstatus.HealthStopped, "no tick for 1m31s", "at least every 1m30s",
		`should fire every 10s (ORDERS_SCHEDULE "*/10 * * * * *")`, "azure-functions-host#11828", "restart the app")

	// A tick that fails before the lease (the stored cursor does not fit) writes only its mark.
	cursorErr := fmt.Errorf("source: poller \"orders\": %w: column \"id\": value \"abc\": invalid syntax", source.ErrCursor)
	if !marker.Record(ctx, liveness.Tick{Poller: "orders", Outcome: "failed", Err: cursorErr, RowsWaiting: -1, Interval: time.Minute}) {
		t.Fatal("a failed tick after ok ones must write a mark")
	}
	check("failing tick", pollerstatus.HealthFailing, `value "abc"`)
	// The probe finds the same and knows it needs a change, not a retry.
	probe = pollerstatus.ProbeFailed(cursorErr)
	check("probe: cursor", pollerstatus.HealthMisconfigured, `value "abc"`)
	probe = pollerstatus.ProbeFailed(fmt.Errorf("source: poller \"orders\": %w (postgres://u:hunter2@db/x): dial tcp: refused", source.ErrConnect))
	r = check("probe: database gone", pollerstatus.HealthFailing)
	if strings.Contains(r.HealthReason+r.Probe.Error, "hunter2") {
		t.Errorf("a password reached the status: %s / %s", r.HealthReason, r.Probe.Error)
	}

	// A tick that commits writes the state document: newer than the failed mark, it is the news.
	doc := &state.Doc{Version: 1, PollerName: "orders", SourceFingerprint: "sha256:x",
		Lease: state.Lease{OwnerID: "test/host/1", FencingToken: 3, TTLSeconds: 60, ReleasedAt: state.At(clk.Now())}}
	doc.AddHistory(state.Tick{At: state.At(clk.Now()), Outcome: "committed", Rows: 5, LagSeconds: ptr(400), RowsWaiting: 1200})
	clk.Advance(time.Second)
	putDoc(t, st, doc)
	probe = pollerstatus.Probe{Skipped: "no settings at hand", RowsWaiting: -1}
	r = check("committed but behind", pollerstatus.HealthLagging, "6m40s old", "ORDERS_MAX_LAG (5m0s)", "rows waiting: 1200")
	if r.LastTick.From != "state" || r.LastTick.Outcome != "committed" || r.LagFrom != "last tick" {
		t.Fatalf("committed: last tick %+v, lag from %q", r.LastTick, r.LagFrom)
	}
	// The probe, when it runs, measures the lag now.
	probe = pollerstatus.Probe{OK: true, RowsWaiting: 3, LagSeconds: ptr(2)}
	check("caught up", pollerstatus.HealthOK)

	// A newer failed tick's liveness mark beats the older state document, its error redacted.
	clk.Advance(30 * time.Second)
	if !marker.Record(ctx, liveness.Tick{Poller: "orders", Outcome: "failed", Err: errors.New("source: connect: Password=hunter2;"), RowsWaiting: -1, Interval: time.Minute}) {
		t.Fatal("a failed tick must write a mark")
	}
	r = check("a newer failed tick", pollerstatus.HealthFailing, "REDACTED")
	if r.LastTick.From != "liveness" || strings.Contains(r.HealthReason, "hunter2") {
		t.Fatalf("newer mark: %+v %s", r.LastTick, r.HealthReason)
	}
}

func ptr(f float64) *float64 { return &f }
