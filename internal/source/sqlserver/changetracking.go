package sqlserver

// The changetracking cursor: SQL Server Change Tracking of the poller's table.
//
// Change Tracking records, for every committed insert, update and delete of a tracked table, the
// row's primary key and the commit's version: a database-wide number that grows by one for each
// committing transaction that changed a tracked table, given at commit. CHANGETABLE(CHANGES t,
// @base) returns one row per key changed after version @base: its latest version
// (SYS_CHANGE_VERSION) and its net operation since @base (SYS_CHANGE_OPERATION): I when the row
// did not exist at @base, D when it does not exist now, U otherwise; a row deleted and inserted
// again with the same key is a U, a row inserted and deleted after @base a D, and a change of
// the key a D of the old key and an I of the new one. A rolled-back change is never there.
//
// # One read
//
// Each fetch reads CHANGE_TRACKING_CURRENT_VERSION() as the upper bound, then, in one
// snapshot-isolation transaction begun after it (ALLOW_SNAPSHOT_ISOLATION must be ON), the
// table's CHANGE_TRACKING_MIN_VALID_VERSION, checks the checkpoint against it, and selects TOP
// (@n) rows of CHANGETABLE(CHANGES t, @base) with SYS_CHANGE_VERSION <= the bound, LEFT JOINed
// to the table on the key for the current values, ORDER BY SYS_CHANGE_VERSION and the key. The
// snapshot makes the changes and the joined values agree: an I or a U finds its row as it is
// after that version, and a D finds none. (Should an I or a U find no row all the same, the row
// is gone now: it is delivered as a delete of its key, which is what applying it must do.)
//
// Versions are given at commit, in commit order, and a transaction's changes all share its
// version: every version at or below a version the read has seen is complete in the snapshot,
// so there is no late-commit problem. The bound is read before the snapshot begins, so every
// version up to it committed before the snapshot and is complete in it too: a read that finds
// nothing up to the bound knows that nothing of the table changed up to it.
//
// # The cursor
//
// Value is a version (a JSON number). Without a tiebreaker the position is a version boundary:
// every change up to and including version Value is done, and the next read is
// CHANGES(t, Value). With a tiebreaker (the key columns, encoded as the keyset kinds encode
// them) the position is inside version Value: every change before it is done, and of its
// changes those whose key sorts at or before the tiebreaker; the next read is
// CHANGES(t, Value-1) with (SYS_CHANGE_VERSION, key) > (Value, tiebreaker). That is how a
// transaction that changed more rows than a batch holds is read over several batches, and
// resumed exactly after a crash: never a skip, never a repeat, since each read returns only rows
// strictly after the position in (version, key) order, and each row's cursor is its own
// (version, key). A key read inside version v and changed again later comes again at its new
// version (a new change); a key not yet read whose change at v was overwritten later comes at
// its later version with its net op (relative to v-1, where the consumer's knowledge stands).
//
// Each row's cursor is (its version, its key). When a batch holds fewer rows than asked, its
// read reached the bound, so the last row's version is complete: that row's cursor (and the
// batch's To) is the boundary Value = its version, which spares the next read a re-scan of that
// version and keeps an idle checkpoint on a boundary. The id a sink derives from poller, key and
// cursor Value therefore differs for two changes of the same key (they have two versions) and
// stays the same when a change is delivered again.
//
// # A backlog
//
// The fetches that page through a backlog form a run (ctRun): each fetch that stops short of its
// bound hands the next, from where it ended, its base and its bound, so that the ops of the
// backlog are the ones a single read of it gives, and after the first fetch the run reads
// ctReadAhead changes at once and delivers them a batch a fetch (deliver): CHANGETABLE computes
// every change after its base for each read, so paging a large backlog one batch a read would
// cost the backlog for each batch.
//
// # Expiry
//
// Change Tracking forgets changes older than the database's CHANGE_RETENTION (auto cleanup),
// and a TRUNCATE TABLE forgets all of them; the table's CHANGE_TRACKING_MIN_VALID_VERSION then
// rises. A checkpoint whose read would start below it (its base: Value, or Value-1 inside a
// version) may have lost changes, which CHANGETABLE would silently leave out: every fetch and
// every count checks it first and fails with ErrExpired, naming both versions and the reset
// (`pollerctl reset P --to-beginning`, after which the rows changed meanwhile must be re-read
// from the table). A checkpoint ahead of CHANGE_TRACKING_CURRENT_VERSION() (a database restored
// or recreated, a version typed wrong) is refused too (ErrCursor). The beginning (no
// checkpoint) is the table's minimum valid version: every change still kept.
//
// # A quiet table in a busy database
//
// An idle tick writes nothing, so the checkpoint of a quiet table would stay where it is while
// the minimum valid version moves on with the retention and other tables' commits, until the
// checkpoint expired although nothing of the table was lost. So a fetch that finds nothing after
// the checkpoint, up to the bound, returns no rows but a To at the bound (a version boundary:
// nothing of the table changed up to it) when the checkpoint has come closer to the minimum valid
// version than to the current one: about half the retention has passed over it. The tick commits
// that move as it commits a logical cursor's keep-up (two blob writes). The rule needs no clock
// and no permission beyond the cursor's: its writes are about two per retention period on a busy
// database, and a number that grows with the log of the versions while cleanup has not yet moved
// the minimum. A stopped poller still expires after the retention: a loud error.

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

var (
	// ErrNotTracked: the database or the table is not set up for the changetracking cursor
	// (Change Tracking, snapshot isolation, the VIEW CHANGE TRACKING permission, the key); the
	// error names the statement that fixes it.
	ErrNotTracked = source.Mark(errors.New("SQL Server Change Tracking is not set up for the poller"), source.ErrMisconfigured)
	// ErrExpired: a changetracking checkpoint is older than CHANGE_TRACKING_MIN_VALID_VERSION:
	// Change Tracking has forgotten changes after it (retention cleanup, or a TRUNCATE TABLE),
	// so they cannot be delivered. The poller stops; the error names the reset. It also wraps
	// ErrCursor.
	ErrExpired = errors.New("the checkpoint is older than the changes SQL Server Change Tracking still keeps")
)

type changeTracking struct {
	driver.StreamDefaults
	l         driver.Layout
	table     string // the quoted table name: in the SQL, and bound as OBJECT_ID's argument
	q         ctQueries
	retention string // the database's CHANGE_RETENTION as check read it ("2 DAYS"), for errors

	run ctRun // the fetches paging through one backlog under one bound

	// done is the last fetch that read everything after its cursor up to its bound: where it
	// ended (cursorKey) and that bound (a backfill's watermark, reachedAt).
	mu   sync.Mutex
	done struct {
		set   bool
		at    string
		bound int64
	}
}

