package sqlserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// threeTables lays out, without a server, a changetracking poller of dbo.orders (key id),
// dbo.lines (key order_id, line) and dbo.notes (key id), and returns its stream.
func threeTables(t *testing.T) *ctTables {
	t.Helper()
	def := sourcedef.Definition{Table: sourcedef.Table{Schema: "dbo", Name: "orders"}, Columns: []string{"id", "amount"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindChangeTracking},
		More: []sourcedef.TableDef{
			{Table: sourcedef.Table{Schema: "dbo", Name: "lines"}, Columns: []string{"order_id", "line", "qty"}, PK: []string{"order_id", "line"}},
			{Table: sourcedef.Table{Schema: "dbo", Name: "notes"}, Columns: []string{"id", "text"}, PK: []string{"id"}},
		}}
	types := map[string]string{"id": "BIGINT", "amount": "DECIMAL", "order_id": "BIGINT", "line": "INT", "qty": "INT", "text": "NVARCHAR"}
	_, lay, err := source.Offline(Driver{}, source.Config{Poller: "orders", Driver: Name, Definition: def}, types)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := Driver{}.ChangeStream(state.KindChangeTracking, lay)
	m, isTables := cs.(*ctTables)
	if err != nil || !isTables || len(m.tabs) != 3 {
		t.Fatalf("the change stream of three tables is a %T", cs)
	}
	return m
}

// TestCTTablesPositions: a boundary is read by every table from the version on; a position
// inside a version names its table, whose key it holds: the tables before it read the later
// versions, it the changes after the key, the tables after it the version again. A tiebreaker
// without the mark is the first table's (a poller that gained tables); one naming another
// table is refused.
func TestCTTablesPositions(t *testing.T) {
	m := threeTables(t)
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, c := range []struct {
		name string
		cur  state.Cursor
		tab  int
		at   [3]string // each table's read: its base, and "+key" when after a key
	}{
		{"boundary", state.Cursor{Kind: state.KindChangeTracking, Value: raw("7")}, -1, [3]string{"7", "7", "7"}},
		{"inside lines", state.Cursor{Kind: state.KindChangeTracking, Value: raw("7"), Tiebreaker: map[string]json.RawMessage{
			"order_id": raw("1"), "line": raw("2"), tableMark: raw(`"dbo.lines"`)}}, 1, [3]string{"7", "6+key", "6"}},
		{"inside orders, no mark", state.Cursor{Kind: state.KindChangeTracking, Value: raw("7"), Tiebreaker: map[string]json.RawMessage{
			"id": raw("5")}}, 0, [3]string{"6+key", "6", "6"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := m.position(&c.cur)
			if err != nil {
				t.Fatal(err)
			}
			if p.tab != c.tab {
				t.Errorf("table %d, want %d", p.tab, c.tab)
			}
			for i := range 3 {
				at := p.at(i)
				got := fmt.Sprint(at.base())
				if at.key != nil {
					got += "+key"
				}
				if got != c.at[i] {
					t.Errorf("table %d reads after %s, want %s", i, got, c.at[i])
				}
			}
			if err := m.CheckCursor(&c.cur); err != nil {
				t.Error(err)
			}
		})
	}
	bad := state.Cursor{Kind: state.KindChangeTracking, Value: raw("7"), Tiebreaker: map[string]json.RawMessage{"id": raw("5"), tableMark: raw(`"dbo.other"`)}}
	if _, err := m.position(&bad); !errors.Is(err, source.ErrCursor) || !strings.Contains(err.Error(), "dbo.other") {
		t.Errorf("a cursor of a table not read: %v", err)
	}
	wrongKey := state.Cursor{Kind: state.KindChangeTracking, Value: raw("7"), Tiebreaker: map[string]json.RawMessage{"id": raw("5"), tableMark: raw(`"dbo.lines"`)}}
	if _, err := m.position(&wrongKey); !errors.Is(err, source.ErrCursor) {
		t.Errorf("a cursor with another table's key: %v", err)
	}
	if p, err := m.position(nil); err != nil || p.at(1) != nil || p.inside() != -1 {
		t.Errorf("the beginning: %+v %v", p, err)
	}
}

