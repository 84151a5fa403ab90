package pollerstatus_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

var ctx = context.Background()

func put(t *testing.T, st store.Store, name string, data []byte) {
	t.Helper()
	if _, err := st.Put(ctx, name, data, store.IfNotExists()); err != nil {
		t.Fatal(err)
	}
}

func putDoc(t *testing.T, st store.Store, d *state.Doc) {
	t.Helper()
	data, err := state.Encode(d)
	if err != nil {
		t.Fatal(err)
	}
	put(t, st, blobpath.State("test", d.PollerName), data)
}

func tsCursor(ts time.Time, id int) *state.Cursor {
	v, _ := json.Marshal(ts.UTC().Format(state.TimeLayout))
	return &state.Cursor{Kind: state.KindTimestampPK, Value: v, Tiebreaker: map[string]json.RawMessage{"id": json.RawMessage(`12`)}}
}

func TestRows(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(now)
	st := memstore.New(clk)

	// orders: a timestamp cursor 90 s behind, a live lease, blocked at 3 of 3 attempts.
	lag := 42.0
	orders := &state.Doc{Version: 1, PollerName: "orders", SourceFingerprint: "sha256:x",
		Checkpoint: state.Checkpoint{Cursor: tsCursor(now.Add(-90*time.Second), 12), LastSuccessfulBatchID: "batch_a", UpdatedAt: state.At(now.Add(-time.Minute))},
		Lease:      state.Lease{OwnerID: "local/host/1", FencingToken: 7, TTLSeconds: 60},
		Failure: &state.Failure{Attempts: 3, BatchID: "batch_b", LastError: `POST https://hooks.example/in?sig=S3CRET&x=1: 500; Password=hunter2`,
			Keys: `{"id":13}..{"id":20}`},
	}
	orders.AddHistory(state.Tick{At: state.At(now), Outcome: "failed", LagSeconds: &lag, RowsWaiting: 8})
	putDoc(t, st, orders)
	if _, err := deadletter.Write(ctx, st, "test", &deadletter.Letter{Poller: "orders", BatchID: "batch_z"}); err != nil {
		t.Fatal(err)
	}
	if _, err := deadletter.Write(ctx, st, "test", &deadletter.Letter{Poller: "orders", BatchID: "batch_y"}); err != nil {
		t.Fatal(err)
	}
	// ledger: quarantine on poison, so the same failures do not block it.
	ledger := &state.Doc{Version: 1, PollerName: "ledger", Checkpoint: state.Checkpoint{Cursor: &state.Cursor{Kind: state.KindInteger, Value: json.RawMessage(`99`)}},
		Failure: &state.Failure{Attempts: 9, BatchID: "batch_c", LastError: "boom"}}
	ledger.Lease = state.Lease{FencingToken: 2, OwnerID: "local/host/2", TTLSeconds: 60, ReleasedAt: state.At(now)}
	putDoc(t, st, ledger)
	// legacy: state only, not registered; broken: not a state document.
	putDoc(t, st, &state.Doc{Version: 1, PollerName: "legacy", Failure: &state.Failure{Attempts: 50, LastError: "x"}})
	put(t, st, blobpath.State("test", "broken"), []byte(`{"version": 1, "poller_name": "broken", "checkpoint": `))
	// Not pollers: a nested blob, another app's state.
	put(t, st, "state/test/nested/x.json", []byte(`{}`))
	put(t, st, blobpath.State("other", "elsewhere"), []byte(`{}`))

	cfg := pollerstatus.Config{App: "test", Registered: []pollerstatus.Registered{
		{Name: "orders", Poison: appsettings.Poison{MaxAttempts: 3, OnPoison: appsettings.Block}},
		{Name: "ledger", Poison: appsettings.Poison{MaxAttempts: 3, OnPoison: appsettings.Quarantine}},
		pollerstatus.RegisteredFrom(pollerdef.Of(poller.New("fresh", "fresh", poller.Integer, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
			poller.WithCursorColumn("id"), poller.WithKey("id"))), appsettings.Settings{}, errors.New(`FRESH_DB_DRIVER: missing; dsn postgres://u:hunter2@db/x`)),
	}}
	rows, err := pollerstatus.All(ctx, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	byName := map[string]pollerstatus.Row{}
	for _, r := range rows {
		names = append(names, r.Poller)
		byName[r.Poller] = r
	}
	if got := strings.Join(names, " "); got != "broken fresh ledger legacy orders" {
		t.Fatalf("pollers %q", got)
	}

	o := byName["orders"]
	// The lag is the last tick's measure of the oldest row waiting, not the cursor's age (90 s).
	if o.State != pollerstatus.StateOK || o.LagSeconds == nil || *o.LagSeconds != 42 || o.LagFrom != "last tick" || o.RowsWaiting != 8 || o.FencingToken != 7 || o.LeaseOwner != "local/host/1" || !o.LeaseLive ||
		o.LastBatchID != "batch_a" || o.LastCommitAt != "2026-11-22T11:59:00Z" || o.FailedAttempts != 3 || o.FailedBatchID != "batch_b" ||
		o.FailureKeys != `{"id":13}..{"id":20}` || !o.Blocked || !strings.Contains(o.Unblock, "ORDERS_ON_POISON=quarantine") ||
		!strings.Contains(o.Unblock, "pollerctl quarantine orders") || len(o.History) != 1 || !o.Registered || o.MaxAttempts != 3 {
		t.Errorf("orders: %+v", o)
	}
	if o.DeadLetters.Count != 2 || strings.Join(o.DeadLetters.BatchIDs, ",") != "batch_y,batch_z" {
		t.Errorf("orders dead letters: %+v", o.DeadLetters)
	}
	if strings.Contains(o.LastError, "S3CRET") || strings.Contains(o.LastError, "hunter2") || !strings.Contains(o.LastError, "hooks.example") {
		t.Errorf("orders last error not redacted: %s", o.LastError)
	}
	if o.Health != pollerstatus.HealthBlocked || !strings.Contains(o.HealthReason, "pollerctl quarantine orders") {
		t.Errorf("orders health %s: %s", o.Health, o.HealthReason)
	}
	for name, want := range map[string]string{"ledger": pollerstatus.HealthFailing, "legacy": pollerstatus.HealthStopped,
		"broken": pollerstatus.HealthMisconfigured, "fresh": pollerstatus.HealthMisconfigured} {
		if r := byName[name]; r.Health != want || r.HealthReason == "" || strings.Contains(r.HealthReason, "hunter2") {
			t.Errorf("%s health %s (%s), want %s", name, r.Health, r.HealthReason, want)
		}
	}
	if l := byName["ledger"]; l.Blocked || l.LagSeconds != nil || l.FailedAttempts != 9 || l.DeadLetters.Count != 0 || l.DeadLetters.BatchIDs == nil || l.History == nil {
		t.Errorf("ledger: %+v", l)
	}
	if l := byName["legacy"]; l.State != pollerstatus.StateOK || l.Registered || l.Blocked {
		t.Errorf("legacy (not registered: no settings say it is blocked): %+v", l)
	}
	if b := byName["broken"]; b.State != pollerstatus.StateCorrupt || !strings.Contains(b.Problem, "state/test/broken.json") {
		t.Errorf("broken: %+v", b)
	}
	f := byName["fresh"]
	if f.State != pollerstatus.StateNone || !f.Registered || f.MaxAttempts != appsettings.DefaultMaxAttempts || f.OnPoison != appsettings.DefaultOnPoison ||
		!strings.Contains(f.SettingsProblem, "FRESH_DB_DRIVER") || strings.Contains(f.SettingsProblem, "hunter2") {
		t.Errorf("fresh: %+v", f)
	}

	// The lease expires on the service's clock: TTL + margin after the last write.
	clk.Advance(66 * time.Second)
	if o := pollerstatus.Read(ctx, st, cfg, "orders"); o.LeaseLive || o.LeaseOwner != "local/host/1" || *o.LagSeconds != 42 {
		t.Errorf("after the TTL: live %v owner %q lag %v", o.LeaseLive, o.LeaseOwner, *o.LagSeconds)
	}
	// A quarantine requested unblocks it.
	orders.Failure.Quarantine = true
	data, _ := state.Encode(orders)
	b, _ := st.Get(ctx, blobpath.State("test", "orders"))
	if _, err := st.Put(ctx, blobpath.State("test", "orders"), data, store.IfMatch(b.ETag)); err != nil {
		t.Fatal(err)
	}
	if o := pollerstatus.Read(ctx, st, cfg, "orders"); o.Blocked || !o.QuarantineRequested {
		t.Errorf("quarantine requested: %+v", o)
	}
}

// failing fails every read and listing, saying something with a secret in it.
type failing struct{}

var errDown = errors.New("GET https://acct.blob.core.windows.net/db-state/x?sv=2024&sig=SIGSECRET: connection refused")

func (failing) Get(context.Context, string) (store.Blob, error) { return store.Blob{}, errDown }
func (failing) List(context.Context, string) ([]string, error)  { return nil, errDown }

func TestUnreadable(t *testing.T) {
	cfg := pollerstatus.Config{App: "test", Registered: []pollerstatus.Registered{{Name: "orders"}}}
	if _, err := pollerstatus.All(ctx, failing{}, cfg); err == nil {
		t.Fatal("All: no error from a store that cannot list")
	}
	r := pollerstatus.Read(ctx, failing{}, cfg, "orders")
	if r.State != pollerstatus.StateUnreadable || r.DeadLetters.Problem == "" {
		t.Fatalf("%+v", r)
	}
	for _, s := range []string{r.Problem, r.DeadLetters.Problem} {
		if strings.Contains(s, "SIGSECRET") || !strings.Contains(s, "connection refused") {
			t.Errorf("not redacted, or redacted too much: %s", s)
		}
	}
}
