package sqlserver

// Several tables in one changetracking poller (sourcedef.Definition.More).
//
// Change versions number the database's committing transactions, whatever tables they changed:
// a transaction that wrote an order and its lines has one version, in both tables'
// CHANGETABLEs. The poller's stream is the tables' changes in (version, table, key) order, the
// table being its place in the poller's list: each read reads each table as a one-table poller
// does (its own queries, TOP (n+1) rows after the position), in one snapshot transaction under
// one bound, and merges them. Every table's list is sorted by (version, key), so the first n+1
// of the merge are the stream's, whatever each list holds past them.
//
// A position inside a version names its table: the cursor's tiebreaker holds the key columns of
// the change's table and, under tableMark, the table's name. After it, the tables before it in
// the list read the versions after, the table itself the changes after the key in the version,
// and the tables after it the version again (CHANGES from the version before). A tiebreaker
// without the mark is the first table's: a poller of one table that gains tables goes on from
// its checkpoint.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// tableMark is the key of a changetracking cursor's tiebreaker that names the change's table,
// in a poller of several tables: no column is named so (an identifier takes no parenthesis).
const tableMark = "(table)"

// ctTables reads several tables' Change Tracking as one stream.
type ctTables struct {
	driver.StreamDefaults
	l    driver.Layout     // the first table's: the connection, and errors naming every table
	tabs []*changeTracking // each table's reader, in the poller's order
	run  ctRun             // the fetches paging through one backlog under one bound
}

func newCTTables(l driver.Layout) *ctTables {
	m := &ctTables{l: l}
	for _, tl := range l.Tables() {
		m.tabs = append(m.tabs, newChangeTracking(tl))
	}
	return m
}

// Check checks each table's set-up, and that no table is named twice (under two names).
func (m *ctTables) Check(ctx context.Context) error {
	ids := map[int64]int{}
	for i, t := range m.tabs {
		if err := t.Check(ctx); err != nil {
			return err
		}
		var id int64
		if err := m.l.DB().QueryRowContext(ctx, "SELECT OBJECT_ID(@p1)", t.table).Scan(&id); err != nil {
			return t.l.Errorf("reading the table's object id: %v", err)
		}
		if j, ok := ids[id]; ok {
			return fmt.Errorf("source: poller %q: %w: tables %s and %s are the same table: name it once", m.l.Poller(), sourcedef.ErrDefinition, m.tabs[j].l.Definition().Table, t.l.Definition().Table)
		}
		ids[id] = i
	}
	return nil
}

// ctTablesPos is a position of the stream: a version boundary (tab -1), or inside version after
// the key of table tab's change.
type ctTablesPos struct {
	ctPosition
	tab int
}

// position reads a stored cursor (nil: the beginning).
func (m *ctTables) position(cur *state.Cursor) (*ctTablesPos, error) {
	if cur == nil {
		return nil, nil
	}
	tab := 0
	c := *cur
	if raw, ok := cur.Tiebreaker[tableMark]; ok {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return nil, fmt.Errorf("source: poller %q: %w: the cursor's table %s is not a name", m.l.Poller(), source.ErrCursor, raw)
		}
		if tab = m.index(name); tab < 0 {
			v, _ := parseVersion(string(cur.Value))
			return nil, fmt.Errorf("source: poller %q: %w: the cursor is inside change version %d, at a change of table %s, which the poller does not read (it reads %s). Go on from the version before, which delivers that version's changes of the other tables again: pollerctl reset %s --to-cursor %d --yes",
				m.l.Poller(), source.ErrCursor, v, name, m.l.Label(), m.l.Poller(), max(v-1, 0))
		}
		c.Tiebreaker = maps.Clone(cur.Tiebreaker)
		delete(c.Tiebreaker, tableMark)
	}
	p, err := m.tabs[tab].position(&c)
	if err != nil {
		return nil, err
	}
	if p.key == nil {
		tab = -1
	}
	return &ctTablesPos{ctPosition: p, tab: tab}, nil
}

// index is the place of the table named name in the poller's list; -1 when none.
func (m *ctTables) index(name string) int {
	for i, t := range m.tabs {
		if t.l.Definition().Table.String() == name {
			return i
		}
	}
	return -1
}

// at is where table i reads from after p (nil: the beginning, each table from the oldest
// version it keeps).
func (p *ctTablesPos) at(i int) *ctPosition {
	switch {
	case p == nil:
		return nil
	case p.tab < 0 || i < p.tab: // the versions after
		return &ctPosition{version: p.version}
	case i == p.tab: // after the key, in the version
		return &p.ctPosition
	}
	return &ctPosition{version: p.version - 1} // the version again
}

// inside is the version p is inside, -1 for none.
func (p *ctTablesPos) inside() int64 {
	if p == nil || p.tab < 0 {
		return -1
	}
	return p.version
}

func (m *ctTables) CheckCursor(cur *state.Cursor) error {
	_, err := m.position(cur)
	return err
}

// CursorFromText reads a version an operator typed: the boundary after it.
func (m *ctTables) CursorFromText(value string) (*state.Cursor, error) {
	return m.tabs[0].CursorFromText(value)
}

// Committed: Change Tracking keeps its changes whatever the readers did.
func (m *ctTables) Committed(context.Context, *state.Cursor) error { return nil }

