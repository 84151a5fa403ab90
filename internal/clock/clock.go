// Package clock holds the time source that lease logic reads, so tests can move time without
// sleeping.
//
// Production code uses System, whose readings carry Go's monotonic clock: durations measured
// between two readings are immune to wall-clock steps. Tests use Fake and advance it by hand.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock tells the time and waits for durations to pass.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has elapsed.
	// A d of zero or less fires at once.
	After(d time.Duration) <-chan time.Time
}

// System is the real clock.
type System struct{}

// Now returns time.Now(), with its monotonic reading.
func (System) Now() time.Time { return time.Now() }

// After is time.After.
func (System) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Offset returns a clock that reads offset later than c (earlier when negative); its timers
// fire exactly when c's would. It models a process whose wall clock is skewed.
func Offset(c Clock, offset time.Duration) Clock { return offsetClock{c, offset} }

type offsetClock struct {
	c      Clock
	offset time.Duration
}

func (o offsetClock) Now() time.Time                         { return o.c.Now().Add(o.offset) }
func (o offsetClock) After(d time.Duration) <-chan time.Time { return o.c.After(d) }

// Fake is a manually advanced clock. Its timers fire only from Advance. It is safe for
// concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	changed chan struct{} // closed and replaced whenever waiters are added
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewFake returns a fake clock that reads start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After returns a channel that fires once Advance has moved the clock d past now.
func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, waiter{at: f.now.Add(d), ch: ch})
	close(f.changed)
	f.changed = make(chan struct{})
	return ch
}

// Advance moves the clock forward by d and fires every timer that is due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if w.at.After(f.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- f.now
	}
	f.waiters = kept
}

// Waiters returns how many timers are pending.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// BlockUntilWaiters waits until at least n timers are pending, or ctx ends.
func (f *Fake) BlockUntilWaiters(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		if len(f.waiters) >= n {
			f.mu.Unlock()
			return nil
		}
		changed := f.changed
		f.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
