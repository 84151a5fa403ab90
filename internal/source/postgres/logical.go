package postgres

// The logical cursor: PostgreSQL logical decoding of the poller's table, read over ordinary SQL.
//
// A replication slot (plugin pgoutput) and a publication of the table, both made by `pollerctl
// cdc enable`, give the table's committed changes in commit order: inserts, updates and deletes,
// never a rolled-back change, never a change of a transaction still open. Each fetch peeks
// (pg_logical_slot_peek_binary_changes, which consumes nothing) from the slot's confirmed
// position, reads the rows' bytes through pgconn and decodes the pgoutput messages (the changes,
// begins and commits by hand, see pgoutput.go; the rest with pglogrepl). The slot moves only
// when the tick calls Committed after a successful commit of the state blob, and only up to that
// checkpoint (pg_replication_slot_advance). The streaming protocol (START_REPLICATION) is not
// used to catch up: measured against the peek, PostgreSQL 15's walsender sent the same changes
// 4-6 times slower (docs/cdc.md); only a tick that holds the lease and follows, once caught up,
// streams the slot (stream.go), confirming only what the blob committed. The blob is the truth:
// a holder whose commit was refused never advances, and a late advance by an old holder only
// trails the newest checkpoint.
//
// Positions (see pgcdc.Position): a transaction is done when the checkpoint's LSN is past the
// start of its commit record; inside a transaction larger than a batch the checkpoint counts the
// changes done, so a tick (or a process after a crash) resumes in the middle of it. A
// transaction is decoded whole by every peek that reaches it, so the decoded changes are kept in
// memory between fetches (cache) and a transaction of 10,000 changes read in batches of 100 is
// decoded once per process, not once per batch.
//
// What a change carries:
//   - insert: the new row. update: the new row; a column whose value PostgreSQL did not send (an
//     unchanged TOAST value) is taken from the old row under REPLICA IDENTITY FULL, and otherwise
//     listed by Row.Unchanged and left out of the row.
//   - delete: the key; the old row too under REPLICA IDENTITY FULL (Row.HasRow).
//   - an update that changes the key is delivered as a delete of the old key and an insert of the
//     new row, so that applying the changes in order to a map keyed by the key is exact.
//   - TRUNCATE stops the poller (ErrTruncate): its rows cannot be delivered one by one; the error
//     says how to skip it once the consumer has dealt with it.
//   - a schema change that removes a column the poller reads or changes its type stops the
//     poller at that change (ErrSchema, naming the column).

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

var (
	// ErrNotEnabled: the database is not set up for the logical cursor (wal_level, the slot, the
	// publication, a privilege, the replica identity); the error names the fix.
	ErrNotEnabled = source.Mark(errors.New("logical decoding is not set up for the poller"), source.ErrMisconfigured)
	// ErrTruncate: the table was truncated; the poller stops there (see the error for the way on).
	ErrTruncate = source.Mark(errors.New("the table was truncated"), source.ErrMisconfigured)
	// ErrSlotAhead: the replication slot is past the checkpoint: changes between were consumed
	// by something else and cannot be read again.
	ErrSlotAhead = source.Mark(errors.New("the replication slot is past the checkpoint"), driver.ErrStreamAhead, source.ErrMisconfigured)
)

type logical struct {
	driver.StreamDefaults
	lay     driver.Layout // the first table's: the connection, and errors naming every table
	poller  string
	def     sourcedef.Definition // the poller's: its first table's, and the slot's and the others'
	slot    string
	pub     string
	tabs    []*ltable // the poller's tables, the first first (Definition.More)
	types   *pgtype.Map
	typesMu sync.Mutex // types is not safe for concurrent use, and rows decode when read

	rels map[uint32]int // the tables' oids (their changes carry them), to their index in tabs
	// layoutAt is the end of the WAL when Check read the table's columns: a change committed
	// before it was written with the columns of its time, one committed after with today's or
	// later ones (AllColumns).
	layoutAt pglogrepl.LSN
	// messages: the server (PostgreSQL 14 or later) sends logical decoding messages, which
	// keep-up uses; keepUp is the distance behind the WAL's end that makes an idle fetch write one.
	messages bool
	keepUp   int64
	// events, for a messages outbox (sourcedef.Definition.ReadsMessages), decode its rows'
	// columns (sourcedef.MessageColumns); nil for a table's poller.
	events []func([]byte) (any, error)

	peekMu sync.Mutex // one peek at a time: the slot serves one reader, and the cache's decoder is reused
	mu     sync.Mutex
	cache  *peeked // the last peek, decoded
	ask    int     // the rows the last peek asked for: a catch-up keeps asking for at least as many
	// served is the position after the last batch Fetch served, servedLimit the rows it was asked
	// for (CommitWanted).
	served      pgcdc.Position
	servedLimit int
	slotAt      pglogrepl.LSN // the furthest position this process advanced the slot to
	// st is the slot's stream while a following tick streams it (stream.go), and noStreamUntil
	// when the next try at one may be made after one could not start or broke.
	st            *stream
	noStreamUntil time.Time
	// held times out the stream a tick held for the next one (Hold) while none took it over;
	// ended is closed when the last stream ended that way has ended (a new one starts after).
	held  *time.Timer
	ended <-chan struct{}
	// retained is the slot's retained WAL as a commit through a stream last read it, at
	// retainedAt (Stats).
	retained   int64
	retainedAt time.Time
	nextSoon   time.Time // the next time an Await without a wait may try to start one
}

// maxAsk bounds the rows one peek asks for, and so the changes a catch-up holds decoded at once
// (with CommitWanted, one peek's window): 131,072 pgoutput messages are about 94,000 changes
// in transactions of five; a catch-up of 100,000 or 1,000,000 of them peaked at 153 and 192-197 MB of
// the handler's RSS (bench.sh scale). A transaction larger than that is still read whole (grow).
var maxAsk = 1 << 17 // a variable for the tests (export_test.go)

