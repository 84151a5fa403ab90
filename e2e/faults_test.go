package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/faultpoint"
	"github.com/pseudotrigger/pseudotrigger/internal/faultproxy"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
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

// buildFaultBinary builds the handler with -tags faultpoints, once.
func buildFaultBinary(t *testing.T) string {
	return buildOnce(t, "handler-faultpoints", "-tags", "faultpoints", "../cmd/handler")
}

// scenario is one row of the matrix; setup arms its fault in a fresh run.
type scenario struct {
	name  string
	setup func(r *run, rng *rand.Rand)
}

func matrix() []scenario {
	s := []scenario{{name: "no fault", setup: func(*run, *rand.Rand) {}}}
	for _, p := range faultpoint.Points {
		s = append(s, scenario{name: "kill at " + string(p), setup: func(r *run, rng *rand.Rand) {
			n := 1 + rng.IntN(3)
			r.ctl.killAt(p, n)
			r.note = fmt.Sprintf("(hit %d)", n)
		}})
	}
	for _, kind := range faultproxy.WriteKinds {
		for _, f := range faultproxy.Faults {
			s = append(s, scenario{name: string(f) + " on " + string(kind), setup: func(r *run, rng *rand.Rand) {
				rule := faultproxy.Rule{Kind: kind, Fault: f, Skip: rng.IntN(2), Times: 1 + rng.IntN(4)}
				switch kind {
				case faultproxy.Commit: // commits that are not releases: several batches a tick
					r.checkpointEvery, r.batch = "0s", 3+rng.IntN(10)
				case faultproxy.Heartbeat: // heartbeats: a few batches take longer than the interval
					r.sink.slowFor(1+rng.IntN(3), 5, 1300*time.Millisecond)
					r.budget = 3 * time.Second
				}
				if f == faultproxy.Delay {
					rule.Delay = time.Duration(100+rng.IntN(1400)) * time.Millisecond
				}
				r.proxy.Add(rule)
				r.note = rule.String()
			}})
		}
	}
	s = append(s,
		scenario{name: "slow handler past the TTL", setup: func(r *run, rng *rand.Rand) {
			// Heartbeats keep the lease: no takeover, no duplicate.
			r.sink.stallNth(2+rng.IntN(3), r.ttl+2*time.Second)
			r.budget = 10 * time.Second
		}},
		scenario{name: "slow handler, storage unreachable", setup: func(r *run, rng *rand.Rand) {
			// The holder's heartbeats vanish while its handler is stalled: its lease ends by its
			// trust window, its handler is cancelled, and another process takes over.
			r.sink.stallNth(2+rng.IntN(3), 3*r.ttl)
			r.sink.onStall = func() {
				r.proxy.Add(faultproxy.Rule{Kind: faultproxy.Heartbeat, Fault: faultproxy.Blackhole, Delay: r.ttl, Times: 3})
			}
			r.budget = 10 * time.Second
		}},
		scenario{name: "process frozen past the TTL", setup: func(r *run, rng *rand.Rand) {
			// SIGSTOP, as a VM or GC pause: no heartbeat either. Another process takes over; the
			// frozen one wakes up past its trust window and must not commit.
			p := []faultpoint.Point{faultpoint.AfterFetch, faultpoint.InHandle, faultpoint.BeforeCommit}[rng.IntN(3)]
			n := 1 + rng.IntN(3)
			r.ctl.freezeAt(p, n, r.ttl+3*time.Second)
			r.note = fmt.Sprintf("(at %s, hit %d)", p, n)
		}},
		scenario{name: "clock skew ±10m, kill", setup: func(r *run, rng *rand.Rand) {
			r.offsets = []string{"10m", "-10m"}
			p, n := faultpoint.Points[rng.IntN(len(faultpoint.Points))], 1+rng.IntN(3)
			r.ctl.killAt(p, n)
			r.note = fmt.Sprintf("(kill at %s, hit %d)", p, n)
		}},
	)
	return s
}

// result is what one run measured.
type result struct {
	rows, versions, deliveries, duplicates, lost, regressions, stale, unexplained, overlaps, staleRejected, faults, fenced int
}

type tally struct {
	runs int
	result
}

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

// fields lists a tally's counters, for VERIFY_TALLY.
func (tl *tally) fields() []*int {
	r := &tl.result
	return []*int{&tl.runs, &r.rows, &r.versions, &r.deliveries, &r.duplicates, &r.lost, &r.regressions, &r.stale, &r.unexplained,
		&r.overlaps, &r.staleRejected, &r.faults, &r.fenced}
}

