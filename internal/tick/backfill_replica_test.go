package tick_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/replicacheck"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
)

// writeBackfill puts b into the poller's state document, as pollerctl backfill would between
// ticks.
func writeBackfill(t testing.TB, st store.Store, app, poller string, b *state.Backfill) {
	t.Helper()
	d, etag := readDocTag(t, st, app, poller)
	d.Backfill = b
	data, err := state.Encode(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, blobpath.State(app, poller), data, store.IfMatch(etag)); err != nil {
		t.Fatal(err)
	}
}

// readDoc reads the poller's state document.
func readDoc(t testing.TB, st store.Store, app, poller string) *state.Doc {
	t.Helper()
	d, _ := readDocTag(t, st, app, poller)
	return d
}

// readDocTag reads the poller's state document and its ETag.
func readDocTag(t testing.TB, st store.Store, app, poller string) (*state.Doc, string) {
	t.Helper()
	name := blobpath.State(app, poller)
	got, err := st.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	d, err := state.Decode(name, poller, got.Data)
	if err != nil {
		t.Fatal(err)
	}
	return d, got.ETag
}

// TestLogicalBackfillReplica: a logical poller's backfill runs beside its live changes while
// writers insert, update, delete and move keys of the rows it reads, in concurrent transactions
// (some held open across ticks, some rolled back), and handler calls fail now and then. Two
// runners take turns. Each read equals the row the changes delivered before it left (none
// brings back an older or a deleted row: the watermark's check), the deliveries applied as they
// arrived rebuild the table, the stream is the witness slot's, and every row present when the
// backfill began was read or changed since.
func TestLogicalBackfillReplica(t *testing.T) { backfillReplica(t, false) }

// TestLogicalInitialSnapshotReplica: the same with a poller whose table holds rows its slot
// never saw ("initial": "snapshot"): its first tick begins the snapshot, and the deliveries
// rebuild the table, those rows included.
func TestLogicalInitialSnapshotReplica(t *testing.T) { backfillReplica(t, true) }

