package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// TestStatusAfterFailingTicks: the stored cursor stops fitting the source (a key "abc" for the
// BIGINT id, as a mistaken reset would leave it), so every tick fails with 500 before it takes the
// lease and writes nothing to the state document. Before, `pollerctl status`, its --json and the
// status page all said "ok", "attempts none", exit 0. Now all three say misconfigured and quote
// the value, and pollerctl exits 3.
func TestStatusAfterFailingTicks(t *testing.T) {
	w := newWorld(t)
	w.insert(20)
	p := start(t, w.env())
	if r := p.tick(); r.status != 200 || r.outcome() != "committed" {
		t.Fatalf("first tick: %d %s", r.status, r.raw)
	}
	d, b := w.doc()
	d.Checkpoint.Cursor.Tiebreaker["id"] = json.RawMessage(`"abc"`)
	data, err := state.Encode(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.Put(context.Background(), w.blobName(), data, store.IfMatch(b.ETag)); err != nil {
		t.Fatal(err)
	}
	before, _ := w.doc()
	for i := range 3 {
		if r := p.tick(); r.status != 500 || !strings.Contains(r.raw, `\"abc\"`) {
			t.Fatalf("tick %d with the bad cursor: %d %s", i, r.status, r.raw)
		}
	}
	if after, _ := w.doc(); after.WriteID != before.WriteID {
		t.Fatal("a tick that failed before the lease wrote the state document")
	}

	// pollerctl status --json: exit 3, the row's health and reason.
	cmd := exec.Command(pollerctl(t), "status", "--json", "orders")
	cmd.Env = w.env()
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("pollerctl status --json: %v (want exit 3)\n%s", err, out)
	}
	var rows []pollerstatus.Row
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("pollerctl status --json: %v\n%s", err, out)
	}
	// The build may have other pollers (pollerctl new): the orders row is the one to check.
	orders := func(rows []pollerstatus.Row) pollerstatus.Row {
		t.Helper()
		for _, r := range rows {
			if r.Poller == "orders" {
				return r
			}
		}
		t.Fatalf("no orders row in %+v", rows)
		return pollerstatus.Row{}
	}
	checkRow := func(what string, r pollerstatus.Row) {
		t.Helper()
		if r.Health != pollerstatus.HealthMisconfigured || !strings.Contains(r.HealthReason, `"abc"`) || !r.LastTick.Failed() ||
			r.Probe == nil || r.Probe.OK || !r.Probe.Misconfigured {
			t.Errorf("%s: health %q (%s), last tick %+v, probe %+v", what, r.Health, r.HealthReason, r.LastTick, r.Probe)
		}
	}
	checkRow("pollerctl status --json", orders(rows))

	// The table says it too, in capitals, with the reason under it.
	cmd = exec.Command(pollerctl(t), "status", "orders")
	cmd.Env = w.env()
	out, _ = cmd.Output()
	if !strings.Contains(string(out), "MISCONFIGURED") || !strings.Contains(string(out), `"abc"`) || cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("pollerctl status: exit %d\n%s", cmd.ProcessState.ExitCode(), out)
	}

	// The status function of the handler that ran the ticks.
	resp, err := http.Get(p.url("/api/status"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rep struct {
		Pollers []pollerstatus.Row `json:"pollers"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("GET /api/status: %v\n%s", err, raw)
	}
	checkRow("the status function", orders(rep.Pollers))
	// One rule for the last tick: the status function (even of the handler that ran the ticks)
	// and pollerctl show the same one, read from the state container.
	if got, want := orders(rep.Pollers).LastTick, orders(rows).LastTick; got.From != want.From || got.Outcome != want.Outcome || got.Error != want.Error {
		t.Errorf("the status function's last tick %+v, pollerctl's %+v", got, want)
	}
}
