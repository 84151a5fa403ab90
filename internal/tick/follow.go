package tick

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Follow mode ({P}_FOLLOW): a tick that has caught up does not end. Without the lease (it found
// nothing to read) it looks again every {P}_FOLLOW_INTERVAL, writing nothing, and takes the lease
// when something comes; with the lease it keeps it, and looks again after each pause, delivering
// what comes, committing at most once per {P}_FOLLOW_COMMIT (delivery never waits for a commit).
// Either way it stops looking when the follow time from the tick's start ends, the invocation is
// dropped, the runner drains or the lease is lost; then it ends as any tick does (the last
// commit folded into the release). The next timer invocation continues from the checkpoint.

// latencyWindow is how far back a following tick's latency percentiles look.
const latencyWindow = time.Minute

// following is a following tick's progress: since when, what it delivered, and the
// commit-to-delivery latencies of the batches its runner's following ticks delivered over the
// last latencyWindow (lat: a tick that follows a few seconds of every few would otherwise show
// its own first batches alone, those that waited for it).
type following struct {
	since   time.Time
	changes int64
	lat     *latencies
}

// latencies are a runner's following ticks' commit-to-delivery latencies, oldest first.
type latencies struct {
	mu      sync.Mutex
	samples []latencySample
}

type latencySample struct {
	at time.Time
	ms float64
}

// add notes a latency at now and drops those older than latencyWindow.
func (l *latencies) add(now time.Time, ms float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.samples = append(l.samples, latencySample{now, ms})
	i := 0
	for i < len(l.samples) && now.Sub(l.samples[i].at) > latencyWindow {
		i++
	}
	l.samples = l.samples[i:]
}

// percentiles are the p50 and p95 of the latencies of the latencyWindow before now; false when
// there are none.
func (l *latencies) percentiles(now time.Time) (p50, p95 float64, ok bool) {
	l.mu.Lock()
	var ms []float64
	for _, x := range l.samples {
		if now.Sub(x.at) <= latencyWindow {
			ms = append(ms, x.ms)
		}
	}
	l.mu.Unlock()
	if len(ms) == 0 {
		return 0, 0, false
	}
	slices.Sort(ms)
	return percentile(ms, 0.50), percentile(ms, 0.95), true
}

// followEnd is when a tick that started at start stops following; zero when follow mode is off.
func (r *Runner) followEnd(start time.Time) time.Time {
	if r.Settings.Follow <= 0 {
		return time.Time{}
	}
	return start.Add(r.Settings.Follow)
}

// caughtUp notes that the tick found nothing more to read: it follows from now on, if it
// follows at all.
func (t *tickRun) caughtUp() {
	if t.fol == nil && !t.followUntil.IsZero() {
		t.fol = &following{since: t.clk.Now(), lat: &t.r.latencies}
	}
}

// lookAgain says whether a following tick looks again after a pause: it follows, the look would
// come before its follow time ends, and it is not stopping (a drain, a dropped invocation) nor
// without the lease it took.
func (t *tickRun) lookAgain() bool {
	if t.followUntil.IsZero() || t.stopping() || (t.l != nil && t.l.Err() != nil) {
		return false
	}
	return t.clk.Now().Add(t.r.Settings.FollowInterval).Before(t.followUntil)
}

// pause waits {P}_FOLLOW_INTERVAL before the tick looks again, and says whether it does
// (lookAgain, before and after the wait). A tick holding the lease whose source can stream
// (driver.Follower) waits on the stream instead: until a change comes, at most that long.
func (t *tickRun) pause() bool {
	if !t.lookAgain() {
		return false
	}
	t.caughtUp()
	if f := t.follower(); f != nil && t.l != nil {
		if t.await(f) {
			return t.l.Err() == nil && !t.stopping()
		}
	}
	var lost <-chan struct{}
	if t.l != nil {
		lost = t.l.Context().Done()
	}
	select {
	case <-t.clk.After(t.r.Settings.FollowInterval):
		return t.l == nil || t.l.Err() == nil
	case <-t.dropped:
	case <-t.r.Draining:
	case <-lost:
	}
	return false
}

// follower is the tick's source as a driver.Follower, when it can stream (source.Source's
// Follower); nil otherwise.
func (t *tickRun) follower() driver.Follower {
	if s, ok := t.r.Source.(interface{ Follower() driver.Follower }); ok {
		return s.Follower()
	}
	return nil
}

// await waits on the source's stream until a change comes after the cursor, at most
// {P}_FOLLOW_INTERVAL, or the tick stops following (a drain, a dropped invocation, the lease
// lost). It says false when the stream could not serve (it could not start or broke: logged);
// the tick then pauses as without it, and its fetches read as before.
func (t *tickRun) await(f driver.Follower) bool {
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	defer context.AfterFunc(t.l.Context(), cancel)()
	go func() {
		select {
		case <-t.dropped:
		case <-t.r.Draining:
		case <-ctx.Done():
		}
		cancel()
	}()
	t.streamed = true
	if _, err := f.Await(ctx, t.cursor, t.r.Settings.FollowInterval); err != nil {
		t.log.Warn("following without streaming (the source is read again every FOLLOW_INTERVAL)", "error", err.Error())
		return false
	}
	return true
}

// streamSoon lets a tick that will follow and holds the lease start its source's stream while
// batches still come full, once the source has read up to the end of its stream (Await with
// no wait: it starts one only then): a poller written faster than a peek-based look can follow
// would otherwise never get a short batch, and so never stream.
func (t *tickRun) streamSoon() {
	f := t.follower()
	if f == nil || t.followUntil.IsZero() || t.l == nil {
		return
	}
	if _, err := f.Await(t.ctx, t.cursor, 0); err != nil {
		t.log.Warn("following without streaming (the source is read again every FOLLOW_INTERVAL)", "error", err.Error())
		return
	}
	t.streamed = true
}

// endStream ends the source's stream if the tick streamed (after its last commit through it):
// the next reader finds the stream free. A failure is logged: the stream's connection is closed
// regardless. A tick that stops (a dropped invocation, a drain) waits for the end at most
// endStreamStopping and goes on to its release: the stream ends on its own, and the release
// must not wait for a busy server to answer.
//
// A tick that ends as planned (hold) holds the stream instead for the next tick of this process
// (driver.Follower's Hold) when the schedule fires again within streamHoldWithin: until then and
// streamHoldSlack after. Its last commit is confirmed through the stream, and the next tick
// reads on from it rather than have the database start one again.
func (t *tickRun) endStream(hold bool) {
	if !t.streamed {
		return
	}
	t.streamed = false
	if hold && !t.stopping() && t.l != nil && t.l.Err() == nil {
		if d := t.holdFor(); d > 0 {
			t.follower().Hold(d)
			t.log.Info("the source's stream is held for the next tick", "hold_ms", d.Milliseconds())
			return
		}
	}
	wait := 10 * time.Second
	if t.stopping() {
		wait = endStreamStopping
	}
	ctx, cancel := context.WithTimeout(t.ctx, wait)
	defer cancel()
	if err := t.follower().EndFollow(ctx); err != nil {
		t.log.Warn("the source's stream did not end cleanly", "error", err.Error())
	}
}

// holdFor is how long a tick ending now holds its source's stream for the next one (endStream):
// 0 when the schedule does not fire again within streamHoldWithin.
func (t *tickRun) holdFor() time.Duration {
	now := t.clk.Now()
	next, ok := appsettings.NextFiring(t.r.Settings.Schedule, now)
	if !ok || next.Sub(now) > streamHoldWithin {
		return 0
	}
	return next.Sub(now) + streamHoldSlack
}

const (
	// endStreamStopping is how long a stopping tick waits for its source's stream to end.
	endStreamStopping = 250 * time.Millisecond
	// streamHoldWithin is the longest pause before the next firing over which a tick holds its
	// stream, and streamHoldSlack how long after that firing it is held: the host starts an
	// invocation a moment after its firing.
	streamHoldWithin = 10 * time.Second
	streamHoldSlack  = 2 * time.Second
)

// follow is what a tick holding the lease does once caught up: unless it will not look again
// (then its end commits with the release, in one write), it commits what it delivered if
// {P}_FOLLOW_COMMIT has passed since the last commit, and pauses. It says whether the tick looks
// again.
func (t *tickRun) follow() (bool, error) {
	if !t.lookAgain() {
		return false, nil
	}
	t.caughtUp()
	if t.uncommitted != nil && (t.clk.Now().Sub(t.lastCommit) >= t.r.Settings.FollowCommit || t.commitWanted()) {
		if err := t.commit(); err != nil {
			return false, err
		}
	}
	return t.pause(), nil
}

// commitEvery is how often at most the tick commits while batches follow each other:
// {P}_CHECKPOINT_INTERVAL, or {P}_FOLLOW_COMMIT once the tick follows.
func (t *tickRun) commitEvery() time.Duration {
	if t.fol != nil {
		return t.r.Settings.FollowCommit
	}
	return t.r.Settings.CheckpointInterval
}

// delivered notes a batch of rows handed to the handler at now, while following: its changes
// and its oldest change's commit-to-delivery latency, when the rows carry a commit time.
func (f *following) delivered(rows []row.Row, now time.Time) {
	if f == nil || len(rows) == 0 {
		return
	}
	f.changes += int64(len(rows))
	if at, ok := commitTime(rows[0]); ok {
		f.lat.add(now, float64(now.Sub(at).Microseconds())/1000)
	}
}

// commitTime is when r's change committed: a change stream's commit time, or a timestamp
// cursor's value (the row's stamp); false for the cursor kinds that carry none.
func commitTime(r row.Row) (time.Time, bool) {
	if tx, ok := r.Transaction(); ok {
		return tx.CommitTime, !tx.CommitTime.IsZero()
	}
	c, err := r.Cursor()
	if err != nil {
		return time.Time{}, false
	}
	return c.Time()
}

// state is the following tick's progress at now as the state document records it.
func (f *following) state(until, now time.Time) state.Follow {
	s := state.Follow{Since: state.At(f.since), Until: state.At(until), Changes: f.changes}
	if p50, p95, ok := f.lat.percentiles(now); ok {
		s.LatencyP50MS, s.LatencyP95MS = &p50, &p95
	}
	return s
}

// percentile is the q-quantile of sorted (nearest rank), rounded to 0.1 ms.
func percentile(sorted []float64, q float64) float64 {
	i := int(q*float64(len(sorted))+0.999999) - 1
	i = min(max(i, 0), len(sorted)-1)
	return float64(int64(sorted[i]*10+0.5)) / 10
}