// accumulate adds the tallies kept in the file VERIFY_TALLY names (by earlier runs of the test,
// as scripts/verify.sh --long makes them, each against a fresh Azurite) and saves the sum there.
func accumulate(t *testing.T, tallies map[string]*tally) map[string]*tally {
	f := os.Getenv("VERIFY_TALLY")
	if f == "" {
		return tallies
	}
	saved := map[string][]int{}
	if data, err := os.ReadFile(f); err == nil {
		if err := json.Unmarshal(data, &saved); err != nil {
			t.Errorf("VERIFY_TALLY %s: %v", f, err)
		}
	}
	sum := map[string]*tally{}
	for name, counts := range saved {
		tl := &tally{}
		for i, p := range tl.fields() {
			if i < len(counts) {
				*p = counts[i]
			}
		}
		sum[name] = tl
	}
	for name, tl := range tallies {
		if sum[name] == nil {
			sum[name] = &tally{}
		}
		dst := sum[name].fields()
		for i, p := range tl.fields() {
			*dst[i] += *p
		}
	}
	out := map[string][]int{}
	for name, tl := range sum {
		for _, p := range tl.fields() {
			out[name] = append(out[name], *p)
		}
	}
	data, _ := json.Marshal(out)
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Errorf("VERIFY_TALLY: %v", err)
	}
	return sum
}

func report(t *testing.T, scenarios []scenario, tallies map[string]*tally) {
	tallies = accumulate(t, tallies)
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-36s %5s %7s %8s %4s %6s %10s %6s %5s %8s %6s\n", "scenario", "runs", "rows", "versions", "lost", "dupes", "unexplained", "faults", "stale", "rejected", "overlap")
	var all tally
	for _, sc := range scenarios {
		tl := tallies[sc.name]
		if tl == nil {
			continue
		}
		fmt.Fprintf(&sb, "%-36s %5d %7d %8d %4d %6d %10d %6d %5d %8d %6d\n", sc.name, tl.runs, tl.rows, tl.versions, tl.lost, tl.duplicates,
			tl.unexplained, tl.faults, tl.stale+tl.regressions+tl.fenced, tl.staleRejected, tl.overlaps)
		all.runs += tl.runs
		all.rows += tl.rows
		all.versions += tl.versions
		all.lost += tl.lost
		all.duplicates += tl.duplicates
		all.unexplained += tl.unexplained
		all.faults += tl.faults
		all.stale += tl.stale + tl.regressions + tl.fenced
		all.staleRejected += tl.staleRejected
		all.overlaps += tl.overlaps
	}
	fmt.Fprintf(&sb, "%-36s %5d %7d %8d %4d %6d %10d %6d %5d %8d %6d\n", "all", all.runs, all.rows, all.versions, all.lost, all.duplicates,
		all.unexplained, all.faults, all.stale, all.staleRejected, all.overlaps)
	sb.WriteString("rows: rows written; versions: row versions committed (inserts and updates); lost: committed versions never\n" +
		"delivered; dupes: deliveries of a version already delivered; unexplained: dupes whose first batch its holder\n" +
		"committed; faults: faults that fired; stale: what a stale holder got through (commits landed with an old token,\n" +
		"checkpoint regressions, batches at the webhook older than one seen); rejected: ticks whose stale writes were\n" +
		"refused (by the service's ETag check or the holder's trust window); overlap: batches at the webhook while\n" +
		"another holder's batch was live.\n")
	t.Logf("fault matrix:\n%s", sb.String())
	if f := os.Getenv("VERIFY_REPORT"); f != "" {
		if err := os.WriteFile(f, []byte(sb.String()), 0o644); err != nil {
			t.Errorf("VERIFY_REPORT: %v", err)
		}
	}
}

// run is one scenario's world.
type run struct {
	t       *testing.T
	bin     string
	app     string
	dsn     string
	db      *sql.DB
	azurite string
	proxy   *faultproxy.Proxy
	cs      string // the connection string through the proxy
	direct  *blobstore.Store
	ctl     *controller
	sink    *sink
	ttl     time.Duration
	offsets []string // per process slot: PSEUDOTRIGGER_CLOCK_OFFSET
	note    string

	batch           int
	checkpointEvery string
	budget          time.Duration

	staleRejected atomic.Int64

	slotMu sync.Mutex
	slots  map[int]string
}