// peeked is one peek's decoded stream.
type peeked struct {
	from     pglogrepl.LSN // the slot's confirmed position: the stream starts there
	behind   int64         // how far the slot's confirmed position is behind the WAL's end, in bytes
	retained int64         // the WAL the slot keeps (from its restart position), in bytes
	// rows are the table's changes in stream order; each one's cursor is after it. A nil one
	// is a place that is not a change: a stop (see stops), or a keep-up mark, a position the
	// cursor may move to with nothing to deliver.
	rows     []*change
	pos      []pgcdc.Position // pos[i] is rows[i]'s cursor
	complete bool             // the peek reached the end of the stream as it was then
	at       time.Time        // when it was read
	first    pgcdc.Position   // its changes before first were dropped (see continues)
	// flushed is the WAL flushed before it was read: a complete peek read every transaction that
	// committed up to there (the server decodes up to its flush position, no earlier).
	flushed pglogrepl.LSN
	asked   int      // the rows the peek asked for
	msgs    int      // the messages decoded
	d       *decoder // the decoder's state after them, for a longer peek from the same position
	// stops are the changes the poller cannot deliver (a truncate, a change without a column
	// it reads), by index in rows (whose entry there is a placeholder): a fetch delivers the rows
	// before one, and then returns its error until the poller is reset past it.
	stops map[int]error
}

// freshFor is how long a peek that reached the end of the stream answers a count without peeking
// again: the tick counts right after its last fetch, and a peek would send the whole stream
// again (the slot moves only at commits); later, a count must see what has come since. A fetch
// always peeks for what it lacks.
const freshFor = 250 * time.Millisecond

// covers reports whether p holds every change after pos that it read (pos is not before the
// changes it dropped, nor, for a checkpoint, before the slot it was read from).
func (p *peeked) covers(resume bool, pos pgcdc.Position) bool {
	return p != nil && !pos.Before(p.first) && (!resume || p.from <= pos.LSN)
}

// fresh reports whether p reached the end of the stream less than freshFor ago.
func (p *peeked) fresh() bool { return p.complete && time.Since(p.at) < freshFor }

// stop returns the error of the first stop in rows[i:j] and its index, or j and nil.
func (p *peeked) stop(i, j int) (int, error) {
	for k := i; k < j && len(p.stops) > 0; k++ {
		if err, ok := p.stops[k]; ok {
			return k, err
		}
	}
	return j, nil
}

// DefaultKeepUp is how far (in WAL bytes) a logical cursor's slot may fall behind the end of the
// WAL while its table is quiet before an idle tick moves it on (see keepUp).
const DefaultKeepUp int64 = 64 << 20

// ChangeStream reads the logical cursor kind.
func (d Driver) ChangeStream(kind string, l driver.Layout) (driver.ChangeStream, error) {
	if kind != state.KindLogical {
		return d.Defaults.ChangeStream(kind, l)
	}
	return newLogical(l), nil
}

func newLogical(lay driver.Layout) *logical {
	d := lay.Definition()
	keepUp := d.KeepUp
	if keepUp <= 0 {
		keepUp = DefaultKeepUp
	}
	l := &logical{lay: lay, poller: lay.Poller(), def: d, slot: d.Slot, pub: d.Publication, types: pgtype.NewMap(), keepUp: keepUp}
	for _, tl := range lay.Tables() {
		l.tabs = append(l.tabs, &ltable{lay: tl, def: tl.Definition(), table: tl.Table()})
	}
	if d.ReadsMessages() {
		l.events = eventDecoders(l.types, &l.typesMu)
	}
	return l
}

// ltable is one of the poller's tables.
type ltable struct {
	lay   driver.Layout        // makes its rows
	def   sourcedef.Definition // the table alone: its columns, key and filter
	table string               // the quoted table name, for to_regclass and messages
}

// fail is ErrNotEnabled for the stream (its slot, its publication), naming the poller's tables.
func (l *logical) fail(format string, args ...any) error { return notEnabled(l.lay, format, args...) }

// fail is ErrNotEnabled for the table t.
func (t *ltable) fail(format string, args ...any) error { return notEnabled(t.lay, format, args...) }

// notEnabled is ErrNotEnabled naming the poller and what lay lays out (its table, or the poller's
// tables).
func notEnabled(lay driver.Layout, format string, args ...any) error {
	return fmt.Errorf("source: poller %q, %s: %w: %s", lay.Poller(), lay.Label(), ErrNotEnabled, fmt.Sprintf(format, args...))
}

// change is a decoded change: what its row carries, its table (index in logical.tabs) and its
// position.
type change struct {
	row.Change
	tab int32
	pos pgcdc.Position
}

// Check reads what the cursor needs, a query for each table: wal_level, the role's REPLICATION,
// the slot, the publication and whether it covers the table, the replica identity and its
// columns.
func (l *logical) Check(ctx context.Context) error {
	// The end of the WAL now: the columns read below, after it, are those of every change written
	// from here on (AllColumns).
	var walAt string
	if err := l.lay.DB().QueryRowContext(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&walAt); err != nil {
		return l.lay.Errorf("reading the end of the WAL: %v", err)
	}
	at, err := pglogrepl.ParseLSN(walAt)
	if err != nil {
		return l.lay.Errorf("reading the WAL position %q: %v", walAt, err)
	}
	rels := map[uint32]int{}
	if l.def.ReadsMessages() {
		if err := l.checkMessages(ctx); err != nil {
			return err
		}
		l.messages = true
	}
	for i, t := range l.tabs {
		if l.def.ReadsMessages() {
			break // no table: checkMessages
		}
		oid, version, err := l.checkTable(ctx, t)
		if err != nil {
			return err
		}
		if j, ok := rels[oid]; ok {
			return fmt.Errorf("source: poller %q: %w: tables %s and %s are the same table: name it once", l.poller, sourcedef.ErrDefinition, l.tabs[j].def.Table, t.def.Table)
		}
		rels[oid], l.messages = i, version >= pgcdc.MessagesSince
	}
	l.rels, l.layoutAt = rels, at
	return nil
}