// ChangeStream reads the changetracking cursor kind.
func (d Driver) ChangeStream(kind string, l driver.Layout) (driver.ChangeStream, error) {
	if kind != state.KindChangeTracking {
		return d.Defaults.ChangeStream(kind, l)
	}
	if len(l.Tables()) > 1 {
		return newCTTables(l), nil
	}
	return newChangeTracking(l), nil
}

// Restart says where a changetracking poller starts again when its state is deleted: at the
// oldest version Change Tracking still keeps.
func (Driver) Restart(kind, poller string) string {
	if kind != state.KindChangeTracking {
		return ""
	}
	return fmt.Sprintf("WARNING: %s is in this build: its next tick starts at the oldest version Change Tracking still keeps, and delivers those changes again.\n", poller)
}

// CheckDefinition checks SQL Server's rules of a definition: a changetracking cursor's tables
// take no filter, since CHANGETABLE has none and every change of a table comes (a filter would
// be left out without a word); each filtered table is a *sourcedef.FieldError, joined.
func (Driver) CheckDefinition(d sourcedef.Definition) error {
	if d.Cursor.Kind != state.KindChangeTracking {
		return nil
	}
	var errs []error
	if d.Outbox != nil {
		// CHANGETABLE gives a row's net operation: an event inserted and deleted between two reads
		// is a D whose values are gone, which an outbox (that leaves deletes out) would lose.
		errs = append(errs, &sourcedef.FieldError{Field: sourcedef.FieldOutbox,
			Err: fmt.Errorf("a %s cursor cannot read an outbox: Change Tracking keeps a changed row's key, not its values, so an event deleted before the poller reads it would be lost; use the rowversion cursor with cleanup (docs/outbox.md)", d.Cursor.Kind)})
	}
	for i, t := range d.Tables() {
		if strings.TrimSpace(t.Filter) != "" {
			errs = append(errs, &sourcedef.FieldError{Field: d.TableField(i, sourcedef.FieldFilter),
				Err: fmt.Errorf("a %s cursor delivers every change of the table and takes no filter (CHANGETABLE has none): filter the rows where they are delivered", d.Cursor.Kind)})
		}
	}
	return errors.Join(errs...)
}

func newChangeTracking(l driver.Layout) *changeTracking {
	d := l.Definition()
	return &changeTracking{l: l, table: l.Table(), q: buildCTQueries(l.Driver(), d.Table, l.Columns(), d.PK, l.KeyMarker, ctOptions{skip: d.SkipWriter})}
}

// ctQueries are the SQL texts of the changetracking cursor.
//
//   - Check (argument: the quoted table name) reads the set-up in one round trip.
//   - Current: CHANGE_TRACKING_CURRENT_VERSION(), the read's bound, before its transaction.
//   - MinValid (the quoted table name): the table's CHANGE_TRACKING_MIN_VALID_VERSION, in the
//     read's snapshot transaction.
//   - FetchFrom (base, version, bound, limit): the changes after the version boundary version,
//     their ops relative to base (version, or where the read's run began: ctRun).
//   - FetchAfter (base, version, the key values, bound, limit): the changes after a position
//     inside a version, their ops relative to base (version-1, or where the run began).
//   - WaitingFrom and WaitingAfter: the same reads, counted.
type ctQueries struct {
	Check, Current, MinValid  string
	FetchFrom, FetchAfter     string
	WaitingFrom, WaitingAfter string
	opts                      ctOptions
}

// ctOptions are what a fetch reads besides each change's version, op and row, as Check found
// the database: each read column's place in SYS_CHANGE_COLUMNS when the table tracks the
// columns an update changed, the commit's time when the user may read
// sys.dm_tran_commit_table, and a writer's context whose changes are left out.
type ctOptions struct {
	columns, commitTime bool
	skip                string // Definition.SkipWriter: "" for none
}

// ctCommitTimeProbe says whether the user may read the commit times of the latest commits in
// sys.dm_tran_commit_table: 1 or 0, and an error when the view cannot be read at all. Microsoft's
// page for the view: "The table sys.dm_tran_commit_table will not reflect live changes for
// read-only users, as VIEW SERVER STATE permission is required. The changes remain stored in the
// rowstore until a CHECKPOINT occurs, following which read-only users will see them reflected."
// So a user without it reads the view without an error but finds no row for the newest
// versions: its changes would carry no commit time, or some would, and the lag would read from
// whichever. The commit time is read only with VIEW SERVER STATE, or on Azure SQL Database
// (engine edition 5), which has no server-level permissions to grant a database's user, with
// VIEW DATABASE STATE, the permission its DMVs take instead. (Microsoft's page names only VIEW
// SERVER STATE: that VIEW DATABASE STATE shows the latest commits there is not documented, and
// not seen here, where no Azure SQL Database is reachable; docs/changes.md says so.)
const ctCommitTimeProbe = `SELECT CASE WHEN HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER STATE') = 1
  OR (CAST(SERVERPROPERTY('EngineEdition') AS int) = 5 AND HAS_PERMS_BY_NAME(NULL, 'DATABASE', 'VIEW DATABASE STATE') = 1)
  THEN 1 ELSE 0 END FROM (SELECT COUNT(*) AS n FROM (SELECT TOP (1) commit_time FROM sys.dm_tran_commit_table) v) x`

// readsCommitTime says whether the changes can carry their commit time (ctCommitTimeProbe).
func readsCommitTime(ctx context.Context, db *sql.DB) bool {
	var ok int32
	return db.QueryRowContext(ctx, ctCommitTimeProbe).Scan(&ok) == nil && ok == 1
}