func (r *run) setSlot(slot int, status string) {
	r.slotMu.Lock()
	defer r.slotMu.Unlock()
	if r.slots == nil {
		r.slots = map[int]string{}
	}
	r.slots[slot] = status
}

func (r *run) slotStatus() []string {
	r.slotMu.Lock()
	defer r.slotMu.Unlock()
	var out []string
	for _, s := range r.slots {
		out = append(out, s)
	}
	return out
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
	t.Logf("seed %d: %s %s; batch %d, checkpoint interval %s", seed, sc.name, r.note, r.batch, r.checkpointEvery)
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

const faultpointEnv = "PSEUDOTRIGGER_FAULTPOINTS"

func (r *run) openDB() {
	t := r.t
	r.dsn, r.db = pgSchema(t, "fm_")
	// updated_at is taken by the database when the row is written, as an application would.
	if _, err := r.db.Exec(`CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL,
		updated_at TIMESTAMPTZ(6) NOT NULL DEFAULT clock_timestamp()); CREATE INDEX ON orders (updated_at, id)`); err != nil {
		t.Fatal(err)
	}
}

// write inserts new orders (amount 1) and updates existing ones (amount + 1, a new version),
// one short transaction each, for d.
func (r *run) write(seed uint64, d time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 7))
	var next int64
	end := time.Now().Add(d)
	pace := time.NewTicker(3 * time.Millisecond) // the workload's rate, not a wait for anything
	defer pace.Stop()
	for time.Now().Before(end) {
		<-pace.C
		var err error
		if next < 10 || rng.IntN(3) > 0 {
			n := 1 + rng.IntN(5)
			var sb strings.Builder
			sb.WriteString("INSERT INTO orders (id, customer, amount) VALUES ")
			for i := range n {
				next++
				if i > 0 {
					sb.WriteString(", ")
				}
				fmt.Fprintf(&sb, "(%d, 'customer %d', 1)", next, next)
			}
			_, err = r.db.Exec(sb.String())
		} else {
			_, err = r.db.Exec("UPDATE orders SET amount = amount + 1, updated_at = clock_timestamp() WHERE id = $1", 1+rng.Int64N(next))
		}
		if err != nil {
			r.t.Errorf("writer: %v", err)
			return
		}
	}
}

// truth is every committed row version: id -> amount (its version).
func (r *run) truth() map[int64]int64 {
	rows, err := r.db.Query("SELECT id, amount::bigint FROM orders")
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	m := map[int64]int64{}
	for rows.Next() {
		var id, v int64
		if err := rows.Scan(&id, &v); err != nil {
			r.t.Fatal(err)
		}
		m[id] = v
	}
	if err := rows.Err(); err != nil {
		r.t.Fatal(err)
	}
	return m
}

// tickLoop is one process slot, as the Functions host runs a timer: a tick every 30 ms; a
// process that died (killed at a fault point) is started again.
func (r *run) tickLoop(slot int, env []string, stop <-chan struct{}) {
	var p *proc
	pace := time.NewTicker(30 * time.Millisecond) // the timer's schedule
	defer pace.Stop()
	for {
		select {
		case <-stop:
			return
		case <-pace.C:
		}
		if p == nil {
			p = startWith(r.t, r.bin, env)
		}
		r.setSlot(slot, fmt.Sprintf("pid %d in a tick since %s", p.cmd.Process.Pid, time.Now().Format("15:04:05.000")))
		rep := p.tick()
		r.setSlot(slot, fmt.Sprintf("pid %d last tick %d %.200s", p.cmd.Process.Pid, rep.status, rep.raw))
		if os.Getenv("VERIFY_DEBUG") != "" && (rep.status != 200 || rep.outcome() != "lease_held" && rep.outcome() != "idle") {
			r.t.Logf("tick %d: %s", rep.status, rep.raw)
		}
		switch {
		case rep.status == -1: // the process died under the request
			p.kill9()
			p = nil
		case rep.status == 500 && strings.Contains(rep.raw, "lease lost"):
			if os.Getenv("VERIFY_DEBUG") != "" {
				r.t.Logf("tick: %s", rep.raw)
			}
			r.staleRejected.Add(1) // a stale holder's write, refused by the service or its own trust window
		case rep.status != 200 && rep.status != 500:
			r.t.Errorf("tick answered %d: %s", rep.status, rep.raw)
		}
	}
}