// checkTable checks the stream's set-up for table t (checkQuery), and returns its oid and the
// server's version.
func (l *logical) checkTable(ctx context.Context, t *ltable) (oid uint32, version int, err error) {
	const q = `SELECT current_setting('wal_level'), current_setting('server_version_num')::int, current_user::text, r.rolsuper OR r.rolreplication,
  c.oid, c.relreplident::text,
  s.slot_name IS NOT NULL, COALESCE(s.plugin, ''), COALESCE(s.slot_type, ''), COALESCE(s.database = current_database(), false),
  p.oid IS NOT NULL, COALESCE(p.pubinsert AND p.pubupdate AND p.pubdelete AND p.pubtruncate, false),
  EXISTS (SELECT 1 FROM pg_publication_tables pt WHERE pt.pubname = $2 AND pt.schemaname = n.nspname AND pt.tablename = c.relname),
  COALESCE((SELECT array_to_json(array_agg(a.attname::text ORDER BY array_position(i.indkey::int2[], a.attnum)))::text
    FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey::int2[])
    WHERE i.indrelid = c.oid AND (CASE c.relreplident WHEN 'i' THEN i.indisreplident ELSE i.indisprimary END)), '[]'),
  COALESCE((SELECT json_object_agg(a.attname, a.atttypid::int8)::text FROM pg_attribute a
    WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '{}')
FROM pg_roles r
LEFT JOIN pg_class c ON c.oid = to_regclass($3)
LEFT JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_replication_slots s ON s.slot_name = $1
LEFT JOIN pg_publication p ON p.pubname = $2
WHERE r.rolname = current_user`
	var (
		walLevel, user, ident, identCols, types, plugin, slotType    string
		replication, slotExists, slotHere, pubExists, pubAll, pubHas bool
		relid                                                        sql.NullInt64
	)
	err = l.lay.DB().QueryRowContext(ctx, q, l.slot, l.pub, t.table).Scan(&walLevel, &version, &user, &replication, &relid, &ident,
		&slotExists, &plugin, &slotType, &slotHere, &pubExists, &pubAll, &pubHas, &identCols, &types)
	if err != nil {
		return 0, 0, t.lay.Errorf("checking the logical decoding set-up: %v", err)
	}
	fail := func(format string, args ...any) (uint32, int, error) { return 0, 0, t.fail(format, args...) }
	st := streamSetup{walLevel: walLevel, user: user, replication: replication, slotExists: slotExists, plugin: plugin, slotType: slotType, slotHere: slotHere, pubExists: pubExists}
	if err := l.checkServer(st); err != nil {
		return 0, 0, err
	}
	if !relid.Valid {
		return 0, 0, t.lay.SchemaErr("", "the table does not exist")
	}
	if err := l.checkSlot(st); err != nil {
		return 0, 0, err
	}
	switch {
	case !pubHas:
		return fail("publication %q does not include the table: run `pollerctl cdc enable %s --yes`, which adds it (ALTER PUBLICATION %s ADD TABLE %s)", l.pub, l.poller, l.pub, t.table)
	case !pubAll:
		return 0, 0, l.fail("publication %q does not publish every operation; a truncate or a delete it left out would be lost silently: ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate')", l.pub, l.pub)
	}
	var keyCols []string
	if err := json.Unmarshal([]byte(identCols), &keyCols); err != nil {
		return 0, 0, t.lay.Errorf("reading the replica identity's columns %s: %v", identCols, err)
	}
	full := fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY FULL (deletes then carry the old row too)", t.table)
	switch ident {
	case "f":
	case "n":
		return fail("the table has REPLICA IDENTITY NOTHING: its updates and deletes carry no key: %s", full)
	default:
		what := "primary key"
		if ident == "i" {
			what = "replica identity index"
		}
		if len(keyCols) == 0 {
			return fail("the table has no primary key, so its deletes carry no key: add one, or %s", full)
		}
		if !slices.Equal(sortedCopy(keyCols), sortedCopy(t.def.PK)) {
			return fail("the poller's key (%s) is not the table's %s (%s), which is all a delete carries: make the key %s, or %s",
				strings.Join(t.def.PK, ", "), what, strings.Join(keyCols, ", "), strings.Join(keyCols, ", "), full)
		}
	}
	var oids map[string]uint32
	if err := json.Unmarshal([]byte(types), &oids); err != nil {
		return 0, 0, t.lay.Errorf("reading the column types %s: %v", types, err)
	}
	if t.lay.AllColumns() {
		for name := range oids {
			if !slices.Contains(t.lay.Columns(), name) { // added between the source's reads
				return 0, 0, fmt.Errorf("source: poller %q, table %s, column %q: %w while the source opened: it opens again", l.poller, t.def.Table, name, source.ErrColumnsChanged)
			}
		}
	}
	if err := l.checkFilter(ctx, t, version, relid.Int64); err != nil {
		return 0, 0, err
	}
	return uint32(relid.Int64), version, nil
}

// streamSetup is what a logical cursor's stream needs of the server, the role, the slot and the
// publication, as Check read it.
type streamSetup struct {
	walLevel, user, plugin, slotType             string
	replication, slotExists, slotHere, pubExists bool
}