// buildCTQueries renders the queries of table t's columns cols, keyed by keys; marker writes key
// j's argument marker (Layout.KeyMarker: cast to the column's type where it needs it).
func buildCTQueries(dl driver.Driver, t sourcedef.Table, cols, keys []string, marker func(j int, m string) string, o ctOptions) ctQueries {
	table := driver.QuoteTable(dl, t)
	var sel, extra []string
	for _, c := range cols {
		if slices.Contains(keys, c) {
			sel = append(sel, "ct."+dl.Quote(c))
		} else {
			sel = append(sel, "t."+dl.Quote(c))
		}
	}
	if o.commitTime {
		// commit_time is a datetime; the documentation does not say in which zone. It is the
		// server's local time (SYSDATETIME's): moved to UTC by the server's offset now, which is
		// wrong by the shift for a commit read across a daylight-saving change (Azure SQL
		// Database runs in UTC; docs/changes.md says so).
		extra = append(extra, "(SELECT DATEADD(minute, -DATEPART(tzoffset, SYSDATETIMEOFFSET()), cm.commit_time) FROM sys.dm_tran_commit_table AS cm WHERE cm.commit_ts = ct.SYS_CHANGE_VERSION)")
	}
	if o.columns {
		extra = append(extra, "CASE WHEN ct.SYS_CHANGE_COLUMNS IS NULL THEN 1 ELSE 0 END")
		for _, c := range cols {
			extra = append(extra, "COALESCE(CHANGE_TRACKING_IS_COLUMN_IN_MASK(COLUMNPROPERTY(OBJECT_ID("+sqlString(table)+"), "+sqlString(c)+", 'ColumnId'), ct.SYS_CHANGE_COLUMNS), 0)")
		}
	}
	var on, order []string
	ctKeys := make([]string, len(keys))
	for i, k := range keys {
		on = append(on, "t."+dl.Quote(k)+" = ct."+dl.Quote(k))
		ctKeys[i] = "ct." + dl.Quote(k)
	}
	order = append([]string{"ct.SYS_CHANGE_VERSION"}, ctKeys...)
	found := "CASE WHEN t." + dl.Quote(keys[0]) + " IS NULL THEN 0 ELSE 1 END"
	selectList := "ct.SYS_CHANGE_VERSION, ct.SYS_CHANGE_OPERATION, " + found + ", " + strings.Join(append(extra, sel...), ", ")
	join := " LEFT JOIN " + table + " AS t ON " + strings.Join(on, " AND ")

	// render builds a read: from a version boundary, or after a position inside a version.
	render := func(inside bool) (from, where string, limit string) {
		n := 1
		next := func() string { n++; return dl.Placeholder(n) }
		from = " FROM CHANGETABLE(CHANGES " + table + ", " + dl.Placeholder(1) + ") AS ct"
		var preds []string
		if inside {
			params := []string{next()}
			for j := range keys {
				params = append(params, marker(j, next()))
			}
			pred, _ := dl.Keyset(state.KindChangeTracking, order, params, driver.After)
			preds = append(preds, pred)
		}
		if !inside {
			preds = append(preds, "ct.SYS_CHANGE_VERSION > "+next())
		}
		preds = append(preds, "ct.SYS_CHANGE_VERSION <= "+next())
		if o.skip != "" {
			preds = append(preds, "(ct.SYS_CHANGE_CONTEXT IS NULL OR ct.SYS_CHANGE_CONTEXT <> "+ctContext(o.skip)+")")
		}
		return from, " WHERE " + strings.Join(preds, " AND "), next()
	}
	q := ctQueries{
		opts:     o,
		Check:    ctCheckQuery,
		Current:  "SELECT CHANGE_TRACKING_CURRENT_VERSION()",
		MinValid: "SELECT CHANGE_TRACKING_MIN_VALID_VERSION(OBJECT_ID(" + dl.Placeholder(1) + "))",
	}
	for _, inside := range []bool{false, true} {
		from, where, limit := render(inside)
		fetch := dl.Limit(selectList, from+join+where+" ORDER BY "+strings.Join(order, ", "), limit)
		count := "SELECT COUNT(*) FROM (" + dl.Limit("ct.SYS_CHANGE_VERSION", from+where, limit) + ") w"
		if inside {
			q.FetchAfter, q.WaitingAfter = fetch, count
		} else {
			q.FetchFrom, q.WaitingFrom = fetch, count
		}
	}
	return q
}

// sqlString is s as an N'...' literal.
func sqlString(s string) string { return "N'" + strings.ReplaceAll(s, "'", "''") + "'" }

// ctContext is the CHANGE_TRACKING_CONTEXT a writer named w marks its changes with: the bytes of
// its name, as CAST('w' AS varbinary(128)) makes them, written as a binary literal.
func ctContext(w string) string { return "0x" + strings.ToUpper(hex.EncodeToString([]byte(w))) }

// ctCheckQuery reads, for the table named by @p1 (quoted), everything the cursor needs: the
// database's name, the user, whether the table exists, Change Tracking on the database (and its
// retention) and on the table, snapshot isolation, the VIEW CHANGE TRACKING permission, and the
// primary key's columns in order (JSON).
const ctCheckQuery = `SELECT DB_NAME(), USER_NAME(), CASE WHEN OBJECT_ID(@p1) IS NULL THEN 0 ELSE 1 END,
  CASE WHEN CHANGE_TRACKING_CURRENT_VERSION() IS NOT NULL OR EXISTS (SELECT 1 FROM sys.change_tracking_databases WHERE database_id = DB_ID()) THEN 1 ELSE 0 END,
  (SELECT CONCAT(retention_period, ' ', retention_period_units_desc) FROM sys.change_tracking_databases WHERE database_id = DB_ID()),
  CASE WHEN EXISTS (SELECT 1 FROM sys.change_tracking_tables WHERE object_id = OBJECT_ID(@p1)) THEN 1 ELSE 0 END,
  (SELECT snapshot_isolation_state_desc FROM sys.databases WHERE database_id = DB_ID()),
  COALESCE(HAS_PERMS_BY_NAME(@p1, 'OBJECT', 'VIEW CHANGE TRACKING'), 0),
  COALESCE((SELECT CAST(is_track_columns_updated_on AS int) FROM sys.change_tracking_tables WHERE object_id = OBJECT_ID(@p1)), 0),
  (SELECT c.name AS [name] FROM sys.indexes i
    JOIN sys.index_columns ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id
    JOIN sys.columns c ON c.object_id = ic.object_id AND c.column_id = ic.column_id
    WHERE i.object_id = OBJECT_ID(@p1) AND i.is_primary_key = 1 AND ic.key_ordinal > 0
    ORDER BY ic.key_ordinal FOR JSON PATH)`

// ctSetup is what ctCheckQuery reads.
type ctSetup struct {
	database, user string
	dbTracked      bool
	retention      string
	tableTracked   bool
	snapshot       string // sys.databases.snapshot_isolation_state_desc: ON, OFF, IN_TRANSITION_TO_ON...
	viewCT         bool
	trackColumns   bool     // TRACK_COLUMNS_UPDATED is on for the table
	pk             []string // the table's primary key columns, in order; nil when it has none
}

