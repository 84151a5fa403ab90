// Package replicacheck is the test kit of the logical cursor's replica tests (internal/tick's
// and e2e's TestLogicalReplica*). It holds a table with its publication, the poller's slot and a
// witness slot; writers that insert, update (the key too) and delete in concurrent transactions, some
// held open, some rolled back; the changes a handler records; and the checks that the changes
// delivered rebuild the table exactly and that the slot never runs ahead of the checkpoint.
//
// It is used by tests only; no product code imports it.
package replicacheck

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// Columns are the replica table's columns, in order; id is the key.
var Columns = []string{"id", "name", "note"}

// DDL makes the replica table (%s is its name).
const DDL = "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL, note text)"

// Row is a row's values but the key; comparable.
type Row struct {
	Name string         `json:"name"`
	Note sql.NullString `json:"-"`
	// NoteJSON carries Note over JSON (nil: NULL).
	NoteJSON *string `json:"note"`
}

func (r Row) String() string {
	if !r.Note.Valid {
		return fmt.Sprintf("{%s NULL}", r.Name)
	}
	return fmt.Sprintf("{%s %q}", r.Name, r.Note.String)
}

// Change is a delivered change as the checks see it.
type Change struct {
	Table  string `json:"table,omitempty"` // Row.Table (checked against Setup.TableOf)
	Pos    string `json:"pos"`             // the position just after it (pgcdc.Position's text)
	Op     string `json:"op"`
	ID     int64  `json:"id"`
	HasRow bool   `json:"has_row"`
	Row    Row    `json:"row"`
	// Before is the row before an update or a delete (REPLICA IDENTITY FULL), Changed the
	// columns an update changed when known; Tx, Index and Last its transaction's (CheckImages).
	Before  *Row     `json:"before,omitempty"`
	Changed []string `json:"changed,omitempty"`
	Known   bool     `json:"known,omitempty"` // Changed is known
	Tx      uint64   `json:"tx,omitempty"`
	Index   int      `json:"index,omitempty"`
	Last    bool     `json:"last,omitempty"`
}

func (c Change) String() string {
	if !c.HasRow {
		return fmt.Sprintf("%s %s %d", c.Pos, c.Op, c.ID)
	}
	return fmt.Sprintf("%s %s %d %v", c.Pos, c.Op, c.ID, c.Row)
}

// Same compares two changes (Row through its values, not its JSON field), what they say of
// the row before, the columns changed and the transaction too.
func (c Change) Same(d Change) bool {
	return c.Table == d.Table && c.Pos == d.Pos && c.Op == d.Op && c.ID == d.ID && c.HasRow == d.HasRow && (!c.HasRow || c.Row.same(d.Row)) &&
		(c.Before == nil) == (d.Before == nil) && (c.Before == nil || c.Before.same(*d.Before)) &&
		c.Known == d.Known && slices.Equal(c.Changed, d.Changed) && c.Tx == d.Tx && c.Index == d.Index && c.Last == d.Last
}

func (r Row) same(o Row) bool { return r.Name == o.Name && r.Note == o.Note }

// rowOf reads a row's values but the key.
func rowOf(r poller.Row) Row {
	var out Row
	out.Name, _ = r.Get("name").(string)
	if n, ok := r.Get("note").(string); ok {
		out.Note = sql.NullString{String: n, Valid: true}
		out.NoteJSON = &n
	}
	return out
}

// FromRow reads a logical cursor's row.
func FromRow(r poller.Row) (Change, error) {
	id, ok := r.Key()["id"].(int64)
	if !ok {
		return Change{}, fmt.Errorf("key %v is not an int64 id", r.Key())
	}
	c := Change{Table: r.Table(), Op: r.Op(), ID: id, HasRow: r.HasRow()}
	if c.Op != row.OpRead { // a backfill's read has no place in the stream
		cur, err := r.Cursor()
		if err != nil {
			return Change{}, err
		}
		pos, err := pgcdc.CursorPosition(stateCursor(&cur))
		if err != nil {
			return Change{}, err
		}
		c.Pos = pos.String()
	}
	if len(r.Unchanged()) > 0 {
		return Change{}, fmt.Errorf("change %s %d: unchanged columns %v (the workload writes no TOAST value)", c.Op, id, r.Unchanged())
	}
	if c.HasRow {
		c.Row = rowOf(r)
	}
	if b, ok := r.Before(); ok {
		before := rowOf(b)
		c.Before = &before
	}
	c.Changed, c.Known = r.Changed()
	if tx, ok := r.Transaction(); ok {
		c.Tx, c.Index, c.Last = tx.ID, tx.Index, tx.Last
	}
	return c, nil
}