// checkServer checks the server's wal_level and the role's REPLICATION.
func (l *logical) checkServer(st streamSetup) error {
	switch {
	case st.walLevel != "logical":
		return l.fail("the server's wal_level is %q; logical decoding needs wal_level = logical (ALTER SYSTEM SET wal_level = logical, then restart the server; on Azure Database for PostgreSQL Flexible Server set the server parameter wal_level to LOGICAL and restart)", st.walLevel)
	case !st.replication:
		return l.fail("the role %q has neither REPLICATION nor SUPERUSER, and reading a replication slot needs one: ALTER ROLE %s WITH REPLICATION (as a superuser or, on Azure, the server's admin)", st.user, Driver{}.Quote(st.user))
	}
	return nil
}

// checkSlot checks that the slot is a pgoutput slot of the database and that the publication
// exists.
func (l *logical) checkSlot(st streamSetup) error {
	enable := fmt.Sprintf("run `pollerctl cdc enable %s --yes`, which creates the publication and the slot", l.poller)
	switch {
	case !st.slotExists:
		return l.fail("replication slot %q does not exist: %s", l.slot, enable)
	case st.slotType != "logical" || st.plugin != "pgoutput":
		return l.fail("replication slot %q is a %s slot with plugin %q, not a logical slot with pgoutput: drop it or set {P}_CDC_SLOT to another name, then %s", l.slot, st.slotType, st.plugin, enable)
	case !st.slotHere:
		return l.fail("replication slot %q belongs to another database: set {P}_CDC_SLOT to another name, then %s", l.slot, enable)
	case !st.pubExists:
		return l.fail("publication %q does not exist: %s", l.pub, enable)
	}
	return nil
}

// checkMessages checks the stream of a messages outbox (sourcedef.Definition.ReadsMessages): the
// server, the role and the slot as for a table, any publication of that name (pgoutput needs one
// to decode, and sends the messages whatever it publishes), and PostgreSQL 14 or later, whose
// pgoutput sends logical decoding messages (its option messages).
func (l *logical) checkMessages(ctx context.Context) error {
	const q = `SELECT current_setting('wal_level'), current_setting('server_version_num')::int, current_user::text, r.rolsuper OR r.rolreplication,
  s.slot_name IS NOT NULL, COALESCE(s.plugin, ''), COALESCE(s.slot_type, ''), COALESCE(s.database = current_database(), false),
  EXISTS (SELECT 1 FROM pg_publication p WHERE p.pubname = $2)
FROM pg_roles r
LEFT JOIN pg_replication_slots s ON s.slot_name = $1
WHERE r.rolname = current_user`
	var st streamSetup
	var version int
	err := l.lay.DB().QueryRowContext(ctx, q, l.slot, l.pub).Scan(&st.walLevel, &version, &st.user, &st.replication,
		&st.slotExists, &st.plugin, &st.slotType, &st.slotHere, &st.pubExists)
	if err != nil {
		return l.lay.Errorf("checking the logical decoding set-up: %v", err)
	}
	if old := pgcdc.MessagesTooOld(version); old != "" {
		return l.fail("%s", old)
	}
	if err := l.checkServer(st); err != nil {
		return err
	}
	return l.checkSlot(st)
}

// checkFilter compares how the publication publishes the table with the poller's filter and
// columns (pgcdc.CheckPublished): a publication that filters otherwise, or leaves out a column
// the poller reads, would deliver other changes than the poller says.
func (l *logical) checkFilter(ctx context.Context, t *ltable, version int, oid int64) error {
	problem, err := pgcdc.CheckPublished(ctx, l.lay.DB(), pgcdc.Published{Poller: l.poller, Publication: l.pub,
		Definition: t.def, Table: t.table, OID: oid, Columns: t.lay.Columns(), Version: version})
	switch {
	case err != nil:
		return t.lay.Errorf("%v", err)
	case problem != "":
		return t.fail("%s", problem)
	}
	return nil
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// position reads a stored cursor; nil is the beginning of the stream (wherever the slot is).
func (l *logical) position(after *state.Cursor) (pgcdc.Position, error) {
	if after == nil {
		return pgcdc.Position{}, nil
	}
	p, err := pgcdc.CursorPosition(after)
	if err != nil {
		return pgcdc.Position{}, fmt.Errorf("source: poller %q: %w: %v", l.poller, source.ErrCursor, err)
	}
	return p, nil
}

func (l *logical) CheckCursor(c *state.Cursor) error {
	_, err := l.position(c)
	return err
}

func (l *logical) CursorFromText(value string) (*state.Cursor, error) {
	p, err := pgcdc.ParsePosition(strings.TrimSpace(value))
	if err != nil {
		return nil, fmt.Errorf("source: poller %q: %w: %v", l.poller, source.ErrCursor, err)
	}
	c := p.Cursor()
	return &c, nil
}

// Fetch serves the changes after the cursor from the last peek when it holds a whole batch of
// them, and peeks again otherwise.
func (l *logical) Fetch(ctx context.Context, after *state.Cursor, limit int) (*row.Batch, error) {
	pos, err := l.position(after)
	if err != nil {
		return nil, err
	}
	l.takeOver(ctx, after != nil, pos, false)
	if s := l.streaming(); s != nil { // a following tick's stream (stream.go)
		if b, ok, err := s.fetch(after, pos, limit); ok || err != nil {
			return b, err
		}
		l.dropStream(s) // it broke: read as before
	}
	p, i, err := l.read(ctx, after != nil, pos, limit, true)
	if err != nil {
		return nil, err
	}
	b, to, err := l.batch(p, i, after, limit)
	if err != nil || b.To == nil {
		return b, err
	}
	l.mu.Lock()
	l.served, l.servedLimit = to, limit
	l.mu.Unlock()
	return b, nil
}

// batch is the batch of up to limit changes of p from its index i on (after is its cursor), and
// the position after it: the changes before the first stop, or that stop's error when it comes
// first.
func (l *logical) batch(p *peeked, i int, after *state.Cursor, limit int) (*row.Batch, pgcdc.Position, error) {
	j, stop := p.stop(i, i+min(len(p.rows)-i, limit))
	if j == i && stop != nil {
		return nil, pgcdc.Position{}, stop
	}
	b := l.lay.Batch(after)
	b.Rows = make([]row.Row, 0, j-i)
	for _, c := range p.rows[i:j] {
		if c != nil { // not a keep-up mark
			b.Rows = append(b.Rows, l.tabs[c.tab].lay.Row(nil, &c.Change))
		}
	}
	if j == i {
		return b, pgcdc.Position{}, nil
	}
	c := p.pos[j-1].Cursor()
	b.To = &c
	return b, p.pos[j-1], nil
}

// CommitWanted says the tick should commit before the next fetch: while a following tick
// streams, when the stream holds all it may and has served it all (only a commit makes room);
// otherwise when the last peek did not reach
// the end of the stream, it holds less than a batch after the last one served, and the slot is
// behind that batch. The next fetch peeks again, and a peek starts at the slot: committing
// first moves the slot up to the checkpoint, so that the peek neither re-reads (and the server
// re-decodes) the changes already delivered nor keeps them, and a catch-up of any length holds
// one peek's window of changes at a time.
func (l *logical) CommitWanted() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st != nil {
		return l.st.wantsCommit()
	}
	p := l.cache
	if p == nil || p.complete || l.servedLimit == 0 || !p.covers(true, l.served) {
		return false
	}
	return len(p.rows)-p.after(l.served) < l.servedLimit && p.from < l.served.LSN
}