// problems lists what keeps the cursor from working, each with the statement that fixes it, in
// the order to run them; none when the set-up is complete. poller is the poller's key.
func (st ctSetup) problems(dl driver.Driver, table string, poller []string) []string {
	var out []string
	db := dl.Quote(st.database)
	if !st.dbTracked {
		out = append(out, fmt.Sprintf("Change Tracking is off in database %s: ALTER DATABASE %s SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 2 DAYS, AUTO_CLEANUP = ON) (the retention must outlast the longest time the poller may be stopped or idle)", db, db))
	}
	if !st.tableTracked {
		out = append(out, fmt.Sprintf("Change Tracking is off for the table: ALTER TABLE %s ENABLE CHANGE_TRACKING", table))
	}
	if st.snapshot != "ON" {
		now := st.snapshot
		if now == "" {
			now = "unknown"
		}
		out = append(out, fmt.Sprintf("database %s does not allow snapshot isolation (ALLOW_SNAPSHOT_ISOLATION is %s), which the reads need so that the change versions and the rows agree: ALTER DATABASE %s SET ALLOW_SNAPSHOT_ISOLATION ON", db, now, db))
	}
	if !st.viewCT {
		out = append(out, fmt.Sprintf("the user %s lacks the VIEW CHANGE TRACKING permission on the table: GRANT VIEW CHANGE TRACKING ON %s TO %s", dl.Quote(st.user), table, dl.Quote(st.user)))
	}
	switch {
	case len(st.pk) == 0:
		out = append(out, fmt.Sprintf("the table has no primary key, which Change Tracking needs: add one (ALTER TABLE %s ADD CONSTRAINT ... PRIMARY KEY (%s)) and make it the poller's key", table, strings.Join(driver.QuoteAll(dl, poller), ", ")))
	case !sameColumns(st.pk, poller):
		out = append(out, fmt.Sprintf("the poller's key (%s) is not the table's primary key (%s), which is all CHANGETABLE returns of a change: make the poller's key %s",
			strings.Join(poller, ", "), strings.Join(st.pk, ", "), strings.Join(st.pk, ", ")))
	}
	return out
}

// sameColumns: the same column names, in any order, ignoring case (SQL Server's catalog
// collation usually does).
func sameColumns(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y string) bool { return strings.EqualFold(x, y) }) {
			return false
		}
	}
	return true
}

func (c *changeTracking) fail(problems ...string) error {
	return fmt.Errorf("source: poller %q, table %s: %w: %s", c.l.Poller(), c.l.Definition().Table, ErrNotTracked, strings.Join(problems, "; "))
}

// Check reads the set-up in one query and names every problem with its fix. It creates nothing.
func (c *changeTracking) Check(ctx context.Context) error {
	var (
		st                                    ctSetup
		exists, dbOn, tableOn, view, columns  int64
		retention, snapshot, pk, user, dbName sql.NullString
	)
	err := c.l.DB().QueryRowContext(ctx, ctCheckQuery, c.table).Scan(&dbName, &user, &exists, &dbOn, &retention, &tableOn, &snapshot, &view, &columns, &pk)
	if err != nil {
		return c.l.Errorf("checking the Change Tracking set-up: %v", err)
	}
	if exists == 0 {
		return c.l.SchemaErr("", "the table does not exist")
	}
	st = ctSetup{database: dbName.String, user: user.String, dbTracked: dbOn == 1, retention: retention.String,
		tableTracked: tableOn == 1, snapshot: snapshot.String, viewCT: view == 1, trackColumns: columns == 1}
	if pk.Valid && pk.String != "" {
		var cols []struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal([]byte(pk.String), &cols); err != nil {
			return c.l.Errorf("reading the primary key's columns %s: %v", pk.String, err)
		}
		for _, col := range cols {
			st.pk = append(st.pk, col.Name)
		}
	}
	if p := st.problems(c.l.Driver(), c.table, c.l.Definition().PK); len(p) > 0 {
		return c.fail(p...)
	}
	if err := checkCodePages(ctx, c.l.DB(), c.l.Driver(), c.l.Definition().Table, c.l.KeyColumns()); err != nil {
		return fmt.Errorf("source: poller %q, table %s: %w", c.l.Poller(), c.l.Definition().Table, err)
	}
	// The commit time needs VIEW SERVER STATE (VIEW DATABASE STATE on Azure SQL Database):
	// without it, the changes carry none (docs/changes.md).
	d := c.l.Definition()
	q := buildCTQueries(c.l.Driver(), d.Table, c.l.Columns(), d.PK, c.l.KeyMarker, ctOptions{columns: st.trackColumns, commitTime: readsCommitTime(ctx, c.l.DB()), skip: d.SkipWriter})
	c.mu.Lock()
	c.retention, c.q = st.retention, q
	c.mu.Unlock()
	return nil
}

// queries are the cursor's SQL as the last Check found the database.
func (c *changeTracking) queries() ctQueries {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.q
}

// ctPosition is a changetracking cursor read: a version boundary (key nil), or a position inside
// version (key: the key values of the last change done there, as query arguments).
type ctPosition struct {
	version int64
	key     []any
}

// insideVersion is the version p is inside, whose changes before it a read does not count
// (number); -1 for a boundary or the beginning (nil).
func (p *ctPosition) insideVersion() int64 {
	if p == nil || p.key == nil {
		return -1
	}
	return p.version
}

// base is the version the read after p passes to CHANGETABLE(CHANGES ...).
func (p ctPosition) base() int64 {
	if p.key != nil {
		return p.version - 1
	}
	return p.version
}

// position reads a stored cursor, checking that it fits: its kind, a whole version, and either no
// tiebreaker or one holding exactly the key columns, each a value of its column's type.
func (c *changeTracking) position(cur *state.Cursor) (ctPosition, error) {
	fail := func(format string, args ...any) (ctPosition, error) {
		return ctPosition{}, fmt.Errorf("source: poller %q: %w: %s", c.l.Poller(), source.ErrCursor, fmt.Sprintf(format, args...))
	}
	if cur.Kind != state.KindChangeTracking {
		return fail("the stored cursor is of kind %q, the source's is %q", cur.Kind, state.KindChangeTracking)
	}
	v, err := parseVersion(string(cur.Value))
	if err != nil {
		return fail("%v", err)
	}
	p := ctPosition{version: v}
	if len(cur.Tiebreaker) == 0 {
		return p, nil
	}
	if v < 1 {
		return fail("a position inside version %d: versions inside which changes are read start at 1", v)
	}
	keys := c.l.KeyColumns()
	if len(cur.Tiebreaker) != len(keys) {
		return fail("the stored cursor's tiebreaker has %d columns, the table's key has %d (%s)", len(cur.Tiebreaker), len(keys), strings.Join(keys, ", "))
	}
	for i, k := range keys {
		raw, ok := cur.Tiebreaker[k]
		if !ok {
			return fail("the stored cursor's tiebreaker lacks key column %q", k)
		}
		val, err := c.l.DecodeKey(i, raw)
		if err != nil {
			return fail("key column %q: value %s: %v", k, raw, err)
		}
		p.key = append(p.key, val)
	}
	return p, nil
}

