package source

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// CheckSetup connects with the driver of ds that cfg.Driver names and checks the poller's table
// set-up (Driver.CheckSetup), adding the change stream's (Driver.OpenCDC's plan, as pollerctl cdc enable
// reads it). The Setup it returns stays connected, to apply the fixes (Apply) and check again;
// close it.
func CheckSetup(ctx context.Context, ds driver.Drivers, cfg Config) (*Setup, error) {
	c, err := connect(ctx, ds, cfg)
	if err != nil {
		return nil, err
	}
	s := &Setup{c: c, sc: c.dl, ds: ds, cfg: cfg}
	if err := s.Check(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// A Setup is a connected check of one poller's table set-up.
type Setup struct {
	c        conn
	sc       driver.Driver
	ds       driver.Drivers
	cfg      Config
	Findings []setup.Finding
	// Offers makes Script and Apply take the offers (VerdictOffer) with the problems' fixes.
	Offers bool
}

// String describes the database and the table, without secrets.
func (s *Setup) String() string { return s.c.describe }

// Close closes the connection.
func (s *Setup) Close() error { return s.c.close() }

// Script is the problems' fixes (and the offers', when Offers is set) as the database's client
// runs them ("" when none).
func (s *Setup) Script() string {
	fix := setup.Fixes(s.Findings, s.Offers)
	if len(fix) == 0 {
		return ""
	}
	return s.sc.Script(fix)
}

// ScriptOf is one finding's fix as the database's client runs it ("" when none).
func (s *Setup) ScriptOf(f setup.Finding) string {
	if len(f.Fix) == 0 {
		return ""
	}
	return s.sc.Script(f.Fix)
}

// InTransaction says whether Apply runs the fixes in one transaction.
func (s *Setup) InTransaction() bool { return s.sc.DDLInTransaction() }

// Check checks again, replacing Findings.
func (s *Setup) Check(ctx context.Context) error {
	d := s.cfg.Definition
	var bound driver.ReadBound
	if !d.Changes() {
		bound, _ = s.sc.ReadBound(s.cfg.DSN, d)
	}
	fs, err := checkSetup(ctx, s.sc, s.c.db, d, bound)
	if err != nil {
		return fmt.Errorf("source: poller %q, table %s: checking the set-up: %w", s.cfg.Poller, d.Table, err)
	}
	if f, ok := s.cdc(ctx); ok {
		fs = append(fs, f)
	}
	s.Findings = fs
	return nil
}

// cdc is the change stream's finding, when the poller's kind has a set-up made on purpose: the
// problems pollerctl cdc enable's plan reports, or that it is not enabled yet.
func (s *Setup) cdc(ctx context.Context) (setup.Finding, bool) {
	if _, ok := s.ds.CDCAdmin(s.cfg.Definition.Cursor.Kind); !ok {
		return setup.Finding{}, false
	}
	f := setup.Finding{Check: setup.CheckCDC, Verdict: setup.VerdictOK}
	cdc, err := OpenCDC(ctx, s.ds, s.cfg)
	if err != nil {
		f.Verdict, f.Detail = setup.VerdictUnknown, err.Error()
		return f, true
	}
	defer cdc.Close()
	plan, err := cdc.PlanEnable(ctx)
	switch {
	case err != nil:
		f.Verdict, f.Detail = setup.VerdictUnknown, err.Error()
	case len(plan.Problems) > 0:
		f.Verdict, f.Detail = setup.VerdictProblem, strings.Join(plan.Problems, "; ")
	case len(plan.Steps) > 0:
		f.Verdict = setup.VerdictProblem
		f.Detail = fmt.Sprintf("not enabled: run `pollerctl cdc enable %s --yes` (%s)", s.cfg.Poller, strings.Join(plan.Steps, "; "))
	default:
		f.Detail = plan.None
	}
	return f, true
}

// Apply runs the problems' fixes: in one transaction where the database runs DDL in one, else
// one by one, stopping at the first that fails. It returns the statements that ran (committed,
// or with a transaction rolled back: none).
func (s *Setup) Apply(ctx context.Context) (ran []string, err error) {
	fix := setup.Fixes(s.Findings, s.Offers)
	if !s.sc.DDLInTransaction() {
		for _, q := range fix {
			if _, err := s.c.db.ExecContext(ctx, q); err != nil {
				return ran, fmt.Errorf("%s: %w", firstLine(q), s.withDetail(err))
			}
			ran = append(ran, q)
		}
		return ran, nil
	}
	tx, err := s.c.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	for _, q := range fix {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("%s: %w (rolled back: nothing was changed)", firstLine(q), s.withDetail(err))
		}
		ran = append(ran, q)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w (nothing was changed)", err)
	}
	return ran, nil
}

// withDetail is a statement's error with what the database said of it beyond its message
// (Driver.ErrorDetail: which key repeats), which the Go driver's error text leaves out.
func (s *Setup) withDetail(err error) error {
	if d := s.sc.ErrorDetail(err); d != "" {
		return fmt.Errorf("%w: %s", err, d)
	}
	return err
}

func firstLine(q string) string {
	l, _, _ := strings.Cut(q, "\n")
	return l
}

// CheckSetup checks the open source's table set-up (Driver.CheckSetup): what the handler runs
// once when it first opens a poller's source. The change stream's set-up is not among them: Open
// checked it.
func (s *Source) CheckSetup(ctx context.Context) ([]setup.Finding, error) {
	fs, err := checkSetup(ctx, s.dl, s.db, s.def, s.bound)
	if err != nil {
		return nil, fmt.Errorf("source: poller %q, table %s: checking the set-up: %w", s.poller, s.def.Table, err)
	}
	return fs, nil
}

// setupCache keeps a source's setup findings: SetupProblems checks again only while they hold a
// problem.
type setupCache struct {
	mu    sync.Mutex
	found []setup.Finding
	done  bool
}

// SetupProblems is the setup check of the open source (CheckSetup) as the handler runs it: the
// first call checks, and so does each later call while the last check found a problem (so that a
// fix shows); a clean check is kept for the life of the source (its set-up is not checked on
// every tick). It returns every finding and whether this call checked.
func (s *Source) SetupProblems(ctx context.Context) (found []setup.Finding, checked bool, err error) {
	s.setup.mu.Lock()
	defer s.setup.mu.Unlock()
	if s.setup.done && setup.Problems(s.setup.found) == 0 {
		return s.setup.found, false, nil
	}
	fs, err := s.CheckSetup(ctx)
	if err != nil {
		return nil, true, err
	}
	s.setup.found, s.setup.done = fs, true
	return fs, true, nil
}

// checkSetup runs the driver's checks, with the portable ones at their place: for each of the
// poller's tables, each finding's detail then naming its table; then an outbox's (bound: the
// reads' bound behind open transactions, nil when none).
func checkSetup(ctx context.Context, sc driver.Driver, db *sql.DB, d sourcedef.Definition, bound driver.ReadBound) ([]setup.Finding, error) {
	if d.ReadsMessages() { // no table: what it reads is the change stream's set-up (Setup.cdc)
		return []setup.Finding{{Check: setup.CheckTable, Verdict: setup.VerdictOK,
			Detail: fmt.Sprintf("none: a messages outbox reads the transactional messages of prefix %q (pg_logical_emit_message(true, %s, payload)) from the replication slot", d.Outbox.Messages, quoteLiteral(d.Outbox.Messages))}}, nil
	}
	if len(d.More) == 0 {
		fs, err := checkTable(ctx, sc, db, d)
		if err != nil {
			return nil, err
		}
		columns := slices.ContainsFunc(fs, func(f setup.Finding) bool { return f.Check == setup.CheckColumns && f.Verdict == setup.VerdictOK })
		f, ok, err := outboxFinding(ctx, sc, db, d, bound, columns)
		if err != nil {
			return nil, fmt.Errorf("checking the outbox: %w", err)
		}
		if ok {
			fs = append(fs, f)
		}
		return fs, nil
	}
	var out []setup.Finding
	for _, t := range d.Tables() {
		fs, err := checkTable(ctx, sc, db, d.Part(t))
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Table, err)
		}
		for _, f := range fs {
			if f.Check != setup.CheckTable { // whose detail names it
				f.Detail = "table " + t.Table.String() + ": " + f.Detail
			}
			out = append(out, f)
		}
	}
	return out, nil
}