// CheckImages checks what the changes of the stream say besides their rows, applying them in
// order: with full (REPLICA IDENTITY FULL) each update and delete carries the row the replica
// held before it, and each update the columns that differ between that row and its own (none
// without full); every change carries its transaction, whose changes come together, numbered
// from 1, the last marked. It returns the problems (at most 10).
func CheckImages(stream []Change, full bool) []string {
	var out []string
	bad := func(format string, args ...any) {
		if len(out) < 10 {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	m := map[int64]Row{}
	seen := map[uint64]bool{}
	var tx uint64
	index := 0
	for i, c := range stream {
		had, ok := m[c.ID]
		switch {
		case c.Op == row.OpInsert && (c.Before != nil || c.Known):
			bad("%v: an insert with a before image or changed columns", c)
		case c.Op != row.OpInsert && full && (c.Before == nil || !ok || !c.Before.same(had)):
			bad("%v: before %v, the replica held %v (present: %v)", c, c.Before, had, ok)
		case c.Op != row.OpInsert && !full && c.Before != nil:
			bad("%v: a before image without REPLICA IDENTITY FULL", c)
		case c.Op == row.OpUpdate && full:
			var want []string
			if had.Name != c.Row.Name {
				want = append(want, "name")
			}
			if had.Note != c.Row.Note {
				want = append(want, "note")
			}
			if !c.Known || !slices.Equal(c.Changed, want) && !(len(want) == 0 && len(c.Changed) == 0) {
				bad("%v: changed %q (known %v), the replica's row %v differs in %q", c, c.Changed, c.Known, had, want)
			}
		case c.Op == row.OpUpdate && c.Known:
			bad("%v: changed columns known without REPLICA IDENTITY FULL", c)
		}
		if c.Op == row.OpDelete {
			delete(m, c.ID)
		} else {
			m[c.ID] = c.Row
		}
		// Its transaction.
		if c.Tx != tx {
			if index > 0 {
				bad("change %d (%v): transaction %d ended at change %d without its last mark", i, c, tx, index)
			}
			if seen[c.Tx] {
				bad("change %d (%v): transaction %d comes again after another", i, c, c.Tx)
			}
			tx, index = c.Tx, 0
			seen[tx] = true
		}
		index++
		if c.Tx == 0 || c.Index != index {
			bad("change %d (%v): transaction %d, index %d, want %d", i, c, c.Tx, c.Index, index)
		}
		if c.Last {
			index = 0
		}
	}
	if index > 0 {
		bad("the stream ends inside transaction %d, without its last mark", tx)
	}
	return out
}

// FromJSON restores Row.Note (and Before's) after a change came through JSON.
func (c *Change) FromJSON() {
	if c.Row.NoteJSON != nil {
		c.Row.Note = sql.NullString{String: *c.Row.NoteJSON, Valid: true}
	}
	if c.Before != nil && c.Before.NoteJSON != nil {
		c.Before.Note = sql.NullString{String: *c.Before.NoteJSON, Valid: true}
	}
}

// Batch is a batch as the handler got it.
type Batch struct {
	ID      string   `json:"batch_id"`
	Token   int64    `json:"fencing_token"`
	Attempt int64    `json:"attempt"`
	Owner   string   `json:"owner"`
	From    string   `json:"from"` // "" for the beginning
	To      string   `json:"to"`
	Changes []Change `json:"changes"`
	// Reads: a backfill's batch, of reads only (From and To are the live position then).
	Reads bool `json:"reads,omitempty"`
}

// FromBatch reads a handler's batch; owner says who delivered it.
func FromBatch(b *poller.Batch[poller.Row], owner string) (Batch, error) {
	out := Batch{ID: b.ID, Token: b.FencingToken, Attempt: b.Attempt, Owner: owner}
	var err error
	if out.From, err = posText(stateCursor(b.From)); err != nil {
		return out, err
	}
	if out.To, err = posText(stateCursor(b.To)); err != nil {
		return out, err
	}
	for _, r := range b.Raw {
		c, err := FromRow(r)
		if err != nil {
			return out, err
		}
		out.Changes = append(out.Changes, c)
		out.Reads = c.Op == row.OpRead
	}
	return out, nil
}

// stateCursor is c as the runtime's cursor, field by field; nil for nil.
func stateCursor(c *poller.Cursor) *state.Cursor {
	if c == nil {
		return nil
	}
	return &state.Cursor{Kind: c.Kind, Value: c.Value, Tiebreaker: c.Tiebreaker}
}

func posText(c *state.Cursor) (string, error) {
	if c == nil {
		return "", nil
	}
	p, err := pgcdc.CursorPosition(c)
	if err != nil {
		return "", err
	}
	return p.String(), nil
}

// Recorder keeps the batches a handler got, in the order it got them.
type Recorder struct {
	mu      sync.Mutex
	batches []Batch
}

// Add records b.
func (r *Recorder) Add(b Batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, b)
}

// Batches returns what was recorded so far.
func (r *Recorder) Batches() []Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

// Len is the number of batches recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.batches)
}

