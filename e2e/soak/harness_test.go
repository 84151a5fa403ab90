package soak

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// workload is the shape of the writers' load, shared by every scenario.
type workload struct {
	writing   time.Duration // how long writers keep starting transactions
	maxTxn    time.Duration // the longest a writer holds a transaction open on purpose
	writers   int           // concurrent writers per scenario
	rollback  float64       // share of transactions rolled back
	update    float64       // share of statements that update an earlier row (scenarios with updates)
	batchSize int           // the poller's batch size: small, so it keeps reading at the head
	idlePause time.Duration // the poller's pause after an idle tick
	settle    time.Duration // how long, beyond the settle lag, the rows may take to come inside the bound
}

// scenario is one cursor kind with one settle lag, and what the soak must show for it.
type scenario struct {
	name    string
	kind    string        // state.KindXID, KindTimestampPK or KindInteger
	lag     time.Duration // the source's SettleLag (sourcedef.NoSettleLag: none)
	bound   bound         // what keeps the source's reads behind transactions still open
	updates bool          // writers also update rows they committed earlier
	expect  expectation
}

// bound is what the source's reads are kept behind, as the scenario sets it up. On MySQL it is
// the poller's role that decides between the two timestamp bounds: with the PROCESS privilege
// the source reads the server's open transactions, without it the settle lag is all it has.
type bound int

const (
	boundNone    bound = iota // integer: no upper bound at all
	boundXmin                 // xid: the oldest open transaction (PostgreSQL's snapshot xmin)
	boundLag                  // timestamp+pk: the database's clock minus the settle lag, and nothing else
	boundOpenTrx              // timestamp+pk on MySQL: the settle lag and the open write transactions
)

func (b bound) String() string {
	switch b {
	case boundXmin:
		return "xmin (open transactions)"
	case boundLag:
		return "settle lag only"
	case boundOpenTrx:
		return "open transactions + settle lag"
	}
	return "none"
}

type expectation int

const (
	reportOnly    expectation = iota // the report shows what happens; no claim on misses
	missNothing                      // every committed row and update is delivered
	missSomething                    // the hazard is real: the workload makes it miss rows
)

func (e expectation) String() string {
	switch e {
	case missNothing:
		return "0 missed"
	case missSomething:
		return "> 0 missed"
	}
	return "report"
}

// effectiveLag is the lag the source applies to a timestamp+pk cursor.
func (s scenario) effectiveLag() time.Duration {
	switch {
	case s.kind != state.KindTimestampPK || s.lag < 0:
		return 0
	case s.lag == 0:
		return sourcedef.DefaultSettleLag
	}
	return s.lag
}

// rowKey is one committed state of a row: its id and version (1 when inserted, +1 per update).
type rowKey struct{ id, version int64 }

// missedRow is a committed row state that was never delivered, with what explains it.
type missedRow struct {
	rowKey
	writer int64
	cursor string        // the cursor column's value, when it is not the key
	held   time.Duration // from the statement that wrote it until its commit returned
}

// result is what one scenario did and saw.
type result struct {
	seed        uint64
	committed   int           // rows in the table at the end (the truth)
	rolledBack  int           // rows inserted by transactions that rolled back
	updates     int           // committed updates
	txns        int           // committed transactions
	aborted     int           // rolled-back transactions
	longestTxn  time.Duration // the longest committed transaction, begin to commit, measured by its writer
	longestHold time.Duration // the longest time from a committed write's statement to its commit
	lateWrites  int           // committed writes held open longer than a tenth of maxTxn after their statement
	delivered   int           // rows handed to the handler, duplicates included
	duplicates  int           // deliveries of a row state beyond its first
	missed      []missedRow   // committed row states never delivered, by id
	phantoms    []string      // delivered row states that never committed
	ticks       int
	batches     int
	elapsed     time.Duration
	// openTrx is what the source said of its last read's open-transaction bound
	// (its Stats' open_trx detail), openTrxOK whether it has one (MySQL timestamp+pk), and openTrxActive
	// and openTrxReads how many of the ticks that read it found it active.
	openTrx       mysql.OpenTrx
	openTrxOK     bool
	openTrxActive int
	openTrxReads  int
}

// commitLog is what the writers of a scenario committed and rolled back.
type commitLog struct {
	mu          sync.Mutex
	held        map[rowKey]time.Duration // committed row state -> statement start to commit return
	rolledBack  int
	updates     int
	txns        int
	aborted     int
	longestTxn  time.Duration
	longestHold time.Duration
}

