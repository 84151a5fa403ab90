package pollerstatus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
)

func bytesPtr(n int64) *int64 { return &n }

func logicalDoc(at string) *state.Doc {
	d := &state.Doc{Version: 1, PollerName: "orders", Lease: state.Lease{OwnerID: "test/host/1", FencingToken: 3, TTLSeconds: 60}}
	if at != "" {
		p, err := pgcdc.ParsePosition(at)
		if err != nil {
			panic(err)
		}
		c := p.Cursor()
		d.Checkpoint.Cursor = &c
	}
	return d
}

// inspectSource is a source whose change stream reads from something of its own (a slot), which
// it inspects; its backlog reports a detail of the driver's too.
type inspectSource struct {
	fakeSource
	inspected []driver.Detail
	problem   error
	backlog   []driver.Detail
}

func (s inspectSource) Inspect(context.Context, string) ([]driver.Detail, error) {
	return s.inspected, s.problem
}

func (s inspectSource) Backlog(context.Context, *state.Cursor, int) (driver.Stats, error) {
	return driver.Stats{Rows: s.rows, Details: s.backlog}, nil
}

// TestProbeDetails: the probe shows what the driver inspected, also when it then fails the probe
// (misconfigured when the driver says so), and what its backlog reported, in the probe's JSON
// after its own members.
func TestProbeDetails(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	slot := driver.Detail{Key: "slot", Value: map[string]any{"name": "pt_orders"}}
	bound := driver.Detail{Key: "open_trx", Value: map[string]any{"active": true}}
	p := pollerstatus.ProbeSource(ctx, inspectSource{fakeSource: fakeSource{rows: 2}, inspected: []driver.Detail{slot}, backlog: []driver.Detail{bound}}, "b", nil, now)
	if !p.OK || len(p.Details) != 2 || p.Details[0].Key != "slot" || p.Details[1].Key != "open_trx" {
		t.Fatalf("probe %+v", p)
	}
	if j, _ := json.Marshal(p); string(j) != `{"ok":true,"rows_waiting":2,"duration_ms":0,"slot":{"name":"pt_orders"},"open_trx":{"active":true}}` {
		t.Errorf("probe JSON %s", j)
	}
	bad := fmt.Errorf("replication slot pt_orders: does not exist: %w", source.ErrMisconfigured)
	p = pollerstatus.ProbeSource(ctx, inspectSource{inspected: []driver.Detail{slot}, problem: bad}, "b", nil, now)
	if p.OK || !p.Misconfigured || p.Error != bad.Error() || len(p.Details) != 1 {
		t.Fatalf("a misconfigured slot: %+v", p)
	}
}

// slotWorld is a logical poller "orders" with {P}_CDC_MAX_RETAINED 1 MiB whose probe answers
// what probe points to, on a store and a fake clock at now.
func slotWorld() (now time.Time, clk *clock.Fake, st store.Store, probe *pollerstatus.Probe, cfg pollerstatus.Config) {
	now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clk = clock.NewFake(now)
	probe = &pollerstatus.Probe{}
	cfg = pollerstatus.Config{App: "test", Now: clk.Now,
		Registered: []pollerstatus.Registered{{Name: "orders", Schedule: "*/10 * * * * *", LivenessInterval: time.Minute, MaxRetained: 1 << 20}},
		Probe:      func(context.Context, string, *state.Doc) pollerstatus.Probe { return *probe },
	}
	return now, clk, memstore.New(clk), probe, cfg
}