// checkTable is checkSetup of one table.
func checkTable(ctx context.Context, drv driver.Driver, db *sql.DB, d sourcedef.Definition) ([]setup.Finding, error) {
	fs, err := drv.CheckSetup(ctx, db, d)
	if err != nil {
		return nil, err
	}
	// The unique key and the column types, after the columns' finding, when the table and its
	// columns were found.
	at := slices.IndexFunc(fs, func(f setup.Finding) bool { return f.Check == setup.CheckColumns })
	if at < 0 || fs[at].Verdict != setup.VerdictOK {
		return fs, nil
	}
	if setup.KeysetColumns(d) != nil {
		f, err := keyFinding(ctx, drv, db, d)
		if err != nil {
			return nil, err
		}
		at++
		fs = slices.Insert(fs, at, f)
	}
	if f, ok, err := typesFinding(ctx, drv, db, d); err != nil {
		return nil, err
	} else if ok {
		fs = slices.Insert(fs, at+1, f)
	}
	return fs, nil
}

// typesFinding is the column types' finding, for a driver with types it refuses (Driver.Refuse):
// a problem names each column whose type Open refuses, and why; false for another driver.
func typesFinding(ctx context.Context, drv driver.Driver, db *sql.DB, d sourcedef.Definition) (setup.Finding, bool, error) {
	if _, err := drv.Refuse(row.ColumnType{}); errors.Is(err, driver.ErrNotSupported) {
		return setup.Finding{}, false, nil
	}
	var want []string // every column, for a poller of them all
	if !d.ReadsAllColumns() {
		want = d.Selected()
	}
	cols, types, err := columnTypes(ctx, db, drv, d.Table, want)
	if err != nil {
		return setup.Finding{}, false, err
	}
	f := setup.Finding{Check: setup.CheckTypes, Verdict: setup.VerdictOK}
	var why []string
	for i, t := range types {
		if w, _ := drv.Refuse(row.NewColumn(drv, cols[i], t).ColumnType); w != "" {
			why = append(why, fmt.Sprintf("column %s (%s): %s", cols[i], t, w))
		}
	}
	if len(why) > 0 {
		f.Verdict, f.Detail = setup.VerdictProblem, strings.Join(why, "; ")
	}
	return f, true, nil
}