// recorder is the poller's handler: it counts every delivered row state.
type recorder struct {
	mu        sync.Mutex
	delivered map[rowKey]int
	rows      int
}

func (r *recorder) handle(_ context.Context, b *poller.Batch[poller.Row]) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, row := range b.Rows {
		id, ok1 := row.Get("id").(int64)
		v, ok2 := row.Get("version").(int64)
		if !ok1 || !ok2 {
			return fmt.Errorf("row %v: id %T and version %T, want int64", row.Key(), row.Get("id"), row.Get("version"))
		}
		r.delivered[rowKey{id, v}]++
		r.rows++
	}
	return nil
}

// database is what the soak needs of one kind of server: the scenario's table, the statements
// the writers run, and the source's bound as SQL. postgres_test.go and mysql_test.go have one
// each.
type database interface {
	// String names the server for the report.
	String() string
	// db is the connection the writers and the checks use (all privileges).
	db() *sql.DB
	// create makes the scenario's table, and registers its removal with cleanup.
	create(ctx context.Context, s scenario, cleanup func(func())) (*table, error)
	// insert and update write one row in tx and return its new state: update counts its
	// version up, and the row's cursor columns are taken as applications take them.
	insert(ctx context.Context, tx *sql.Tx, t *table, writer int, payload string) (rowKey, error)
	update(ctx context.Context, tx *sql.Tx, t *table, id int64, payload string) (rowKey, error)
	// settled reports whether every row of the table is inside the source's upper bound, so that
	// ticking until idle reads everything the source will ever read. src is the poller's source,
	// still ticking.
	settled(ctx context.Context, t *table, s scenario, src tick.Source) (bool, error)
	// missed is the query reading the given rows' id, version, writer and a description of their
	// cursor value, and its arguments.
	missed(t *table, kind string, ids []int64) (string, []any)
}

// table is one scenario's table, as the writers and the poller name it.
type table struct {
	quoted  string   // quoted (and schema-qualified when it needs to be), for the writers' SQL
	name    string   // the poller's table
	schema  string   // the poller's schema ("": the connection's)
	columns []string // the poller's columns
	driver  string   // the source's driver
	dsn     string   // the poller's DSN: its role decides the bound on MySQL
}

