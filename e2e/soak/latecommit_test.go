package soak

import (
	"database/sql"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// durationVar names the length of the writing phase (a Go duration): scripts run the soak longer
// with it.
const durationVar = "SOAK_DURATION"

// reportVar names a file the report is appended to.
const reportVar = "SOAK_REPORT"

// newWorkload is the default load, shortened by -short and set by SOAK_DURATION.
func newWorkload(t *testing.T) workload {
	t.Helper()
	w := workload{
		writing:   6 * time.Second,
		maxTxn:    time.Second,
		writers:   6,
		rollback:  0.15,
		update:    0.3,
		batchSize: 5,
		idlePause: 10 * time.Millisecond,
		settle:    time.Minute,
	}
	if testing.Short() {
		w.writing = 2 * time.Second
	}
	if v := strings.TrimSpace(os.Getenv(durationVar)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q is not a positive Go duration like 30s or 5m", durationVar, v)
		}
		w.writing = d
	}
	return w
}

// scenarios are the late-commit cases of docs/sources.md's cursor kinds on PostgreSQL. The lags are relative to
// the longest transaction a writer holds open on purpose (maxTxn): well above it (3x: commits
// also take time on a loaded machine, and the test checks the measured longest against the lag),
// and well below it (a tenth).
func scenarios(w workload) []scenario {
	above, below := 3*w.maxTxn, w.maxTxn/10
	return []scenario{
		{name: "xid", kind: state.KindXID, bound: boundXmin, updates: true, expect: missNothing},
		{name: "timestamp+pk_lag_above_txn", kind: state.KindTimestampPK, lag: above, bound: boundLag, updates: true, expect: missNothing},
		{name: "timestamp+pk_lag_below_txn", kind: state.KindTimestampPK, lag: below, bound: boundLag, updates: true, expect: missSomething},
		// The source bounds integer cursors by nothing, so a settle lag, however long, changes
		// nothing: a sequence value taken early and committed late falls behind the cursor.
		{name: "integer_lag_above_txn", kind: state.KindInteger, lag: above, bound: boundNone, expect: missSomething},
		{name: "integer_lag_below_txn", kind: state.KindInteger, lag: below, bound: boundNone, expect: reportOnly},
	}
}

