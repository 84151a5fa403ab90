package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/faultproxy"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// The fault matrix runs the real handler binary, built with the faultpoints tag, as two
// processes ticking one poller against PostgreSQL and Azurite (through faultproxy), while writers
// insert and update rows. Each scenario injects one kind of fault; afterwards it checks:
//
//   - lost: every committed row version was delivered at least once;
//   - regressions: the checkpoint never moved backwards, neither in the log of writes that
//     landed (from the proxy) nor in a continuous sample of the blob read straight from Azurite;
//   - stale: no commit landed with a fencing token older than one that had landed before;
//   - unexplained duplicates: a row version delivered again only if the batch that first
//     delivered it was never committed by its own holder (it was in flight at a fault);
//   - overlaps: no batch arrived at the webhook while another holder's batch was still live.
//
// VERIFY_ITERATIONS (default 1) runs every scenario that many times with fresh random choices
// (VERIFY_SEED fixes them); VERIFY_REPORT names a file to write the summary table to.
//
// This file holds the matrix test, one scenario's run and the checks above (run.check); the
// scenarios are in faults_scenarios_test.go, the world a run drives in faults_run_test.go, the
// fault point controller in faults_crash_test.go, the webhook in faults_sink_test.go and the
// summary table in faults_report_test.go. scripts/verify.sh quotes this file's failure lines.

// TestFaultMatrix runs every scenario VERIFY_ITERATIONS times (default 1) and prints the table.
func TestFaultMatrix(t *testing.T) {
	bin := buildFaultBinary(t)
	iterations := 1
	if v := os.Getenv("VERIFY_ITERATIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("VERIFY_ITERATIONS=%q: want a positive integer", v)
		}
		iterations = n
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("VERIFY_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("VERIFY_SEED=%q: want an unsigned integer", v)
		}
		seed = n
	}
	t.Logf("VERIFY_SEED=%d, %d iteration(s) per scenario", seed, iterations)
	scenarios := matrix()
	var mu sync.Mutex
	tallies := map[string]*tally{}
	done := 0
	t.Cleanup(func() { report(t, scenarios, tallies) })
	for i, sc := range scenarios {
		for it := range iterations {
			runSeed := seed + uint64(i*100_000+it)
			t.Run(fmt.Sprintf("%s/%d", sc.name, it), func(t *testing.T) {
				t.Parallel()
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("to run it again: VERIFY_SEED=%d VERIFY_ITERATIONS=%d go test -run 'TestFaultMatrix/%s' ./e2e/", seed, iterations, t.Name()[len("TestFaultMatrix/"):])
					}
				})
				res := runScenario(t, bin, sc, runSeed)
				mu.Lock()
				defer mu.Unlock()
				tl := tallies[sc.name]
				if tl == nil {
					tl = &tally{}
					tallies[sc.name] = tl
				}
				tl.runs++
				done++
				t.Logf("progress: %d of %d runs done", done, len(scenarios)*iterations)
				tl.rows += res.rows
				tl.versions += res.versions
				tl.deliveries += res.deliveries
				tl.duplicates += res.duplicates
				tl.lost += res.lost
				tl.regressions += res.regressions
				tl.stale += res.stale
				tl.unexplained += res.unexplained
				tl.overlaps += res.overlaps
				tl.fenced += res.fenced
				tl.staleRejected += res.staleRejected
				tl.faults += res.faults
			})
		}
	}
}

