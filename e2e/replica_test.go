package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/faultpoint"
	"github.com/pseudotrigger/pseudotrigger/internal/replicacheck"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// The logical cursor's replica tests at the process level: the handler binary of
// e2e/replicahandler (the product's handler serving one logical poller, built with -tags
// faultpoints) runs as processes that the fault point controller kills (SIGKILL) or freezes
// (SIGSTOP) at named points, while writers change the table. The checks are those of
// internal/tick's TestLogicalReplica (package replicacheck): the batches chain from checkpoint
// to checkpoint, the changes rebuild the table exactly, they are the witness slot's stream, and
// a sampler (slot first, then the blob) never sees the slot ahead of the checkpoint.

func buildReplicaBinary(t *testing.T) string {
	return buildOnce(t, "replicahandler-faultpoints", "-tags", "faultpoints", "./replicahandler")
}

// replicaRun is one test's world.
type replicaRun struct {
	t       *testing.T
	bin     string
	dsn     string
	db      *sql.DB
	setup   *replicacheck.Setup
	st      *blobstore.Store
	azurite string
	app     string
	ctl     *controller
	rec     *replicacheck.Recorder
	hook    *httptest.Server
	extra   []string // settings for every process
	ticks   *replicacheck.Ticks
	start   pgcdc.Position
	// snapshot: the poller began with a snapshot of the table (REPLICA_INITIAL=snapshot).
	snapshot bool
	// skip is the writer whose changes the poller skips (REPLICA_SKIP_WRITER), "" for none.
	skip string

	mu       sync.Mutex
	started  map[int]int // per process slot in a tick: the faults fired when the tick began
	kills    []string    // what the slot and the blob held right after each kill
	behind   int         // kills after which the slot was behind the checkpoint
	rejected int         // ticks that ended with the lease lost (a stale holder refused)
	busy     int         // ticks whose fetch found the slot busy (driver.ErrBusy)
	spurious []string    // ticks failed with ErrSlotAhead while the blob had reached the slot
	failed   []string    // any other failed tick
	// dropWanted, when set, drops ticks once they follow (as the host drops an invocation) until
	// drops reaches it; each dropped tick must end at once.
	dropWanted int
	drops      int
	// spans is when the first and the last batch of each fencing token arrived.
	spans map[int64][2]time.Time
	// held counts the streams ticks held for the next tick (countHeld).
	held int
}

func newReplicaRun(t *testing.T, batch int, extra ...string) *replicaRun {
	return newReplicaRunWith(t, batch, replicacheck.Options{}, extra...)
}

