package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
)

// failingStore fails writes (as a storage account answering 503 to PUTs would) and, with
// readsDown, reads too (unreachable).
type failingStore struct {
	lease.Store
	down      atomic.Bool
	readsDown atomic.Bool
	puts      atomic.Int64
}

func (s *failingStore) Put(ctx context.Context, name string, data []byte, cond store.Condition) (store.Written, error) {
	s.puts.Add(1)
	if s.down.Load() {
		return store.Written{}, errors.New("test: HTTP 503 ServerBusy")
	}
	return s.Store.Put(ctx, name, data, cond)
}

func (s *failingStore) Get(ctx context.Context, name string) (store.Blob, error) {
	if s.readsDown.Load() {
		return store.Blob{}, errors.New("test: storage unreachable")
	}
	return s.Store.Get(ctx, name)
}

func keepAliveFixture(t *testing.T) (*clock.Fake, *failingStore, *fixture) {
	clk := clock.NewFake(time.Date(2026, 4, 7, 1, 0, 0, 0, time.UTC))
	fs := &failingStore{Store: memstore.New(clk)}
	return clk, fs, &fixture{st: memstore.New(clk), blob: blobName()}
}

// failingLease acquires a lease on fs, whose failures the test switches on.
func failingLease(t *testing.T, clk *clock.Fake, fs *failingStore) *lease.Lease {
	t.Helper()
	m, err := lease.New(fs, lease.Config{Poller: testPoller, Blob: blobName(), Owner: "A", Fingerprint: testFingerprint,
		TTL: testTTL, Margin: testMargin, HeartbeatInterval: testInterval, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return acquire(t, m)
}

func deadline(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := deadline(t)
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(time.Millisecond):
		}
	}
}

func TestKeepAliveHeartbeats(t *testing.T) {
	clk, fs, _ := keepAliveFixture(t)
	l := failingLease(t, clk, fs)
	l.KeepAlive()
	// Ten intervals: the lease is extended each time and stays trusted far beyond one TTL.
	for i := 1; i <= 10; i++ {
		if err := clk.BlockUntilWaiters(deadline(t), 2); err != nil { // heartbeat timer and watchdog
			t.Fatal(err)
		}
		before := fs.puts.Load()
		clk.Advance(testInterval)
		waitFor(t, "a heartbeat", func() bool { return fs.puts.Load() > before })
		waitFor(t, "the trust window to move", func() bool {
			return l.TrustedUntil().Equal(clk.Now().Add(testTTL - testMargin))
		})
	}
	if !l.Trusted() || l.Context().Err() != nil {
		t.Fatalf("after 10 heartbeats: trusted %v, context %v", l.Trusted(), l.Context().Err())
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Released: the goroutines stop, and no more writes happen however far time moves.
	puts := fs.puts.Load()
	clk.Advance(10 * testTTL)
	waitFor(t, "the timers to be dropped", func() bool { return clk.Waiters() <= 2 })
	if fs.puts.Load() != puts {
		t.Fatal("a heartbeat was written after the release")
	}
}

// TestWatchdogEndsUnrenewableLease: storage refuses writes (reads show they did not land); the
// heartbeats fail and are retried; the lease's context is cancelled when the trust window ends,
// not before and not after.
func TestWatchdogEndsUnrenewableLease(t *testing.T) {
	clk, fs, _ := keepAliveFixture(t)
	l := failingLease(t, clk, fs)
	end := l.TrustedUntil()
	fs.down.Store(true)
	l.KeepAlive()
	for clk.Now().Add(testInterval).Before(end) {
		if err := clk.BlockUntilWaiters(deadline(t), 2); err != nil {
			t.Fatal(err)
		}
		before := fs.puts.Load()
		clk.Advance(testInterval)
		waitFor(t, "a failed heartbeat", func() bool { return fs.puts.Load() > before })
		if l.Context().Err() != nil {
			t.Fatalf("the lease ended at %v, before its trust window (%v)", clk.Now(), end)
		}
	}
	if err := clk.BlockUntilWaiters(deadline(t), 2); err != nil {
		t.Fatal(err)
	}
	clk.Advance(end.Sub(clk.Now()))
	select {
	case <-l.Context().Done():
	case <-deadline(t).Done():
		t.Fatal("the lease's context was not cancelled when its trust window ended")
	}
	if !errors.Is(context.Cause(l.Context()), lease.ErrLost) {
		t.Fatalf("cause %v, want ErrLost", context.Cause(l.Context()))
	}
}

// TestKeepAliveNoticesTakeover: a heartbeat refused by the CAS cancels the context at once.
func TestKeepAliveNoticesTakeover(t *testing.T) {
	clk, _, f := keepAliveFixture(t)
	l := acquire(t, f.manager(t, "A", clk))
	l.KeepAlive()
	f.takeOver(t, "intruder")
	if err := clk.BlockUntilWaiters(deadline(t), 2); err != nil {
		t.Fatal(err)
	}
	clk.Advance(testInterval)
	select {
	case <-l.Context().Done():
	case <-deadline(t).Done():
		t.Fatal("the takeover did not cancel the lease's context")
	}
	if err := l.Commit(context.Background(), checkpoint(1)); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("commit after the takeover: %v", err)
	}
}

// TestUnsettledHeartbeatEndsLease: a heartbeat fails and so does the re-read that would settle
// it. The holder cannot know its ETag any more, so it treats the lease as lost at once
// (DESIGN §2) rather than at the end of its trust window.
func TestUnsettledHeartbeatEndsLease(t *testing.T) {
	clk, fs, _ := keepAliveFixture(t)
	l := failingLease(t, clk, fs)
	fs.down.Store(true)
	fs.readsDown.Store(true)
	err := l.Heartbeat(context.Background())
	if !errors.Is(err, lease.ErrLost) || !errors.Is(context.Cause(l.Context()), lease.ErrLost) {
		t.Fatalf("unsettled heartbeat: %v (context cause %v), want ErrLost", err, context.Cause(l.Context()))
	}
	if !l.TrustedUntil().After(clk.Now()) {
		t.Fatal("test set-up: the trust window had already ended")
	}
}
