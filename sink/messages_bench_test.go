package sink

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// BenchmarkMessages renders a batch of 500 rows as webhook messages: the sink's own CPU per row.
func BenchmarkMessages(b *testing.B) {
	_, lay, err := source.Offline(sqlite.Driver{}, source.Config{Poller: "p", Driver: sqlite.Name, Definition: sourcedef.Definition{
		Table: sourcedef.Table{Name: "orders"}, Columns: []string{"id", "customer", "amount", "updated_at"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "id"}}},
		map[string]string{"id": "INTEGER", "customer": "TEXT", "amount": "REAL", "updated_at": "TEXT"})
	if err != nil {
		b.Fatal(err)
	}
	rows := make([]row.Row, 500)
	for i := range rows {
		rows[i] = lay.Row([]any{int64(i), "a customer", 9.5, "2026-11-26T10:00:00Z"}, nil)
	}
	p := poller.New("p", "orders", poller.Integer, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
		poller.WithColumns("id", "customer", "amount", "updated_at"), poller.WithKey("id"), poller.WithCursorColumn("id"))
	batch := rawBatch(p, "b", rows)
	for b.Loop() {
		if _, err := Messages(batch, ModeRow); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}

// handRow is BenchmarkMessages' row as a hand-written loop holds it.
type handRow struct {
	ID        int64   `json:"id"`
	Customer  string  `json:"customer"`
	Amount    float64 `json:"amount"`
	UpdatedAt string  `json:"updated_at"`
}

// BenchmarkMessagesHand renders BenchmarkMessages' rows as the same messages with encoding/json,
// as the sink benchmark's hand loop does (handMessages): what the sink's rendering is weighed
// against.
func BenchmarkMessagesHand(b *testing.B) {
	rows := make([]handRow, 500)
	for i := range rows {
		rows[i] = handRow{int64(i), "a customer", 9.5, "2026-11-26T10:00:00Z"}
	}
	for b.Loop() {
		handMessages(b, rows)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}

// handMessages renders rows as Changes with encoding/json. scripts/bench.sh instructions counts
// its instructions alone (callgrind's --toggle-collect), as it does Messages'.
//
//go:noinline
func handMessages(b *testing.B, rows []handRow) [][]byte {
	out := make([][]byte, len(rows))
	for i, r := range rows {
		id := strconv.FormatInt(r.ID, 10)
		rowJSON, _ := json.Marshal(r)
		body, err := json.Marshal(Change{
			ID: ChangeID("p", []byte(`{"id":`+id+`}`), []byte(id)), Poller: "p", Table: "orders", Op: "upsert", Key: map[string]any{"id": r.ID},
			Row: rowJSON, Cursor: poller.Cursor{Kind: "integer", Value: json.RawMessage(id)}, BatchID: "b", FencingToken: 1, Attempt: 1,
		})
		if err != nil {
			b.Fatal(err)
		}
		out[i] = body
	}
	return out
}