// Waiting counts the changes after the cursor, up to limit.
func (l *logical) Waiting(ctx context.Context, after *state.Cursor, limit int) (int64, error) {
	pos, err := l.position(after)
	if err != nil {
		return 0, err
	}
	resume := after != nil
	if s := l.streaming(); s != nil { // a following tick's stream holds the slot: it counts
		if n, ok := s.waiting(resume, pos, limit); ok {
			return n, nil
		}
	}
	l.mu.Lock()
	p := l.cache
	l.mu.Unlock()
	if p.covers(resume, pos) && p.fresh() {
		return int64(min(len(p.rows)-p.after(pos), limit)), nil
	}
	p, i, err := l.read(ctx, resume, pos, limit, false)
	if err != nil {
		return 0, err
	}
	return int64(min(len(p.rows)-i, limit)), nil
}

// read returns a decoded stream holding the changes after pos and the index of the first of
// them: the cached one when it holds limit of them, else a new peek, asked for more rows until it holds limit changes or reaches the end of
// the stream. keepUp (a fetch, not a count) lets it write a keep-up message when nothing waits
// and the slot is far behind.
//
// A peek always starts at the slot, which moves only at commits, and returns the same messages
// from there each time: the ask grows (to the rest of the WAL behind the slot, see grow) while it
// is not enough and is kept between fetches, a longer peek from the same position decodes only the messages past the last one's
// end (continuing its decoder), and the changes before pos are dropped from the cache then, so
// that it holds at most about maxAsk messages' changes.
func (l *logical) read(ctx context.Context, resume bool, pos pgcdc.Position, limit int, keepUp bool) (*peeked, int, error) {
	l.mu.Lock()
	p := l.cache
	l.mu.Unlock()
	if p.covers(resume, pos) {
		if i := p.after(pos); len(p.rows)-i >= limit {
			return p, i, nil
		}
	}
	if p.covers(resume, pos) && p.complete && time.Since(p.at) < time.Second {
		// It read the whole stream a moment ago: unless WAL was flushed since, there is nothing
		// more, which one cheap query says instead of peeking (and sending) the stream again.
		var flushed string
		if err := l.lay.DB().QueryRowContext(ctx, "SELECT pg_current_wal_flush_lsn()::text").Scan(&flushed); err == nil && flushed == p.flushed.String() {
			return p, p.after(pos), nil
		}
	}
	l.peekMu.Lock()
	defer l.peekMu.Unlock()
	base := 4*limit + 64 // pgoutput sends a begin and a commit around each transaction's changes
	l.mu.Lock()
	ask, prev := max(base, l.ask), l.cache
	slotAt := l.slotAt
	l.mu.Unlock()
	if !prev.covers(resume, pos) {
		prev = nil
	}
	if prev != nil && prev.from < slotAt {
		// Committed since: the peek starts further on, and prev's changes (delivered) are not
		// kept while it decodes the next window.
		prev = nil
		l.mu.Lock()
		l.cache = nil
		l.mu.Unlock()
	}
	if prev != nil && ask <= prev.msgs {
		ask = prev.grow(base) // the same ask would read the same messages again
	}
	kept := false
	for {
		p, err := l.peek(ctx, ask, prev, pos)
		if err != nil {
			l.mu.Lock()
			l.cache = nil // its decoder may have moved on
			l.mu.Unlock()
			return nil, 0, err
		}
		prev = p
		if resume && p.from > pos.LSN {
			return nil, 0, l.slotAhead(p.from, pos)
		}
		l.mu.Lock()
		l.cache, l.ask = p, min(max(ask, p.asked), maxAsk)
		l.mu.Unlock()
		i := p.after(pos)
		if keepUp && i == len(p.rows) && p.complete && !kept && l.messages && p.behind >= l.keepUp {
			// Nothing of the table after the checkpoint, and the slot far behind the WAL: the
			// slot moves only to positions the stream gives, and a quiet table gives none. Write
			// a logical decoding message (its own little transaction) and read again: its commit
			// is a position the cursor can move to, and the tick commits it and advances the slot.
			if err := l.emitKeepUp(ctx); err != nil {
				return nil, 0, err
			}
			kept = true
			continue
		}
		if len(p.rows)-i >= limit || p.complete {
			return p, i, nil
		}
		ask = p.grow(base)
	}
}

