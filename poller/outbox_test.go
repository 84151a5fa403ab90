package poller_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestMessagesOutbox: a logical poller of no table with a messages outbox is declared, its
// batches' Outbox names the canonical columns its rows have (sourcedef.MessageColumns), the
// type and headers only when named, and the definition's rules refuse a table beside it.
func TestMessagesOutbox(t *testing.T) {
	noop := func(context.Context, *poller.Batch[poller.Row]) error { return nil }
	p := poller.New("events", "", poller.Logical, noop,
		poller.WithOutbox(poller.Outbox{Messages: "app", ID: "event_id", AggregateType: "agg", AggregateID: "agg_id", Headers: "meta"}))
	b, ok := pollerdef.Of(p).Raw(&pollerdef.Batch{Poller: "events"}).(*poller.Batch[poller.Row])
	if !ok || b.Outbox == nil {
		t.Fatalf("no outbox on the batch: %+v", b)
	}
	want := poller.Outbox{Messages: "app", ID: "id", AggregateType: "aggregate_type", AggregateID: "aggregate_id", Payload: "payload", Headers: "headers"}
	if *b.Outbox != want {
		t.Errorf("batch outbox %+v, want %+v", *b.Outbox, want)
	}
	for _, c := range []string{b.Outbox.ID, b.Outbox.AggregateType, b.Outbox.AggregateID, b.Outbox.Payload, b.Outbox.Headers} {
		if !slices.Contains(sourcedef.MessageColumns, c) {
			t.Errorf("the batch names column %q, which a message's row has not", c)
		}
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "a messages outbox reads no table (events)") {
			t.Errorf("a table beside a messages outbox: %v", r)
		}
	}()
	poller.New("events2", "events", poller.Logical, noop, poller.WithOutbox(poller.Outbox{Messages: "app", AggregateType: "agg", AggregateID: "agg_id"}))
}