// run creates the scenario's table, runs the writers and the poller, lets everything settle and
// compares what was delivered with what was committed.
func (s scenario) run(ctx context.Context, d database, w workload, seed uint64, cleanup func(func())) (*result, error) {
	started := time.Now()
	res := &result{seed: seed}
	tbl, err := d.create(ctx, s, cleanup)
	if err != nil {
		return res, fmt.Errorf("scenario %s: %w", s.name, err)
	}

	column := map[string]string{state.KindXID: "txid", state.KindTimestampPK: "updated_at", state.KindInteger: "id"}[s.kind]
	if column == "" {
		return res, fmt.Errorf("scenario %s: cursor kind %q is not soaked", s.name, s.kind)
	}
	rec := &recorder{delivered: map[rowKey]int{}}
	opts := []poller.Option{poller.WithColumns(tbl.columns...), poller.WithKey("id"), poller.WithCursorColumn(column)}
	if tbl.schema != "" {
		opts = append(opts, poller.WithSchema(tbl.schema))
	}
	p := poller.New("soak", tbl.name, poller.CursorKind(s.kind), rec.handle, opts...)
	runner, err := tick.Open(ctx, tick.Config{Poller: pollerdef.Of(p), Store: memstore.New(nil), App: "soak", Owner: "soak/" + tbl.name,
		Settings: appsettings.Settings{Driver: tbl.driver, DSN: tbl.dsn, BatchSize: w.batchSize, LeaseTTL: lease.DefaultTTL,
			HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: 2 * time.Second, SettleLag: s.lag}})
	if err != nil {
		return res, fmt.Errorf("scenario %s: opening the source: %w", s.name, err)
	}
	defer runner.Close()
	// The poller goroutine and, after it stops, the settling loop tick: one at a time.
	tickOnce := func() (tick.Outcome, error) {
		sum, err := runner.Tick(ctx, "")
		res.ticks++
		res.batches += sum.Batches
		if o, ok := openTrxOf(runner.Source.Stats()); ok {
			res.openTrx, res.openTrxOK = o, true
			res.openTrxReads++
			if o.Active {
				res.openTrxActive++
			}
		}
		if err != nil {
			return sum.Outcome, fmt.Errorf("scenario %s: tick %d: %w", s.name, res.ticks, err)
		}
		return sum.Outcome, nil
	}

	// The poller ticks while the writers write.
	stop := make(chan struct{})
	pollerDone := make(chan error, 1)
	go func(stop <-chan struct{}) {
		for {
			select {
			case <-stop:
				pollerDone <- nil
				return
			default:
			}
			out, err := tickOnce()
			if err != nil {
				pollerDone <- err
				return
			}
			if out == tick.Idle {
				if err := pause(ctx, stop, w.idlePause); err != nil {
					pollerDone <- err
					return
				}
			}
		}
	}(stop)
	stopped := false
	stopPoller := func() error {
		if stopped {
			return nil
		}
		stopped = true
		close(stop)
		return <-pollerDone
	}
	defer func() { _ = stopPoller() }()

	log := &commitLog{held: map[rowKey]time.Duration{}}
	until := time.Now().Add(w.writing)
	errs := make([]error, w.writers)
	var wg sync.WaitGroup
	for i := range w.writers {
		wr := &writer{
			id: i + 1, d: d, table: tbl, w: w, updates: s.updates, log: log,
			rng: rand.New(rand.NewPCG(seed, uint64(i))),
		}
		wg.Go(func() { errs[i] = wr.run(ctx, until) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("scenario %s: writers: %w", s.name, err)
	}

	// Settle: wait until every row is inside the source's bound (the poller keeps ticking, so a
	// bound the source reads from the server moves on), then tick until a tick is idle.
	if err := waitFor(ctx, s.effectiveLag()+w.settle, 50*time.Millisecond, "every row inside the source's upper bound", func() (bool, error) {
		return d.settled(ctx, tbl, s, runner.Source)
	}); err != nil {
		return res, fmt.Errorf("scenario %s: %w", s.name, err)
	}
	if err := stopPoller(); err != nil {
		return res, err
	}
	deadline := time.Now().Add(w.settle)
	for {
		out, err := tickOnce()
		if err != nil {
			return res, err
		}
		if out == tick.Idle {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("scenario %s: the poller still found rows after %v of ticking once the writers stopped", s.name, w.settle)
		}
	}

	// Compare with the truth.
	truth, err := readTruth(ctx, d.db(), tbl)
	if err != nil {
		return res, fmt.Errorf("scenario %s: %w", s.name, err)
	}
	res.committed = len(truth)
	res.rolledBack, res.updates, res.txns, res.aborted = log.rolledBack, log.updates, log.txns, log.aborted
	res.longestTxn, res.longestHold = log.longestTxn, log.longestHold
	res.delivered = rec.rows
	var missedIDs []int64
	for id, v := range truth {
		if rec.delivered[rowKey{id, v}] == 0 {
			missedIDs = append(missedIDs, id)
		}
	}
	slices.Sort(missedIDs)
	for _, held := range log.held {
		if held > w.maxTxn/10 {
			res.lateWrites++
		}
	}
	for k, n := range rec.delivered {
		res.duplicates += n - 1
		switch v, ok := truth[k.id]; {
		case !ok:
			res.phantoms = append(res.phantoms, fmt.Sprintf("id=%d v%d (no such row: its insert rolled back)", k.id, k.version))
		case k.version > v:
			res.phantoms = append(res.phantoms, fmt.Sprintf("id=%d v%d (the row's last committed version is %d)", k.id, k.version, v))
		}
	}
	slices.Sort(res.phantoms)
	if res.missed, err = describeMissed(ctx, d, tbl, s.kind, missedIDs, log.held); err != nil {
		return res, fmt.Errorf("scenario %s: %w", s.name, err)
	}
	res.elapsed = time.Since(started)
	return res, nil
}

// readTruth returns every row's id and latest committed version.
func readTruth(ctx context.Context, db *sql.DB, t *table) (map[int64]int64, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, version FROM `+t.quoted)
	if err != nil {
		return nil, fmt.Errorf("reading the committed rows: %w", err)
	}
	defer rows.Close()
	truth := map[int64]int64{}
	for rows.Next() {
		var id, v int64
		if err := rows.Scan(&id, &v); err != nil {
			return nil, fmt.Errorf("reading the committed rows: %w", err)
		}
		truth[id] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the committed rows: %w", err)
	}
	return truth, nil
}

// describeMissed reads the missed rows' cursor values and joins what their writers measured.
func describeMissed(ctx context.Context, d database, t *table, kind string, ids []int64, held map[rowKey]time.Duration) ([]missedRow, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	q, args := d.missed(t, kind, ids)
	rows, err := d.db().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the missed rows: %w", err)
	}
	defer rows.Close()
	var out []missedRow
	for rows.Next() {
		var m missedRow
		if err := rows.Scan(&m.id, &m.version, &m.writer, &m.cursor); err != nil {
			return nil, fmt.Errorf("reading the missed rows: %w", err)
		}
		m.held = held[m.rowKey]
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the missed rows: %w", err)
	}
	return out, nil
}

// writer runs transactions against one scenario's table until its time is up.
type writer struct {
	id      int
	d       database
	table   *table
	w       workload
	updates bool
	log     *commitLog
	rng     *rand.Rand
	mine    []int64 // ids of rows this writer inserted and committed
}

func (wr *writer) run(ctx context.Context, until time.Time) error {
	for n := 1; time.Now().Before(until); n++ {
		if err := wr.txn(ctx); err != nil {
			return fmt.Errorf("writer %d, transaction %d: %w", wr.id, n, err)
		}
	}
	return nil
}

// hold picks how long a transaction stays open: half of them commit promptly, the others stay
// open for up to maxTxn.
func (wr *writer) hold() time.Duration {
	limit := wr.w.maxTxn
	if wr.rng.IntN(2) == 0 {
		limit /= 20
	}
	return time.Duration(wr.rng.Int64N(int64(limit) + 1))
}

// txn runs one transaction: one to three statements at random moments while it is open, then a
// commit at the end of its hold, or a rollback.
func (wr *writer) txn(ctx context.Context) error {
	hold := wr.hold()
	at := make([]time.Duration, 1+wr.rng.IntN(3))
	for i := range at {
		at[i] = time.Duration(wr.rng.Int64N(int64(hold) + 1))
	}
	slices.Sort(at)
	rollback := wr.rng.Float64() < wr.w.rollback

	begin := time.Now()
	tx, err := wr.d.db().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after a commit
	type write struct {
		key    rowKey
		start  time.Time
		insert bool
	}
	var writes []write
	for _, off := range at {
		if err := sleepUntil(ctx, begin.Add(off)); err != nil {
			return err
		}
		start := time.Now()
		var k rowKey
		insert := !wr.updates || len(wr.mine) == 0 || wr.rng.Float64() >= wr.w.update
		payload := fmt.Sprintf("w%d-%d", wr.id, wr.rng.Uint32())
		if insert {
			k, err = wr.d.insert(ctx, tx, wr.table, wr.id, payload)
		} else {
			// Only this writer's own rows: writers never wait on each other's row locks, so a
			// transaction stays open exactly as long as its writer means it to.
			k, err = wr.d.update(ctx, tx, wr.table, wr.mine[wr.rng.IntN(len(wr.mine))], payload)
		}
		if err != nil {
			return fmt.Errorf("insert=%v: %w", insert, err)
		}
		writes = append(writes, write{k, start, insert})
	}
	if err := sleepUntil(ctx, begin.Add(hold)); err != nil {
		return err
	}

	l := wr.log
	if rollback {
		if err := tx.Rollback(); err != nil {
			return fmt.Errorf("rollback: %w", err)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.aborted++
		for _, wt := range writes {
			if wt.insert {
				l.rolledBack++
			}
		}
		return nil
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	done := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.txns++
	l.longestTxn = max(l.longestTxn, done.Sub(begin))
	for _, wt := range writes {
		held := done.Sub(wt.start)
		l.held[wt.key] = held
		l.longestHold = max(l.longestHold, held)
		if wt.insert {
			wr.mine = append(wr.mine, wt.key.id)
		} else {
			l.updates++
		}
	}
	return nil
}

// sleepUntil waits until the moment at: this is how a writer holds its transaction open.
func sleepUntil(ctx context.Context, at time.Time) error {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// pause paces the poller after an idle tick; it returns early when stop closes.
func pause(ctx context.Context, stop <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
	case <-t.C:
	}
	return nil
}

// waitFor polls cond every interval until it holds, failing after timeout.
func waitFor(ctx context.Context, timeout, interval time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: not so after %v", what, timeout)
		}
		if err := sleepUntil(ctx, time.Now().Add(interval)); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
	}
}

// openTrxOf is the open-transaction bound a MySQL timestamp+pk source's stats show.
func openTrxOf(st driver.Stats) (mysql.OpenTrx, bool) {
	for _, d := range st.Details {
		if o, ok := d.Value.(mysql.OpenTrx); ok {
			return o, true
		}
	}
	return mysql.OpenTrx{}, false
}
