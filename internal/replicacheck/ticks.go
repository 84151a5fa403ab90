package replicacheck

import (
	"context"
	"fmt"
	"sync"
)

// Ticks counts the ticks a replica test's runners finished and lets a goroutine (the workload's
// Hold, the test) wait for more without sleeping. Its zero value is ready.
type Ticks struct {
	mu sync.Mutex
	n  int
	ch chan struct{} // closed and replaced at each tick
}

// wake is the channel the next tick closes.
func (c *Ticks) wake() chan struct{} {
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// Add counts a finished tick.
func (c *Ticks) Add() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	close(c.wake())
	c.ch = make(chan struct{})
}

// Await returns once k more ticks have finished than when it was called, or when cond (if not
// nil) holds after a tick; an error when ctx ends first.
func (c *Ticks) Await(ctx context.Context, k int, cond func() bool) error {
	c.mu.Lock()
	target := c.n + k
	c.mu.Unlock()
	for {
		c.mu.Lock()
		n, ch := c.n, c.wake()
		c.mu.Unlock()
		if n >= target || cond != nil && cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d ticks (at %d of %d): %w", k, n, target, ctx.Err())
		}
	}
}