// parseVersion reads a change version: a whole number, 0 or more.
func parseVersion(s string) (int64, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a change version (a whole number, 0 or more, as CHANGE_TRACKING_CURRENT_VERSION() gives)", s)
	}
	return v, nil
}

// ctCursor is the cursor at version v: a boundary when key is nil, else inside v after key.
func ctCursor(v int64, key map[string]json.RawMessage) state.Cursor {
	return state.Cursor{Kind: state.KindChangeTracking, Value: json.RawMessage(strconv.FormatInt(v, 10)), Tiebreaker: key}
}

func (c *changeTracking) CheckCursor(cur *state.Cursor) error {
	_, err := c.position(cur)
	return err
}

// CursorFromText reads a version an operator typed: the boundary after it (every change up to
// and including that version is done).
func (c *changeTracking) CursorFromText(value string) (*state.Cursor, error) {
	v, err := parseVersion(value)
	if err != nil {
		return nil, fmt.Errorf("source: poller %q: %w: %v", c.l.Poller(), source.ErrCursor, err)
	}
	cur := ctCursor(v, nil)
	return &cur, nil
}

// Committed: the checkpoint in the state blob is all there is; Change Tracking keeps changes for
// its retention whatever the readers did.
func (c *changeTracking) Committed(context.Context, *state.Cursor) error { return nil }

// ctRead is one read's query (the From or After form), its arguments but the limit (which the
// reader appends), and the versions it was checked against.
type ctRead struct {
	query             string
	args              []any
	pos               *ctPosition // nil: the beginning
	current, minValid int64
	base              int64 // the version CHANGETABLE's ops are relative to (ctRun)
	resumed           bool  // the read goes on with a run
}

// read reads the bound, then runs do in a snapshot transaction after checking the cursor
// against the versions; q are the queries as the caller took them (one Check's).
// A fetch goes on with the run (ctRun) that ended at after; a count (run nil) reads its own
// bound.
func (c *changeTracking) read(ctx context.Context, q ctQueries, run *ctRun, after *state.Cursor, from, inside string, do func(tx *sql.Tx, rd ctRead) error) error {
	var p *ctPosition
	if after != nil {
		pos, err := c.position(after)
		if err != nil {
			return err
		}
		p = &pos
	}
	// The bound first, outside the snapshot: every version up to it is complete in the snapshot.
	var current, minValid sql.NullInt64
	r, resumed := run.resume(after)
	if resumed {
		current = sql.NullInt64{Int64: r.bound, Valid: true}
	} else if err := c.l.DB().QueryRowContext(ctx, q.Current).Scan(&current); err != nil {
		return c.readErr("reading CHANGE_TRACKING_CURRENT_VERSION()", err)
	}
	tx, err := c.l.DB().BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSnapshot})
	if err != nil {
		return c.readErr("starting the snapshot transaction", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, q.MinValid, c.table).Scan(&minValid); err != nil {
		return c.readErr("reading CHANGE_TRACKING_MIN_VALID_VERSION", err)
	}
	args, in, err := c.args(p, current, minValid)
	if err != nil {
		return err
	}
	if resumed {
		runBase(args, r.bases[0], minValid.Int64)
	}
	rd := ctRead{query: from, args: args, pos: p, current: current.Int64, minValid: minValid.Int64, base: args[0].(int64), resumed: resumed}
	if in {
		rd.query = inside
	}
	if err := do(tx, rd); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return c.readErr("ending the snapshot transaction", err)
	}
	return nil
}

// args checks the position p (nil: the beginning) against the database's current and minimum
// valid versions and returns the read's arguments (but the limit), and whether the read is the
// After form (inside a version) rather than the From form.
func (c *changeTracking) args(p *ctPosition, current, minValid sql.NullInt64) ([]any, bool, error) {
	switch {
	case !current.Valid:
		return nil, false, c.fail("Change Tracking is off in the database now (CHANGE_TRACKING_CURRENT_VERSION() is NULL); turn it back on and reset the poller: its changes since were not recorded")
	case !minValid.Valid:
		return nil, false, c.fail(fmt.Sprintf("CHANGE_TRACKING_MIN_VALID_VERSION of the table is NULL: Change Tracking is off for the table, or the user lacks VIEW CHANGE TRACKING on it (ALTER TABLE %s ENABLE CHANGE_TRACKING; GRANT VIEW CHANGE TRACKING ON %s TO <the poller's user>)", c.table, c.table))
	}
	if p == nil {
		return []any{minValid.Int64, minValid.Int64, current.Int64}, false, nil
	}
	if p.base() < minValid.Int64 {
		return nil, false, c.expired(*p, minValid.Int64)
	}
	if p.version > current.Int64 {
		return nil, false, fmt.Errorf("source: poller %q, table %s: %w: the checkpoint is at change version %d, ahead of the database's CHANGE_TRACKING_CURRENT_VERSION() %d: the database was restored or recreated, or the version was typed wrong; the changes below it would be skipped. Reset the poller: pollerctl reset %s --to-beginning --yes (or --to-cursor <a version at or below %d>)",
			c.l.Poller(), c.l.Definition().Table, source.ErrCursor, p.version, current.Int64, c.l.Poller(), current.Int64)
	}
	if p.key == nil {
		return []any{p.version, p.version, current.Int64}, false, nil
	}
	args := append([]any{p.version - 1, p.version}, p.key...)
	return append(args, current.Int64), true, nil
}

// expired is the error for a checkpoint older than the table's minimum valid version.
func (c *changeTracking) expired(p ctPosition, minValid int64) error {
	where := fmt.Sprintf("version %d", p.version)
	if p.key != nil {
		where = fmt.Sprintf("inside version %d", p.version)
	}
	retention := ""
	if c.retention != "" {
		retention = " after " + c.retention
	}
	return fmt.Errorf("source: poller %q, table %s: %w (%w): the checkpoint (%s) reads the changes after version %d, but the table's CHANGE_TRACKING_MIN_VALID_VERSION is %d: Change Tracking has forgotten changes in between (its cleanup drops them%s, and a TRUNCATE TABLE drops them all), and they cannot be delivered. The poller stops here rather than skip them. To go on from the oldest change still kept: pollerctl reset %s --to-beginning --yes; the rows changed meanwhile must then be re-read from the table (the consumer resynchronizes), since their changes are lost",
		c.l.Poller(), c.l.Definition().Table, ErrExpired, source.ErrCursor, where, p.base(), minValid, retention, c.l.Poller())
}