func mustPos(s string) pgcdc.Position {
	p, err := pgcdc.ParsePosition(s)
	if err != nil {
		panic(err)
	}
	return p
}

// Stream is the stream of changes the batches delivered, rebuilt: each batch starts at a
// checkpoint (its From), which is the beginning, the position of a change delivered before, or
// a keep-up mark's (an idle tick's, a backfill's watermark), between changes or past them all;
// a batch that starts before the end of what was delivered so far is a redelivery (a batch
// whose commit was lost, or that failed, comes again from the checkpoint) and must repeat
// exactly the changes delivered there before. Stream returns the changes once each, in stream
// order, and how many deliveries were repeats.
//
// "In order" is thus the stream's order, not the order of arrival: applying the changes as they
// arrived gives the same result only because each change sets or removes its key's row whole,
// and a replay from the checkpoint repeats a contiguous run of the stream (see ApplyArrival).
func Stream(batches []Batch) (stream []Change, repeats int, err error) {
	index := map[string]int{} // position -> index in stream
	for bi, b := range batches {
		if b.Reads {
			continue // not the stream's (CheckReads)
		}
		k := 0
		if b.From != "" {
			i, ok := index[b.From]
			if ok {
				k = i + 1
			} else {
				// A checkpoint at no change's position: a keep-up mark (an idle tick's, or a
				// backfill's watermark), delivered as an empty move the handler never saw. The
				// batch resumes at the first change after it; whether it skipped one is for the
				// witness comparison (SameStream) and the table to tell.
				from := mustPos(b.From)
				k, _ = slices.BinarySearchFunc(stream, from, func(c Change, p pgcdc.Position) int {
					if mustPos(c.Pos).Before(p) || c.Pos == b.From {
						return -1
					}
					return 1
				})
			}
		}
		if len(b.Changes) == 0 {
			return stream, repeats, fmt.Errorf("batch %d (%s) is empty", bi, b.ID)
		}
		// A batch ends at its last change, or past it at a keep-up mark (a backfill's watermark).
		if last := b.Changes[len(b.Changes)-1].Pos; last != b.To && !mustPos(last).Before(mustPos(b.To)) {
			return stream, repeats, fmt.Errorf("batch %d (%s) ends at %s, its last change is at %s", bi, b.ID, b.To, last)
		}
		for ci, c := range b.Changes {
			at := k + ci
			if at < len(stream) {
				if !stream[at].Same(c) {
					return stream, repeats, fmt.Errorf("batch %d (%s, token %d, attempt %d, %s) from %s: change %d is %v, but %v was delivered there before", bi, b.ID, b.Token, b.Attempt, b.Owner, b.From, ci, c, stream[at])
				}
				repeats++
				continue
			}
			if n := len(stream); n > 0 && !mustPos(stream[n-1].Pos).Before(mustPos(c.Pos)) {
				return stream, repeats, fmt.Errorf("batch %d (%s): change %v does not come after %v", bi, b.ID, c, stream[n-1])
			}
			index[c.Pos] = len(stream)
			stream = append(stream, c)
		}
	}
	return stream, repeats, nil
}

// Apply applies changes in order to an empty replica, strictly: an insert of a key it has, an
// update or a delete of a key it lacks, is an error (a change lost or repeated).
func Apply(changes []Change) (map[int64]Row, error) {
	m := map[int64]Row{}
	var errs []error
	for _, c := range changes {
		_, have := m[c.ID]
		switch c.Op {
		case row.OpInsert:
			if have {
				errs = append(errs, fmt.Errorf("%v: the replica has the key already", c))
			}
			m[c.ID] = c.Row
		case row.OpUpdate:
			if !have {
				errs = append(errs, fmt.Errorf("%v: the replica lacks the key", c))
			}
			m[c.ID] = c.Row
		case row.OpDelete:
			if !have {
				errs = append(errs, fmt.Errorf("%v: the replica lacks the key", c))
			}
			delete(m, c.ID)
		default:
			errs = append(errs, fmt.Errorf("%v: op %q", c, c.Op))
		}
		if !c.HasRow && c.Op != row.OpDelete {
			errs = append(errs, fmt.Errorf("%v: an %s without its row", c, c.Op))
		}
		if len(errs) > 10 {
			break
		}
	}
	return m, errors.Join(errs...)
}

// ApplyArrival applies every delivered change in the order it arrived, repeats included, as a
// consumer that keeps no position would: an insert or update sets the key's row, a delete removes
// it (a repeated delete finds nothing).
func ApplyArrival(batches []Batch) map[int64]Row {
	m := map[int64]Row{}
	for _, b := range batches {
		for _, c := range b.Changes {
			if c.Op == row.OpDelete {
				delete(m, c.ID)
			} else {
				m[c.ID] = c.Row
			}
		}
	}
	return m
}