// newReplicaRunWith is newReplicaRun with the table made with opts (its Filter is the poller's
// too: REPLICA_FILTER).
func newReplicaRunWith(t *testing.T, batch int, opts replicacheck.Options, extra ...string) *replicaRun {
	t.Helper()
	r := &replicaRun{t: t, bin: buildReplicaBinary(t), azurite: testenv.Azurite(t), app: testenv.Name("rep-"),
		rec: &replicacheck.Recorder{}, ticks: &replicacheck.Ticks{}}
	// A server of the test's own (issue 42): the replica checks compare the checkpoint with the
	// witness slot's stream, and an idle tick's keep-up mark, written when the slot is
	// DefaultKeepUp behind the WAL's end, which every other test writing to a shared server
	// moves, puts the checkpoint past that stream's last change.
	r.dsn, r.db = pgSchemaOn(t, testenv.PostgresOwn(t), "rep_")
	s, cleanup, err := replicacheck.CreateWith(context.Background(), r.db, testenv.Name("rep"), opts)
	t.Cleanup(cleanup)
	if err != nil {
		t.Fatal(err)
	}
	r.setup = s
	if r.start, err = s.SlotLSN(context.Background(), s.Slot); err != nil {
		t.Fatal(err)
	}
	if r.st, err = blobstore.New(blobstore.Settings{Setting: "test", ConnectionString: r.azurite, Container: "db-state"}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		name := blobpath.State(r.app, "replica")
		if b, err := r.st.Get(context.Background(), name); err == nil {
			_ = r.st.Delete(context.Background(), name, store.IfMatch(b.ETag))
		}
	})
	r.ctl = newController(t)
	r.hook = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var b replicacheck.Batch
		if err := json.NewDecoder(req.Body).Decode(&b); err != nil {
			t.Errorf("webhook: %v", err)
			w.WriteHeader(400)
			return
		}
		for i := range b.Changes {
			b.Changes[i].FromJSON()
		}
		r.rec.Add(b)
		now := time.Now()
		r.mu.Lock()
		if r.spans == nil {
			r.spans = map[int64][2]time.Time{}
		}
		sp, ok := r.spans[b.Token]
		if !ok {
			sp[0] = now
		}
		sp[1] = now
		r.spans[b.Token] = sp
		r.mu.Unlock()
		w.WriteHeader(204)
	}))
	t.Cleanup(r.hook.Close)
	r.extra = append([]string{"REPLICA_BATCH_SIZE=" + strconv.Itoa(batch)}, extra...)
	if opts.Filter != "" {
		r.extra = append(r.extra, "REPLICA_FILTER="+opts.Filter)
	}
	if r.setup.Second != "" {
		r.extra = append(r.extra, "REPLICA_SECOND="+r.setup.Second)
	}
	return r
}

func (r *replicaRun) env() []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"StateStorage=" + r.azurite,
		"POLLER_APP_NAME=" + r.app,
		"REPLICA_TABLE=" + r.setup.Table,
		"REPLICA_WEBHOOK_URL=" + r.hook.URL,
		"REPLICA_DB_DRIVER=postgres",
		"REPLICA_DB_CONNECTION=" + r.dsn,
		"REPLICA_CDC_SLOT=" + r.setup.Slot,
		"REPLICA_CDC_PUBLICATION=" + r.setup.Publication,
		"REPLICA_LEASE_TTL=4s",
		"REPLICA_HEARTBEAT_INTERVAL=1s",
		"REPLICA_CHECKPOINT_INTERVAL=0s",
		"REPLICA_TICK_BUDGET=100ms",
		faultpointEnv + "=" + r.ctl.srv.URL,
	}, r.extra...)
}

func (r *replicaRun) checkpoint(ctx context.Context) (*state.Cursor, error) {
	d, err := r.doc(ctx)
	if d == nil || err != nil {
		return nil, err
	}
	return d.Checkpoint.Cursor, nil
}

// doc is the poller's state document; nil before the first tick wrote one.
func (r *replicaRun) doc(ctx context.Context) (*state.Doc, error) {
	name := blobpath.State(r.app, "replica")
	b, err := r.st.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return state.Decode(name, "replica", b.Data)
}

func (r *replicaRun) tick(p *proc) reply { return p.post("/replica", hostBody) }

// afterKill records where the slot and the checkpoint are right after a process died at a
// fault point (slot first, then the blob, as the sampler reads them).
func (r *replicaRun) afterKill(pid int) {
	ctx := context.Background()
	slot, serr := r.setup.SlotLSN(ctx, r.setup.Slot)
	cp, cerr := r.checkpoint(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if serr != nil || cerr != nil || cp == nil {
		r.kills = append(r.kills, fmt.Sprintf("pid %d killed: slot %s (%v), checkpoint %v (%v)", pid, slot, serr, cp, cerr))
		return
	}
	pos, _ := pgcdc.CursorPosition(cp)
	if slot.Before(pos) {
		r.behind++
	}
	r.kills = append(r.kills, fmt.Sprintf("pid %d killed: slot %s, checkpoint %s", pid, slot, pos))
}

// classify sorts a tick's reply.
func (r *replicaRun) classify(pid int, rep reply) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case rep.status == 200:
	case rep.status == 500 && strings.Contains(rep.raw, "lease lost"):
		r.rejected++
	case rep.status == 500 && strings.Contains(rep.raw, driver.ErrBusy.Error()):
		// The holder's fetch met another process's peek (or a stale holder's advance) of the
		// slot five times in a row, which a loaded machine makes possible: the tick failed
		// before handing anything over, and the next one goes on from the checkpoint.
		r.busy++
	case rep.status == 500 && strings.Contains(rep.raw, "the replication slot is past the checkpoint"):
		// Sorted apart: a pre-lease peek comparing the slot with a checkpoint read before another
		// process committed and advanced it failed like this (internal/tick's
		// TestLogicalReplicaStalePeek) until the tick learned to tell a lost race.
		r.spurious = append(r.spurious, fmt.Sprintf("pid %d: %.300s", pid, rep.raw))
	default:
		r.failed = append(r.failed, fmt.Sprintf("pid %d: %d %.500s", pid, rep.status, rep.raw))
	}
}