// readErr names the fix when SQL Server refuses the snapshot transaction.
func (c *changeTracking) readErr(what string, err error) error {
	var me mssql.Error
	if errors.As(err, &me) && me.Number == 3952 { // snapshot isolation not allowed in the database
		return c.fail(fmt.Sprintf("%s: ALTER DATABASE <the database> SET ALLOW_SNAPSHOT_ISOLATION ON", me.Message))
	}
	return c.l.Errorf("%s: %v", what, err)
}

// Fetch reads up to limit changes after the cursor. It asks for one more, so that it knows
// whether the last one ends its transaction (Row.Transaction's Last), and leaves that one out.
// A fetch that goes on with a run (ctRun) takes the changes the run read ahead, or reads ahead.
func (c *changeTracking) Fetch(ctx context.Context, after *state.Cursor, limit int) (*row.Batch, error) {
	if run, ok := c.run.takeAhead(after); ok {
		p, err := c.position(after)
		if err != nil {
			return nil, err
		}
		return c.deliver(after, limit, run.ahead, run.whole, p.insideVersion(), run), nil
	}
	var (
		got   []ctChange
		whole bool // the read reached its bound
		rd0   ctRead
	)
	q := c.queries()
	err := c.read(ctx, q, &c.run, after, q.FetchFrom, q.FetchAfter, func(tx *sql.Tx, rd ctRead) error {
		n := limit + 1
		if rd.resumed { // a backlog: read ahead
			n = max(limit, ctReadAhead) + 1
		}
		var err error
		got, err = c.changes(ctx, tx, q, rd, n)
		whole, rd0 = len(got) < n, rd
		return err
	})
	if err != nil {
		return nil, err
	}
	b := c.deliver(after, limit, got, whole, rd0.pos.insideVersion(), ctRunState{bases: []int64{rd0.base}, bound: rd0.current})
	if len(b.Rows) == 0 && ctKeepUp(rd0.pos, rd0.current, rd0.minValid) {
		to := ctCursor(rd0.current, nil)
		b.To = &to
	}
	return b, nil
}

// ctReadAhead is how many changes a fetch that goes on with a run reads at once (or the batch's
// size when larger): each read of CHANGETABLE computes every change after its base, whatever
// TOP takes, so paging a backlog (one transaction of 100,000 changes, say) a batch a read costs
// the backlog for each batch; read ahead, the run takes the changes it has read, and reads once
// for many batches. Their values are the rows as they were when read: a row changed since comes
// again at its later version, in a later run.
const ctReadAhead = 10_000

// deliver makes the batch of a fetch after after: up to limit of got (a read's changes, or a
// run's read ahead: in order, unnumbered; the one more a read asks for, which says only its
// version, last when the read stopped short of its bound), numbered; whole says the changes end
// at the bound. What follows the batch is kept for the run's next fetch, with the run's bases and
// bound (run), and a fetch that delivers all there was up to the bound ends the run.
func (c *changeTracking) deliver(after *state.Cursor, limit int, got []ctChange, whole bool, inside int64, run ctRunState) *row.Batch {
	n := len(got)
	for i, ch := range got {
		if ch.ch == nil { // the one more: no change to deliver
			n = i
			break
		}
	}
	var batch []ctChange
	more := false // a change after the batch's was read: the batch stopped short of the bound
	if k := min(limit, n); k < len(got) {
		batch, more = number(got[:k+1], k, inside)
	} else {
		batch, more = number(got, limit, inside)
	}
	b := c.l.Batch(after)
	b.Rows = rowsOf(batch)
	if len(batch) > 0 {
		b.To = seal(batch[len(batch)-1].ch, !more)
	}
	run.ahead, run.whole = nil, whole
	if more {
		run.ahead = got[len(batch):]
	}
	c.run.record(b.To, more, run)
	if !more { // it read all there was up to its bound
		end := b.To
		if end == nil {
			end = after
		}
		c.mu.Lock()
		c.done.set, c.done.at, c.done.bound = true, cursorKey(end), run.bound
		c.mu.Unlock()
	}
	return b
}

// ctChange is a change a read returned, in the order of the read: its version, the commit's
// time (zero when not read), its row and what the row carries.
type ctChange struct {
	version int64
	at      time.Time
	row     row.Row
	ch      *row.Change
}

// changes runs rd's read (its query, with n as the limit) in tx and returns its changes, each
// with its row and change made, its columns changed marked; not yet numbered (number). The n-th,
// the one more a fetch asks for, says only its version: it is not delivered, and a row it
// could not make must not fail the batch before it.
func (c *changeTracking) changes(ctx context.Context, tx *sql.Tx, q ctQueries, rd ctRead, n int) ([]ctChange, error) {
	rows, err := tx.QueryContext(ctx, rd.query, append(rd.args, n)...)
	if err != nil {
		return nil, c.readErr("reading the changes", err)
	}
	defer rows.Close()
	out := make([]ctChange, 0, min(n, 1025))
	sc := newCTScan(len(c.l.Columns()), q.opts)
	for rows.Next() {
		if err := rows.Scan(sc.ptrs...); err != nil {
			return nil, c.l.Errorf("reading the changes: %v", err)
		}
		if len(out) == n-1 {
			out = append(out, ctChange{version: sc.version})
			break
		}
		r, ch, err := c.row(sc.version, sc.op, sc.found == 1, sc.values())
		if err != nil {
			return nil, err
		}
		if changed := sc.changed(ch.Op, c.l); changed != nil {
			ch.Images = &row.Images{Changed: changed}
		}
		out = append(out, ctChange{version: sc.version, at: sc.commitTime(), row: r, ch: ch})
	}
	if err := rows.Err(); err != nil {
		return nil, c.readErr("reading the changes", err)
	}
	return out, nil
}

// number gives the changes of a read, in order, their transactions (a version each, its commit
// time the first change's), their places in them and the last one's mark, and keeps the first
// limit: more says there was a change after them (the one more a fetch asks for), so the read
// stopped short of its bound; without it the last change ends its version. inside is the version
// the read resumed inside (-1: none), whose changes before are not counted: no index there.
func number(changes []ctChange, limit int, inside int64) (batch []ctChange, more bool) {
	var tx0 *ctTx // the transaction of the changes numbered last
	for i, c := range changes {
		if tx0 != nil && tx0.version != c.version {
			tx0.last.Last = true
		}
		if i == limit { // the one more: the read did not reach its bound
			return changes[:limit], true
		}
		if tx0 == nil || tx0.version != c.version {
			tx0 = &ctTx{version: c.version, commit: &row.Commit{ID: uint64(c.version), Version: c.version, Time: c.at}}
			tx0.unknown = inside == c.version
		}
		c.ch.Commit = tx0.commit
		if tx0.count++; !tx0.unknown {
			c.ch.Index = int32(tx0.count)
		}
		tx0.last = c.ch
	}
	if tx0 != nil { // it read all there was up to its bound: its version is whole
		tx0.last.Last = true
	}
	return changes, false
}

