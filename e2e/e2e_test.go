package e2e

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/faultproxy"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// Test20000Rows: repeated ticks deliver every row at least once; the checkpoint ends on the last
// row; the state document decodes strictly (package state).
func Test20000Rows(t *testing.T) {
	w := newWorld(t)
	w.insert(20_000)
	p := start(t, w.env("ORDERS_BATCH_SIZE=1000"))
	drain(t, p, 2*time.Minute)
	distinct, _ := w.hook.delivered()
	if distinct != 20_000 {
		t.Fatalf("%d distinct rows delivered, want 20000", distinct)
	}
	d, _ := w.doc()
	if d == nil || d.Checkpoint.Cursor == nil || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "20000" {
		t.Fatalf("checkpoint %+v, want the last row (id 20000)", d)
	}
	var ts string
	if err := json.Unmarshal(d.Checkpoint.Cursor.Value, &ts); err != nil {
		t.Fatal(err)
	}
	if got, _ := time.Parse(time.RFC3339Nano, ts); !got.Equal(w.base.Add(20_000 * time.Microsecond)) {
		t.Fatalf("cursor value %s, want the last row's updated_at %v at full precision", ts, w.base.Add(20_000*time.Microsecond))
	}
	if d.Version != 1 || d.PollerName != "orders" || !strings.HasPrefix(d.SourceFingerprint, "sha256:") || !d.Lease.Released() ||
		d.Lease.FencingToken < 1 || d.Checkpoint.LastSuccessfulBatchID == "" || d.Checkpoint.UpdatedAt.IsZero() {
		t.Fatalf("state document: %+v", d)
	}
}

// TestThreeProcesses: three handlers tick concurrently while rows are inserted: never two
// batches at the webhook at once, no row lost.
func TestThreeProcesses(t *testing.T) {
	w := newWorld(t)
	// A short tick budget hands the lease on often, so the three really contend for it.
	env := w.env("ORDERS_BATCH_SIZE=50", "ORDERS_TICK_BUDGET=5ms")
	procs := []*proc{start(t, env), start(t, env), start(t, env)}
	var inserting atomic.Bool
	inserting.Store(true)
	var wg sync.WaitGroup
	outcomes := make([]map[string]int, len(procs))
	for i, p := range procs {
		outcomes[i] = map[string]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			idleAfterInsert := 0
			for idleAfterInsert < 3 {
				r := p.tick()
				if r.status != 200 {
					t.Errorf("process %d: %d %s", i, r.status, r.raw)
					return
				}
				outcomes[i][r.outcome()]++
				if !inserting.Load() && r.outcome() == "idle" {
					idleAfterInsert++
				}
			}
		}()
	}
	for range 40 {
		w.insert(100)
	}
	inserting.Store(false)
	wg.Wait()
	drain(t, procs[0], time.Minute)
	distinct, _ := w.hook.delivered()
	w.hook.mu.Lock()
	maxFlight := w.hook.maxFlight
	w.hook.mu.Unlock()
	if distinct != 4000 {
		t.Fatalf("%d distinct rows delivered, want 4000", distinct)
	}
	if maxFlight != 1 {
		t.Fatalf("%d batches were at the webhook at the same moment", maxFlight)
	}
	committing := 0
	for _, o := range outcomes {
		if o["committed"] > 0 {
			committing++
		}
	}
	t.Logf("outcomes per process: %v", outcomes)
	if committing < 2 {
		t.Fatalf("only %d of 3 processes ever won the lease: the test did not make them contend", committing)
	}
}

