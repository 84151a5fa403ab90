package poller_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestRowsAreTheRuntimesRows: a handler of Row gets the runtime's rows themselves, not copies
// (b.Raw[i] is at the address of the runtime's row i; its capacity is its length, so an append
// cannot write into the runtime's array), and its From and To are the runtime's cursors. Every
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
	if got.Poller != "rows" || got.ID != "batch_1" || got.FencingToken != 7 || got.Attempt != 2 {
		t.Errorf("batch %+v", got)
	}
	if (*state.Cursor)(got.From) != from || (*state.Cursor)(got.To) != &to {
		t.Errorf("From %p To %p, want the runtime's %p and %p", got.From, got.To, from, &to)
	}
	if len(got.Raw) != 3 || cap(got.Raw) != 3 || len(got.Rows) != 3 || &got.Rows[0] != &got.Raw[0] {
		t.Fatalf("Raw: len %d cap %d; Rows: len %d", len(got.Raw), cap(got.Raw), len(got.Rows))
	}
	for i, r := range got.Raw {
		src := rows[i]
		if &got.Raw[i] != (*poller.Row)(&rows[i]) {
			t.Errorf("row %d is a copy", i)
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
		if err != nil || !reflect.DeepEqual(gotCursor, poller.Cursor(wantCursor)) {
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
	got.Raw = append(got.Raw, got.Raw[0])
	if &got.Raw[0] == (*poller.Row)(&rows[0]) {
		t.Error("an append to Raw wrote into the runtime's array")
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
		got, err := json.Marshal(poller.Cursor(c))
		if err != nil || string(got) != string(want) {
			t.Errorf("poller.Cursor as JSON: %s %v, want %s", got, err, want)
		}
		var back poller.Cursor
		if err := json.Unmarshal(want, &back); err != nil || !reflect.DeepEqual(state.Cursor(back), c) {
			t.Errorf("%s read into a poller.Cursor: %+v %v", want, back, err)
		}
		wantTime, wantOK := c.Time()
		gotTime, gotOK := (*poller.Cursor)(&c).Time()
		if gotOK != wantOK || !gotTime.Equal(wantTime) || (c.Kind == state.KindTimestampPK) != gotOK {
			t.Errorf("%s: Time %v %v, want %v %v", want, gotTime, gotOK, wantTime, wantOK)
		}
	}
	if ts, ok := (*poller.Cursor)(nil).Time(); ok || !ts.Equal(time.Time{}) {
		t.Errorf("a nil cursor's Time: %v %v", ts, ok)
	}
}