// sample reads the blob straight from Azurite, continuously, and reports every move backwards.
func (r *run) sample(ctx context.Context) []string {
	var bad []string
	var last *cursorPos
	name := "state/" + r.app + "/orders.json"
	pace := time.NewTicker(20 * time.Millisecond) // a sample every 20 ms, not a busy loop on Azurite
	defer pace.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return bad
		case <-pace.C:
		}
		b, err := r.direct.Get(ctx, name)
		if err != nil {
			continue
		}
		d, err := state.Decode(name, "orders", b.Data)
		if err != nil {
			bad = append(bad, "undecodable state: "+err.Error())
			continue
		}
		pos := positionOf(d.Checkpoint.Cursor)
		if last != nil && pos.less(*last) {
			bad = append(bad, fmt.Sprintf("sampled checkpoint went from %v back to %v", *last, pos))
		}
		last = &pos
	}
	return bad
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

// controller answers the fault points of every process of a run.
type controller struct {
	srv *httptest.Server

	mu     sync.Mutex
	hits   map[faultpoint.Point]int
	events []string
	plan   []planned
}

type planned struct {
	point  faultpoint.Point
	nth    int
	action faultpoint.Action
	freeze time.Duration
	done   bool
}

func newController(t *testing.T) *controller {
	c := &controller{hits: map[faultpoint.Point]int{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		point, pid, _ := strings.Cut(string(b), " ")
		action, freeze := c.decide(faultpoint.Point(point))
		if n, err := strconv.Atoi(pid); err == nil && freeze > 0 {
			if err := syscall.Kill(n, syscall.SIGSTOP); err != nil {
				t.Errorf("SIGSTOP %d: %v", n, err)
			}
			<-time.After(freeze) // the freeze is the fault itself
			if err := syscall.Kill(n, syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT %d: %v", n, err)
			}
		}
		_, _ = io.WriteString(w, string(action))
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *controller) killAt(p faultpoint.Point, nth int) {
	c.plan = append(c.plan, planned{point: p, nth: nth, action: faultpoint.Kill})
}

// freezeAt stops the process (SIGSTOP) at the nth hit of p for d, then lets it go on.
func (c *controller) freezeAt(p faultpoint.Point, nth int, d time.Duration) {
	c.plan = append(c.plan, planned{point: p, nth: nth, action: faultpoint.Continue, freeze: d})
}

func (c *controller) decide(p faultpoint.Point) (faultpoint.Action, time.Duration) {
	// The returned duration is how long to freeze the process first.
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hits[p]++
	for i := range c.plan {
		pl := &c.plan[i]
		if !pl.done && pl.point == p && pl.nth == c.hits[p] {
			pl.done = true
			c.events = append(c.events, fmt.Sprintf("%s #%d: %s, frozen %v", p, pl.nth, pl.action, pl.freeze))
			return pl.action, pl.freeze
		}
	}
	return faultpoint.Continue, 0
}

func (c *controller) fired() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

func (c *controller) log() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

func (c *controller) hitCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.hits {
		n += v
	}
	return n
}

// sink is the webhook: it records every batch with its rows' versions, and counts batches that
// arrive while another holder's batch is still live (its caller still waiting).
type sink struct {
	srv *httptest.Server

	mu         sync.Mutex
	deliveries []sunk
	seen       map[[2]int64]int
	live       map[*sunk]context.Context
	overlaps   int
	maxToken   int64
	fenced     int // batches refused for carrying an older fencing token than one seen
	changed    chan struct{}
	stallAt    int
	stallFor   time.Duration
	onStall    func() // run when the stall begins
	stalls     int
	slowFrom   int // arrivals slowFrom.. slowFrom+slowN-1 take slow each
	slowN      int
	slow       time.Duration
	arrivals   int
}

type sunk struct {
	token int64
	rows  []sunkRow
	last  cursorPos
}

type sunkRow struct{ id, version int64 }

func newSink(t *testing.T) *sink {
	s := &sink{seen: map[[2]int64]int{}, live: map[*sunk]context.Context{}, changed: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct {
			FencingToken int64 `json:"fencing_token"`
			Rows         []struct {
				ID        int64  `json:"id"`
				Amount    any    `json:"amount"`
				UpdatedAt string `json:"updated_at"`
			} `json:"rows"`
		}
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			t.Errorf("webhook: bad body: %v", err)
			w.WriteHeader(400)
			return
		}
		d := &sunk{token: p.FencingToken}
		for _, row := range p.Rows {
			v, err := strconv.ParseFloat(fmt.Sprint(row.Amount), 64)
			if err != nil {
				t.Errorf("webhook: amount %v: %v", row.Amount, err)
			}
			d.rows = append(d.rows, sunkRow{row.ID, int64(v)})
			ts, err := time.Parse(time.RFC3339Nano, row.UpdatedAt)
			if err != nil {
				t.Errorf("webhook: updated_at %q: %v", row.UpdatedAt, err)
			}
			d.last = cursorPos{ts, row.ID}
		}
		s.mu.Lock()
		stale := d.token < s.maxToken
		s.maxToken = max(s.maxToken, d.token)
		if stale { // a fencing sink refuses a holder older than one it has seen
			s.fenced++
			s.mu.Unlock()
			w.WriteHeader(http.StatusConflict)
			return
		}
		s.mu.Unlock()
		s.arrive(d, r.Context())
		defer s.leave(d)
		s.mu.Lock()
		s.arrivals++
		stall := s.arrivals == s.stallAt
		if stall {
			s.stalls++
		}
		onStall := s.onStall
		slow := time.Duration(0)
		if s.arrivals >= s.slowFrom && s.arrivals < s.slowFrom+s.slowN {
			slow = s.slow
		}
		s.mu.Unlock()
		if slow > 0 { // a handler that takes a while: the lease is kept alive by heartbeats
			select {
			case <-r.Context().Done():
			case <-time.After(slow):
			}
		}
		if stall { // the handler hangs until its caller gives up (or the stall ends)
			if onStall != nil {
				onStall()
			}
			select {
			case <-r.Context().Done():
			case <-time.After(s.stallFor):
			}
		}
		s.record(d)
		w.WriteHeader(204)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) stallNth(n int, d time.Duration) { s.stallAt, s.stallFor = n, d }

func (s *sink) slowFor(from, n int, d time.Duration) { s.slowFrom, s.slowN, s.slow = from, n, d }

// arrive registers a batch; another live batch (its caller still waiting for it, after a grace
// for the cancellation of a caller that gave up to reach this server) is an overlap.
func (s *sink) arrive(d *sunk, ctx context.Context) {
	s.mu.Lock()
	others := make([]context.Context, 0, len(s.live))
	for _, c := range s.live {
		others = append(others, c)
	}
	s.live[d] = ctx
	s.mu.Unlock()
	for _, c := range others {
		select {
		case <-c.Done():
		case <-time.After(time.Second):
			s.mu.Lock()
			s.overlaps++
			s.mu.Unlock()
		}
	}
}

func (s *sink) stallCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stalls
}