// read reads the bound, then, in one snapshot transaction, runs each table's read after p (the
// From or After query, its arguments, checked against the table's minimum valid version) with
// do; minValid is the highest of the tables' minimum valid versions, where the beginning (p nil)
// is.
// A fetch goes on with the run (ctRun) that ended at after, and returns each table's base;
// a count (run nil) reads its own bound.
func (m *ctTables) read(ctx context.Context, p *ctTablesPos, run *ctRun, after *state.Cursor, count bool, do func(i int, tx *sql.Tx, q ctQueries, rd ctRead) error) (current, minValid int64, bases []int64, err error) {
	q0 := m.tabs[0].queries()
	var cur sql.NullInt64
	r, resumed := run.resume(after)
	if resumed {
		cur = sql.NullInt64{Int64: r.bound, Valid: true}
	} else if err := m.l.DB().QueryRowContext(ctx, q0.Current).Scan(&cur); err != nil {
		return 0, 0, nil, m.tabs[0].readErr("reading CHANGE_TRACKING_CURRENT_VERSION()", err)
	}
	tx, err := m.l.DB().BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSnapshot})
	if err != nil {
		return 0, 0, nil, m.tabs[0].readErr("starting the snapshot transaction", err)
	}
	defer tx.Rollback()
	mvs := make([]sql.NullInt64, len(m.tabs))
	for i, t := range m.tabs {
		if err := tx.QueryRowContext(ctx, t.queries().MinValid, t.table).Scan(&mvs[i]); err != nil {
			return 0, 0, nil, t.readErr("reading CHANGE_TRACKING_MIN_VALID_VERSION", err)
		}
		minValid = max(minValid, mvs[i].Int64)
	}
	if p == nil {
		// The beginning is the oldest version from which every table still keeps its changes:
		// below it, one of them has forgotten some (or was not tracked yet).
		p = &ctTablesPos{ctPosition: ctPosition{version: minValid}, tab: -1}
	}
	for i, t := range m.tabs {
		q := t.queries()
		mv := mvs[i]
		pos := p.at(i)
		args, in, err := t.args(pos, cur, mv)
		if err != nil {
			return 0, 0, nil, err
		}
		if resumed {
			runBase(args, r.bases[i], mv.Int64)
		}
		bases = append(bases, args[0].(int64))
		rd := ctRead{query: q.FetchFrom, args: args, pos: pos, current: cur.Int64, minValid: mv.Int64, base: args[0].(int64)}
		switch {
		case count && in:
			rd.query = q.WaitingAfter
		case count:
			rd.query = q.WaitingFrom
		case in:
			rd.query = q.FetchAfter
		}
		if err := do(i, tx, q, rd); err != nil {
			return 0, 0, nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, nil, m.tabs[0].readErr("ending the snapshot transaction", err)
	}
	return cur.Int64, minValid, bases, nil
}

// Fetch reads up to limit changes of the tables after the cursor, in (version, table, key)
// order, and one more, as a one-table fetch does.
func (m *ctTables) Fetch(ctx context.Context, after *state.Cursor, limit int) (*row.Batch, error) {
	p, err := m.position(after)
	if err != nil {
		return nil, err
	}
	var all []ctChange
	current, minValid, bases, err := m.read(ctx, p, &m.run, after, false, func(i int, tx *sql.Tx, q ctQueries, rd ctRead) error {
		t := m.tabs[i]
		got, err := t.changes(ctx, tx, q, rd, limit+1)
		if err != nil {
			return err
		}
		all = m.add(all, i, got, limit+1)
		return nil
	})
	if err != nil {
		return nil, err
	}
	got, more := number(all, limit, p.inside())
	b := m.l.Batch(after)
	b.Rows = rowsOf(got)
	switch {
	case len(got) > 0:
		b.To = seal(got[len(got)-1].ch, !more)
	case p != nil && ctKeepUp(&p.ctPosition, current, minValid):
		to := ctCursor(current, nil)
		b.To = &to
	}
	m.run.record(b.To, more, ctRunState{bases: bases, bound: current})
	return b, nil
}

// add merges the changes table i's read returned (changes: in version order, perhaps ending
// with the one more a fetch asks for) into all, keeping at most n, each change's cursor naming
// its table. The one more says only its version: it has no change to name the table in.
func (m *ctTables) add(all []ctChange, i int, got []ctChange, n int) []ctChange {
	name, _ := json.Marshal(m.tabs[i].l.Definition().Table.String())
	for _, c := range got {
		if c.ch != nil {
			c.ch.Cursor.Tiebreaker[tableMark] = name
		}
	}
	return mergeVersions(all, got, n)
}

// mergeVersions merges b into a, both in version order, keeping at most n: a change of a before
// one of b of the same version (a holds the tables before b's).
func mergeVersions(a, b []ctChange, n int) []ctChange {
	out := make([]ctChange, 0, min(len(a)+len(b), n))
	i, j := 0, 0
	for len(out) < n && (i < len(a) || j < len(b)) {
		if j == len(b) || i < len(a) && a[i].version <= b[j].version {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	return out
}

// Waiting counts the changes of the tables after the cursor, up to limit.
func (m *ctTables) Waiting(ctx context.Context, after *state.Cursor, limit int) (int64, error) {
	p, err := m.position(after)
	if err != nil {
		return 0, err
	}
	var n int64
	_, _, _, err = m.read(ctx, p, nil, after, true, func(i int, tx *sql.Tx, q ctQueries, rd ctRead) error {
		var k int64
		if err := tx.QueryRowContext(ctx, rd.query, append(rd.args, limit)...).Scan(&k); err != nil {
			return m.tabs[i].readErr("counting the changes", err)
		}
		n += k
		return nil
	})
	return min(n, int64(limit)), err
}