// slotAhead is ErrSlotAhead for a slot found at from, past the checkpoint pos.
func (l *logical) slotAhead(from pglogrepl.LSN, pos pgcdc.Position) error {
	return fmt.Errorf("source: poller %q, %s: %w: slot %q is at %s, the checkpoint at %s; the changes between were consumed by something else (the slot dropped and made again by pollerctl cdc disable and enable, a pg_replication_slot_advance or pg_logical_slot_get_changes by hand, another poller sharing the slot) and cannot be read again. To go on from the slot's position: pollerctl reset %s --to-cursor %s --yes",
		l.poller, l.lay.Label(), ErrSlotAhead, l.slot, from, pos, l.poller, from)
}

// grow is the ask for the peek after p, which did not reach the end of the stream: enough for
// the rest of the WAL behind the slot at the density of messages p found (so that a catch-up
// reads its messages about once more, not once per batch), at least eight times p's, and at most
// maxAsk more than p's.
func (p *peeked) grow(base int) int {
	more := max(7*p.msgs, base)
	if used := int64(p.d.lastEnd) - int64(p.from); p.msgs > 0 && used > 0 {
		perMsg := float64(used) / float64(p.msgs)
		more = max(more, int(float64(p.behind-used)/perMsg*1.1)+base)
	}
	return p.msgs + min(more, maxAsk)
}

// keepUpPrefix marks the logical decoding messages keep-up writes.
const keepUpPrefix = "pseudotrigger"

// emitKeepUp writes a transactional logical decoding message, committed with synchronous_commit
// on so that the next peek reads it.
func (l *logical) emitKeepUp(ctx context.Context) error {
	_, err := l.lay.DB().ExecContext(ctx, `DO $$BEGIN SET LOCAL synchronous_commit = on; PERFORM pg_logical_emit_message(true, '`+keepUpPrefix+`', 'keep-up'); END$$`)
	if err != nil {
		return l.lay.Errorf("writing a keep-up message for slot %q (it is far behind the WAL while the table is quiet): %v", l.slot, err)
	}
	return nil
}

// after is the index of the first change after pos.
func (p *peeked) after(pos pgcdc.Position) int {
	i, _ := slices.BinarySearchFunc(p.pos, pos, func(e, t pgcdc.Position) int {
		if t.Before(e) {
			return 1
		}
		return -1
	})
	return i
}

// peekQuery reads, in one round trip, a header row and then the stream, one message a row
// (column data; the header's is NULL): the header (column head) says the slot's position, the
// WAL flushed before the peek (a volatile function in a materialised CTE, evaluated before the
// peek), how far the slot is behind the WAL's end, the WAL the slot retains and the rows asked
// for (at least $2, more when the slot is far behind, at most $4). No row when the slot is gone.
// The header is not repeated on every row, which would send and scan it 70,000 times for a
// catch-up of 50,000 rows. A trailer row ("end" and the slot's position again, read after the
// peek released the slot) says whether another process advanced the slot between the header's
// read and the peek's start: the stream then starts later than the header says, and a decoder
// continuing the last peek would take it for the stream from there (errSlotMoved).
// Servers before PostgreSQL 14 do not know pgoutput's messages option (peekQuery13).
const peekQuery = `WITH s AS MATERIALIZED (SELECT slot_name, confirmed_flush_lsn, pg_current_wal_flush_lsn() AS flushed,
    (pg_current_wal_lsn() - confirmed_flush_lsn)::int8 AS behind,
    (pg_current_wal_lsn() - restart_lsn)::int8 AS retained,
    GREATEST($2::int8, LEAST($4::int8, ((pg_current_wal_lsn() - confirmed_flush_lsn) / $5::int)::int8))::int AS ask
  FROM pg_replication_slots WHERE slot_name = $1)
SELECT concat_ws(' ', s.confirmed_flush_lsn, s.flushed, s.behind, s.retained, s.ask) AS head, NULL::bytea AS data FROM s
UNION ALL
SELECT NULL, c.data FROM s, pg_logical_slot_peek_binary_changes(s.slot_name, NULL, s.ask, 'proto_version', '1', 'publication_names', $3, 'messages', 'true') c
UNION ALL
SELECT 'end ' || confirmed_flush_lsn::text, NULL FROM pg_replication_slots WHERE slot_name = $1`

// errSlotMoved: the slot moved between the peek's header and the peek (see peekQuery); peek
// reads again.
var errSlotMoved = errors.New("the replication slot was advanced by another process during the peek")

// peekBytesPerMessage is the WAL per pgoutput message that a peek's ask assumes at most: a peek
// asks for (WAL behind the slot / peekBytesPerMessage) messages, up to maxAsk, so that a
// catch-up reads its backlog in one peek rather than growing towards it (a real message takes
// 60 bytes of WAL or more). An idle slot is a few bytes behind: a small ask.
const peekBytesPerMessage = 32

var peekQuery13 = strings.Replace(peekQuery, ", 'messages', 'true'", "", 1)

