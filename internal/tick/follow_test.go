package tick_test

import (
	"context"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
)

// follower is a runner in follow mode on a fake clock, and the tick it runs in the background.
type follower struct {
	t   *testing.T
	e   *env
	clk *clock.Fake
	r   *tick.Runner
	rec *recorder
	// waiting is the fake clock's timers while the tick pauses between looks: its own, plus
	// the lease's heartbeat and watchdog once it holds the lease.
	waiting int
	done    chan struct{}
	sum     tick.Summary
	err     error
}

func newFollower(t *testing.T, e *env, follow time.Duration) *follower {
	f := &follower{t: t, e: e, clk: clock.NewFake(time.Now()), rec: &recorder{}}
	r, err := tick.Open(ctx, tick.Config{Poller: pollerdef.Of(ordersPoller(f.rec.handle)), Store: e.st, App: "test", Owner: "A", Source: e.src,
		Clock: f.clk, Settings: appsettings.Settings{BatchSize: e.batch, LeaseTTL: lease.DefaultTTL, HeartbeatInterval: lease.DefaultTTL / 4,
			TickBudget: time.Minute, CheckpointInterval: 0, Follow: follow, FollowInterval: 100 * time.Millisecond, FollowCommit: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	f.r = r
	return f
}

// start runs a tick in the background on ctx.
func (f *follower) start(ctx context.Context) {
	f.done = make(chan struct{})
	go func() {
		defer close(f.done)
		f.sum, f.err = f.r.Tick(ctx, "follow")
	}()
}

// paused waits until the tick pauses between looks (the fake clock holds f.waiting timers).
func (f *follower) paused() {
	f.t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := f.clk.BlockUntilWaiters(wctx, f.waiting); err != nil {
		f.t.Fatalf("the tick did not pause with %d timers: %v", f.waiting, err)
	}
}

// look lets the paused tick look again, and waits until it pauses after that look.
func (f *follower) look() {
	f.t.Helper()
	f.paused()
	f.clk.Advance(100 * time.Millisecond)
	f.paused()
}

// finish advances the clock a look at a time, each time the tick pauses, until it ends.
func (f *follower) finish() {
	f.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-f.done:
			return
		default:
		}
		if time.Now().After(deadline) {
			f.t.Fatal("the tick did not end")
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		err := f.clk.BlockUntilWaiters(wctx, f.waiting) // or it is ending: the clock stays
		cancel()
		if err == nil {
			f.clk.Advance(100 * time.Millisecond)
		}
	}
}

// TestFollowDeliversWithoutEnding: a tick in follow mode that finds nothing looks again every
// {P}_FOLLOW_INTERVAL without the lease and writing nothing; rows that come are delivered at the
// next look, under the lease it then takes; while it follows it commits at most once per
// {P}_FOLLOW_COMMIT, the document saying it follows (since, changes, latency); at the follow
// time's end it commits what is left and releases in one write, and says what it did.
func TestFollowDeliversWithoutEnding(t *testing.T) {
	e := newEnv(t, 10)
	f := newFollower(t, e, 10*time.Second)
	f.waiting = 1 // the pause alone: no lease yet
	f.start(ctx)
	f.look()
	f.look()
	if n := e.st.Puts.Load(); n != 0 {
		t.Fatalf("%d writes while following without rows, want 0", n)
	}

	e.insert(5)
	f.clk.Advance(100 * time.Millisecond)
	f.waiting = 3 // the pause, the heartbeat and the watchdog
	f.paused()
	if len(f.rec.ids) != 5 || e.st.Puts.Load() != 1 {
		t.Fatalf("after the look that found 5 rows: %d delivered, %d writes (want 5, the acquire alone)", len(f.rec.ids), e.st.Puts.Load())
	}
	e.insert(3)
	f.look()
	if len(f.rec.ids) != 8 || e.st.Puts.Load() != 1 {
		t.Fatalf("100 ms later: %d delivered, %d writes (want 8, still the acquire alone: delivery does not wait for a commit)", len(f.rec.ids), e.st.Puts.Load())
	}
	for range 10 { // a second passes: the next look commits the 8 rows
		f.look()
	}
	if n := e.st.Puts.Load(); n != 2 {
		t.Fatalf("%d writes after a second of following, want 2 (the acquire and one commit)", n)
	}
	d := e.doc()
	if d.Follow == nil || d.Follow.Changes != 8 || d.Follow.LatencyP50MS == nil || *d.Follow.LatencyP50MS < 3_500_000 ||
		string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "8" || d.Lease.Released() {
		t.Fatalf("the document while following: follow %+v, checkpoint %+v, lease %+v", d.Follow, d.Checkpoint.Cursor, d.Lease)
	}
	for range 10 { // another quiet second: nothing to commit, no write
		f.look()
	}
	if n := e.st.Puts.Load(); n != 2 {
		t.Fatalf("%d writes after a quiet second, want still 2", n)
	}
	e.insert(4)
	f.finish()
	if f.err != nil || f.sum.Outcome != tick.Committed || f.sum.Rows != 12 || f.sum.Follow == nil || f.sum.Follow.Changes != 12 {
		t.Fatalf("the tick's end: %+v (follow %+v), %v", f.sum, f.sum.Follow, f.err)
	}
	if n := e.st.Puts.Load(); n != 4 {
		t.Fatalf("%d writes in all, want 4 (acquire, a grouped commit, the 4 rows' commit at once, more than a second after the last, the release)", n)
	}
	d = e.doc()
	if d.Follow != nil || !d.Lease.Released() || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "12" {
		t.Fatalf("the document after the tick: follow %+v, checkpoint %+v, lease %+v", d.Follow, d.Checkpoint.Cursor, d.Lease)
	}
	// It ended at its follow time (10 s), its last look within a pause of it; well before its
	// budget (a minute).
	if d := time.Duration(f.sum.DurationMS) * time.Millisecond; d < 9800*time.Millisecond || d > 10*time.Second {
		t.Fatalf("the tick ran %v, want about ORDERS_FOLLOW (10s)", d)
	}
}

// TestFollowIdleEndsIdle: a tick that follows and never finds a row ends idle at the follow
// time's end, having written nothing.
func TestFollowIdleEndsIdle(t *testing.T) {
	e := newEnv(t, 10)
	f := newFollower(t, e, 2*time.Second)
	f.waiting = 1
	f.start(ctx)
	f.finish()
	if f.err != nil || f.sum.Outcome != tick.Idle || e.st.Puts.Load() != 0 {
		t.Fatalf("%+v, %v, %d writes", f.sum, f.err, e.st.Puts.Load())
	}
}

// TestFollowStopsWhenDropped: a following tick whose invocation is dropped (or whose runner
// drains) stops at once: what it delivered is committed and the lease released in one write.
func TestFollowStopsWhenDropped(t *testing.T) {
	for _, how := range []string{"dropped", "draining"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t, 10)
			f := newFollower(t, e, 50*time.Second)
			drain := make(chan struct{})
			f.r.Draining = drain
			e.insert(5)
			tctx, cancel := context.WithCancel(ctx)
			defer cancel()
			f.waiting = 3
			f.start(tctx)
			f.paused()
			if how == "dropped" {
				cancel()
			} else {
				close(drain)
			}
			select {
			case <-f.done:
			case <-time.After(30 * time.Second):
				t.Fatal("the tick did not stop")
			}
			d := e.doc()
			if f.err != nil || f.sum.Rows != 5 || !d.Lease.Released() || d.Follow != nil || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "5" || e.st.Puts.Load() != 2 {
				t.Fatalf("%+v %v; document lease %+v follow %+v cursor %+v; %d writes", f.sum, f.err, d.Lease, d.Follow, d.Checkpoint.Cursor, e.st.Puts.Load())
			}
		})
	}
}
