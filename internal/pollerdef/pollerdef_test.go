package pollerdef_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

type row struct {
	ID int64 `db:"id,key,cursor"`
}

// TestOf: Of reads what poller.New built, a copy of its table definition each time; anything
// but a poller built by New panics, naming what it got.
func TestOf(t *testing.T) {
	setup := errors.New("no URL")
	p := poller.New("widgets", "widgets_t", poller.Integer, func(context.Context, *poller.Batch[row]) error { return nil },
		poller.WithBatchSize(42), poller.WithSetup(func(func(string) string) error { return setup }), poller.WithTarget(func() string { return "nowhere" }))
	d := pollerdef.Of(p)
	if d.Name() != "widgets" || d.Source().Table.Name != "widgets_t" || d.BatchSize() != 42 || d.Target() != "nowhere" ||
		!errors.Is(d.Setup(nil), setup) || d.Err() != nil {
		t.Errorf("Def: %s %+v %d %q %v %v", d.Name(), d.Source(), d.BatchSize(), d.Target(), d.Setup(nil), d.Err())
	}
	d.Source().Columns[0] = "changed"
	if c := pollerdef.Of(p).Source().Columns; c[0] != "id" {
		t.Errorf("a caller changed the poller's columns: %v", c)
	}
	for name, v := range map[string]any{"nil poller": (*poller.Poller)(nil), "zero poller": &poller.Poller{}, "not a poller": "widgets"} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "not a poller built by poller.New") {
					t.Errorf("Of(%s): recovered %v", name, r)
				}
			}()
			pollerdef.Of(v)
		}()
	}
}

// TestHandle: a handler's panic is an error with the stack; a Failed poller fails every use
// with its error and has no setup or target.
func TestHandle(t *testing.T) {
	p := poller.New("boom", "t", poller.Integer, func(context.Context, *poller.Batch[row]) error { panic("boom") })
	err := pollerdef.Of(p).Handle(context.Background(), &pollerdef.Batch{})
	if err == nil || !strings.HasPrefix(err.Error(), "panic: boom\n") || !strings.Contains(err.Error(), "goroutine") {
		t.Errorf("a panicking handler: %v", err)
	}
	bad := errors.New("bad/poller.json: sink.queue: missing")
	f := pollerdef.Failed("bad", bad)
	if f.Name() != "bad" || f.Err() != bad || !errors.Is(f.Handle(context.Background(), &pollerdef.Batch{}), bad) ||
		f.Setup(nil) != nil || f.Target() != "" || f.BatchSize() != 0 {
		t.Errorf("Failed: %s %v %q %d", f.Name(), f.Err(), f.Target(), f.BatchSize())
	}
}

// TestCheckName: names are function names; the status function's, in any case, is reserved.
func TestCheckName(t *testing.T) {
	for _, ok := range []string{"orders", "Orders-EU", "a", "x_1", strings.Repeat("a", 64)} {
		if err := pollerdef.CheckName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "9lives", "bad name", "a.b", "-x", strings.Repeat("a", 65)} {
		if err := pollerdef.CheckName(bad); err == nil || errors.Is(err, pollerdef.ErrReservedName) || !strings.Contains(err.Error(), "not a valid poller and function name") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	for _, reserved := range []string{"status", "STATUS", "Status"} {
		if err := pollerdef.CheckName(reserved); !errors.Is(err, pollerdef.ErrReservedName) || !strings.Contains(err.Error(), "status/function.json") {
			t.Errorf("%q: %v", reserved, err)
		}
	}
}
