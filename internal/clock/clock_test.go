package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
)

func TestFakeFiresOnlyDueTimers(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := clock.NewFake(start)
	early, late := f.After(time.Second), f.After(time.Minute)
	if f.Waiters() != 2 {
		t.Fatalf("waiters %d, want 2", f.Waiters())
	}
	f.Advance(999 * time.Millisecond)
	select {
	case <-early:
		t.Fatal("a timer fired before it was due")
	default:
	}
	f.Advance(time.Millisecond)
	if got := <-early; !got.Equal(start.Add(time.Second)) {
		t.Fatalf("fired with %v", got)
	}
	select {
	case <-late:
		t.Fatal("the later timer fired too")
	default:
	}
	if f.Waiters() != 1 {
		t.Fatalf("waiters %d, want 1", f.Waiters())
	}
	if now := <-f.After(0); !now.Equal(f.Now()) {
		t.Fatal("After(0) did not fire at once")
	}
}

func TestFakeBlockUntilWaiters(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	go func() { <-f.After(time.Second) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.BlockUntilWaiters(ctx, 1); err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := f.BlockUntilWaiters(short, 2); err == nil {
		t.Fatal("BlockUntilWaiters returned nil for a waiter that never came")
	}
}

func TestOffset(t *testing.T) {
	f := clock.NewFake(time.Unix(1000, 0))
	o := clock.Offset(f, -10*time.Minute)
	if got := f.Now().Sub(o.Now()); got != 10*time.Minute {
		t.Fatalf("offset %v", got)
	}
	ch := o.After(time.Second)
	f.Advance(time.Second)
	<-ch
}