// TestKill9MidBatch: a handler killed with SIGKILL in the middle of a batch; after the lease's
// TTL another process resumes; no row lost; only the in-flight batch repeats.
func TestKill9MidBatch(t *testing.T) {
	w := newWorld(t)
	w.insert(500)
	env := w.env("ORDERS_BATCH_SIZE=100", "ORDERS_LEASE_TTL=4s", "ORDERS_HEARTBEAT_INTERVAL=1s", "ORDERS_CHECKPOINT_INTERVAL=0s")
	a := start(t, env)
	inBatch := make(chan delivery, 1)
	release := make(chan struct{})
	var n atomic.Int64
	w.hook.mu.Lock()
	w.hook.hold = func(d delivery) {
		if n.Add(1) == 3 { // the third batch stalls: two are committed before it
			inBatch <- d
			<-release
		}
	}
	w.hook.mu.Unlock()
	go a.tick()
	stalled := <-inBatch
	a.kill9()
	close(release)
	w.hook.mu.Lock()
	w.hook.hold = nil
	w.hook.mu.Unlock()

	d, _ := w.doc()
	if d == nil || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "200" {
		t.Fatalf("before the kill, two batches should be committed: %+v", d)
	}
	b := start(t, env)
	t0 := time.Now()
	sawHeld := false
	for {
		r := b.tick()
		if r.status != 200 {
			t.Fatalf("tick: %d %s", r.status, r.raw)
		}
		if r.outcome() == "lease_held" {
			sawHeld = true
			if time.Since(t0) > 30*time.Second {
				t.Fatal("the dead holder's lease never expired")
			}
			continue
		}
		break
	}
	if !sawHeld {
		t.Fatal("the new process took the lease at once: the dead holder's lease was not live")
	}
	drain(t, b, time.Minute)
	distinct, dups := w.hook.delivered()
	slices.Sort(dups)
	slices.Sort(stalled.IDs)
	if distinct != 500 {
		t.Fatalf("%d distinct rows delivered, want 500", distinct)
	}
	// The webhook recorded the stalled batch when it was let go (its caller was dead by then);
	// the batch came again from the new holder. Exactly its rows are duplicated, nothing else.
	if !slices.Equal(dups, stalled.IDs) {
		t.Fatalf("rows delivered twice: %v; want exactly the in-flight batch %v..%v", dups, stalled.IDs[0], stalled.IDs[len(stalled.IDs)-1])
	}
	w.hook.mu.Lock()
	defer w.hook.mu.Unlock()
	repeated := false
	for _, bd := range w.hook.batches {
		if bd.BatchID == stalled.BatchID {
			repeated = slices.Equal(bd.IDs, stalled.IDs) && bd.Token > stalled.Token
		}
	}
	if !repeated {
		t.Fatalf("the in-flight batch %s was not redelivered whole under a newer token", stalled.BatchID)
	}
}