func runScenario(t *testing.T, bin string, sc scenario, seed uint64) result {
	rng := rand.New(rand.NewPCG(seed, seed>>1|1))
	r := &run{t: t, bin: bin, app: testenv.Name("fm-"), ttl: 4 * time.Second, azurite: testenv.Azurite(t)}
	r.openDB()
	var err error
	r.proxy, r.cs, err = faultproxy.ForConnectionString(r.azurite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.proxy.Close() })
	if r.direct, err = blobstore.New(blobstore.Settings{Setting: "test", ConnectionString: r.azurite, Container: "db-state"}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // thousands of runs share one Azurite: leave nothing behind
		name := "state/" + r.app + "/orders.json"
		if b, err := r.direct.Get(context.Background(), name); err == nil {
			_ = r.direct.Delete(context.Background(), name, store.IfMatch(b.ETag))
		}
	})
	r.ctl = newController(t)
	r.sink = newSink(t)
	r.checkpointEvery = []string{"0s", "300ms"}[rng.IntN(2)]
	r.batch = 5 + rng.IntN(30)
	r.budget = 300 * time.Millisecond
	sc.setup(r, rng)
	t.Logf("seed %d: %s %s; batch %d, checkpoint interval %s, follow %v", seed, sc.name, r.note, r.batch, r.checkpointEvery, r.follow)
	env := ordersEnv(r.cs, r.app, r.dsn, r.sink.srv.URL,
		// Each write is one short statement: 2 s is far longer than any of them takes to commit.
		"ORDERS_SETTLE_LAG=2s",
		"ORDERS_BATCH_SIZE="+strconv.Itoa(r.batch),
		"ORDERS_LEASE_TTL="+r.ttl.String(),
		"ORDERS_HEARTBEAT_INTERVAL=1s",
		"ORDERS_CHECKPOINT_INTERVAL="+r.checkpointEvery,
		"ORDERS_TICK_BUDGET="+r.budget.String(),
		faultpointEnv+"="+r.ctl.srv.URL,
	)
	if r.follow > 0 {
		env = append(env, "ORDERS_FOLLOW="+r.follow.String(), "ORDERS_FOLLOW_INTERVAL=50ms")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sampled := make(chan []string, 1)
	go func() { sampled <- r.sample(ctx) }()

	// Writers insert and update for a while; the two process slots tick all along.
	var writing sync.WaitGroup
	writing.Add(1)
	go func() {
		defer writing.Done()
		r.write(rng.Uint64(), 1500*time.Millisecond)
	}()
	var ticking sync.WaitGroup
	stopTicks := make(chan struct{})
	for slot := range 2 {
		slotEnv := slices.Clone(env)
		if slot < len(r.offsets) {
			slotEnv = append(slotEnv, "PSEUDOTRIGGER_CLOCK_OFFSET="+r.offsets[slot])
		}
		ticking.Add(1)
		go func() {
			defer ticking.Done()
			r.tickLoop(slot, slotEnv, stopTicks)
		}()
	}
	writing.Wait()

	truth := r.truth()
	deadline := time.Now().Add(60 * time.Second)
	for !r.sink.has(truth) {
		if time.Now().After(deadline) {
			b, err := r.direct.Get(context.Background(), "state/"+r.app+"/orders.json")
			t.Errorf("not caught up 60 s after the writers stopped; the state blob: %s (%v); slots: %v", b.Data, err, r.slotStatus())
			break
		}
		r.sink.waitChange(500 * time.Millisecond)
	}
	close(stopTicks)
	ticking.Wait()
	cancel()
	regressions := <-sampled
	res := r.check(truth, regressions)
	switch {
	case sc.name == "no fault" && (res.duplicates > 0 || res.staleRejected > 0):
		t.Errorf("without a fault: %d duplicates and %d stale writes rejected, want none", res.duplicates, res.staleRejected)
	case sc.name != "no fault" && res.faults == 0:
		t.Errorf("the scenario's fault never fired (%s): the run tested nothing", r.note)
	}
	return res
}

