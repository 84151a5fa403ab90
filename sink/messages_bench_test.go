package sink

import (
	"context"
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
