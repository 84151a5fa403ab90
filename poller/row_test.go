package poller_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestRowsAreTheRuntimesRows: a handler of Row gets the runtime's rows in a slice of its own
// (copies of the rows, whose capacity is its length, so that an append cannot write into the
// runtime's array), From and To copies of the runtime's cursors, and the poller's tables. Every
// method of Row answers what the runtime's row answers.
func TestRowsAreTheRuntimesRows(t *testing.T) {
	rows := sqliteRows(t, 3)
	from := &state.Cursor{Kind: state.KindInteger, Value: json.RawMessage(`0`)}
	to, err := rows[2].Cursor()
	if err != nil {
		t.Fatal(err)
	}
	var got *poller.Batch[poller.Row]
	p := poller.New("rows", "orders", poller.Integer, func(_ context.Context, b *poller.Batch[poller.Row]) error { got = b; return nil },
		poller.WithColumns("id", "customer", "amount", "updated_at"), poller.WithKey("id"), poller.WithCursorColumn("id"))
	if err := pollerdef.Of(p).Handle(context.Background(), &pollerdef.Batch{Poller: "rows", ID: "batch_1", FencingToken: 7, Attempt: 2, From: from, To: &to, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	if got.Poller != "rows" || got.ID != "batch_1" || got.FencingToken != 7 || got.Attempt != 2 || !slices.Equal(got.Tables, []string{"orders"}) {
		t.Errorf("batch %+v", got)
	}
	if got.From == nil || got.To == nil || !reflect.DeepEqual(*got.From, poller.Cursor{Kind: from.Kind, Value: from.Value}) ||
		!reflect.DeepEqual(*got.To, poller.Cursor{Kind: to.Kind, Value: to.Value, Tiebreaker: to.Tiebreaker}) {
		t.Errorf("From %+v To %+v, want the runtime's %+v and %+v", got.From, got.To, from, to)
	}
	if len(got.Raw) != 3 || cap(got.Raw) != 3 || len(got.Rows) != 3 || &got.Rows[0] != &got.Raw[0] {
		t.Fatalf("Raw: len %d cap %d; Rows: len %d", len(got.Raw), cap(got.Raw), len(got.Rows))
	}
	for i, r := range got.Raw {
		src := rows[i]
		if r.Table() != "orders" || r.Table() != src.Table() || !slices.Equal(r.Columns(), src.Columns()) {
			t.Errorf("row %d: Table %s Columns %v, the runtime's %s %v", i, r.Table(), r.Columns(), src.Table(), src.Columns())
		}
		wantJSON, _ := src.MarshalJSON()
		gotJSON, err := r.MarshalJSON()
		if err != nil || string(gotJSON) != string(wantJSON) || string(gotJSON) == "" {
			t.Errorf("row %d: MarshalJSON %s %v, want %s", i, gotJSON, err, wantJSON)
		}
		if asJSON, err := json.Marshal(r); err != nil || string(asJSON) != string(wantJSON) {
			t.Errorf("row %d: json.Marshal %s %v, want %s", i, asJSON, err, wantJSON)
		}
		wantCursor, _ := src.Cursor()
		gotCursor, err := r.Cursor()
		if err != nil || !reflect.DeepEqual(gotCursor, poller.Cursor{Kind: wantCursor.Kind, Value: wantCursor.Value, Tiebreaker: wantCursor.Tiebreaker}) {
			t.Errorf("row %d: Cursor %+v %v, want %+v", i, gotCursor, err, wantCursor)
		}
		if !reflect.DeepEqual(r.Get("customer"), src.Get("customer")) || r.Get("customer") == nil ||
			!reflect.DeepEqual(r.Key(), src.Key()) || !reflect.DeepEqual(r.Values(), src.Values()) ||
			r.Op() != src.Op() || r.HasRow() != src.HasRow() || !reflect.DeepEqual(r.Unchanged(), src.Unchanged()) {
			t.Errorf("row %d: Get %v Key %v Values %v Op %s HasRow %v Unchanged %v; the runtime's: %v %v %v %s %v %v", i,
				r.Get("customer"), r.Key(), r.Values(), r.Op(), r.HasRow(), r.Unchanged(),
				src.Get("customer"), src.Key(), src.Values(), src.Op(), src.HasRow(), src.Unchanged())
		}
		var want, into benchOrder
		if err := src.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if err := r.Decode(&into); err != nil || into != want || into.ID != int64(i+1) {
			t.Errorf("row %d: Decode %+v %v, want %+v", i, into, err, want)
		}
	}
	got.Tables[0] = "changed"
	if err := pollerdef.Of(p).Handle(context.Background(), &pollerdef.Batch{Poller: "rows", Rows: rows}); err != nil || got.Tables[0] != "orders" {
		t.Errorf("a handler that changed Tables changed the next batch's: %v %v", got.Tables, err)
	}
}

// TestCursorIsTheCheckpointsCursor: a Cursor's JSON is the state document's cursor's, both ways,
// and Time reads a timestamp+pk cursor's time.
func TestCursorIsTheCheckpointsCursor(t *testing.T) {
	for _, c := range []state.Cursor{
		{Kind: state.KindTimestampPK, Value: json.RawMessage(`"2026-01-02T03:04:05.123456Z"`), Tiebreaker: map[string]json.RawMessage{"id": json.RawMessage(`7`)}},
		{Kind: state.KindXID, Value: json.RawMessage(`"18446744073709551615"`)},
	} {
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		pc := poller.Cursor{Kind: c.Kind, Value: c.Value, Tiebreaker: c.Tiebreaker}
		got, err := json.Marshal(pc)
		if err != nil || string(got) != string(want) {
			t.Errorf("poller.Cursor as JSON: %s %v, want %s", got, err, want)
		}
		var back poller.Cursor
		if err := json.Unmarshal(want, &back); err != nil || !reflect.DeepEqual(back, pc) {
			t.Errorf("%s read into a poller.Cursor: %+v %v", want, back, err)
		}
		wantTime, wantOK := c.Time()
		gotTime, gotOK := pc.Time()
		if gotOK != wantOK || !gotTime.Equal(wantTime) || (c.Kind == state.KindTimestampPK) != gotOK {
			t.Errorf("%s: Time %v %v, want %v %v", want, gotTime, gotOK, wantTime, wantOK)
		}
	}
	if ts, ok := (*poller.Cursor)(nil).Time(); ok || !ts.Equal(time.Time{}) {
		t.Errorf("a nil cursor's Time: %v %v", ts, ok)
	}
}

// TestMirrorsHaveTheRuntimesFields: Cursor and Transaction, which package poller fills field by
// field from the runtime's, have the runtime's fields, of the same types and JSON names: a field
// added to one of them fails here until the other has it and the copy carries it.
func TestMirrorsHaveTheRuntimesFields(t *testing.T) {
	for _, c := range []struct{ public, runtime reflect.Type }{
		{reflect.TypeFor[poller.Cursor](), reflect.TypeFor[state.Cursor]()},
		{reflect.TypeFor[poller.Transaction](), reflect.TypeFor[row.Transaction]()},
	} {
		fields := func(t reflect.Type) []string {
			var out []string
			for f := range t.Fields() {
				out = append(out, f.Name+" "+f.Type.String()+" "+f.Tag.Get("json"))
			}
			return out
		}
		if got, want := fields(c.public), fields(c.runtime); !slices.Equal(got, want) {
			t.Errorf("%v has the fields %q, %v %q", c.public, got, c.runtime, want)
		}
	}
}
