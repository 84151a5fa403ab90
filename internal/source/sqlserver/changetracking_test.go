package sqlserver

import (
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// ctSource lays out a changetracking source on SQL Server as Open would after reading the column
// types, without a server: orders(id BIGINT, region NVARCHAR, customer NVARCHAR, amount DECIMAL,
// updated_at DATETIME2), with a reader of its own.
func ctSource(t *testing.T, pk ...string) (*source.Source, *changeTracking) {
	t.Helper()
	def := sourcedef.Definition{Table: sourcedef.Table{Schema: "dbo", Name: "orders"}, Columns: []string{"id", "customer", "amount", "updated_at"},
		Cursor: sourcedef.Cursor{Kind: state.KindChangeTracking}, PK: pk}
	types := map[string]string{"id": "BIGINT", "region": "NVARCHAR", "customer": "NVARCHAR", "amount": "DECIMAL", "updated_at": "DATETIME2"}
	s, lay, err := source.Offline(Driver{}, source.Config{Poller: "orders", Driver: Name, Definition: def}, types)
	if err != nil {
		t.Fatal(err)
	}
	ct := newChangeTracking(lay)
	ct.retention = "2 DAYS"
	return s, ct
}

func TestChangeTrackingCursor(t *testing.T) {
	s, ct := ctSource(t, "id")
	c, err := s.CursorFromText(" 42 ", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != state.KindChangeTracking || string(c.Value) != "42" || c.Tiebreaker != nil || c.Validate() != nil {
		t.Fatalf("cursor from text: %+v", c)
	}
	if p, err := ct.position(c); err != nil || p.version != 42 || p.key != nil || p.base() != 42 {
		t.Fatalf("boundary position %+v, %v", p, err)
	}
	for _, bad := range []string{"-1", "abc", "1.5", "", "0x10", "99999999999999999999"} {
		if _, err := s.CursorFromText(bad, nil); !errors.Is(err, source.ErrCursor) || !strings.Contains(err.Error(), "change version") {
			t.Errorf("%q: %v, want ErrCursor naming a change version", bad, err)
		}
	}
	if _, err := s.CursorFromText("42", map[string]string{"id": "1"}); !errors.Is(err, source.ErrCursor) {
		t.Errorf("key values accepted: %v", err)
	}

	// A row's cursor is inside its version, after its key; it survives the state document.
	r, _, err := ct.row(7, "U", true, []any{int64(5), "alice", []byte("12.50"), time.Date(2026, 4, 7, 1, 2, 3, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := r.Cursor()
	if string(rc.Value) != "7" || len(rc.Tiebreaker) != 1 || string(rc.Tiebreaker["id"]) != "5" {
		t.Fatalf("row cursor %+v", rc)
	}
	doc, err := json.Marshal(rc)
	if err != nil {
		t.Fatal(err)
	}
	var back state.Cursor
	if err := json.Unmarshal(doc, &back); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckCursor(&back); err != nil {
		t.Fatal(err)
	}
	p, err := ct.position(&back)
	if err != nil || p.version != 7 || p.base() != 6 || !slices.Equal(p.key, []any{int64(5)}) {
		t.Fatalf("inside position %+v, %v", p, err)
	}

	bad := []state.Cursor{
		{Kind: state.KindRowversion, Value: json.RawMessage(`"0x00000000000007D1"`)},
		{Kind: state.KindChangeTracking, Value: json.RawMessage(`"7"`)},
		{Kind: state.KindChangeTracking, Value: json.RawMessage(`-3`)},
		{Kind: state.KindChangeTracking, Value: json.RawMessage(`0`), Tiebreaker: map[string]json.RawMessage{"id": json.RawMessage(`5`)}},
		{Kind: state.KindChangeTracking, Value: json.RawMessage(`7`), Tiebreaker: map[string]json.RawMessage{"region": json.RawMessage(`5`)}},
		{Kind: state.KindChangeTracking, Value: json.RawMessage(`7`), Tiebreaker: map[string]json.RawMessage{"id": json.RawMessage(`"abc"`)}},
		{Kind: state.KindChangeTracking, Value: json.RawMessage(`7`), Tiebreaker: map[string]json.RawMessage{"id": json.RawMessage(`5`), "x": json.RawMessage(`1`)}},
	}
	for _, c := range bad {
		if err := s.CheckCursor(&c); !errors.Is(err, source.ErrCursor) {
			t.Errorf("%s %s %v accepted: %v", c.Kind, c.Value, c.Tiebreaker, err)
		}
	}

	// A composite key: every key column in the tiebreaker, each as its type.
	s2, ct2 := ctSource(t, "region", "id")
	r2, _, err := ct2.row(9, "I", true, []any{int64(5), "bob", []byte("1.00"), time.Now(), "eu"})
	if err != nil {
		t.Fatal(err)
	}
	rc2, _ := r2.Cursor()
	if string(rc2.Tiebreaker["region"]) != `"eu"` || string(rc2.Tiebreaker["id"]) != "5" || string(rc2.Value) != "9" {
		t.Fatalf("composite row cursor %+v", rc2)
	}
	if p, err := ct2.position(&rc2); err != nil || !slices.Equal(p.key, []any{"eu", int64(5)}) {
		t.Fatalf("composite position %+v, %v", p, err)
	}
	if err := s2.CheckCursor(&rc); !errors.Is(err, source.ErrCursor) {
		t.Errorf("a one-column tiebreaker fits a two-column key: %v", err)
	}
}

func TestChangeTrackingOps(t *testing.T) {
	cases := []struct {
		op      string
		found   bool
		want    string
		keyOnly bool
	}{
		{"I", true, row.OpInsert, false},
		{"U", true, row.OpUpdate, false},
		{"D", false, row.OpDelete, true},
		{"D", true, row.OpDelete, true},
		{"I", false, row.OpDelete, true}, // inserted, and gone now
		{"U", false, row.OpDelete, true},
		{"U ", true, row.OpUpdate, false}, // nchar(1) padded by a driver
	}
	for _, c := range cases {
		got, keyOnly, err := ctOp(c.op, c.found)
		if err != nil || got != c.want || keyOnly != c.keyOnly {
			t.Errorf("%q found=%v: %s %v %v, want %s %v", c.op, c.found, got, keyOnly, err, c.want, c.keyOnly)
		}
	}
	if _, _, err := ctOp("X", true); err == nil {
		t.Error("an unknown operation was accepted")
	}

	_, ct := ctSource(t, "id")
	vals := []any{int64(3), "gone", []byte("9.99"), time.Now()}
	r, _, err := ct.row(11, "D", false, vals)
	if err != nil {
		t.Fatal(err)
	}
	if r.Op() != row.OpDelete || r.HasRow() || r.Get("customer") != nil || r.Get("amount") != nil || r.Key()["id"] != int64(3) {
		t.Fatalf("delete row: op %s, has row %v, customer %v, key %v", r.Op(), r.HasRow(), r.Get("customer"), r.Key())
	}
	j, _ := r.MarshalJSON()
	if string(j) != `{"id":3,"customer":null,"amount":null,"updated_at":null}` {
		t.Errorf("delete row JSON %s", j)
	}
	r, _, err = ct.row(12, "I", true, []any{int64(4), "alice", []byte("12.50"), time.Date(2026, 4, 7, 1, 2, 3, 400, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Op() != row.OpInsert || !r.HasRow() || r.Get("amount") != "12.50" || r.Get("customer") != "alice" {
		t.Fatalf("insert row: %s %v %v", r.Op(), r.Get("amount"), r.Get("customer"))
	}
	if _, _, err := ct.row(13, "U", true, []any{nil, "x", nil, nil}); !errors.Is(err, source.ErrNullCursor) {
		t.Errorf("a change without a key: %v", err)
	}
	if _, _, err := ct.row(13, "Z", true, vals); err == nil || !strings.Contains(err.Error(), `poller "orders"`) {
		t.Errorf("unknown op error %v does not name the poller", err)
	}
}

func TestChangeTrackingSeal(t *testing.T) {
	_, ct := ctSource(t, "id")
	var last *row.Change
	mk := func(v int64, id int64) row.Row {
		r, ch, err := ct.row(v, "U", true, []any{id, "c", []byte("1"), time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		last = ch
		return r
	}
	full := &row.Batch{Rows: []row.Row{mk(5, 1), mk(5, 2)}}
	full.To = seal(last, false)
	if string(full.To.Value) != "5" || string(full.To.Tiebreaker["id"]) != "2" {
		t.Fatalf("a batch whose read found a change after it ends inside its last version: %+v", full.To)
	}
	short := &row.Batch{Rows: []row.Row{mk(5, 1), mk(6, 2)}}
	short.To = seal(last, true)
	if string(short.To.Value) != "6" || short.To.Tiebreaker != nil {
		t.Fatalf("a batch whose read reached its bound ends on a version boundary: %+v", short.To)
	}
	if last, _ := short.Rows[1].Cursor(); last.Tiebreaker != nil {
		t.Fatalf("the last row's cursor is not the batch's To: %+v", last)
	}
	// The sink's id takes the cursor Value: two changes of a key differ, one change keeps it.
	a, _ := short.Rows[0].Cursor()
	b, _ := mk(8, 1).Cursor()
	if string(a.Value) == string(b.Value) {
		t.Fatal("two changes of one key share a cursor value")
	}
}

func TestChangeTrackingVersions(t *testing.T) {
	_, ct := ctSource(t, "id")
	n := func(v int64) sql.NullInt64 { return sql.NullInt64{Int64: v, Valid: true} }
	null := sql.NullInt64{}

	if _, _, err := ct.args(nil, null, n(3)); !errors.Is(err, ErrNotTracked) || !strings.Contains(err.Error(), "Change Tracking is off in the database") {
		t.Errorf("no current version: %v", err)
	}
	if _, _, err := ct.args(nil, n(9), null); !errors.Is(err, ErrNotTracked) || !strings.Contains(err.Error(), "ALTER TABLE [dbo].[orders] ENABLE CHANGE_TRACKING") {
		t.Errorf("no minimum valid version: %v", err)
	}
	if args, in, err := ct.args(nil, n(9), n(3)); err != nil || in || !slices.Equal(args, []any{int64(3), int64(3), int64(9)}) {
		t.Errorf("from the beginning: %v %v %v", args, in, err)
	}
	if args, in, err := ct.args(&ctPosition{version: 5}, n(9), n(3)); err != nil || in || !slices.Equal(args, []any{int64(5), int64(5), int64(9)}) {
		t.Errorf("from a boundary: %v %v %v", args, in, err)
	}
	if args, in, err := ct.args(&ctPosition{version: 5, key: []any{int64(7)}}, n(9), n(3)); err != nil || !in || !slices.Equal(args, []any{int64(4), int64(5), int64(7), int64(9)}) {
		t.Errorf("inside a version: %v %v %v", args, in, err)
	}
	if _, _, err := ct.args(&ctPosition{version: 3}, n(9), n(3)); err != nil {
		t.Errorf("a boundary at the minimum valid version is valid: %v", err)
	}

	// Expired: the message names the poller, the table, both versions, the retention and the reset.
	_, _, err := ct.args(&ctPosition{version: 12}, n(90), n(40))
	if !errors.Is(err, ErrExpired) || !errors.Is(err, source.ErrCursor) {
		t.Fatalf("expired: %v", err)
	}
	for _, want := range []string{`poller "orders"`, "table dbo.orders", "after version 12", "CHANGE_TRACKING_MIN_VALID_VERSION is 40",
		"after 2 DAYS", "TRUNCATE TABLE", "pollerctl reset orders --to-beginning", "re-read", "rather than skip"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the expired error lacks %q: %v", want, err)
		}
	}
	// Inside a version the read starts one version below it.
	_, _, err = ct.args(&ctPosition{version: 40, key: []any{int64(1)}}, n(90), n(40))
	if !errors.Is(err, ErrExpired) || !strings.Contains(err.Error(), "inside version 40") || !strings.Contains(err.Error(), "after version 39") {
		t.Errorf("expired inside a version: %v", err)
	}
	// Ahead of the database: refused, not expired.
	_, _, err = ct.args(&ctPosition{version: 91}, n(90), n(40))
	if !errors.Is(err, source.ErrCursor) || errors.Is(err, ErrExpired) || !strings.Contains(err.Error(), "ahead of the database's CHANGE_TRACKING_CURRENT_VERSION() 90") {
		t.Errorf("ahead: %v", err)
	}
}

func TestChangeTrackingKeepUp(t *testing.T) {
	cases := []struct {
		p                 *ctPosition
		current, minValid int64
		want              bool
	}{
		{nil, 100, 10, false},                                           // the beginning follows the minimum anyway
		{&ctPosition{version: 100}, 100, 10, false},                     // nothing newer
		{&ctPosition{version: 60}, 100, 10, false},                      // 50 above the minimum, 40 below the current
		{&ctPosition{version: 50}, 100, 10, true},                       // 40 above, 50 below
		{&ctPosition{version: 51, key: []any{int64(1)}}, 100, 10, true}, // inside 51: base 50
		{&ctPosition{version: 10}, 11, 10, true},                        // at the minimum: move as soon as there is a version
	}
	for _, c := range cases {
		if got := ctKeepUp(c.p, c.current, c.minValid); got != c.want {
			t.Errorf("%+v current %d min %d: keep-up %v, want %v", c.p, c.current, c.minValid, got, c.want)
		}
	}
}

func TestChangeTrackingCheckMessages(t *testing.T) {
	dl := Driver{}
	ok := ctSetup{database: "shop", user: "app", dbTracked: true, retention: "2 DAYS", tableTracked: true, snapshot: "ON", viewCT: true, pk: []string{"id"}}
	if p := ok.problems(dl, "[dbo].[orders]", []string{"ID"}); len(p) != 0 {
		t.Fatalf("a complete set-up has problems: %v", p)
	}
	cases := []struct {
		name  string
		setup func(*ctSetup)
		key   []string
		n     int
		want  []string
	}{
		{"database off", func(s *ctSetup) { s.dbTracked, s.tableTracked = false, false }, []string{"id"}, 2,
			[]string{"ALTER DATABASE [shop] SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 2 DAYS, AUTO_CLEANUP = ON)", "ALTER TABLE [dbo].[orders] ENABLE CHANGE_TRACKING"}},
		{"table off", func(s *ctSetup) { s.tableTracked = false }, []string{"id"}, 1, []string{"ALTER TABLE [dbo].[orders] ENABLE CHANGE_TRACKING"}},
		{"snapshot off", func(s *ctSetup) { s.snapshot = "OFF" }, []string{"id"}, 1, []string{"ALLOW_SNAPSHOT_ISOLATION is OFF", "ALTER DATABASE [shop] SET ALLOW_SNAPSHOT_ISOLATION ON"}},
		{"permission", func(s *ctSetup) { s.user = "poll]er" }, []string{"id"}, 0, nil},
		{"no permission", func(s *ctSetup) { s.viewCT, s.user = false, "poll]er" }, []string{"id"}, 1, []string{"GRANT VIEW CHANGE TRACKING ON [dbo].[orders] TO [poll]]er]"}},
		{"key differs", func(*ctSetup) {}, []string{"customer"}, 1, []string{"the poller's key (customer) is not the table's primary key (id)", "make the poller's key id"}},
		{"no primary key", func(s *ctSetup) { s.pk = nil }, []string{"id"}, 1, []string{"no primary key", "PRIMARY KEY ([id])"}},
	}
	for _, c := range cases {
		st := ok
		c.setup(&st)
		p := st.problems(dl, "[dbo].[orders]", c.key)
		if len(p) != c.n {
			t.Errorf("%s: problems %v", c.name, p)
		}
		all := strings.Join(p, "; ")
		for _, w := range c.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: %q lacks %q", c.name, all, w)
			}
		}
	}
	// The order to run them in: the database before the table.
	st := ok
	st.dbTracked, st.tableTracked, st.snapshot = false, false, "OFF"
	p := st.problems(dl, "[dbo].[orders]", []string{"id"})
	if len(p) != 3 || !strings.Contains(p[0], "ALTER DATABASE") || !strings.Contains(p[1], "ALTER TABLE") {
		t.Fatalf("problems out of order: %v", p)
	}
	_, ct := ctSource(t, "id")
	err := ct.fail(p...)
	if !errors.Is(err, ErrNotTracked) || !strings.HasPrefix(err.Error(), `source: poller "orders", table dbo.orders: `) {
		t.Fatalf("check error: %v", err)
	}
}

// TestChangeTrackingReached: a chunk's watermark (version 10) is reached at a cursor whose base
// is at or past it, or where the last fetch that read everything after its cursor ended, up to a
// bound at or past it; the beginning (nil) too, which no cursor's base can say (a quiet table
// whose changes Change Tracking no longer keeps: the initial snapshot of a new poller).
func TestChangeTrackingReached(t *testing.T) {
	_, ct := ctSource(t, "id")
	w := &ctWatermark{c: ct, version: 10}
	at := func(v int64, key string) *state.Cursor {
		c := ctCursor(v, nil)
		if key != "" {
			c.Tiebreaker = map[string]json.RawMessage{"id": json.RawMessage(key)}
		}
		return &c
	}
	for _, c := range []struct {
		cur  *state.Cursor
		want bool
	}{{nil, false}, {at(9, ""), false}, {at(10, ""), true}, {at(10, "3"), false}, {at(11, "3"), true}} {
		if got := w.Reached(c.cur); got != c.want {
			t.Errorf("Reached(%v) = %v, want %v", c.cur, got, c.want)
		}
	}
	ct.done.set, ct.done.at, ct.done.bound = true, cursorKey(nil), 12 // a fetch from the beginning found nothing up to 12
	if !w.Reached(nil) || w.Reached(at(9, "")) {
		t.Error("a fetch from the beginning that found nothing up to 12 does not reach 10 there, or reaches it elsewhere")
	}
	ct.done.at = cursorKey(at(9, ""))
	if !w.Reached(at(9, "")) || w.Reached(nil) {
		t.Error("a fetch from version 9 that found nothing up to 12 does not reach 10 there, or reaches it at the beginning")
	}
	ct.done.bound = 9
	if w.Reached(at(9, "")) {
		t.Error("a fetch up to 9 reaches 10")
	}
}