// check compares what was delivered with the truth and the write log.
func (r *run) check(truth map[int64]int64, regressions []string) result {
	t := r.t
	res := result{rows: len(truth), regressions: len(regressions), faults: len(r.proxy.Events()) + r.ctl.fired() + r.sink.stallCount(), staleRejected: int(r.staleRejected.Load())}
	for _, v := range truth {
		res.versions += int(v)
	}
	for _, s := range regressions {
		t.Error(s)
	}
	// Lost: a committed version never delivered. Versions overwritten before the poller read
	// them are not expected (a table holds only its latest version); the latest always is.
	var lost []string
	for id, v := range truth {
		if r.sink.count(id, v) == 0 {
			lost = append(lost, fmt.Sprintf("%d@%d", id, v))
		}
	}
	res.lost = len(lost)
	if len(lost) > 0 {
		slices.Sort(lost)
		t.Errorf("%d committed row versions never delivered: %v", len(lost), lost[:min(10, len(lost))])
	}

	// The writes that landed, in order: checkpoints only move forward; commits carry the newest token.
	writes := r.proxy.Writes()
	var maxToken int64
	var last *cursorPos
	committedBy := map[int64]cursorPos{} // token -> furthest checkpoint its holder committed
	for _, w := range writes {
		d := w.Doc
		pos := positionOf(d.Checkpoint.Cursor)
		if d.Lease.FencingToken < maxToken {
			res.stale++
			t.Errorf("a %s landed with fencing token %d after token %d had landed", w.Kind, d.Lease.FencingToken, maxToken)
		}
		maxToken = max(maxToken, d.Lease.FencingToken)
		if last != nil && pos.less(*last) {
			res.regressions++
			t.Errorf("the checkpoint went back from %v to %v in a %s (token %d)", *last, pos, w.Kind, d.Lease.FencingToken)
		}
		last = &pos
		if w.Kind != faultproxy.Acquire {
			committedBy[d.Lease.FencingToken] = pos
		}
	}

	// Duplicates: each must come from a batch its holder never committed.
	r.sink.mu.Lock()
	defer r.sink.mu.Unlock()
	res.deliveries = len(r.sink.deliveries)
	first := map[[2]int64]int{} // version -> index of its first delivery
	for i, d := range r.sink.deliveries {
		for _, row := range d.rows {
			k := [2]int64{row.id, row.version}
			j, seen := first[k]
			if !seen {
				first[k] = i
				continue
			}
			res.duplicates++
			prev := r.sink.deliveries[j]
			if c, ok := committedBy[prev.token]; ok && !c.less(prev.last) {
				res.unexplained++
				if res.unexplained <= 5 {
					t.Errorf("row %d@%d delivered again (token %d) although its first batch (token %d, up to %v) was committed by its holder (to %v)",
						row.id, row.version, d.token, prev.token, prev.last, c)
				}
			}
		}
	}
	res.overlaps = r.sink.overlaps
	if res.overlaps > 0 {
		t.Errorf("%d batches arrived at the webhook while another holder's batch was live", res.overlaps)
	}
	// Every fault here strikes before a batch is handed over, where the holder checks its trust
	// window: no stale holder may reach the webhook at all.
	res.fenced = r.sink.fenced
	if res.fenced > 0 {
		t.Errorf("%d batches reached the webhook from a holder older than one it had seen", res.fenced)
	}
	if t.Failed() {
		t.Logf("faults fired: proxy %v, fault points %v", r.proxy.Events(), r.ctl.log())
	}
	return res
}

// cursorPos is a timestamp+pk cursor as a comparable position.
type cursorPos struct {
	ts time.Time
	id int64
}

func (a cursorPos) less(b cursorPos) bool {
	return a.ts.Before(b.ts) || a.ts.Equal(b.ts) && a.id < b.id
}

func (a cursorPos) String() string {
	return a.ts.Format("15:04:05.000000") + "/" + strconv.FormatInt(a.id, 10)
}

func positionOf(c *state.Cursor) cursorPos {
	if c == nil {
		return cursorPos{}
	}
	var s string
	_ = json.Unmarshal(c.Value, &s)
	ts, _ := time.Parse(time.RFC3339Nano, s)
	id, _ := strconv.ParseInt(string(c.Tiebreaker["id"]), 10, 64)
	return cursorPos{ts, id}
}