func (s *sink) leave(d *sunk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, d)
}

func (s *sink) record(d *sunk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deliveries = append(s.deliveries, *d)
	for _, row := range d.rows {
		s.seen[[2]int64{row.id, row.version}]++
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *sink) count(id, version int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[[2]int64{id, version}]
}

// has reports whether every version in truth was delivered.
func (s *sink) has(truth map[int64]int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, v := range truth {
		if s.seen[[2]int64{id, v}] == 0 {
			return false
		}
	}
	return true
}

// waitChange returns when a batch is recorded, or after d.
func (s *sink) waitChange(d time.Duration) {
	s.mu.Lock()
	ch := s.changed
	s.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(d):
	}
}

// TestFaultPointsOnlyInTaggedBuilds: the production build never calls a fault point controller;
// the faultpoints build calls it at every point of a committed tick.
func TestFaultPointsOnlyInTaggedBuilds(t *testing.T) {
	bin := buildFaultBinary(t)
	w := newWorld(t)
	w.insert(30)
	ctl := newController(t)
	env := w.env("ORDERS_BATCH_SIZE=10", faultpointEnv+"="+ctl.srv.URL)
	prod := start(t, env)
	drain(t, prod, time.Minute)
	if n := ctl.hitCount(); n != 0 {
		t.Fatalf("the production build called the fault point controller %d times", n)
	}
	w.insert(30)
	tagged := startWith(t, bin, env)
	drain(t, tagged, time.Minute)
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	for _, p := range faultpoint.Points {
		if ctl.hits[p] == 0 {
			t.Errorf("the faultpoints build never reached %s (hits: %v)", p, ctl.hits)
		}
	}
}