// faultsDone reports whether the planned faults have all fired and played out: a fault fires in
// a tick, so once every tick in flight began after the last one fired, no process is frozen.
func (r *replicaRun) faultsDone(planned int) bool {
	fired := r.ctl.fired()
	if fired < planned {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.started {
		if f < planned {
			return false
		}
	}
	return true
}

func (r *replicaRun) begin(slot int) {
	fired := r.ctl.fired()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started == nil {
		r.started = map[int]int{}
	}
	r.started[slot] = fired
}

func (r *replicaRun) end(slot int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.started, slot)
}

// loop is process slot n, ticking as the host's timer would (every 10 ms) and starting a
// process again when one died at a fault point.
func (r *replicaRun) loop(n int, stop <-chan struct{}) {
	var p *proc
	pace := time.NewTicker(10 * time.Millisecond) // the timer's schedule
	defer pace.Stop()
	for {
		select {
		case <-stop:
			if p != nil {
				r.countHeld(p)
			}
			return
		case <-pace.C:
		}
		if p == nil {
			p = startWith(r.t, r.bin, r.env())
		}
		r.begin(n)
		rep := r.tickOrDrop(p)
		r.end(n)
		switch rep.status {
		case -1: // killed at a fault point
			r.countHeld(p)
			pid := p.cmd.Process.Pid
			p.kill9()
			r.afterKill(pid)
			p = nil
		case -2: // dropped: the process lives on
		default:
			r.classify(p.cmd.Process.Pid, rep)
		}
		r.ticks.Add()
	}
}

// countHeld counts the streams p's ticks held for the next tick (a log line each), once, when
// the slot is done with p.
func (r *replicaRun) countHeld(p *proc) {
	n := strings.Count(p.out.String(), `"msg":"the source's stream is held for the next tick"`)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held += n
}