// TestCTTablesMerge: the tables' changes merged in (version, table, key) order and numbered by
// version across the tables; a batch that ends inside a version is marked there, and one that
// holds the read whole ends on a version boundary.
func TestCTTablesMerge(t *testing.T) {
	m := threeTables(t)
	mk := func(tab int, version int64, vals ...any) ctChange {
		r, ch, err := m.tabs[tab].row(version, "I", true, vals)
		if err != nil {
			t.Fatal(err)
		}
		return ctChange{version: version, row: r, ch: ch}
	}
	// fresh makes each table's changes anew: a fetch's changes are its own, and the test's
	// numbering and sealing change them.
	var orders, lines, notes []ctChange
	fresh := func() {
		orders = []ctChange{mk(0, 3, int64(1), "9.50"), mk(0, 5, int64(2), "1.00")}
		lines = []ctChange{mk(1, 3, int64(1), int64(1), int64(4)), mk(1, 3, int64(1), int64(2), int64(1)), mk(1, 4, int64(2), int64(1), int64(8))}
		notes = []ctChange{mk(2, 5, int64(2), "gift")}
	}
	fresh()
	show := func(cs []ctChange) string {
		var out []string
		for _, c := range cs {
			line := fmt.Sprintf("v%d %s %v #%d", c.version, c.row.Table(), c.row.Key(), c.ch.Index)
			if c.ch.Last {
				line += " last"
			}
			out = append(out, line)
		}
		return strings.Join(out, "\n")
	}
	for _, c := range []struct {
		limit int
		want  string
		more  bool
	}{
		{10, "v3 dbo.orders map[id:1] #1\nv3 dbo.lines map[line:1 order_id:1] #2\nv3 dbo.lines map[line:2 order_id:1] #3 last\nv4 dbo.lines map[line:1 order_id:2] #1 last\nv5 dbo.orders map[id:2] #1\nv5 dbo.notes map[id:2] #2 last", false},
		{2, "v3 dbo.orders map[id:1] #1\nv3 dbo.lines map[line:1 order_id:1] #2", true},
		{3, "v3 dbo.orders map[id:1] #1\nv3 dbo.lines map[line:1 order_id:1] #2\nv3 dbo.lines map[line:2 order_id:1] #3 last", true},
	} {
		fresh()
		var all []ctChange
		for i, l := range [][]ctChange{orders, lines, notes} {
			all = m.add(all, i, l, c.limit+1)
		}
		got, more := number(all, c.limit, -1)
		if show(got) != c.want || more != c.more {
			t.Errorf("limit %d:\n%s\nmore %v; want\n%s\nmore %v", c.limit, show(got), more, c.want, c.more)
		}
		to := seal(got[len(got)-1].ch, !more)
		p, err := m.position(to)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !more && (p.tab != -1 || p.version != 5):
			t.Errorf("limit %d: a whole read ends at %+v, not on version 5's boundary", c.limit, p)
		case more && p.tab != 1:
			t.Errorf("limit %d: the batch ends at %+v, not inside version 3 in dbo.lines", c.limit, p)
		}
	}
	// A table with more changes than the batch: its read returns the one more a fetch asks for,
	// which carries only its version (changes). Its merge names no table in it, and numbering
	// leaves it out.
	fresh()
	readAhead := []ctChange{orders[0], {version: orders[1].version}} // a fetch of 1: one change and the one more
	var merged []ctChange
	for i, l := range [][]ctChange{readAhead, lines[:2], notes} {
		merged = m.add(merged, i, l, 2)
	}
	first, more := number(merged, 1, -1)
	if !more || show(first) != "v3 dbo.orders map[id:1] #1" {
		t.Errorf("a fetch of 1 with a read-ahead change:\n%s\nmore %v", show(first), more)
	}
	if tb := string(first[0].ch.Cursor.Tiebreaker[tableMark]); tb != `"dbo.orders"` {
		t.Errorf("the change's cursor names table %s", tb)
	}

	// Two tables' changes of one key in one version are two messages: their ids differ.
	p := poller.New("orders", "orders", poller.ChangeTracking, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
		poller.WithSchema("dbo"), poller.WithColumns("id", "amount"), poller.WithKey("id"),
		poller.WithTables(poller.Table{Schema: "dbo", Name: "lines", Columns: []string{"order_id", "line", "qty"}, Key: []string{"order_id", "line"}},
			poller.Table{Schema: "dbo", Name: "notes", Columns: []string{"id", "text"}, Key: []string{"id"}}))
	b := pollerdef.Of(p).Raw(&pollerdef.Batch{Poller: "orders", Rows: []row.Row{orders[1].row, notes[0].row}}).(*poller.Batch[poller.Row])
	msgs, err := sink.Messages(b, sink.ModeRow)
	if err != nil || len(msgs) != 2 || msgs[0].ID == msgs[1].ID {
		t.Errorf("dbo.orders and dbo.notes, key id 2, version 5: ids %v (%v)", msgs, err)
	}

	// A read resumed inside version 3 does not count its changes there.
	fresh()
	got, _ := number(mergeVersions(nil, lines[1:], 10), 10, 3)
	if got[0].ch.Index != 0 || got[1].ch.Index != 1 {
		t.Errorf("resumed inside version 3: %s", show(got))
	}
}