// TestStalledHolderLosesLease: holder A's storage is cut while its webhook call is stalled; B
// takes the lease after the TTL and commits. A never commits after that: the checkpoint
// (sampled continuously) never moves backwards, and fencing tokens at the webhook never decrease.
func TestStalledHolderLosesLease(t *testing.T) {
	w := newWorld(t)
	w.insert(300)
	px, pxStorage, err := faultproxy.ForConnectionString(w.azurite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	base := []string{"ORDERS_BATCH_SIZE=100", "ORDERS_LEASE_TTL=4s", "ORDERS_HEARTBEAT_INTERVAL=1s", "ORDERS_CHECKPOINT_INTERVAL=0s"}
	envA := append(w.env(base...), "StateStorage="+pxStorage)
	a := start(t, envA)

	stop := make(chan struct{})
	regress := make(chan string, 1)
	go sampleCheckpoint(w, stop, regress)
	defer close(stop)

	inBatch := make(chan delivery, 1)
	unstall := make(chan struct{})
	var n atomic.Int64
	w.hook.mu.Lock()
	w.hook.hold = func(d delivery) {
		if n.Add(1) == 2 {
			inBatch <- d
			<-unstall
		}
	}
	w.hook.mu.Unlock()
	aDone := make(chan reply, 1)
	go func() { aDone <- a.tick() }()
	stalled := <-inBatch
	cutStorage(px) // A's heartbeats can no longer reach storage

	b := start(t, w.env(base...))
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := b.tick()
		if r.status != 200 {
			t.Fatalf("B: %d %s", r.status, r.raw)
		}
		if r.outcome() == "committed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B never got the lease")
		}
	}
	close(unstall) // A's stalled delivery may complete now
	ra := <-aDone
	if ra.status != 500 || !strings.Contains(ra.raw, "lease") {
		t.Fatalf("A's tick: %d %s, want a failure naming the lost lease", ra.status, ra.raw)
	}
	w.hook.mu.Lock()
	w.hook.hold = nil
	w.hook.mu.Unlock()
	drain(t, b, time.Minute)

	select {
	case msg := <-regress:
		t.Fatal(msg)
	default:
	}
	w.hook.mu.Lock()
	defer w.hook.mu.Unlock()
	if !slices.IsSorted(w.hook.tokens) {
		t.Fatalf("fencing tokens at the webhook went backwards: %v", w.hook.tokens)
	}
	for id := int64(1); id <= 300; id++ {
		if w.hook.seen[id] == 0 {
			t.Fatalf("row %d was lost", id)
		}
	}
	d, _ := w.doc()
	if d.Lease.FencingToken <= stalled.Token || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "300" {
		t.Fatalf("final state: token %d (A had %d), cursor %s", d.Lease.FencingToken, stalled.Token, d.Checkpoint.Cursor.Tiebreaker["id"])
	}
}

// sampleCheckpoint reads the blob continuously and reports a cursor that moved backwards.
func sampleCheckpoint(w *world, stop <-chan struct{}, regress chan<- string) {
	var lastTS time.Time
	var lastID int64
	for {
		select {
		case <-stop:
			return
		default:
		}
		b, err := w.st.Get(context.Background(), w.blobName())
		if err != nil {
			continue
		}
		d, err := state.Decode(w.blobName(), "orders", b.Data)
		if err != nil || d.Checkpoint.Cursor == nil {
			continue
		}
		var s string
		_ = json.Unmarshal(d.Checkpoint.Cursor.Value, &s)
		ts, _ := time.Parse(time.RFC3339Nano, s)
		var id int64
		_ = json.Unmarshal(d.Checkpoint.Cursor.Tiebreaker["id"], &id)
		if ts.Before(lastTS) || (ts.Equal(lastTS) && id < lastID) {
			select {
			case regress <- "the checkpoint moved backwards: " + s:
			default:
			}
			return
		}
		lastTS, lastID = ts, id
	}
}

