package sink

import (
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// BenchmarkMessages renders a batch of 500 rows as webhook messages: the sink's own CPU per row.
func BenchmarkMessages(b *testing.B) {
	_, lay, err := source.Offline(sqlite.Driver{}, source.Config{Poller: "p", Driver: sqlite.Name, Definition: source.Definition{
		Table: source.Table{Name: "orders"}, Columns: []string{"id", "customer", "amount", "updated_at"}, PK: []string{"id"},
		Cursor: source.Cursor{Kind: state.KindInteger, Column: "id"}}},
		map[string]string{"id": "INTEGER", "customer": "TEXT", "amount": "REAL", "updated_at": "TEXT"})
	if err != nil {
		b.Fatal(err)
	}
	rows := make([]poller.Row, 500)
	for i := range rows {
		rows[i] = poller.Row(lay.Row([]any{int64(i), "a customer", 9.5, "2026-11-26T10:00:00Z"}, nil))
	}
	batch := &poller.Batch[poller.Row]{Poller: "p", ID: "b", Raw: rows}
	for b.Loop() {
		if _, err := Messages(batch, ModeRow); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}