// rowsOf are the changes' rows.
func rowsOf(changes []ctChange) []row.Row {
	out := make([]row.Row, len(changes))
	for i, c := range changes {
		out[i] = c.row
	}
	return out
}

// ctTx is a transaction (a change version) as a fetch reads its changes.
type ctTx struct {
	version int64
	commit  *row.Commit
	count   int
	unknown bool        // the read began inside it: its changes' places are not known
	last    *row.Change // its last change read
}

// ctScan is where a fetch's row is scanned: the version, op and found flag, what ctOptions add,
// and the values.
type ctScan struct {
	version  int64
	op       string
	found    int64
	at       sql.NullTime
	allCols  int64  // SYS_CHANGE_COLUMNS is NULL: every column changed (an update)
	mask     []bool // by column: in SYS_CHANGE_COLUMNS
	vals     []any
	ptrs     []any
	opts     ctOptions
	nColumns int
}

func newCTScan(n int, o ctOptions) *ctScan {
	sc := &ctScan{opts: o, nColumns: n}
	sc.ptrs = append(sc.ptrs, &sc.version, &sc.op, &sc.found)
	if o.commitTime {
		sc.ptrs = append(sc.ptrs, &sc.at)
	}
	if o.columns {
		sc.mask = make([]bool, n)
		sc.ptrs = append(sc.ptrs, &sc.allCols)
		for i := range sc.mask {
			sc.ptrs = append(sc.ptrs, &sc.mask[i])
		}
	}
	sc.vals = make([]any, n)
	for i := range sc.vals {
		sc.ptrs = append(sc.ptrs, &sc.vals[i])
	}
	return sc
}

// values hands over the values scanned, and makes room for the next row's.
func (sc *ctScan) values() []any {
	out := sc.vals
	sc.vals = make([]any, sc.nColumns)
	for i := range sc.vals {
		sc.ptrs[len(sc.ptrs)-sc.nColumns+i] = &sc.vals[i]
	}
	return out
}