// TestBadInput: each a clear error, the state blob byte-for-byte unchanged.
func TestBadInput(t *testing.T) {
	w := newWorld(t)
	w.insert(10)
	p := start(t, w.env())
	drain(t, p, time.Minute) // a real state blob exists now
	raw := func() store.Blob {
		b, err := w.st.Get(context.Background(), w.blobName())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	before := raw()

	check := func(name string, r reply, status int, mentions ...string) {
		t.Helper()
		if r.status != status {
			t.Errorf("%s: status %d, want %d: %s", name, r.status, status, r.raw)
		}
		for _, m := range mentions {
			if !strings.Contains(r.raw, m) {
				t.Errorf("%s: %s does not mention %q", name, r.raw, m)
			}
		}
		if after := raw(); string(after.Data) != string(before.Data) || after.ETag != before.ETag {
			t.Errorf("%s: the state blob changed", name)
		}
	}
	check("garbage body", p.post("/orders", "not json"), 400, "invocation JSON")
	check("JSON but not the host's", p.post("/orders", `{"hello": 1}`), 400, "Data")
	check("unknown poller", p.post("/invoices", hostBody), 404, "invoices")
	check("huge body", p.post("/orders", `{"Data":{"x":"`+strings.Repeat("a", 2<<20)+`"}}`), 413, "exceeds")

	missing := start(t, slices.DeleteFunc(w.env(), func(s string) bool { return strings.HasPrefix(s, "ORDERS_DB_CONNECTION=") }))
	check("missing setting", missing.tick(), 500, "ORDERS_DB_CONNECTION")
	badTTL := start(t, w.env("ORDERS_LEASE_TTL=soon"))
	check("bad setting", badTTL.tick(), 500, "ORDERS_LEASE_TTL")

	// Another table: another fingerprint.
	if _, err := w.db.Exec(`CREATE TABLE orders2 (LIKE orders INCLUDING ALL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Exec(`ALTER TABLE orders RENAME TO orders_old; ALTER TABLE orders2 RENAME TO orders; ALTER TABLE orders ADD COLUMN note TEXT`); err != nil {
		t.Fatal(err)
	}
	other := start(t, w.env("ORDERS_DB_CONNECTION="+strings.Replace(w.dsn, "127.0.0.1", "localhost", 1)))
	check("fingerprint mismatch", other.tick(), 500, "pollerctl reset orders")

	// A corrupt blob: refused, never overwritten.
	corrupt := []byte(`{"version": 1, "poller_name": "orders", "checkpoint": {`)
	if _, err := w.st.Put(context.Background(), w.blobName(), corrupt, store.IfMatch(before.ETag)); err != nil {
		t.Fatal(err)
	}
	before = raw()
	check("corrupt state blob", p.tick(), 500, w.blobName())
}

// cutStorage makes px reset every request from now on, of every kind, as a cut network would:
// nothing reaches storage through it any more.
func cutStorage(px *faultproxy.Proxy) {
	for _, k := range []faultproxy.Kind{faultproxy.Read, faultproxy.Acquire, faultproxy.Heartbeat, faultproxy.Commit, faultproxy.Release, faultproxy.Other} {
		px.Add(faultproxy.Rule{Kind: k, Fault: faultproxy.Reset, Times: math.MaxInt})
	}
}

// TestGracefulShutdown: SIGTERM while a batch is at the webhook: the batch finishes, is
// committed with the lease released, no further batch is taken, and the process exits 0.
func TestGracefulShutdown(t *testing.T) {
	w := newWorld(t)
	w.insert(300)
	p := start(t, w.env("ORDERS_BATCH_SIZE=100", "ORDERS_CHECKPOINT_INTERVAL=0s"))
	inBatch := make(chan delivery, 1)
	release := make(chan struct{})
	var n atomic.Int64
	w.hook.mu.Lock()
	w.hook.hold = func(d delivery) {
		if n.Add(1) == 2 {
			inBatch <- d
			<-release
		}
	}
	w.hook.mu.Unlock()
	tickDone := make(chan reply, 1)
	go func() { tickDone <- p.tick() }()
	<-inBatch
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	// Let the batch go once the process has begun draining (it logs so after it did).
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.out.String(), "stopping: finishing running ticks") {
		select {
		case err := <-exited:
			t.Fatalf("the process exited (%v) before its batch finished", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the process did not start draining within 10 s")
		}
		time.Sleep(5 * time.Millisecond) // polling its output with a deadline
	}
	close(release)
	r := <-tickDone
	if r.status != 200 || r.outcome() != "committed" {
		t.Fatalf("the draining tick answered %d %s", r.status, r.raw)
	}
	if err := <-exited; err != nil {
		t.Fatalf("exit: %v, want 0", err)
	}
	d, _ := w.doc()
	if !d.Lease.Released() || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "200" {
		t.Fatalf("after shutdown: released %v, cursor %s; want the two handled batches committed and the lease released",
			d.Lease.Released(), d.Checkpoint.Cursor.Tiebreaker["id"])
	}
	if distinct, _ := w.hook.delivered(); distinct != 200 {
		t.Fatalf("%d rows delivered, want 200 (no batch after the signal)", distinct)
	}
}