// CheckReads applies the deliveries in arrival order, as ApplyArrival, and checks each
// backfill read against what the consumer held then: a read of a key that a change delivered
// before it touched must equal the row those changes left (a read that brings back an older
// row, or one deleted, is a read delivered after a newer change). It returns the reads seen and
// the problems.
func CheckReads(batches []Batch) (reads int, problems []string) {
	m := map[int64]Row{}
	touched := map[int64]bool{}
	for _, b := range batches {
		for _, c := range b.Changes {
			switch {
			case c.Op == row.OpRead:
				reads++
				if had, ok := m[c.ID]; touched[c.ID] && (!ok || had.Name != c.Row.Name || had.Note != c.Row.Note) && len(problems) < 10 {
					problems = append(problems, fmt.Sprintf("batch %s: the read of %d is %v, but the changes delivered before it left %v (present: %v)", b.ID, c.ID, c.Row, had, ok))
				}
				m[c.ID] = c.Row
			case c.Op == row.OpDelete:
				touched[c.ID] = true
				delete(m, c.ID)
			default:
				touched[c.ID] = true
				m[c.ID] = c.Row
			}
		}
	}
	return reads, problems
}

// SnapshotProblem says p, one of Verify's problems, is what a poller that began with a snapshot
// of its table has by design: the stream alone lacks the rows that were there before, and only
// the deliveries applied as they arrived, reads included, rebuild the table.
func SnapshotProblem(p string) bool {
	return strings.HasPrefix(p, streamOrderProblem) || strings.HasPrefix(p, streamApplyProblem)
}

// Verify's problems of the stream alone.
const (
	streamApplyProblem = "applying the stream: "
	streamOrderProblem = "the stream applied in order: "
)

// Rows reads the tables (the second's too: Options.Second) as the replica should be: their keys
// do not overlap (TableOf).
func (s *Setup) Rows(ctx context.Context) (map[int64]Row, error) {
	out, err := Table(ctx, s.DB, s.Table)
	if err != nil || s.Second == "" {
		return out, err
	}
	second, err := Table(ctx, s.DB, s.Second)
	for id, r := range second {
		out[id] = r
	}
	return out, err
}

// TableOf is the table whose key id is: with a second table (Options.Second), the even keys
// are its rows, the odd ones the first table's.
func (s *Setup) TableOf(id int64) string {
	if s.Second != "" && id%2 == 0 {
		return s.Second
	}
	return s.Table
}

// Tables names the change of a key from another table than TableOf's (at most 10).
func (s *Setup) Tables(stream []Change) (problems []string) {
	for _, c := range stream {
		if c.Table != s.TableOf(c.ID) && len(problems) < 10 {
			problems = append(problems, fmt.Sprintf("%v: from table %q, the key is table %q's", c, c.Table, s.TableOf(c.ID)))
		}
	}
	return problems
}

// Table reads the table as the replica should be.
func Table(ctx context.Context, db *sql.DB, table string) (map[int64]Row, error) {
	rows, err := db.QueryContext(ctx, "SELECT id, name, note FROM "+table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]Row{}
	for rows.Next() {
		var id int64
		var r Row
		if err := rows.Scan(&id, &r.Name, &r.Note); err != nil {
			return nil, err
		}
		out[id] = r
	}
	return out, rows.Err()
}