// TestSlotHealth: a slot that keeps more WAL than {P}_CDC_MAX_RETAINED is lagging; one that
// grows while nothing reads it is failing; measured only at the last tick, it is judged from
// that. The JSON row and the page show the slot and the ops the ticks delivered.
func TestSlotHealth(t *testing.T) {
	now, clk, st, probe, cfg := slotWorld()
	doc := logicalDoc("0/16D3290")
	doc.AddHistory(state.Tick{At: state.At(now), Outcome: "committed", Rows: 5, RowsWaiting: 0, Ops: map[string]int{"insert": 3, "delete": 2}})
	doc.AddHistory(state.Tick{At: state.At(now), Outcome: "committed", Rows: 2, RowsWaiting: 0, Ops: map[string]int{"update": 2},
		RetainedBytes: bytesPtr(2 << 20)})
	putDoc(t, st, doc)
	clk.Advance(time.Second)
	slot := pgcdc.SlotState{Name: "pt_orders", Exists: true, Type: "logical", Plugin: "pgoutput", Here: true, ConfirmedFlush: "0/16D3290"}
	read := func(step, want string, reason ...string) pollerstatus.Row {
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

	slot.RetainedBytes = bytesPtr(512 << 10)
	probed := func() []driver.Detail { return []driver.Detail{{Key: "slot", Value: slot}} }
	*probe = pollerstatus.Probe{OK: true, RowsWaiting: 0, LagSeconds: ptr(0), Details: probed()}
	r := read("within the limit", pollerstatus.HealthOK)
	if len(r.Details) != 1 || r.Details[0].Key != "slot" {
		t.Fatalf("slot: %+v", r.Details)
	}
	if r.HistoryOps["insert"] != 3 || r.HistoryOps["delete"] != 2 || r.HistoryOps["update"] != 2 {
		t.Errorf("history ops: %v", r.HistoryOps)
	}
	j, _ := json.Marshal(r)
	for _, w := range []string{`"history_ops":{"delete":2,"insert":3,"update":2}`, `"slot":{"name":"pt_orders"`, `"retained_bytes":524288`, `"from":"probe","max_retained_bytes":1048576}`, `"ops":{"update":2}`} {
		if !strings.Contains(string(j), w) {
			t.Errorf("the JSON row lacks %s: %s", w, j)
		}
	}

	slot.RetainedBytes = bytesPtr(2 << 20) // as much as at the last tick: not growing
	probe.Details = probed()
	read("past the limit", pollerstatus.HealthLagging, "pt_orders keeps 2.0 MiB of WAL, more than ORDERS_CDC_MAX_RETAINED (1.0 MiB)")
	slot.RetainedBytes = bytesPtr(3 << 20)
	probe.Details = probed()
	read("past the limit and growing", pollerstatus.HealthFailing, "grows while nothing reads it", "pollerctl cdc disable orders --yes")
	slot.Active = true
	probe.Details = probed()
	read("past the limit, being read", pollerstatus.HealthLagging)

	*probe = pollerstatus.Probe{Skipped: "no settings", RowsWaiting: -1}
	r = read("no probe: the last tick's measure", pollerstatus.HealthLagging, "at the last tick that measured it")
	if j, _ := json.Marshal(r); len(r.Details) != 1 || !strings.Contains(string(j), `"from":"last tick"`) {
		t.Fatalf("slot: %s", j)
	}

	var b bytes.Buffer
	if err := pollerstatus.RenderPage(&b, pollerstatus.NewPage(pollerstatus.Report{App: "test", Pollers: []pollerstatus.Row{r}})); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`<td class="ops">3 insert · 2 update · 2 delete<div class="muted">newest: 2 update`, `<td class="slot bad">keeps 2.0 MiB of WAL (limit 1.0 MiB) · at the last tick</td>`} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("the page lacks %s", w)
		}
	}
}

// TestSlotAhead: a slot past the checkpoint is misconfigured, naming the reset; but a slot past
// a document read before it is judged with the document read again after it (a tick commits,
// then advances the slot), so a commit between the two reads is not a false alarm.
func TestSlotAhead(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	st := memstore.New(clk)
	slot := pgcdc.SlotState{Name: "pt_orders", Exists: true, Type: "logical", Plugin: "pgoutput", Here: true, ConfirmedFlush: "0/16D3290", RetainedBytes: bytesPtr(1)}
	stale := logicalDoc("0/16D0000+9")
	stale.AddHistory(state.Tick{At: state.At(clk.Now()), Outcome: "committed", RowsWaiting: 0})
	putDoc(t, st, stale)
	var afterProbe func()
	cfg := pollerstatus.Config{App: "test", Now: clk.Now, Registered: []pollerstatus.Registered{{Name: "orders", Schedule: "*/10 * * * * *"}},
		Probe: func(context.Context, string, *state.Doc) pollerstatus.Probe {
			if afterProbe != nil {
				afterProbe()
			}
			return pollerstatus.Probe{OK: true, RowsWaiting: 0, LagSeconds: ptr(0), Details: []driver.Detail{{Key: "slot", Value: slot}}}
		}}
	r := pollerstatus.Read(ctx, st, cfg, "orders")
	if r.Health != pollerstatus.HealthMisconfigured || !strings.Contains(r.HealthReason, "is at 0/16D3290, past the checkpoint 0/16D0000+9") ||
		!strings.Contains(r.HealthReason, "pollerctl reset orders --to-beginning --yes") || r.Probe.OK || len(r.Details) != 1 || len(r.Probe.Details) != 1 {
		t.Fatalf("slot ahead: %s (%s), probe %+v", r.Health, r.HealthReason, r.Probe)
	}
	// A tick commits at the slot's position (and advances it) between the document's read and the
	// slot's: not ahead.
	afterProbe = func() {
		d := logicalDoc("0/16D3290")
		d.AddHistory(state.Tick{At: state.At(clk.Now()), Outcome: "committed", RowsWaiting: 0})
		data, err := state.Encode(d)
		if err != nil {
			t.Fatal(err)
		}
		b, err := st.Get(ctx, blobpath.State("test", "orders"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(ctx, blobpath.State("test", "orders"), data, store.IfMatch(b.ETag)); err != nil {
			t.Fatal(err)
		}
	}
	if r := pollerstatus.Read(ctx, st, cfg, "orders"); r.Health != pollerstatus.HealthOK || !r.Probe.OK {
		t.Fatalf("a commit between the reads: %s (%s)", r.Health, r.HealthReason)
	}
}