// tickOrDrop is a tick of p, dropped once it follows (the state document says so: a commit while
// following, under p's lease) while drops of following ticks are wanted. Not after a fixed time: a tick that
// has not caught up by then (a loaded machine) would be dropped before it follows, and so would
// every tick after it, each leaving the backlog it could not read. A dropped tick must end at
// once: its log line (written after its last commit and its release) within 2 s, half the
// lease's TTL, and without an error; it counts as a drop when it followed with the lease.
func (r *replicaRun) tickOrDrop(p *proc) reply {
	r.mu.Lock()
	drop := r.dropWanted > 0 && r.drops < r.dropWanted
	r.mu.Unlock()
	if !drop {
		return r.tick(p)
	}
	lines := func() []string { return tickLines(p.out.String()) }
	before := len(lines())
	owner := procOwner(p.out.String())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // polls the state document with the tick's own deadline: the tick's end
		for ctx.Err() == nil {
			// This process's tick follows: it holds the lease (another's ticks are not dropped).
			if d, err := r.doc(ctx); err == nil && d != nil && d.Follow != nil && owner != "" && d.Lease.OwnerID == owner && len(lines()) == before {
				cancel()
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond): // polling
			}
		}
	}()
	rep := p.postCtx(ctx, "/replica", hostBody)
	if rep.status != -2 {
		return rep
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(lines()) == before {
		if time.Now().After(deadline) {
			r.t.Errorf("a dropped tick did not end within 2s (its lease must be released at once)")
			return rep
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	l := lines()[before]
	if strings.Contains(l, `"error"`) {
		r.t.Errorf("the tick dropped at %s ended with: %s", time.Now().UTC().Format(time.RFC3339Nano), l)
	}
	// Counted when it followed with the lease (a tick that watched without it, or caught up
	// for long, was dropped too, and had to end as well).
	if strings.Contains(l, `"outcome":"committed"`) && strings.Contains(l, `"follow_since"`) {
		r.mu.Lock()
		r.drops++
		r.mu.Unlock()
	}
	return rep
}

// procOwner is the lease owner a handler's output names in its "state store" line ("" before it).
func procOwner(out string) string {
	for l := range strings.Lines(out) {
		var line struct{ Msg, Owner string }
		if strings.Contains(l, `"msg":"state store"`) && json.Unmarshal([]byte(l), &line) == nil {
			return line.Owner
		}
	}
	return ""
}

// tickLines are the tick log lines in a handler's output.
func tickLines(out string) []string {
	var lines []string
	for l := range strings.Lines(out) {
		if strings.Contains(l, `"msg":"tick"`) {
			lines = append(lines, l)
		}
	}
	return lines
}

// drain ticks a fresh process until a tick is idle.
func (r *replicaRun) drain(ctx context.Context) {
	p := startWith(r.t, r.bin, r.env())
	defer p.kill9()
	for {
		rep := r.tick(p)
		if rep.status == 200 && rep.outcome() == "idle" {
			return
		}
		if rep.status == -1 {
			r.t.Fatalf("the draining process died: %s", rep.raw)
		}
		r.classify(p.cmd.Process.Pid, rep)
		if ctx.Err() != nil {
			r.t.Fatalf("not idle in time: %d %s", rep.status, rep.raw)
		}
	}
}

func (r *replicaRun) config() source.Config {
	cfg := source.Config{Poller: "replica", Driver: postgres.Name, DSN: r.dsn, Definition: sourcedef.Definition{
		Table: sourcedef.Table{Name: r.setup.Table}, Columns: replicacheck.Columns, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindLogical}, Slot: r.setup.Slot, Publication: r.setup.Publication,
		Filter: r.setup.Options.Filter, SkipWriter: r.skip,
	}}
	if r.setup.Second != "" {
		cfg.Definition.More = []sourcedef.TableDef{{Table: sourcedef.Table{Name: r.setup.Second}, Columns: replicacheck.Columns, PK: []string{"id"}, Filter: r.setup.Options.Filter}}
	}
	return cfg
}

// replicaScenario runs writers (wl, may be nil) and `slots` process slots until the writers are
// done and every planned fault fired, flushes the WAL, drains with a fresh process and checks
// everything; it returns the rebuilt stream, the batches and the repeats.
func (r *replicaRun) scenario(slots int, wl *replicacheck.Workload, planned int) ([]replicacheck.Change, []replicacheck.Batch, int) {
	t := r.t
	begin := time.Now()
	deadline, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sampleCtx, stopSampling := context.WithCancel(deadline)
	sampler := &replicacheck.Sampler{Setup: r.setup, Checkpoint: r.checkpoint, Start: r.start}
	sampled := make(chan struct{})
	go func() { defer close(sampled); sampler.Run(sampleCtx, 2*time.Millisecond) }()

	stop := make(chan struct{})
	var loops sync.WaitGroup
	for n := range slots {
		loops.Add(1)
		go func() { defer loops.Done(); r.loop(n, stop) }()
	}
	if wl != nil {
		wl.Setup = r.setup
		wl.Hold = func(ctx context.Context) error { return r.ticks.Await(ctx, 2*slots+1, nil) }
		wl.More = func() bool { return !r.faultsDone(planned) } // changes flow until the faults played out
		t.Logf("workload seed %d", wl.Seed)
		if err := wl.Run(deadline); err != nil {
			close(stop)
			loops.Wait()
			t.Fatal(err)
		}
	}
	if err := r.setup.Flush(deadline); err != nil {
		t.Fatal(err)
	}
	err := r.ticks.Await(deadline, 1<<30, func() bool { return r.faultsDone(planned) })
	close(stop)
	loops.Wait()
	if err != nil {
		t.Fatalf("the planned faults did not all fire (%v): %v", r.ctl.log(), err)
	}
	r.drain(deadline)
	stopSampling()
	<-sampled
	sampler.Sample(context.Background())

	batches := r.rec.Batches()
	cp, err := r.checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stream, repeats, problems := r.setup.Verify(context.Background(), r.config(), batches, cp)
	samples, sampleErrs, violations, lastErr := sampler.Result()
	stats := ""
	if wl != nil {
		stats = wl.Stats() + "; "
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Logf("%s%d batches (%s), %d changes, %d delivered again; faults %v; after the kills: %v; %d stale holders refused; %d ticks found the slot busy; %d samples; %v",
		stats, len(batches), replicacheck.Owners(batches), len(stream), repeats, r.ctl.log(), r.kills, r.rejected, r.busy, samples, time.Since(begin))
	for _, p := range problems {
		if !r.snapshot || !replicacheck.SnapshotProblem(p) {
			t.Error(p)
		}
	}
	reads, readProblems := replicacheck.CheckReads(batches)
	for _, p := range readProblems {
		t.Error(p)
	}
	if reads > 0 {
		t.Logf("%d reads", reads)
	}
	for _, v := range violations {
		t.Errorf("the slot was ahead of the checkpoint: %v", v)
	}
	if samples < 20 || sampleErrs > samples/10 {
		t.Errorf("%d samples, %d failed (last: %v)", samples, sampleErrs, lastErr)
	}
	for _, f := range r.failed {
		t.Errorf("a tick failed: %s", f)
	}
	if len(r.spurious) > 0 {
		t.Errorf("%d ticks failed with a spurious ErrSlotAhead (see internal/tick's TestLogicalReplicaStalePeek), e.g. %s", len(r.spurious), r.spurious[0])
	}
	return stream, batches, repeats
}

// TestLogicalReplicaKillBeforeSlotAdvance: processes are killed (SIGKILL) twice between a
// commit of the checkpoint and the slot's advance to it, while writers change the table. After
// each kill the slot is behind the checkpoint, and the next process skips what the checkpoint
// says is done: nothing is delivered again (no batch failed, every commit landed), nothing is
// lost, and the replica is exact.
func TestLogicalReplicaKillBeforeSlotAdvance(t *testing.T) {
	r := newReplicaRun(t, 7)
	r.ctl.killAt(faultpoint.BeforeSlotAdvance, 3)
	r.ctl.killAt(faultpoint.BeforeSlotAdvance, 12)
	wl := &replicacheck.Workload{Writers: 3, Txns: 30, Pace: 30 * time.Millisecond, Seed: uint64(time.Now().UnixNano())}
	_, _, repeats := r.scenario(1, wl, 2)
	if r.behind != 2 {
		t.Errorf("after %d of the 2 kills the slot was behind the checkpoint: %v", r.behind, r.kills)
	}
	if repeats != 0 {
		t.Errorf("%d changes delivered again, although every commit landed", repeats)
	}
}

// TestLogicalReplicaImagesKill: TestLogicalReplicaKillBeforeSlotAdvance's kills, and one before a
// commit, on a REPLICA IDENTITY FULL table whose publication filters out the keys ending in 3 or
// 8 (the poller's filter), with a writer of the application's own whose replication origin the
// poller skips: no filtered or skipped change arrives, the replica equals the table's other
// rows, and every before image, changed list and transaction mark is right
// (replicacheck.CheckImages, in Verify).
func TestLogicalReplicaImagesKill(t *testing.T) {
	runImagesKill(t, replicacheck.Options{Full: true, Filter: replicacheck.KeyFilter})
}

// TestLogicalReplicaTablesKill is TestLogicalReplicaImagesKill with two tables in one poller (one
// slot, one publication; the even keys in the second table, written in the same transactions as
// the odd ones): besides its checks, every change names its key's table, and the replica built
// from both tables' changes in one stream equals both tables (replicacheck.Setup.Verify).
func TestLogicalReplicaTablesKill(t *testing.T) {
	runImagesKill(t, replicacheck.Options{Full: true, Filter: replicacheck.KeyFilter, Second: true})
}

func runImagesKill(t *testing.T, opts replicacheck.Options) {
	r := newReplicaRunWith(t, 7, opts)
	r.skip = r.setup.Table + "-app"
	r.extra = append(r.extra, "REPLICA_SKIP_WRITER="+r.skip)
	r.ctl.killAt(faultpoint.BeforeSlotAdvance, 3)
	r.ctl.killAt(faultpoint.BeforeCommit, 8)
	wl := &replicacheck.Workload{Writers: 3, Txns: 30, Pace: 30 * time.Millisecond, Seed: uint64(time.Now().UnixNano()), Origin: r.skip}
	r.setup.Options.Hidden = func(id int64) bool { return replicacheck.FilteredOut(id) || wl.OwnKey(id) }
	r.scenario(1, wl, 2) // its Verify checks every before image (CheckImages)
	hidden := 0
	all, err := r.setup.Rows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seconds := 0
	for id := range all {
		if r.setup.Options.Hidden(id) {
			hidden++
		}
		if r.setup.TableOf(id) == r.setup.Second {
			seconds++
		}
	}
	if opts.Second && (seconds == 0 || seconds == len(all)) {
		t.Errorf("the run did not write both tables: %d of %d rows in the second", seconds, len(all))
	}
	if hidden == 0 || wl.Own == 0 || len(r.kills) != 2 {
		t.Errorf("the run did not exercise everything: %d rows hidden, %d transactions of the application's own, kills %v", hidden, wl.Own, r.kills)
	}
}

// TestLogicalReplicaFrozenHolder: a process is frozen (SIGSTOP) past its lease's TTL in the
// handler's call, and another, later, just before it advances the slot, while a second process
// ticks on: the second takes over once the lease expired; the frozen one, woken, commits
// nothing (its lease is lost) and never moves the slot past the newest checkpoint; the replica
// is exact.
func TestLogicalReplicaFrozenHolder(t *testing.T) {
	r := newReplicaRun(t, 15)
	freeze := 4*time.Second + 3*time.Second // the TTL, the expiry margin and the clock's resolution
	r.ctl.freezeAt(faultpoint.InHandle, 2, freeze)
	r.ctl.freezeAt(faultpoint.BeforeSlotAdvance, 10, freeze)
	// The writers go on until both freezes are over (Workload.More): the other process has changes
	// to deliver, commit and advance the slot past the frozen one's checkpoint.
	wl := &replicacheck.Workload{Writers: 2, Txns: 30, Pace: 50 * time.Millisecond, Seed: uint64(time.Now().UnixNano())}
	_, batches, _ := r.scenario(2, wl, 2)
	if r.rejected == 0 {
		t.Errorf("no stale holder was refused: %v", r.ctl.log())
	}
	owners := map[string]bool{}
	for _, b := range batches {
		owners[b.Owner] = true
	}
	if len(owners) < 2 {
		t.Errorf("only %v delivered: no takeover", owners)
	}
}

// TestLogicalReplicaBigTransaction: one transaction of 10,000 inserts, delivered in batches of
// 100 by processes of which one is killed before a commit (its batch comes again) and one
// between a commit and the slot's advance: every change is delivered, in order (ids 1 to 10,000,
// each at the position of its rank in the transaction), and each restart resumes inside the
// transaction.
func TestLogicalReplicaBigTransaction(t *testing.T) {
	r := newReplicaRun(t, 100)
	tx, err := r.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SET LOCAL synchronous_commit = on",
		"INSERT INTO " + r.setup.Table + " SELECT g, 'n' || g, CASE WHEN g % 3 = 0 THEN NULL ELSE 'x' || g END FROM generate_series(1, 10000) g"} {
		if _, err := tx.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r.ctl.killAt(faultpoint.BeforeCommit, 15)
	r.ctl.killAt(faultpoint.BeforeSlotAdvance, 40)
	stream, batches, repeats := r.scenario(1, nil, 2)
	if len(stream) != 10000 {
		t.Fatalf("%d changes, want 10000", len(stream))
	}
	lsn := strings.Split(stream[0].Pos, "+")[0]
	for i, c := range stream {
		want := fmt.Sprintf("%s+%d", lsn, i+1)
		if i == len(stream)-1 {
			want = c.Pos // the last one ends the transaction: its commit's end
		}
		if c.ID != int64(i+1) || c.Op != row.OpInsert || c.Pos != want {
			t.Fatalf("change %d: %v, want insert %d at %s", i, c, i+1, want)
		}
	}
	if strings.Contains(stream[len(stream)-1].Pos, "+") {
		t.Errorf("the last change's position %s is inside the transaction", stream[len(stream)-1].Pos)
	}
	if repeats == 0 {
		t.Error("the batch handled before the kill before its commit was not delivered again")
	}
	// Each process after the first starts inside the transaction.
	resumed := 0
	for i := 1; i < len(batches); i++ {
		if batches[i].Owner != batches[i-1].Owner {
			if !strings.Contains(batches[i].From, "+") {
				t.Errorf("%s's first batch starts at %q, not inside the transaction", batches[i].Owner, batches[i].From)
			}
			resumed++
		}
	}
	if resumed < 2 {
		t.Errorf("%d restarts resumed delivery, want 2 (%s)", resumed, replicacheck.Owners(batches))
	}
}

// TestLogicalReplicaSnapshotKill: a logical poller started with "initial": "snapshot" on a table
// of REPLICA_SNAPSHOT_ROWS (100,000) rows its slot never saw, while writers insert, update,
// delete and move keys of those rows: processes are killed (SIGKILL) three times with a chunk
// read and its reads not yet handed over, and once before a commit. Each restart resumes the
// snapshot after its last committed chunk; the deliveries applied as they arrived rebuild the
// table, no read brings back an older or a deleted row, every row present at the start was read
// or changed since, and the snapshot ended.
func TestLogicalReplicaSnapshotKill(t *testing.T) {
	rows := 100_000
	if n, err := strconv.Atoi(os.Getenv("REPLICA_SNAPSHOT_ROWS")); err == nil && n > 0 {
		rows = n
	}
	const writers = 4
	r := newReplicaRun(t, 500, "REPLICA_INITIAL=snapshot")
	r.snapshot = true
	ctx := context.Background()
	for n := range writers {
		base := (n + 1) * 1_000_000
		if _, err := r.db.Exec(fmt.Sprintf("INSERT INTO %s SELECT g, 'w%d seed', CASE WHEN g %% 3 = 0 THEN NULL ELSE 'n' || g END FROM generate_series(%d, %d) g",
			r.setup.Table, n, base+1, base+rows/writers)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.setup.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, slot := range []string{r.setup.Slot, r.setup.Witness} { // the rows were there before the poller
		if _, err := r.db.Exec("SELECT pg_replication_slot_advance($1, pg_current_wal_flush_lsn())", slot); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if r.start, err = r.setup.SlotLSN(ctx, r.setup.Slot); err != nil {
		t.Fatal(err)
	}
	atStart, err := replicacheck.Table(ctx, r.db, r.setup.Table)
	if err != nil || len(atStart) != rows/writers*writers {
		t.Fatalf("%d rows at the start, %v", len(atStart), err)
	}
	r.ctl.killAt(faultpoint.InBackfill, 3)
	r.ctl.killAt(faultpoint.InBackfill, 25)
	r.ctl.killAt(faultpoint.BeforeCommit, 40)
	r.ctl.killAt(faultpoint.InBackfill, 60)
	wl := &replicacheck.Workload{Writers: writers, Txns: 40, Pace: 30 * time.Millisecond, Seed: uint64(time.Now().UnixNano()), Existing: true}
	_, batches, _ := r.scenario(1, wl, 4)
	since := map[int64]bool{}
	for _, b := range batches {
		for _, c := range b.Changes {
			since[c.ID] = true
		}
	}
	missing := 0
	for id := range atStart {
		if !since[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d rows present at the start were neither read nor changed since", missing)
	}
	b, err := r.st.Get(ctx, blobpath.State(r.app, "replica"))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := state.Decode("replica", "replica", b.Data); err != nil || d.Backfill != nil {
		t.Errorf("the snapshot did not end: %+v, %v", d, err)
	}
}

// TestLogicalReplicaFollow: follow mode under three runners. Writers change the table for about
// 30 s while three process slots tick every 10 ms with REPLICA_FOLLOW=5s: one tick holds the lease
// and follows for 5 s, the others find it held. REPLICA_SCHEDULE fires every 10 s, so a tick that
// ends as planned holds its stream for its process's next tick, and the others find the slot
// busy meanwhile. A process is killed (SIGKILL) twice while it
// follows (in the handler, mid-batch), and a following tick's invocation is dropped twice (as the
// host drops one): it ends at once, committed and released. The replica is exact, the changes
// come in commit order, batches chain from checkpoint to checkpoint (no two owners), and changes
// are delivered again only after the kills. Ticks delivered batches over 2 s or more under one
// fencing token: they followed.
func TestLogicalReplicaFollow(t *testing.T) {
	r := newReplicaRun(t, 20, "REPLICA_FOLLOW=5s", "REPLICA_TICK_BUDGET=6s", "REPLICA_FOLLOW_INTERVAL=50ms", "REPLICA_SCHEDULE=*/10 * * * * *")
	r.dropWanted = 2
	r.ctl.killAt(faultpoint.InHandle, 60)
	r.ctl.killAt(faultpoint.InHandle, 200)
	wl := &replicacheck.Workload{Writers: 3, Txns: 300, Pace: 100 * time.Millisecond, Seed: uint64(time.Now().UnixNano())}
	// The writers go on until two ticks were dropped while they followed (a drop needs a tick
	// that caught up and committed while following, which a loaded machine gives later), for
	// 90 s from the start at most.
	more := time.Now().Add(90 * time.Second)
	wl.More = func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.drops < r.dropWanted && time.Now().Before(more)
	}
	_, _, repeats := r.scenario(3, wl, 2)
	r.mu.Lock()
	drops := r.drops
	r.mu.Unlock()
	if drops < r.dropWanted { // more when two slots' ticks were dropped at once
		t.Errorf("%d following ticks dropped, want %d", drops, r.dropWanted)
	}
	r.mu.Lock()
	followed := 0
	for _, sp := range r.spans {
		if sp[1].Sub(sp[0]) >= 2*time.Second {
			followed++
		}
	}
	r.mu.Unlock()
	if followed < 2 {
		t.Errorf("%d ticks delivered over 2 s or more under one fencing token (%d tokens in all): the ticks did not follow", followed, len(r.spans))
	}
	r.mu.Lock()
	held := r.held
	r.mu.Unlock()
	if held == 0 {
		t.Error("no tick held its stream for the next one (the schedule fires within 10 s of every tick's end)")
	}
	t.Logf("%d changes delivered again (after the 2 kills); %d streams held for the next tick", repeats, held)
}