// keyFinding is the unique key's finding (Driver.UniqueKey, as Open asks it): a problem whose fix
// is the unique index over the definition's key columns; unless their values repeat among the
// first DupScan rows in key order, and creating the index would fail: then the problem names one
// repeated key and how many rows have it, and the fix is left to people.
func keyFinding(ctx context.Context, drv driver.Driver, db *sql.DB, d sourcedef.Definition) (setup.Finding, error) {
	keys := setup.KeysetColumns(d)
	f := setup.Finding{Check: setup.CheckUniqueKey, Verdict: setup.VerdictUnknown}
	u, err := drv.UniqueKey(ctx, db, d.Table, keys)
	if errors.Is(err, driver.ErrNotSupported) {
		f.Detail = "the " + drv.Name() + " driver cannot read keys from its catalog: each fetch checks its rows for a repeated key"
		return f, nil
	}
	if err != nil {
		return setup.Finding{}, fmt.Errorf("reading the table's keys from the catalog: %w", err)
	}
	switch u.Verdict {
	case setup.KeyUnique:
		f.Verdict, f.Detail = setup.VerdictOK, u.By
		return f, nil
	case setup.KeyUnknown:
		f.Detail = u.Why + ": each fetch checks its rows for a repeated key"
		return f, nil
	}
	f.Verdict = setup.VerdictProblem
	f.Detail = fmt.Sprintf("no primary key or unique index covers the key columns (%s): rows that share them are skipped when a batch ends between them", strings.Join(keys, ", "))
	// The repeats that would fail the fix: of the columns it makes unique, not only of (cursor,
	// key...), whose rows may differ in the cursor alone.
	vals, n, err := duplicateKey(ctx, db, drv, d.Table, d.PK)
	if err != nil {
		return setup.Finding{}, fmt.Errorf("looking for a repeated key: %w", err)
	}
	create := UniqueIndexSQL(drv, d.Table, d.PK)
	if vals == nil {
		f.Fix = []string{create}
		return f, nil
	}
	shown := make([]string, len(vals))
	for i, v := range vals {
		if b, ok := v.([]byte); ok {
			v = string(b)
		}
		shown[i] = fmt.Sprintf("%s=%v", d.PK[i], v)
	}
	f.Detail += fmt.Sprintf("; and the key repeats: %d rows have %s, so a unique index over (%s) cannot be made (no fix in SQL): "+
		"remove the repeats, then %s; or choose key columns whose values are unique (\"key\" in poller.json, poller.WithKey)",
		n, strings.Join(shown, " "), strings.Join(d.PK, ", "), create)
	return f, nil
}

// quoteLiteral is s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
