package pollertest_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/pollertest"
)

// widget has a composite key whose first column is TEXT, a nullable column and a float.
type widget struct {
	Region   string    `db:"region,key"`
	ID       int64     `db:"id,key"`
	Price    float64   `db:"price"`
	Note     *string   `db:"note"`
	Modified time.Time `db:"modified,cursor"`
}

// TestSampleRowsComeBackInOrder: Sample rows inserted out of order reach the handler in cursor
// order, decoded as they were written, over two batches; a second tick finds nothing.
func TestSampleRowsComeBackInOrder(t *testing.T) {
	p := poller.New("widgets", "widgets", poller.TimestampPK, func(context.Context, *poller.Batch[widget]) error { return nil })
	h := pollertest.New(t, p, "WIDGETS_BATCH_SIZE=3")
	var want []widget
	for i := 1; i <= 5; i++ {
		want = append(want, pollertest.Sample[widget](i))
	}
	h.Insert(want[3], want[0], want[4], want[2], want[1])
	if r := h.Tick(); r.Outcome != "committed" || r.Rows != 5 || r.Batches != 2 {
		t.Fatalf("first tick: %+v", r)
	}
	if got := pollertest.Rows[widget](h); !reflect.DeepEqual(got, want) {
		t.Fatalf("delivered %+v\nwant %+v", got, want)
	}
	if r := h.Tick(); r.Outcome != "idle" {
		t.Fatalf("second tick: %+v", r)
	}
}

// TestFailedBatchComesAgain: a handler's error fails the tick (TickErr returns it), the delivery
// is recorded with the error, and the next tick hands over the same batch with attempt 2.
func TestFailedBatchComesAgain(t *testing.T) {
	fail := errors.New("sink down")
	p := poller.New("widgets", "widgets", poller.TimestampPK, func(_ context.Context, b *poller.Batch[widget]) error {
		if b.Attempt == 1 {
			return fail
		}
		return nil
	})
	h := pollertest.New(t, p)
	h.Insert(pollertest.Sample[widget](1))
	if _, err := h.TickErr(); !errors.Is(err, fail) {
		t.Fatalf("first tick: %v", err)
	}
	h.Tick()
	d := h.Deliveries()
	if len(d) != 2 || !errors.Is(d[0].Err, fail) || d[1].Err != nil || d[1].Batch.Attempt != 2 || d[1].Batch.ID != d[0].Batch.ID {
		t.Fatalf("deliveries %+v", d)
	}
	if got := pollertest.Rows[widget](h); len(got) != 1 {
		t.Fatalf("rows accepted: %+v", got)
	}
}

// TestUntypedPoller: a poller of poller.Row names its columns with options; Rows returns them raw.
func TestUntypedPoller(t *testing.T) {
	p := poller.New("seq", "events", poller.Integer, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
		poller.WithColumns("n", "what"), poller.WithKey("n"), poller.WithCursorColumn("n"))
	h := pollertest.New(t, p)
	h.Insert(struct {
		N    int64  `db:"n"`
		What string `db:"what"`
	}{2, "b"}, struct {
		N    int64  `db:"n"`
		What string `db:"what"`
	}{1, "a"})
	h.Tick()
	got := pollertest.Rows[poller.Row](h)
	if len(got) != 2 || got[0].Get("what") != "a" || got[1].Get("n") != int64(2) {
		t.Fatalf("rows %v", got)
	}
}