func backfillReplica(t *testing.T, snapshot bool) {
	const perWriter, writers = 1500, 4
	w := newReplicaWorld(t, 50)
	w.initial = snapshot
	for n := range writers {
		base := (n + 1) * 1_000_000
		if _, err := w.db.Exec(fmt.Sprintf("INSERT INTO %s SELECT g, 'w%d seed', CASE WHEN g %% 3 = 0 THEN NULL ELSE 'n' || g END FROM generate_series(%d, %d) g",
			w.setup.Table, n, base+1, base+perWriter)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.setup.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	deadline, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	a, b := w.runner("A"), w.runner("B")
	drain := func(r *tick.Runner, what string) {
		for n := 0; ; n++ {
			sum, err := r.Tick(ctx, "")
			if err == nil && sum.Outcome == tick.Idle && (sum.FencingToken > 0 || n > 0) && readDoc(t, w.st, w.app, replicaPoller).Backfill == nil {
				return
			}
			if deadline.Err() != nil {
				t.Fatalf("%s: not idle after %d ticks: %+v %v", what, n, sum, err)
			}
		}
	}
	if snapshot { // the rows are there before the poller: its slot moves past them
		for _, slot := range []string{w.setup.Slot, w.setup.Witness} {
			if _, err := w.db.Exec("SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())", slot); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		drain(a, "catch-up")
	}
	atStart, err := replicacheck.Table(ctx, w.db, w.setup.Table)
	if err != nil {
		t.Fatal(err)
	}
	delivered := w.rec.Len()
	if !snapshot {
		writeBackfill(t, w.st, w.app, replicaPoller, &state.Backfill{ID: "bf_rep", Kind: state.BackfillRequested, Chunk: 97, StartedAt: state.At(time.Now())})
	}
	w.fail.Store(13)

	ticks := &replicacheck.Ticks{}
	stop := make(chan struct{})
	var errMu sync.Mutex
	var tickErrs []string
	loops := tickLoops([]*tick.Runner{a, b}, 5*time.Millisecond, stop, ticks, func(i int, _ tick.Summary, err error) {
		if err != nil && !strings.Contains(err.Error(), "injected failure") && !strings.Contains(err.Error(), "being read by another") {
			errMu.Lock()
			tickErrs = append(tickErrs, fmt.Sprintf("%c: %v", 'A'+i, err))
			errMu.Unlock()
		}
	})
	wl := &replicacheck.Workload{Setup: w.setup, Writers: writers, Txns: 60, Pace: 15 * time.Millisecond, Seed: uint64(time.Now().UnixNano()), Existing: true,
		Hold: func(ctx context.Context) error { return ticks.Await(ctx, 4, nil) }}
	t.Logf("workload seed %d", wl.Seed)
	if err := wl.Run(deadline); err != nil {
		t.Fatal(err)
	}
	if err := w.setup.Flush(deadline); err != nil {
		t.Fatal(err)
	}
	close(stop)
	loops.Wait()
	w.fail.Store(0)
	drain(w.runner("D"), "drain")

	batches := w.rec.Batches()
	reads, problems := replicacheck.CheckReads(batches)
	for _, p := range problems {
		t.Error(p)
	}
	cp, err := w.checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream, repeats, problems := w.setup.Verify(ctx, w.settings().Config(w.poller("witness")), batches, cp)
	for _, p := range problems {
		if !snapshot || !replicacheck.SnapshotProblem(p) {
			t.Error(p)
		}
	}
	// Every row present when the backfill began was read, or changed (moved, deleted) since.
	since := map[int64]bool{}
	readBatches := 0
	for _, b := range batches[delivered:] {
		if b.Reads {
			readBatches++
		}
		for _, c := range b.Changes {
			since[c.ID] = true
		}
	}
	for id := range atStart {
		if !since[id] {
			t.Errorf("row %d, present when the backfill began, was neither read nor changed since", id)
			break
		}
	}
	if len(tickErrs) > 0 {
		t.Errorf("%d unexpected tick errors, e.g. %s", len(tickErrs), tickErrs[0])
	}
	t.Logf("%s; %d rows at the start, %d reads in %d batches, %d changes in the stream, %d delivered again; %d batches in all",
		wl.Stats(), len(atStart), reads, readBatches, len(stream), repeats, len(batches))
	if reads < len(atStart)/2 || wl.Moved == 0 || repeats == 0 {
		t.Errorf("the run did not exercise the backfill: %d reads of %d rows, %d key changes, %d repeats", reads, len(atStart), wl.Moved, repeats)
	}
}

// chunkHookSource runs after once each backfill chunk has been read (its watermark written),
// before the tick fetches the live changes after it.
type chunkHookSource struct {
	tick.Source
	src   *source.Source
	after func(c *source.Chunk)
}

func (s *chunkHookSource) ReadChunk(ctx context.Context, after map[string]json.RawMessage, where string, position *state.Cursor, limit int) (*source.Chunk, error) {
	c, err := s.src.ReadChunk(ctx, after, where, position, limit)
	if err == nil {
		s.after(c)
	}
	return c, err
}

func (s *chunkHookSource) Backfills() error { return s.src.Backfills() }

func (s *chunkHookSource) CountChunkRows(ctx context.Context, where string, limit int64) (int64, error) {
	return s.src.CountChunkRows(ctx, where, limit)
}

// TestLogicalBackfillDropsNewer: right after each chunk of a logical poller's backfill is read,
// the application updates one of its rows and deletes another; those changes reach the stream
// after the chunk's watermark, in the live batch the tick delivers before the chunk's reads, so
// the reads of those two rows are dropped (their snapshot is older), counted as left, and the
// rest are sent: no read brings back an older or a deleted row.
func TestLogicalBackfillDropsNewer(t *testing.T) {
	w := newReplicaWorld(t, 50)
	if _, err := w.db.Exec("INSERT INTO " + w.setup.Table + " SELECT g, 'seed', NULL FROM generate_series(1, 40) g"); err != nil {
		t.Fatal(err)
	}
	if err := w.setup.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	settings := w.settings()
	settings.TickBudget = time.Minute // no chunk read in vain: each one's reads go in the tick that read it
	r, err := tick.Open(ctx, tick.Config{Poller: w.poller("A"), Settings: settings, Store: w.st, App: w.app, Owner: "A"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if sum, err := r.Tick(ctx, ""); err != nil || sum.Rows != 40 {
		t.Fatalf("catch-up: %+v, %v", sum, err)
	}
	src, err := drivers.Open(ctx, settings.Config(w.poller("A")))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var changed []int64
	r.Source = &chunkHookSource{Source: r.Source, src: src, after: func(c *source.Chunk) {
		if len(c.Rows) < 3 {
			return
		}
		up, del := c.Rows[1].Get("id").(int64), c.Rows[2].Get("id").(int64)
		changed = append(changed, up, del)
		testenv.ExecFlushed(t, w.db, fmt.Sprintf("UPDATE %s SET name = 'changed after its chunk' WHERE id = %d", w.setup.Table, up),
			fmt.Sprintf("DELETE FROM %s WHERE id = %d", w.setup.Table, del))
	}}
	writeBackfill(t, w.st, w.app, replicaPoller, &state.Backfill{ID: "bf_drop", Kind: state.BackfillRequested, Chunk: 10, StartedAt: state.At(time.Now())})
	for n := 0; readDoc(t, w.st, w.app, replicaPoller).Backfill != nil; n++ {
		if _, err := r.Tick(ctx, ""); err != nil || n > 50 {
			t.Fatalf("tick %d: %v", n, err)
		}
	}
	batches := w.rec.Batches()
	reads, problems := replicacheck.CheckReads(batches)
	for _, p := range problems {
		t.Error(p)
	}
	read := map[int64]bool{}
	for _, b := range batches {
		for _, c := range b.Changes {
			if c.Op == "read" {
				read[c.ID] = true
			}
		}
	}
	for _, id := range changed {
		if read[id] {
			t.Errorf("row %d, changed after its chunk was read, was sent as a read", id)
		}
	}
	// Four chunks of 10 (and an empty one), two rows of each changed: 8 reads each.
	if len(changed) != 8 || reads != 32 {
		t.Errorf("%d rows changed after their chunks, %d reads; want 8 and 32", len(changed), reads)
	}
	table, err := replicacheck.Table(ctx, w.db, w.setup.Table)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range replicacheck.Diff(replicacheck.ApplyArrival(batches), table) {
		t.Error(d)
	}
}
