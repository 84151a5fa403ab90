package tick_test

import (
	"context"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// stuckStream is a windowSource that can stream (driver.Follower): its Await with a wait waits
// until its context ends (nothing comes), and its end never comes before the context's (a busy
// server that does not answer the stream's end); paced, its Await waits d and its end comes at
// once. ended says how long the tick let EndFollow wait, held what Hold was given.
type stuckStream struct {
	*windowSource
	paced     bool
	following chan struct{} // closed at the first Await
	ended     chan time.Duration
	held      chan time.Duration
}

// stuckRunner is a runner of a stuckStream holding one batch of 10 rows (paced or not), that
// follows follow with a look every interval on schedule.
func stuckRunner(t *testing.T, paced bool, follow, interval time.Duration, schedule string) (*stuckStream, *tick.Runner) {
	t.Helper()
	m, err := lease.New(memstore.New(nil), lease.Config{Poller: "orders", Blob: blobpath.State("test", "orders"), Owner: "A", Fingerprint: "sha256:window"})
	if err != nil {
		t.Fatal(err)
	}
	src := &stuckStream{windowSource: &windowSource{n: 1, size: 10}, paced: paced, following: make(chan struct{}),
		ended: make(chan time.Duration, 1), held: make(chan time.Duration, 1)}
	noop := pollerdef.Of(ordersPoller(func(context.Context, *poller.Batch[poller.Row]) error { return nil }))
	return src, &tick.Runner{Poller: noop, Lease: m, Source: src, Settings: appsettings.Settings{BatchSize: 10, LeaseTTL: lease.DefaultTTL,
		HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: time.Minute, CheckpointInterval: time.Minute,
		Follow: follow, FollowInterval: interval, FollowCommit: time.Second, Schedule: schedule}}
}

func (s *stuckStream) Follower() driver.Follower { return s }

func (s *stuckStream) Await(ctx context.Context, _ *state.Cursor, d time.Duration) (bool, error) {
	if d <= 0 { // an offer between full batches: it returns at once
		return false, nil
	}
	select {
	case <-s.following:
	default:
		close(s.following)
	}
	if s.paced {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		return false, nil
	}
	<-ctx.Done()
	return false, nil
}

func (s *stuckStream) Hold(d time.Duration) { s.held <- d }

func (s *stuckStream) EndFollow(ctx context.Context) error {
	if s.paced { // a server that answers
		s.ended <- 0
		return nil
	}
	start := time.Now()
	<-ctx.Done()
	s.ended <- time.Since(start)
	return ctx.Err()
}

// TestDroppedTickEndsItsStreamAtOnce: a following tick whose invocation is dropped while it
// waits on its source's stream goes on to its release after waiting a moment for the stream's
// end, not the 10 s a tick that ends as planned gives it: the lease must go at once.
func TestDroppedTickEndsItsStreamAtOnce(t *testing.T) {
	src, r := stuckRunner(t, false, 50*time.Second, 20*time.Second, "* * * * * *")
	ctx, drop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Tick(ctx, "dropped")
		done <- err
	}()
	select {
	case <-src.following:
	case <-time.After(10 * time.Second):
		t.Fatal("the tick did not wait on its stream")
	}
	drop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dropped tick: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a dropped tick was still running 5 s later")
	}
	if waited := <-src.ended; waited > 2*time.Second {
		t.Errorf("the dropped tick waited %v for its stream's end", waited)
	}
	if len(src.committed) == 0 || src.committed[len(src.committed)-1] != "1" {
		t.Errorf("committed %v, want the batch's checkpoint 1 at the end", src.committed)
	}
	if len(src.held) > 0 {
		t.Errorf("the dropped tick held its stream for %v, for a next tick", <-src.held)
	}
}

// TestFollowingTickHoldsItsStream: a following tick that ends as planned holds its source's
// stream for the next tick when its schedule fires again within 10 s (until that firing and 2 s
// more), after its last commit (confirmed through the stream); with a schedule that fires later,
// or none, it ends the stream.
func TestFollowingTickHoldsItsStream(t *testing.T) {
	for _, tc := range []struct {
		schedule string
		hold     bool
	}{{"* * * * * *", true}, {"*/5 * * * * *", true}, {"0 0 0 * * *", false}, {"", false}} {
		t.Run(tc.schedule, func(t *testing.T) {
			src, r := stuckRunner(t, true, 300*time.Millisecond, 50*time.Millisecond, tc.schedule)
			if sum, err := r.Tick(context.Background(), ""); err != nil || sum.Rows != 10 {
				t.Fatalf("tick: %+v %v", sum, err)
			}
			if len(src.committed) == 0 || src.committed[len(src.committed)-1] != "1" {
				t.Errorf("committed %v, want the batch's checkpoint 1 at the end", src.committed)
			}
			select {
			case d := <-src.held:
				next, _ := appsettings.NextFiring(tc.schedule, time.Now())
				if !tc.hold {
					t.Fatalf("held the stream %v with schedule %q", d, tc.schedule)
				}
				if want := time.Until(next) + 2*time.Second; d < want-500*time.Millisecond || d > want+500*time.Millisecond {
					t.Errorf("held the stream %v, want about %v (the next firing and 2 s)", d, want)
				}
			default:
				if tc.hold {
					t.Fatalf("did not hold the stream with schedule %q", tc.schedule)
				}
				select {
				case <-src.ended:
				default:
					t.Error("neither held nor ended its stream")
				}
			}
		})
	}
}