// TestLateCommit runs every scenario at once (each in its own schema), reports them in one table
// and then checks each in a subtest. See the package documentation.
func TestLateCommit(t *testing.T) {
	dsn := testenv.Postgres(t)
	w := newWorkload(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatalf("opening %s: %v", redact.DSN(dsn), err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(t.Context()); err != nil {
		t.Fatalf("connecting to %s: %v", redact.DSN(dsn), err)
	}

	soak(t, postgres{conn: db, dsn: dsn}, w, scenarios(w))
}

// soak runs every scenario at once on d, reports them in one table and then checks each in a
// subtest.
func soak(t *testing.T, d database, w workload, scs []scenario) {
	results := make([]*result, len(scs))
	errs := make([]error, len(scs))
	var cleanupMu sync.Mutex
	cleanup := func(f func()) { cleanupMu.Lock(); defer cleanupMu.Unlock(); t.Cleanup(f) }
	started := time.Now()
	var wg sync.WaitGroup
	for i, s := range scs {
		seed := rand.Uint64()
		wg.Go(func() { results[i], errs[i] = s.run(t.Context(), d, w, seed, cleanup) })
	}
	wg.Wait()

	report := renderReport(d, w, scs, results, errs, time.Since(started))
	t.Log("\n" + report)
	if path := os.Getenv(reportVar); path != "" {
		if err := appendReport(path, report); err != nil {
			t.Errorf("%s: %v", reportVar, err)
		}
	}

	for i, s := range scs {
		t.Run(s.name, func(t *testing.T) {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			check(t, w, s, results[i])
		})
	}
}

// check asserts what the scenario claims, and what every scenario must hold.
func check(t *testing.T, w workload, s scenario, r *result) {
	t.Logf("seed %d: %d committed transactions, %d rolled back; %d committed writes held open more than %v; %d ticks, %d batches; %v",
		r.seed, r.txns, r.aborted, r.lateWrites, w.maxTxn/10, r.ticks, r.batches, r.elapsed.Round(time.Millisecond))
	if r.committed == 0 || r.delivered == 0 || r.lateWrites == 0 {
		t.Fatalf("the workload committed %d rows (%d of the writes late) and the poller delivered %d: nothing was soaked",
			r.committed, r.lateWrites, r.delivered)
	}
	// A row whose transaction rolled back is not in the table; delivering it would be reading
	// uncommitted data (or a bookkeeping error in this test).
	if len(r.phantoms) > 0 {
		t.Errorf("%d delivered row states never committed: %s", len(r.phantoms), strings.Join(first(r.phantoms, 10), ", "))
	}
	lag := s.effectiveLag()
	switch s.expect {
	case missNothing:
		if s.bound == boundOpenTrx && r.longestHold <= lag {
			t.Errorf("no write was committed more than the settle lag %v after its timestamp (the longest %v): the scenario no "+
				"longer shows the open-transaction bound covering what the lag does not", lag, r.longestHold)
		}
		if s.bound == boundLag && r.longestHold >= lag {
			t.Errorf("a write was committed %v after its timestamp, not less than the settle lag %v: the scenario no longer tests "+
				"a lag above the longest transaction (the machine is too slow for the workload; raise the lag)", r.longestHold, lag)
		}
		if len(r.missed) > 0 {
			t.Errorf("%s missed %d of %d committed rows: %s", s.kind, len(r.missed), r.committed, describe(r.missed, 10))
		}
	case missSomething:
		if len(r.missed) == 0 {
			t.Errorf("%s with a settle lag of %v missed nothing in %v of writing (%d transactions, the longest %v): the soak no "+
				"longer shows the late-commit hazard; lengthen it with %s or look for a change in the source's bound",
				s.kind, lag, w.writing, r.txns, r.longestTxn, durationVar)
		}
	}
	checkOpenTrx(t, s, r)
	// Every timestamp miss must be a late commit: its write committed more than the lag after
	// the statement that took the timestamp (the writer's measure is an upper bound of that).
	if s.kind == state.KindTimestampPK {
		for _, m := range r.missed {
			if m.held <= lag {
				t.Errorf("missed %s, committed only %v after its write, within the settle lag %v: a miss that a late commit does not explain",
					m, m.held, lag)
			}
		}
	}
}

// checkOpenTrx asserts what a source with an open-transaction bound (MySQL timestamp+pk) said
// of its last read: bounded by the open transactions when the scenario's role may read them, by
// the settle lag alone, for want of PROCESS, when it may not.
func checkOpenTrx(t *testing.T, s scenario, r *result) {
	t.Helper()
	switch {
	case s.bound == boundOpenTrx && !r.openTrxOK:
		t.Errorf("the source has no open-transaction bound (Source.OpenTrxBound ok=false) for a scenario that needs one")
	case s.bound == boundOpenTrx && !r.openTrx.Active:
		t.Errorf("the source's last read was not bounded by the open transactions: %s", r.openTrx)
	case s.bound == boundOpenTrx && r.openTrxActive < r.openTrxReads:
		t.Logf("%d of %d ticks read with the open-transaction bound; the others: by the settle lag alone", r.openTrxActive, r.openTrxReads)
	case s.bound != boundOpenTrx && r.openTrxOK && r.openTrxActive > 0:
		t.Errorf("%d of %d ticks read with the open-transaction bound, in a scenario whose role cannot read it: %s",
			r.openTrxActive, r.openTrxReads, r.openTrx)
	case s.bound != boundOpenTrx && r.openTrxOK && !strings.Contains(r.openTrx.Reason, "PROCESS"):
		t.Errorf("the source reads by the settle lag alone, and its reason does not name the PROCESS privilege: %q", r.openTrx.Reason)
	}
}

func first[T any](s []T, n int) []T { return s[:min(n, len(s))] }