// peek reads up to about ask rows of the stream from the slot's position and decodes them. A
// slot being read by another connection is retried a few times, then is ErrBusy.
func (l *logical) peek(ctx context.Context, ask int, prev *peeked, pos pgcdc.Position) (*peeked, error) {
	for try := 0; ; try++ {
		p, err := l.peekOnce(ctx, ask, prev, pos)
		if errors.Is(err, errSlotMoved) && try < 4 {
			continue // at once: its stream is the slot's new one
		}
		if !errors.Is(err, driver.ErrBusy) || try == 4 {
			if errors.Is(err, errSlotMoved) {
				err = &driver.BusyError{Holder: "another reader of the replication slot (a tick reading it, or streaming it while it follows or for the next tick)", Err: fmt.Errorf("source: poller %q, slot %q: %w (%v)", l.poller, l.slot, driver.ErrBusy, err)}
			}
			return p, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Duration(25<<try) * time.Millisecond):
		}
	}
}

// peekOnce runs peekQuery on a connection of the pool through pgconn: each row's bytes as the
// server sent them, no database/sql scan (which copies every value).
func (l *logical) peekOnce(ctx context.Context, ask int, prev *peeked, pos pgcdc.Position) (*peeked, error) {
	c, err := l.lay.DB().Conn(ctx)
	if err != nil {
		return nil, l.peekErr(err)
	}
	defer c.Close()
	var p *peeked
	err = c.Raw(func(dc any) error {
		pc, ok := dc.(interface{ Conn() *pgx.Conn })
		if !ok {
			return l.lay.Errorf("reading replication slot %q: the connection is a %T, not pgx's", l.slot, dc)
		}
		p, err = l.peekConn(ctx, pc.Conn(), ask, prev, pos)
		return err
	})
	return p, err
}

// The names of the peek's prepared statements: each connection prepares the one its server
// takes once (an idle tick is that one query, and planning it took 2 ms), unless the DSN's
// default_query_exec_mode says a pooler between may not keep statements (see peekConn).
const (
	peekStmt   = "pseudotrigger_logical_peek"
	peekStmt13 = "pseudotrigger_logical_peek13"
)

// peekResultFormats: the header as text, the messages as bytes.
var peekResultFormats = []int16{pgtype.TextFormatCode, pgtype.BinaryFormatCode}

func (l *logical) peekConn(ctx context.Context, conn *pgx.Conn, ask int, prev *peeked, pos pgcdc.Position) (*peeked, error) {
	name, q := peekStmt, peekQuery
	if !l.messages {
		name, q = peekStmt13, peekQuery13
	}
	args := [][]byte{[]byte(l.slot), strconv.AppendInt(nil, int64(ask), 10), []byte(l.pub),
		strconv.AppendInt(nil, int64(maxAsk), 10), strconv.AppendInt(nil, peekBytesPerMessage, 10)}
	var rr *pgconn.ResultReader
	if conn.Config().DefaultQueryExecMode == pgx.QueryExecModeCacheStatement { // pgx's default
		if _, err := conn.Prepare(ctx, name, q); err != nil { // once per connection
			return nil, l.peekErr(err)
		}
		rr = conn.PgConn().ExecPrepared(ctx, name, args, nil, peekResultFormats)
	} else {
		// Another mode (default_query_exec_mode=exec, simple_protocol...: what a DSN through
		// PgBouncer's transaction pooling sets) keeps no statement on the connection: an unnamed one.
		rr = conn.PgConn().ExecParams(ctx, q, args, nil, nil, peekResultFormats)
	}
	p := &peeked{at: time.Now()}
	var d *decoder
	moved := false
	for rr.NextRow() {
		v := rr.Values()
		if end, ok := bytes.CutPrefix(v[0], []byte("end ")); ok && d != nil { // the trailer
			at, err := pglogrepl.ParseLSN(string(end))
			moved = err != nil || at != p.from
			continue
		}
		if v[0] != nil { // the header
			var err error
			if d == nil {
				err = l.peekHead(p, v[0])
			}
			if d != nil || err != nil {
				rr.Close()
				return nil, cmp.Or(err, l.lay.Errorf("reading replication slot %q: a second header row", l.slot))
			}
			d = p.continues(prev, pos, l)
			continue
		}
		if d == nil {
			rr.Close()
			return nil, l.lay.Errorf("reading replication slot %q: a message before the header row", l.slot)
		}
		p.msgs++
		if err := d.message(v[1]); err != nil {
			rr.Close()
			return nil, err
		}
	}
	if _, err := rr.Close(); err != nil {
		return nil, l.peekErr(err)
	}
	if moved {
		return nil, errSlotMoved
	}
	if d == nil {
		return nil, l.fail("replication slot %q does not exist (any more): run `pollerctl cdc enable %s --yes`; if the poller had a checkpoint, the changes since are lost with the slot and it must be reset", l.slot, l.poller)
	}
	p.complete = p.msgs < p.asked
	return p, nil
}

// peekHead reads peekQuery's header: the slot's position, the WAL flushed, behind, retained and
// the rows asked for, separated by spaces.
func (l *logical) peekHead(p *peeked, head []byte) error {
	f := strings.Fields(string(head))
	if len(f) != 5 {
		return l.lay.Errorf("reading replication slot %q: its header %q is not a position, a flush position and three numbers", l.slot, head)
	}
	var err error
	if p.from, err = pglogrepl.ParseLSN(f[0]); err != nil {
		return l.lay.Errorf("slot %q: confirmed position %q: %v", l.slot, f[0], err)
	}
	if p.flushed, err = pglogrepl.ParseLSN(f[1]); err != nil {
		return l.lay.Errorf("the WAL's flush position %q: %v", f[1], err)
	}
	nums := [3]int64{}
	for i := range nums {
		if nums[i], err = strconv.ParseInt(f[2+i], 10, 64); err != nil {
			return l.lay.Errorf("reading replication slot %q: its header %q: %v", l.slot, head, err)
		}
	}
	p.behind, p.retained, p.asked = nums[0], nums[1], int(nums[2])
	return nil
}