// Diff lists how got differs from want (at most 20 lines).
func Diff(got, want map[int64]Row) []string {
	var out []string
	ids := map[int64]bool{}
	for id := range got {
		ids[id] = true
	}
	for id := range want {
		ids[id] = true
	}
	sorted := make([]int64, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	slices.Sort(sorted)
	for _, id := range sorted {
		g, gok := got[id]
		w, wok := want[id]
		switch {
		case gok && !wok:
			out = append(out, fmt.Sprintf("row %d: in the replica (%v), not in the table", id, g))
		case !gok && wok:
			out = append(out, fmt.Sprintf("row %d: in the table (%v), not in the replica", id, w))
		case g.Name != w.Name || g.Note != w.Note:
			out = append(out, fmt.Sprintf("row %d: replica %v, table %v", id, g, w))
		}
		if len(out) == 20 {
			out = append(out, "...")
			break
		}
	}
	return out
}

// Setup is a replica table with its publication, the poller's slot and a witness slot made at
// the same moment, which nothing advances: at the end it holds the whole stream to compare with.
type Setup struct {
	DB          *sql.DB
	Table       string // as written in SQL (may rely on the DSN's search_path)
	Second      string // the second table (Options.Second), "" for none
	Slot        string
	Publication string
	Witness     string
	Options     Options
	flush       string
}

// KeyFilter is the publication row filter (on the key, so that any replica identity takes it)
// of the replica tests of filters, and FilteredOut its Go twin: the keys it leaves out.
const KeyFilter = "id % 5 <> 3"

// FilteredOut says whether KeyFilter leaves key id out.
func FilteredOut(id int64) bool { return id%5 == 3 }

// Options are what CreateWith makes besides Create's table: REPLICA IDENTITY FULL (before
// images), and a row filter of the publication (the poller's filter, on the key: id).
type Options struct {
	Full   bool
	Filter string
	// Hidden, if set, says which keys the poller never sees (its filter, a skipped writer's):
	// Verify leaves them out of the table and fails a change of one.
	Hidden func(id int64) bool
	// Second makes a second table of the same columns, in the same publication (with the same
	// replica identity and filter): the poller reads both (Definition.More), and the writers
	// write the even keys there (TableOf), in the same transactions as the odd ones.
	Second bool
}

// Create makes the table name (a fresh lower-case name), its publication and the slots, all named
// after it; cleanup drops them (register it with t.Cleanup).
func Create(ctx context.Context, db *sql.DB, name string) (s *Setup, cleanup func(), err error) {
	return CreateWith(ctx, db, name, Options{})
}

// CreateWith is Create with o.
func CreateWith(ctx context.Context, db *sql.DB, name string, o Options) (s *Setup, cleanup func(), err error) {
	s = &Setup{DB: db, Table: name, Slot: name, Publication: name, Witness: name + "_w", flush: name + "_flush", Options: o}
	if o.Second {
		s.Second = name + "_b"
	}
	cleanup = func() {
		c := context.Background()
		for _, slot := range []string{s.Slot, s.Witness} {
			// A slot in use by a killed process's connection frees when the server notices.
			for try := 0; try < 50; try++ {
				_, err := db.ExecContext(c, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", slot)
				if err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond) // polling a server-side release, bounded
			}
		}
		db.ExecContext(c, "DROP PUBLICATION IF EXISTS "+s.Publication)
		db.ExecContext(c, "SELECT pg_replication_origin_drop(roname) FROM pg_replication_origin WHERE roname = $1", s.Table+"-app")
		db.ExecContext(c, "DROP TABLE IF EXISTS "+s.Table)
		if s.Second != "" {
			db.ExecContext(c, "DROP TABLE IF EXISTS "+s.Second)
		}
		db.ExecContext(c, "DROP TABLE IF EXISTS "+s.flush)
	}
	var specs, ddl []string
	for _, t := range s.tables() {
		spec := t
		if o.Filter != "" {
			spec += " WHERE (" + o.Filter + ")"
		}
		specs = append(specs, spec)
		ddl = append(ddl, fmt.Sprintf(DDL, t))
		if o.Full {
			ddl = append(ddl, "ALTER TABLE "+t+" REPLICA IDENTITY FULL")
		}
	}
	pub := fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s", s.Publication, strings.Join(specs, ", "))
	for _, q := range append(ddl,
		"CREATE TABLE "+s.flush+" (n bigint)",
		pub,
		fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", s.Slot),
		fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", s.Witness),
	) {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return s, cleanup, fmt.Errorf("%s: %w", q, err)
		}
	}
	return s, cleanup, nil
}

// tables are the setup's tables: Table, and Second when there is one.
func (s *Setup) tables() []string {
	if s.Second == "" {
		return []string{s.Table}
	}
	return []string{s.Table, s.Second}
}

// Flush makes every transaction committed so far readable by logical decoding: the test
// PostgreSQL runs with synchronous_commit=off and decoding reads only flushed WAL, so one commit
// that waits for its flush (of a table outside the publication) flushes everything before it.
func (s *Setup) Flush(ctx context.Context) error {
	tx, err := s.DB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+s.flush+" VALUES (1)"); err != nil {
		return err
	}
	return tx.Commit()
}

// Hide leaves the keys the poller never sees (Options.Hidden) out of table, and names each change
// of one in the stream.
func (s *Setup) Hide(table map[int64]Row, stream []Change) (problems []string) {
	if s.Options.Hidden == nil {
		return nil
	}
	for id := range table {
		if s.Options.Hidden(id) {
			delete(table, id)
		}
	}
	for _, c := range stream {
		if s.Options.Hidden(c.ID) && len(problems) < 10 {
			problems = append(problems, fmt.Sprintf("%v: a change of a key the poller never sees (filtered, or the application's own)", c))
		}
	}
	return problems
}

// SlotLSN reads a slot's confirmed position.
func (s *Setup) SlotLSN(ctx context.Context, slot string) (pgcdc.Position, error) {
	var lsn string
	if err := s.DB.QueryRowContext(ctx, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&lsn); err != nil {
		return pgcdc.Position{}, fmt.Errorf("slot %s: %w", slot, err)
	}
	return pgcdc.ParsePosition(lsn)
}