// commitTime is the scanned commit time in UTC; zero when not read.
func (sc *ctScan) commitTime() time.Time {
	if !sc.at.Valid {
		return time.Time{}
	}
	t := sc.at.Time
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// changed marks the columns an update changed, from its column mask; nil for other ops and
// when the table does not track them. A NULL mask on an update means every column but the key.
func (sc *ctScan) changed(op string, l driver.Layout) []bool {
	if !sc.opts.columns || op != row.OpUpdate {
		return nil
	}
	out := slices.Clone(sc.mask)
	if sc.allCols == 1 {
		for i := range out {
			out[i] = !slices.Contains(l.KeyIndex(), i)
		}
	}
	return out
}

// ctKeepUp says whether a read that found nothing after p, up to current, moves the checkpoint
// to current: when p has come closer to the minimum valid version than to the current one (see
// the file's comment). Never from the beginning, which follows the minimum valid version anyway.
func ctKeepUp(p *ctPosition, current, minValid int64) bool {
	if p == nil || current <= p.version {
		return false
	}
	base := p.base()
	return base-minValid < current-base
}

// seal is the To of a batch whose last row's change is last: that row's cursor, made a version
// boundary when the read reached its bound (whole: no change after the batch's was read), so
// that the last row's version is complete.
func seal(last *row.Change, whole bool) *state.Cursor {
	if whole {
		last.Cursor.Tiebreaker = nil
	}
	to := last.Cursor
	return &to
}

// row makes a Row of one change: op its SYS_CHANGE_OPERATION, found whether the table has the
// row now, vals the columns in the source's order (the key from CHANGETABLE, the rest from the
// table). Its cursor is inside version, after its key.
func (c *changeTracking) row(version int64, op string, found bool, vals []any) (row.Row, *row.Change, error) {
	l := c.l
	kind, keyOnly, err := ctOp(op, found)
	if err != nil {
		return row.Row{}, nil, l.Errorf("the change at version %d: %v", version, err)
	}
	keyIdx, keyCols := l.KeyIndex(), l.KeyColumns()
	if keyOnly {
		for i := range vals {
			if !slices.Contains(keyIdx, i) {
				vals[i] = nil
			}
		}
	}
	ch := &row.Change{Op: kind, KeyOnly: keyOnly}
	key := make(map[string]json.RawMessage, len(keyIdx))
	for j, idx := range keyIdx {
		if vals[idx] == nil {
			return row.Row{}, nil, fmt.Errorf("source: poller %q, table %s, column %q: %w: the change at version %d carries no key", l.Poller(), l.Definition().Table, keyCols[j], source.ErrNullCursor, version)
		}
		raw, err := l.EncodeKey(j, vals[idx])
		if err != nil {
			return row.Row{}, nil, fmt.Errorf("source: poller %q, table %s, column %q: the change at version %d: %w", l.Poller(), l.Definition().Table, keyCols[j], version, err)
		}
		key[keyCols[j]] = raw
	}
	ch.Cursor = ctCursor(version, key)
	return l.Row(vals, ch), ch, nil
}

// ctOp maps SYS_CHANGE_OPERATION to a Row's op. An insert or an update whose row the table no
// longer has (found false) is delivered as a delete of its key: the row is gone.
func ctOp(op string, found bool) (kind string, keyOnly bool, err error) {
	switch strings.TrimSpace(op) {
	case "I":
		kind = row.OpInsert
	case "U":
		kind = row.OpUpdate
	case "D":
		return row.OpDelete, true, nil
	default:
		return "", false, fmt.Errorf("unknown SYS_CHANGE_OPERATION %q", op)
	}
	if !found {
		return row.OpDelete, true, nil
	}
	return kind, false, nil
}

// A ctRun is the fetches that page through one backlog: each fetch that stops short of its
// bound (it read one more change than it delivers) leaves the next fetch, from where it ended,
// its bound and the base its ops are relative to, instead of a new bound and its own position.
//
// Why: CHANGETABLE(CHANGES t, @base) reports each changed row once, at its latest version, with
// its net op since @base. A read that resumes where the last one ended, from that position as
// its base, says "update" of a row inserted after the run began whose insert it never delivered:
// a row inserted at version 5 and updated at 9 before the poller read version 5 is at version 9
// in every read, and from a base of 6 it is an update, the first the consumer hears of it (the
// same inside a transaction larger than a batch, whose reads resume from the version before).
// So the reads of a run keep the run's base, and select the changes after their own position by
// version (FetchFrom's lower bound, FetchAfter's keyset): a paged backlog gets the ops one read
// of it all would give.
//
// The run keeps its bound so that the rows it reads are the same in each of its reads: a row's
// latest version at or below the bound was so when the run's first read began (every version up
// to the bound had committed), and a row changed since has a version above the bound, which every
// read of the run leaves out (the next run reads it, at that version). So each row comes at most
// once in a run, and the base stays right for every row not yet read.
//
// A run is kept in memory only: a fetch from any other cursor (the next tick, a retry, another
// process) begins a run of its own, whose base is its position's. Ops relative to a position are
// what a consumer gets across runs; docs/changes.md says what an update may then mean.
type ctRun struct {
	mu sync.Mutex
	at string // cursorKey of the To of the run's last fetch; "" when there is no run
	ctRunState
}

// ctRunState is what a run carries from one fetch to the next.
type ctRunState struct {
	bases []int64 // by table: the base of the table's reads
	bound int64
	// ahead are the changes read past the last fetch's (changeTracking.deliver), whole whether
	// they end at the bound (else the one more a read asks for ends them).
	ahead []ctChange
	whole bool
}

// resume returns the run's state when after is where its last fetch ended. A nil run never
// resumes.
func (r *ctRun) resume(after *state.Cursor) (ctRunState, bool) {
	if r == nil {
		return ctRunState{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == "" || r.at != cursorKey(after) {
		return ctRunState{}, false
	}
	return r.ctRunState, true
}

// takeAhead takes the run's state when after is where its last fetch ended and the run has read
// changes ahead of it: a fetch from after delivers them, and no other fetch can (the run goes on
// from where that fetch ends).
func (r *ctRun) takeAhead(after *state.Cursor) (ctRunState, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == "" || r.at != cursorKey(after) || len(r.ahead) == 0 || r.ahead[0].ch == nil {
		return ctRunState{}, false
	}
	st := r.ctRunState
	r.at, r.ctRunState = "", ctRunState{}
	return st, true
}

// record ends a fetch: one that stopped short of its bound (more) is continued by a fetch from
// to, with st; any other ends the run.
func (r *ctRun) record(to *state.Cursor, more bool, st ctRunState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at, r.ctRunState = "", ctRunState{}
	if more && to != nil {
		r.at, r.ctRunState = cursorKey(to), st
	}
}

// runBase makes a read's base (args[0], as args made it) the run's, when that is earlier and
// Change Tracking still keeps the changes after it; else the read's own stays (the run's
// beginning was cleaned up meanwhile: its ops are relative to the position, as a new run's).
func runBase(args []any, base, minValid int64) {
	if own := args[0].(int64); base < own && base >= minValid {
		args[0] = base
	}
}

// Waiting counts the changes after the cursor, up to limit, within the same bound as fetch.
func (c *changeTracking) Waiting(ctx context.Context, after *state.Cursor, limit int) (int64, error) {
	var n int64
	q := c.queries()
	err := c.read(ctx, q, nil, after, q.WaitingFrom, q.WaitingAfter, func(tx *sql.Tx, rd ctRead) error {
		if err := tx.QueryRowContext(ctx, rd.query, append(rd.args, limit)...).Scan(&n); err != nil {
			return c.readErr("counting the changes", err)
		}
		return nil
	})
	return n, err
}

// A backfill beside the changetracking cursor (driver.ChangeStream.Watermark): its chunk is read in a
// snapshot transaction begun after reading CHANGE_TRACKING_CURRENT_VERSION() (v), as a fetch
// reads its bound, so every version up to v is complete in the snapshot. A change whose version
// is above v may not be in it: it counts as newer, and the tick drops that key's read (one in
// the snapshot after all only costs its read: the live change delivers the row). The stream has
// passed the watermark once the cursor's base is at or past v, or once a fetch from the cursor
// found nothing more up to a bound at or past v (an idle table; see reached).

// Watermarks says the changetracking cursor can run a backfill.
func (c *changeTracking) Watermarks() error { return nil }

// Watermark runs read, a backfill chunk's query, in a snapshot it judges the stream against.
func (c *changeTracking) Watermark(ctx context.Context, read func(q driver.Querier) error) (driver.Watermark, error) {
	var current sql.NullInt64
	if err := c.l.DB().QueryRowContext(ctx, c.queries().Current).Scan(&current); err != nil {
		return nil, c.readErr("backfill chunk: reading CHANGE_TRACKING_CURRENT_VERSION()", err)
	}
	if !current.Valid {
		return nil, c.fail("Change Tracking is off in the database now (CHANGE_TRACKING_CURRENT_VERSION() is NULL)")
	}
	tx, err := c.l.DB().BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSnapshot})
	if err != nil {
		return nil, c.readErr("backfill chunk: starting the snapshot transaction", err)
	}
	defer tx.Rollback()
	if err := read(tx); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, c.readErr("backfill chunk: ending the snapshot transaction", err)
	}
	return &ctWatermark{c: c, version: current.Int64}, nil
}

// ctWatermark is a chunk's version: every change at or below it is in the chunk's snapshot.
type ctWatermark struct {
	c       *changeTracking
	version int64
}

// Newer says r's change is above the chunk's version (or its version cannot be read).
func (w *ctWatermark) Newer(r row.Row) bool {
	cur, err := r.Cursor()
	if err != nil {
		return true
	}
	p, err := w.c.position(&cur)
	return err != nil || p.version > w.version
}

// Reached says every change at or below the chunk's version is delivered at cur.
func (w *ctWatermark) Reached(cur *state.Cursor) bool {
	if w.c.reachedAt(cur) >= w.version {
		return true
	}
	if cur == nil { // the beginning: only a fetch that found nothing more says it is reached
		return false
	}
	p, err := w.c.position(cur)
	return err == nil && p.base() >= w.version
}

// reachedAt is the bound up to which the last fetch that read all there was after its cursor
// read, if that fetch ended at cur (its last row's cursor, or cur itself when it found none); -1
// otherwise.
func (c *changeTracking) reachedAt(cur *state.Cursor) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done.set || c.done.at != cursorKey(cur) {
		return -1
	}
	return c.done.bound
}

// cursorKey renders a cursor to compare two; nil, the beginning, too.
func cursorKey(cur *state.Cursor) string {
	if cur == nil {
		return "<beginning>"
	}
	b, _ := json.Marshal(cur)
	return string(b)
}