// continues starts p from prev's decoded stream when prev read from the same position and
// ended between transactions, and returns the decoder to go on with: it passes over the
// transactions prev decoded (those committed before prev's last commit ended) and decodes what
// follows. Else it returns a new decoder. prev's changes up to pos are left out (the reader is
// past them). prev is left as it was: p shares its rows' arrays only up to their length, and
// has its own map and decoder.
//
// The same transactions come from the same position, but not always as the same messages:
// pgoutput sends a table's relation message again after a relcache invalidation of the table
// reaches the decoding backend (rel_sync_cache_relation_cb sets schema_sent to false), and one
// can arrive in the middle of a peek (a VACUUM or ANALYZE of the table, or an invalidation
// queue overflow, which invalidates every table). So the decoder passes over prev's part by the
// commit positions, never by a count of messages: a count one off began decoding inside a
// transaction (a change "outside a transaction", or worse).
func (p *peeked) continues(prev *peeked, pos pgcdc.Position, l *logical) *decoder {
	if prev == nil || prev.from != p.from || prev.d == nil || prev.d.tx != nil {
		n := min(max(p.asked, 1024), 1<<16)
		p.rows, p.pos = make([]*change, 0, n), make([]pgcdc.Position, 0, n)
		p.d = l.newDecoder(p)
		return p.d
	}
	i := prev.after(pos)
	p.first = prev.first
	if i > 0 {
		p.first = prev.pos[i-1]
	}
	n := len(prev.rows)
	p.rows, p.pos = prev.rows[i:n:n], prev.pos[i:n:n]
	for k, err := range prev.stops {
		if k >= i {
			if p.stops == nil {
				p.stops = map[int]error{}
			}
			p.stops[k-i] = err
		}
	}
	dc := *prev.d
	dc.changes, dc.texts, dc.arena, dc.commits = nil, nil, nil, nil // prev's blocks stay prev's
	dc.txBuf.entries = slices.Clone(dc.txBuf.entries)
	dc.oldT, dc.newT = tuple{}, tuple{}
	dc.rels, dc.cur = slices.Clone(dc.rels), nil // replaced whole by a relation message, never changed
	dc.decoded, dc.passing = dc.lastEnd, false
	dc.p = p
	p.d = &dc
	return p.d
}

// peekErr names the fix for what a peek can fail on.
func (l *logical) peekErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		enable := fmt.Sprintf("run `pollerctl cdc enable %s --yes`", l.poller)
		switch {
		case pe.Code == "55006": // object_in_use
			return &driver.BusyError{Holder: "another reader of the replication slot (a tick reading it, or streaming it while it follows or for the next tick)",
				Err: fmt.Errorf("source: poller %q, slot %q: %w (%s)", l.poller, l.slot, driver.ErrBusy, pe.Message)}
		case pe.Code == "42704" && strings.Contains(pe.Message, "publication"):
			return l.fail("%s: %s", pe.Message, enable)
		case pe.Code == "42704":
			return l.fail("%s: %s", pe.Message, enable)
		case pe.Code == "42501":
			return l.fail("%s: ALTER ROLE <the poller's role> WITH REPLICATION", pe.Message)
		case pe.Code == "55000":
			return l.fail("%s", pe.Message)
		}
	}
	return l.lay.Errorf("reading replication slot %q: %v", l.slot, err)
}

// Committed advances the slot to the checkpoint c, never backwards (an advance that would not
// move it is skipped in the query: PostgreSQL refuses one below the slot's position). The cache
// stays: it starts at the old position, and the next peek, from the new one, replaces it.
func (l *logical) Committed(ctx context.Context, c *state.Cursor) error {
	pos, err := l.position(c)
	if err != nil {
		return err
	}
	if s := l.streaming(); s != nil && s.committed(pos) { // confirmed through the stream, which holds the slot
		l.mu.Lock()
		l.slotAt = max(l.slotAt, pos.LSN)
		stale := time.Since(l.retainedAt) >= retainedEvery
		l.mu.Unlock()
		if stale { // no peek reads it while the stream runs
			var n int64
			if err := l.lay.DB().QueryRowContext(ctx, "SELECT (pg_current_wal_lsn() - restart_lsn)::int8 FROM pg_replication_slots WHERE slot_name = $1", l.slot).Scan(&n); err == nil {
				l.mu.Lock()
				l.retained, l.retainedAt = n, time.Now()
				l.mu.Unlock()
			}
		}
		return nil
	}
	_, err = l.lay.DB().ExecContext(ctx, `SELECT pg_replication_slot_advance($1, $2::pg_lsn) FROM pg_replication_slots
WHERE slot_name = $1 AND confirmed_flush_lsn < $2::pg_lsn`, l.slot, pos.LSN.String())
	if err != nil {
		return fmt.Errorf("source: poller %q: advancing replication slot %q to %s: %w", l.poller, l.slot, pos.LSN, l.peekErr(err))
	}
	l.mu.Lock()
	l.slotAt = max(l.slotAt, pos.LSN)
	l.mu.Unlock()
	return nil
}

// Stats says the WAL the slot kept at the last peek, in bytes (none before any): every tick
// peeks, so its log line can say it without another query, idle and failing ticks included.
// While a stream runs, no peek does: a commit through it reads the slot's retained WAL again
// when it is retainedEvery old, and Stats says the newer of the two.
func (l *logical) Stats() driver.Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cache == nil {
		return driver.Stats{}
	}
	n := l.cache.retained
	if l.retainedAt.After(l.cache.at) {
		n = l.retained
	}
	return driver.Stats{RetainedBytes: &n}
}

// retainedEvery is how often at most a commit through a stream reads the slot's retained WAL.
const retainedEvery = 10 * time.Second