// WitnessStream reads the whole stream from the witness slot (which nothing advanced) through
// the logical cursor, without consuming it. cfg is the poller's source.Config; its slot is
// replaced by the witness.
func (s *Setup) WitnessStream(ctx context.Context, cfg source.Config) ([]Change, error) {
	cfg.Definition.Slot = s.Witness
	src, err := drivers.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	// The witness's rows as a logical poller of poller.Row gets them, which FromRow reads.
	untyped := pollerdef.Of(poller.New("witness", cfg.Definition.Table.Name, poller.Logical, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
		poller.WithColumns(Columns...), poller.WithKey("id")))
	var out []Change
	var c *state.Cursor
	for {
		b, err := src.Fetch(ctx, c, 1000)
		if err != nil {
			return out, err
		}
		if len(b.Rows) == 0 {
			return out, nil
		}
		for _, r := range untyped.Raw(&pollerdef.Batch{Rows: b.Rows}).(*poller.Batch[poller.Row]).Raw {
			ch, err := FromRow(r)
			if err != nil {
				return out, err
			}
			out = append(out, ch)
		}
		c = b.To
	}
}

// SameStream compares the rebuilt stream with the witness's, naming the first difference.
func SameStream(got, want []Change) error {
	for i := range min(len(got), len(want)) {
		if !got[i].Same(want[i]) {
			return fmt.Errorf("change %d of the stream: delivered %v, the witness slot has %v", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d changes delivered, the witness slot has %d", len(got), len(want))
	}
	return nil
}

// Workload runs writers over the table, each on keys of its own (so that no writer waits on
// another's row locks, while their transactions still interleave in the WAL).
type Workload struct {
	Setup   *Setup
	Writers int
	Txns    int    // transactions per writer
	Seed    uint64 // fixes every choice
	// Hold is called while a transaction held open across ticks waits to end (with its changes
	// made): it returns once the poller has ticked meanwhile.
	Hold func(ctx context.Context) error
	// More, if set, keeps each writer going past Txns while it returns true (a test that needs
	// changes to flow until its faults have played out).
	More func() bool
	// Pace is each writer's time between transactions: the workload's rate, so that the ticks
	// run while it writes (0: as fast as it can).
	Pace time.Duration
	// Existing: each writer starts from the rows of its key range already in the table (a
	// workload's before), so that it changes rows a backfill reads; else from none.
	Existing bool
	// Origin, if set, adds a writer that marks its session with the replication origin of that
	// name (the application's own writes, which a poller may skip), on keys of its own: those
	// of OwnKey.
	Origin string

	mu                                 sync.Mutex
	Committed, RolledBack, Held, Moved int
	Own                                int // committed by the Origin writer
}

// Run runs the writers until each has done its transactions.
func (w *Workload) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	n := w.Writers
	if w.Origin != "" {
		n++
	}
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.writer(ctx, i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// OwnKey says whether id is a key of the Origin writer (with w.Writers other writers).
func (w *Workload) OwnKey(id int64) bool {
	return w.Origin != "" && id >= int64(w.Writers+1)*1_000_000 && id < int64(w.Writers+2)*1_000_000
}

// session is where a writer begins its transactions: the pool, or one connection marked with
// the replication origin.
type session interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// ownSession is a connection of its own marked with the replication origin, made when missing
// (an origin outlives the session: Create's cleanup drops the one named after the table, Table
// and "-app").
func (w *Workload) ownSession(ctx context.Context) (*sql.Conn, error) {
	conn, err := w.Setup.DB.Conn(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range []string{
		"SELECT pg_replication_origin_create($1) WHERE pg_replication_origin_oid($1) IS NULL",
		"SELECT pg_replication_origin_session_setup($1)",
	} {
		if _, err := conn.ExecContext(ctx, q, w.Origin); err != nil {
			conn.Close()
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	return conn, nil
}

func (w *Workload) writer(ctx context.Context, n int) error {
	rng := rand.New(rand.NewPCG(w.Seed, uint64(n)+1))
	base := int64(n+1) * 1_000_000
	next := base
	var sess session = w.Setup.DB
	if n == w.Writers { // the Origin writer
		conn, err := w.ownSession(ctx)
		if err != nil {
			return fmt.Errorf("the writer of origin %s: %w", w.Origin, err)
		}
		defer conn.Close()
		defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_replication_origin_session_reset()")
		sess = conn
	}
	live := []int64{} // the writer's committed keys
	if w.Existing {
		for _, table := range w.Setup.tables() {
			keys, err := keysIn(ctx, w.Setup.DB, table, base, base+1_000_000)
			if err != nil {
				return fmt.Errorf("writer %d: %w", n, err)
			}
			live = append(live, keys...)
		}
		slices.Sort(live)
		if len(live) > 0 {
			next = live[len(live)-1]
		}
	}
	tableOf := w.Setup.TableOf
	var pace <-chan time.Time
	if w.Pace > 0 {
		tk := time.NewTicker(w.Pace) // the workload's rate, not a wait for anything
		defer tk.Stop()
		pace = tk.C
	}
	for i := 0; i < w.Txns || w.More != nil && w.More(); i++ {
		if pace != nil {
			select {
			case <-pace:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		tx, err := sess.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		// Half the commits wait for their flush; the others are flushed by the WAL writer (or
		// by a later commit that waits).
		if rng.IntN(2) == 0 {
			if _, err := tx.ExecContext(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
				tx.Rollback()
				return err
			}
		}
		cur := slices.Clone(live)
		ops := 1 + rng.IntN(6)
		if rng.IntN(12) == 0 {
			ops = 20 + rng.IntN(30) // spans several batches: the checkpoint lands inside it
		}
		moved := 0
		for range ops {
			var qs []string // one statement, or an insert's of each table
			var args []any
			pick := func() (int, int64) { j := rng.IntN(len(cur)); return j, cur[j] }
			switch k := rng.IntN(10); {
			case len(cur) < 3 || k < 4: // insert one or a few rows
				m := 1 + rng.IntN(3)
				vals := map[string][]string{}
				for range m {
					next++
					cur = append(cur, next)
					note := "NULL"
					if rng.IntN(3) > 0 {
						note = fmt.Sprintf("'n%d'", rng.IntN(1000))
					}
					vals[tableOf(next)] = append(vals[tableOf(next)], fmt.Sprintf("(%d, 'w%d t%d', %s)", next, n, i, note))
				}
				for _, table := range w.Setup.tables() {
					if len(vals[table]) > 0 {
						qs = append(qs, "INSERT INTO "+table+" VALUES "+strings.Join(vals[table], ", "))
					}
				}
			case k < 7: // update the values
				_, id := pick()
				if rng.IntN(4) == 0 {
					qs, args = []string{"UPDATE " + tableOf(id) + " SET name = name || '+', note = NULL WHERE id = $1"}, []any{id}
				} else {
					qs, args = []string{"UPDATE " + tableOf(id) + " SET name = $2, note = $3 WHERE id = $1"}, []any{id, fmt.Sprintf("w%d t%d u", n, i), fmt.Sprint(rng.IntN(1000))}
				}
			case k < 8: // change the key (within its table)
				j, id := pick()
				if next++; tableOf(next) != tableOf(id) {
					next++
				}
				qs, args = []string{"UPDATE " + tableOf(id) + " SET id = $2, name = name || ' moved' WHERE id = $1"}, []any{id, next}
				cur[j] = next
				moved++
			default: // delete
				j, id := pick()
				qs, args = []string{"DELETE FROM " + tableOf(id) + " WHERE id = $1"}, []any{id}
				cur = slices.Delete(cur, j, j+1)
			}
			for _, q := range qs {
				if _, err := tx.ExecContext(ctx, q, args...); err != nil {
					tx.Rollback()
					return fmt.Errorf("writer %d: %s: %w", n, q, err)
				}
			}
		}
		held := w.Hold != nil && rng.IntN(10) == 0
		if held {
			if err := w.Hold(ctx); err != nil {
				tx.Rollback()
				return fmt.Errorf("writer %d, a transaction held open: %w", n, err)
			}
		}
		rollback := rng.IntN(7) == 0
		w.mu.Lock()
		if held {
			w.Held++
		}
		if rollback {
			w.RolledBack++
		} else {
			w.Committed++
			w.Moved += moved
			if n == w.Writers {
				w.Own++
			}
		}
		w.mu.Unlock()
		if rollback {
			if err := tx.Rollback(); err != nil {
				return err
			}
			continue
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		live = cur
	}
	return nil
}

// keysIn reads the table's keys in [from, to), in order.
func keysIn(ctx context.Context, db *sql.DB, table string, from, to int64) ([]int64, error) {
	rows, err := db.QueryContext(ctx, "SELECT id FROM "+table+" WHERE id >= $1 AND id < $2 ORDER BY id", from, to)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// Stats says what the workload did.
func (w *Workload) Stats() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("%d transactions committed (%d key changes), %d rolled back, %d held open across ticks", w.Committed, w.Moved, w.RolledBack, w.Held)
}

// Violation is a sample in which the slot was ahead of the checkpoint.
type Violation struct {
	Slot, Checkpoint pgcdc.Position
	HaveCheckpoint   bool
	At               time.Time
}

func (v Violation) String() string {
	cp := "none yet"
	if v.HaveCheckpoint {
		cp = v.Checkpoint.String()
	}
	return fmt.Sprintf("%s: slot at %s, checkpoint %s", v.At.Format("15:04:05.000"), v.Slot, cp)
}

// Sampler reads the poller's slot and then the state blob's checkpoint, again and again, and
// records every sample in which the slot is past the checkpoint.
//
// The order of the two reads is what makes a violation a proof. The slot only ever moves to a
// checkpoint that is already in the blob, and the blob's checkpoint only moves forward. Reading
// the slot first (S at time t1) and the blob second (C at t2 > t1): if the system is right, S(t1)
// <= C(t1) <= C(t2), so S > C in a sample can only be a real violation (the slot ahead at t1, or
// the checkpoint moved back). Read the other way round, a commit and an advance landing between
// the two reads would show the new slot against the old checkpoint: a false alarm. So a sample
// can only err on the safe side: it may miss a violation that lasted less than the gap between
// its reads, never report one that did not happen.
type Sampler struct {
	Setup *Setup
	// Checkpoint reads the blob's checkpoint (nil: none yet).
	Checkpoint func(ctx context.Context) (*state.Cursor, error)
	// Start is the slot's position before anything was committed: without a checkpoint the
	// slot must still be there.
	Start pgcdc.Position

	mu         sync.Mutex
	Samples    int
	Errors     int
	Violations []Violation
	lastErr    error
}

// Run samples every period until ctx ends.
func (s *Sampler) Run(ctx context.Context, period time.Duration) {
	pace := time.NewTicker(period) // the sampling rate, not a wait for anything
	defer pace.Stop()
	for {
		s.Sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-pace.C:
		}
	}
}

// Sample takes one sample.
func (s *Sampler) Sample(ctx context.Context) {
	slot, err := s.Setup.SlotLSN(ctx, s.Setup.Slot) // first the slot ...
	if err != nil {
		s.fail(ctx, err)
		return
	}
	c, err := s.Checkpoint(ctx) // ... then the blob
	if err != nil {
		s.fail(ctx, err)
		return
	}
	v := Violation{Slot: slot, At: time.Now()}
	bad := false
	if c == nil {
		bad = s.Start.Before(slot)
	} else {
		cp, err := pgcdc.CursorPosition(c)
		if err != nil {
			s.fail(ctx, err)
			return
		}
		v.Checkpoint, v.HaveCheckpoint = cp, true
		bad = slot.LSN > cp.LSN
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Samples++
	if bad {
		s.Violations = append(s.Violations, v)
	}
}

func (s *Sampler) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Errors++
	s.lastErr = err
}

// Result returns the samples taken, the failed reads, the violations and the last read error.
func (s *Sampler) Result() (samples, errs int, violations []Violation, lastErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Samples, s.Errors, slices.Clone(s.Violations), s.lastErr
}

// Owners counts the batches per owner, for the log.
func Owners(batches []Batch) string {
	n := map[string]int{}
	for _, b := range batches {
		n[b.Owner]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s:%d", k, n[k]))
	}
	return strings.Join(parts, " ")
}

// Verify runs the end-of-run checks on the batches delivered and the blob's last checkpoint:
// the batches chain (Stream); the stream applied strictly, and every delivery applied as it
// arrived, both give the table; the stream is the witness slot's; the checkpoint is the
// stream's end; the slot is not past it. cfg opens the poller's source (for the witness). It
// returns the stream, the repeats and the problems found (none: all is well).
func (s *Setup) Verify(ctx context.Context, cfg source.Config, batches []Batch, checkpoint *state.Cursor) (stream []Change, repeats int, problems []string) {
	stream, repeats, err := Stream(batches)
	if err != nil {
		return stream, repeats, []string{"the batches do not chain: " + err.Error()}
	}
	table, err := s.Rows(ctx)
	if err != nil {
		return stream, repeats, []string{"reading the table: " + err.Error()}
	}
	problems = append(problems, s.Tables(stream)...)
	problems = append(problems, s.Hide(table, stream)...)
	problems = append(problems, CheckImages(stream, s.Options.Full)...)
	replica, err := Apply(stream)
	if err != nil {
		problems = append(problems, streamApplyProblem+err.Error())
	}
	for _, d := range Diff(replica, table) {
		problems = append(problems, streamOrderProblem+d)
	}
	for _, d := range Diff(ApplyArrival(batches), table) {
		problems = append(problems, "the deliveries applied as they arrived: "+d)
	}
	witness, err := s.WitnessStream(ctx, cfg)
	if err != nil {
		problems = append(problems, "reading the witness slot: "+err.Error())
	} else if err := SameStream(stream, witness); err != nil {
		problems = append(problems, err.Error())
	}
	if checkpoint == nil {
		if len(stream) > 0 {
			problems = append(problems, "no checkpoint after delivering changes")
		}
		return stream, repeats, problems
	}
	cp, err := pgcdc.CursorPosition(checkpoint)
	if err != nil {
		return stream, repeats, append(problems, err.Error())
	}
	if len(stream) > 0 && cp.String() != stream[len(stream)-1].Pos && !mustPos(stream[len(stream)-1].Pos).Before(cp) { // past it: a keep-up mark
		problems = append(problems, fmt.Sprintf("the checkpoint is %s, the stream ends at %s", cp, stream[len(stream)-1].Pos))
	}
	if slot, err := s.SlotLSN(ctx, s.Slot); err != nil || slot.LSN > cp.LSN {
		problems = append(problems, fmt.Sprintf("at the end the slot is at %s (%v), past the checkpoint %s", slot, err, cp))
	}
	return stream, repeats, problems
}
