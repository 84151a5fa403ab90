package lease_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
)

var ctx = context.Background()

func TestLifecycle(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		a := acquire(t, f.manager(t, "A", f.svc))
		if a.Token() != 1 {
			t.Fatalf("first acquire: token %d, want 1", a.Token())
		}
		d, b := f.doc(t)
		if d.Version != 1 || d.PollerName != testPoller || d.SourceFingerprint != testFingerprint ||
			d.Lease.OwnerID != "A" || d.Lease.FencingToken != 1 || d.Lease.TTLSeconds != 60 ||
			d.Lease.Released() || d.Checkpoint.Cursor != nil || d.WriteID == "" {
			t.Fatalf("document after the first acquire: %+v", d)
		}

		// A live lease is held: B gets the outcome, and writes nothing.
		mb := f.manager(t, "B", f.svc)
		if res := tryAcquire(t, mb); res.Won() || res.Holder != "A" {
			t.Fatalf("B acquired a live lease: %+v", res)
		}
		if _, b2 := f.doc(t); b2.ETag != b.ETag {
			t.Fatal("a refused acquire wrote the blob")
		}

		if err := a.Commit(ctx, checkpoint(10)); err != nil {
			t.Fatalf("commit: %v", err)
		}
		if err := a.Heartbeat(ctx); err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
		if err := a.CommitAndRelease(ctx, checkpoint(20)); err != nil {
			t.Fatalf("commit and release: %v", err)
		}
		if !errors.Is(a.Err(), lease.ErrReleased) || a.Context().Err() == nil {
			t.Fatalf("after release: Err %v, context %v", a.Err(), a.Context().Err())
		}
		if err := a.Heartbeat(ctx); !errors.Is(err, lease.ErrReleased) {
			t.Fatalf("heartbeat after release: %v, want ErrReleased", err)
		}
		d, _ = f.doc(t)
		if !d.Lease.Released() || cursorOf(d) != "20" || d.Checkpoint.LastSuccessfulBatchID != "batch-20" || d.Checkpoint.UpdatedAt.IsZero() {
			t.Fatalf("document after release: %+v", d)
		}

		// A released lease is free at once, with no clock moved; the checkpoint carries over.
		bl := acquire(t, mb)
		if bl.Token() != 2 {
			t.Fatalf("acquire after release: token %d, want 2", bl.Token())
		}
		if cp := bl.Checkpoint(); cp.Cursor == nil || string(cp.Cursor.Value) != "20" {
			t.Fatalf("the new holder starts from %+v, want cursor 20", cp.Cursor)
		}
	})
}

// TestForcedExpiryRace: A acquires (token n) and is paused at a barrier; the service's clock
// passes the expiry; B acquires (n+1) and commits; A resumes. A's heartbeat and commit are
// rejected, the checkpoint is B's, the token n+1. Two variants: A's own clock moved on too (it
// refuses by its trust window, sending nothing), or A's clock stood still (a paused VM): then the
// store's CAS must refuse it.
func TestForcedExpiryRace(t *testing.T) {
	for _, variant := range []string{"holder_clock_moved", "holder_clock_stood_still"} {
		t.Run(variant, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, f *fixture) {
				runs := 200
				if testing.Short() {
					runs = 20
				}
				for i := range runs {
					forcedExpiryOnce(t, f, i, variant == "holder_clock_moved")
					if t.Failed() {
						t.Fatalf("failed at run %d", i)
					}
				}
			})
		})
	}
}

func forcedExpiryOnce(t *testing.T, f *fixture, run int, holderClockMoves bool) {
	var aClock clock.Clock = f.svc
	if !holderClockMoves {
		aClock = clock.NewFake(f.svc.Now())
	}
	ma, mb := f.manager(t, "A", aClock), f.manager(t, "B", f.svc)

	acquired, resume := make(chan *lease.Lease), make(chan struct{})
	type result struct{ heartbeat, commit error }
	done := make(chan result)
	go func() {
		a := acquire(t, ma)
		acquired <- a
		<-resume // the barrier
		hb := a.Heartbeat(ctx)
		done <- result{hb, a.Commit(ctx, checkpoint(-run))}
	}()
	a := <-acquired
	n := a.Token()

	// B cannot take the lease while it is live...
	if res := tryAcquire(t, mb); res.Won() {
		t.Fatalf("B acquired a live lease")
	}
	// ...until the service's clock passes Last-Modified + TTL + margin.
	f.svc.Advance(testTTL + testMargin + time.Second)
	b := acquire(t, mb)
	if b.Token() != n+1 {
		t.Fatalf("B's token %d, want %d", b.Token(), n+1)
	}
	if err := b.Commit(ctx, checkpoint(run)); err != nil {
		t.Fatalf("B's commit: %v", err)
	}
	_, before := f.doc(t)

	close(resume)
	r := <-done
	if !errors.Is(r.heartbeat, lease.ErrLost) || !errors.Is(r.commit, lease.ErrLost) {
		t.Fatalf("A after the takeover: heartbeat %v, commit %v; want ErrLost for both", r.heartbeat, r.commit)
	}
	if !errors.Is(context.Cause(a.Context()), lease.ErrLost) {
		t.Fatalf("A's context: %v, want cancelled with ErrLost", context.Cause(a.Context()))
	}
	d, after := f.doc(t)
	if cursorOf(d) != itoa(run) || d.Lease.FencingToken != n+1 || d.Lease.OwnerID != "B" {
		t.Fatalf("after A's attempts: cursor %s token %d owner %s; want B's cursor %d, token %d", cursorOf(d), d.Lease.FencingToken, d.Lease.OwnerID, run, n+1)
	}
	if after.ETag != before.ETag {
		t.Fatal("A's rejected writes changed the blob")
	}
	if err := b.CommitAndRelease(ctx, checkpoint(run)); err != nil {
		t.Fatalf("B's release: %v", err)
	}
}

func itoa(n int) string { return strings.TrimSpace(string(checkpoint(n).Cursor.Value)) }

// TestLostReplies: a write that lands but whose reply is lost (and whose SDK retry then gets 412
// or 409) is settled as landed by its write_id; if another owner took over before the re-read,
// it is settled as lost.
func TestLostReplies(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		m := f.manager(t, "A", f.svc)

		f.drop(func() {})
		l := acquire(t, m) // create, reply lost
		d, _ := f.doc(t)
		if d.Lease.OwnerID != "A" || d.Lease.FencingToken != 1 {
			t.Fatalf("after a create with a lost reply: %+v", d.Lease)
		}

		f.drop(func() {})
		if err := l.Heartbeat(ctx); err != nil {
			t.Fatalf("heartbeat with a lost reply: %v", err)
		}
		f.drop(func() {})
		if err := l.Commit(ctx, checkpoint(5)); err != nil {
			t.Fatalf("commit with a lost reply: %v", err)
		}
		if d, _ := f.doc(t); cursorOf(d) != "5" {
			t.Fatalf("cursor %s after a commit with a lost reply, want 5", cursorOf(d))
		}
		// The adopted ETag is the right one: an ordinary write still succeeds.
		if err := l.CommitAndRelease(ctx, checkpoint(6)); err != nil {
			t.Fatalf("commit after settled writes: %v", err)
		}

		// Now with another owner taking over between the lost reply and the re-read.
		l = acquire(t, m)
		f.drop(func() { f.takeOver(t, "intruder-1") })
		if err := l.Heartbeat(ctx); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("heartbeat lost and taken over: %v, want ErrLost", err)
		}

		f.svc.Advance(testTTL + testMargin + time.Second)
		l = acquire(t, m)
		f.drop(func() { f.takeOver(t, "intruder-2") })
		if err := l.Commit(ctx, checkpoint(7)); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("commit lost and taken over: %v, want ErrLost", err)
		}
		if d, _ := f.doc(t); d.Lease.OwnerID != "intruder-2" || cursorOf(d) != "-1" {
			t.Fatalf("after a commit lost to a takeover: owner %s cursor %s, want intruder-2's", d.Lease.OwnerID, cursorOf(d))
		}

		// A release whose reply is lost, the lease (free at once) taken before the re-read: the
		// release landed, so the commit folded into it stands; it is not reported as lost.
		f.svc.Advance(testTTL + testMargin + time.Second)
		l = acquire(t, m)
		f.drop(func() { f.takeOver(t, "successor") })
		if err := l.CommitAndRelease(ctx, checkpoint(8)); err != nil {
			t.Fatalf("a release that landed, then taken over: %v, want success", err)
		}
		if !errors.Is(l.Err(), lease.ErrReleased) {
			t.Fatalf("lease state after the release: %v, want ErrReleased", l.Err())
		}
		// The same after the trust window passed: it cannot tell, so it reports the lease lost.
		f.svc.Advance(testTTL + testMargin + time.Second)
		l = acquire(t, m)
		f.drop(func() {
			f.takeOver(t, "late-successor")
			f.svc.Advance(testTTL) // the holder reads this clock too
		})
		if err := l.CommitAndRelease(ctx, checkpoint(9)); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("a release settled after the trust window: %v, want ErrLost", err)
		}
	})
}

func TestLostReplyOnCreateWithTakeover(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		m := f.manager(t, "A", f.svc)
		f.drop(func() { f.takeOver(t, "intruder") })
		if res := tryAcquire(t, m); res.Won() || res.Holder != "intruder" {
			t.Fatalf("create lost and taken over: %+v, want held by intruder", res)
		}
	})
}

// TestSlowHeartbeat: the trust window runs from when a write was sent, so a slow reply does not
// stretch it.
func TestSlowHeartbeat(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		clk := clock.NewFake(f.svc.Now())
		slow := &slowStore{Store: f.st, clk: clk}
		m, err := lease.New(slow, lease.Config{Poller: testPoller, Blob: f.blob, Owner: "A", Fingerprint: testFingerprint,
			TTL: testTTL, Margin: testMargin, HeartbeatInterval: testInterval, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		l := acquire(t, m)
		clk.Advance(10 * time.Second)
		sent := clk.Now()
		slow.delay.Store(int64(40 * time.Second))
		if err := l.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		if want := sent.Add(testTTL - testMargin); !l.TrustedUntil().Equal(want) {
			t.Fatalf("trusted until %v, want send time + TTL - margin = %v (the reply came 40s later)", l.TrustedUntil(), want)
		}
		// 40 s passed during the write; the window (TTL 60 s - margin 2 s from the send) ends 18 s on.
		clk.Advance(17 * time.Second)
		if !l.Trusted() {
			t.Fatal("the lease is not trusted 57 s after the heartbeat was sent")
		}
		clk.Advance(time.Second)
		if l.Trusted() {
			t.Fatal("the lease is still trusted 58 s after the heartbeat was sent")
		}
		slow.delay.Store(0)
		if err := l.Commit(ctx, checkpoint(1)); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("commit after the trust window: %v, want ErrLost", err)
		}
	})
}

// TestClockSkew: holders whose wall clocks are 10 minutes ahead of and behind the service's,
// acting in random order over random time steps: never two trusted holders at once, and every
// commit that succeeds is by the holder of the newest token.
func TestClockSkew(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		for _, skew := range []time.Duration{10 * time.Minute, -10 * time.Minute} {
			steps := 400
			if testing.Short() {
				steps = 50
			}
			rng := rand.New(rand.NewPCG(uint64(skew), 7))
			names := []string{"A", "B"}
			ms := []*lease.Manager{
				f.manager(t, "A", clock.Offset(f.svc, skew)),
				f.manager(t, "B", clock.Offset(f.svc, -skew)),
			}
			held := make([]*lease.Lease, 2)
			var maxToken int64
			cursor, takeovers, rejected := 0, 0, 0
			for step := range steps {
				f.svc.Advance(time.Duration(rng.IntN(25)) * time.Second)
				i := rng.IntN(2)
				switch l := held[i]; {
				case l == nil || l.Err() != nil:
					held[i] = nil
					if res := tryAcquire(t, ms[i]); res.Won() {
						held[i] = res.Lease
						if held[1-i] != nil && held[1-i].Err() == nil {
							takeovers++ // the other one still thinks it holds a lease
						}
						if res.Lease.Token() <= maxToken {
							t.Fatalf("step %d: %s acquired token %d, not above %d", step, names[i], res.Lease.Token(), maxToken)
						}
						maxToken = res.Lease.Token()
					}
				case rng.IntN(3) == 0:
					// stall: do nothing, let the lease age
				default:
					cursor++
					err := l.Commit(ctx, checkpoint(cursor))
					if err == nil {
						d, _ := f.doc(t)
						if d.Lease.FencingToken != maxToken || l.Token() != maxToken || cursorOf(d) != itoa(cursor) {
							t.Fatalf("step %d: %s committed with token %d while the newest is %d", step, names[i], l.Token(), maxToken)
						}
					} else if errors.Is(err, lease.ErrLost) {
						rejected++
					} else {
						t.Fatalf("step %d: commit: %v", step, err)
					}
				}
				trusted := 0
				for _, l := range held {
					if l != nil && l.Trusted() {
						trusted++
					}
				}
				if trusted > 1 {
					t.Fatalf("step %d (skew %v): both holders trust their lease", step, skew)
				}
			}
			if takeovers == 0 || rejected == 0 {
				t.Fatalf("skew %v: the walk took over %d leases and rejected %d commits; it must exercise both", skew, takeovers, rejected)
			}
			for _, l := range held {
				if l != nil && l.Err() == nil {
					_ = l.Release(ctx)
				}
			}
		}
	})
}

func TestCorruptDocumentsAreNeverOverwritten(t *testing.T) {
	cases := map[string]struct {
		data     string
		sentinel error
	}{
		"not json":      {`{"version": 1, "poller_name": "orders"`, state.ErrCorrupt},
		"version 2":     {`{"version": 2, "poller_name": "orders"}`, state.ErrVersion},
		"no version":    {`{"poller_name": "orders"}`, state.ErrCorrupt},
		"other poller":  {`{"version": 1, "poller_name": "invoices", "source_fingerprint": "sha256:0123456789abcdef", "checkpoint": {"cursor": null}, "lease": {}}`, state.ErrPollerMismatch},
		"unknown field": {`{"version": 1, "poller_name": "orders", "surprise": true}`, state.ErrCorrupt},
		"fingerprint":   {`{"version": 1, "poller_name": "orders", "source_fingerprint": "sha256:other", "checkpoint": {"cursor": null}, "lease": {}}`, state.ErrFingerprintMismatch},
	}
	forEachStore(t, func(t *testing.T, f *fixture) {
		for name, c := range cases {
			f.blob = blobName()
			w, err := f.st.Put(ctx, f.blob, []byte(c.data), store.IfNotExists())
			if err != nil {
				t.Fatal(err)
			}
			m := f.manager(t, "A", f.svc)
			_, err = m.Read(ctx)
			if !errors.Is(err, c.sentinel) {
				t.Fatalf("%s: Read returned %v, want %v", name, err, c.sentinel)
			}
			if !strings.Contains(err.Error(), f.blob) {
				t.Fatalf("%s: the error %q does not name the blob", name, err)
			}
			if c.sentinel == state.ErrFingerprintMismatch && !strings.Contains(err.Error(), "pollerctl reset orders") {
				t.Fatalf("the fingerprint error %q does not name the reset command", err)
			}
			b, err := f.st.Get(ctx, f.blob)
			if err != nil || string(b.Data) != c.data || b.ETag != w.ETag {
				t.Fatalf("%s: the blob changed: %q %v", name, b.Data, err)
			}
		}

		// A holder whose blob is replaced by something corrupt loses the lease and never writes
		// over it.
		f.blob = blobName()
		l := acquire(t, f.manager(t, "A", f.svc))
		_, b := f.doc(t)
		garbage := []byte(`{"version": 7}`)
		if _, err := f.st.Put(ctx, f.blob, garbage, store.IfMatch(b.ETag)); err != nil {
			t.Fatal(err)
		}
		if err := l.Heartbeat(ctx); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("heartbeat on a corrupted blob: %v, want ErrLost", err)
		}
		if got, _ := f.st.Get(ctx, f.blob); string(got.Data) != string(garbage) {
			t.Fatalf("the corrupted blob was overwritten: %q", got.Data)
		}
	})
}

func TestBlobDeletedUnderHolder(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		l := acquire(t, f.manager(t, "A", f.svc))
		_, b := f.doc(t)
		if err := f.st.Delete(ctx, f.blob, store.IfMatch(b.ETag)); err != nil {
			t.Fatal(err)
		}
		if err := l.Heartbeat(ctx); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "deleted") {
			t.Fatalf("heartbeat after the blob was deleted: %v, want ErrLost naming the deletion", err)
		}
		if err := l.Commit(ctx, checkpoint(1)); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("commit after the blob was deleted: %v, want ErrLost", err)
		}
		if _, err := f.st.Get(ctx, f.blob); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the deleted blob was recreated: %v", err)
		}
	})
}

func TestFencingTokenLimit(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		put := func(token int64) {
			f.blob = blobName()
			d := &state.Doc{Version: 1, PollerName: testPoller, SourceFingerprint: testFingerprint}
			d.Lease.FencingToken = token
			data, err := state.Encode(d)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.st.Put(ctx, f.blob, data, store.IfNotExists()); err != nil {
				t.Fatal(err)
			}
		}
		put(state.MaxFencingToken - 1)
		if l := acquire(t, f.manager(t, "A", f.svc)); l.Token() != state.MaxFencingToken {
			t.Fatalf("token %d, want %d", l.Token(), state.MaxFencingToken)
		}
		put(state.MaxFencingToken)
		m := f.manager(t, "A", f.svc)
		snap, err := m.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Acquire(ctx, snap); !errors.Is(err, lease.ErrTokenExhausted) {
			t.Fatalf("acquire at token 2^53-1: %v, want ErrTokenExhausted", err)
		}
		if _, b := f.doc(t); b.ETag != snap.ETag {
			t.Fatal("a refused acquire wrote the blob")
		}
	})
}

func TestRacingContenders(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		for round := range 3 {
			const n = 10
			ms := make([]*lease.Manager, n)
			snaps := make([]lease.Snapshot, n)
			for i := range n {
				ms[i] = f.manager(t, "C"+itoa(i), f.svc)
				s, err := ms[i].Read(ctx)
				if err != nil {
					t.Fatal(err)
				}
				snaps[i] = s
			}
			start := make(chan struct{})
			results := make(chan lease.Result, n)
			for i := range n {
				go func() {
					<-start
					res, err := ms[i].Acquire(ctx, snaps[i])
					if err != nil {
						t.Error(err)
					}
					results <- res
				}()
			}
			close(start)
			var winners []*lease.Lease
			for range n {
				if r := <-results; r.Won() {
					winners = append(winners, r.Lease)
				}
			}
			if len(winners) != 1 {
				t.Fatalf("round %d: %d contenders won, want exactly 1", round, len(winners))
			}
			if d, _ := f.doc(t); d.Lease.OwnerID != winners[0].Owner() || d.Lease.FencingToken != int64(round+1) {
				t.Fatalf("round %d: blob says %s token %d, winner is %s", round, d.Lease.OwnerID, d.Lease.FencingToken, winners[0].Owner())
			}
			if err := winners[0].Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestConfigValidation(t *testing.T) {
	base := lease.Config{Poller: "p", Blob: "b", Owner: "o", Fingerprint: "f"}
	bad := map[string]func(c *lease.Config){
		"margin below 1s":         func(c *lease.Config) { c.Margin = 500 * time.Millisecond },
		"heartbeat at TTL/3":      func(c *lease.Config) { c.TTL = 60 * time.Second; c.HeartbeatInterval = 20 * time.Second },
		"TTL below 3 margins":     func(c *lease.Config) { c.TTL = 10 * time.Second; c.Margin = 5 * time.Second },
		"no owner":                func(c *lease.Config) { c.Owner = "" },
		"no fingerprint":          func(c *lease.Config) { c.Fingerprint = "" },
		"negative write time-out": func(c *lease.Config) { c.WriteTimeout = -time.Second },
	}
	for name, mutate := range bad {
		c := base
		mutate(&c)
		if _, err := lease.New(nil, c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	m, err := lease.New(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Config(); c.TTL != 60*time.Second || c.HeartbeatInterval != 15*time.Second || c.Margin != 5*time.Second {
		t.Fatalf("defaults: %+v", c)
	}
}

// slowStore moves a fake clock forward while a Put is in flight.
type slowStore struct {
	lease.Store
	clk   *clock.Fake
	delay atomicDuration
}

func (s *slowStore) Put(ctx context.Context, name string, data []byte, cond store.Condition) (store.Written, error) {
	w, err := s.Store.Put(ctx, name, data, cond)
	s.clk.Advance(time.Duration(s.delay.Load()))
	return w, err
}

// TestExpiryBoundary pins both clock rules on a deterministic service clock: a contender sees
// the lease held until the read's Date reaches Last-Modified + TTL + margin, and the holder
// stopped trusting it strictly before that.
func TestExpiryBoundary(t *testing.T) {
	start := time.Date(2026, 4, 7, 1, 23, 45, 600_000_000, time.UTC) // mid-second: LM truncates
	svc := clock.NewFake(start)
	f := &fixture{st: memstore.New(svc), blob: blobName()}
	a := acquire(t, f.manager(t, "A", svc))
	lm := start.Truncate(time.Second)
	mb := f.manager(t, "B", svc)

	svc.Advance(lm.Add(testTTL + testMargin - time.Second).Sub(svc.Now()))
	if a.Trusted() {
		t.Fatalf("the holder still trusts its lease at %v, TTL+margin-1s after Last-Modified", svc.Now())
	}
	if res := tryAcquire(t, mb); res.Won() {
		t.Fatalf("B acquired at Date = Last-Modified + TTL + margin - 1s")
	}
	svc.Advance(time.Second)
	if res := tryAcquire(t, mb); !res.Won() {
		t.Fatalf("B could not acquire at Date = Last-Modified + TTL + margin: held by %q", res.Holder)
	}

	// The holder's window: trusted just before send + TTL - margin, not at it.
	c := acquireAt(t, f, svc, "C")
	sent := svc.Now()
	svc.Advance(testTTL - testMargin - time.Nanosecond)
	if !c.Trusted() {
		t.Fatal("the holder does not trust its lease just before send + TTL - margin")
	}
	svc.Advance(time.Nanosecond)
	if c.Trusted() || !svc.Now().Equal(sent.Add(testTTL-testMargin)) {
		t.Fatal("the holder still trusts its lease at send + TTL - margin")
	}
}

// acquireAt takes the blob over in a fresh fixture state: a new blob, acquired by owner.
func acquireAt(t *testing.T, f *fixture, clk clock.Clock, owner string) *lease.Lease {
	t.Helper()
	f.blob = blobName()
	return acquire(t, f.manager(t, owner, clk))
}

func TestFailureRecords(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		m := f.manager(t, "A", f.svc)
		l := acquire(t, m)
		if err := l.Commit(ctx, checkpoint(1)); err != nil {
			t.Fatal(err)
		}
		for attempt := int64(1); attempt <= 3; attempt++ {
			if attempt > 1 {
				l = acquire(t, m)
			}
			if f := l.Failure(); (attempt == 1) != (f == nil) || (f != nil && f.Attempts != attempt-1) {
				t.Fatalf("attempt %d: the lease shows failure %+v", attempt, f)
			}
			var progress *state.Checkpoint
			if attempt == 1 {
				// Progress made before the failure is committed with it (a new checkpoint, so a
				// new batch: its count starts at 1).
				cp := checkpoint(2)
				progress = &cp
			}
			l.AddHistory(state.Tick{Outcome: "failed", Rows: int(attempt), RowsWaiting: 7})
			if err := l.FailAndRelease(ctx, progress, "batch-x", `{"id":1}..{"id":5}`, errors.New("webhook said 503")); err != nil {
				t.Fatal(err)
			}
			d, _ := f.doc(t)
			if d.Failure == nil || d.Failure.Attempts != attempt || d.Failure.LastError != "webhook said 503" || !d.Lease.Released() ||
				d.Failure.Keys != `{"id":1}..{"id":5}` {
				t.Fatalf("after failure %d: %+v", attempt, d.Failure)
			}
			// The queued history entry went with the write, once.
			if n := len(d.History); n != int(attempt) || d.History[n-1].Rows != int(attempt) || d.History[n-1].Outcome != "failed" {
				t.Fatalf("after failure %d: history %+v", attempt, d.History)
			}
			if cursorOf(d) != "2" {
				t.Fatalf("the progress before the failure was not committed: cursor %s", cursorOf(d))
			}
		}
		d, _ := f.doc(t)
		first := d.Failure.FirstFailureAt
		l = acquire(t, m)
		if err := l.CommitAndRelease(ctx, checkpoint(3)); err != nil {
			t.Fatal(err)
		}
		if d, _ := f.doc(t); d.Failure != nil {
			t.Fatalf("a successful commit kept the failure: %+v", d.Failure)
		}
		if first.IsZero() {
			t.Fatal("first_failure_at was not recorded")
		}
	})
}

// TestBackfillProgress: a backfill's progress queued with SetBackfill goes with the lease's next
// write, whichever it is (a heartbeat here), once; nil ends it; Backfill shows what is queued.
func TestBackfillProgress(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		l := acquire(t, f.manager(t, "A", f.svc))
		if l.Backfill() != nil {
			t.Fatalf("a new document has a backfill: %+v", l.Backfill())
		}
		b := &state.Backfill{ID: "bf_1", Kind: state.BackfillRequested, Chunk: 100, After: map[string]json.RawMessage{"id": json.RawMessage("100")}, Rows: 100}
		l.SetBackfill(b)
		b.Rows = 7 // the lease keeps its own copy
		if got := l.Backfill(); got == nil || got.Rows != 100 {
			t.Fatalf("queued: %+v", got)
		}
		if d, _ := f.doc(t); d.Backfill != nil {
			t.Fatalf("written before any write: %+v", d.Backfill)
		}
		if err := l.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		if d, _ := f.doc(t); d.Backfill == nil || d.Backfill.Rows != 100 || string(d.Backfill.After["id"]) != "100" {
			t.Fatalf("after the heartbeat: %+v", d.Backfill)
		}
		if err := l.Commit(ctx, checkpoint(1)); err != nil {
			t.Fatal(err)
		}
		if d, _ := f.doc(t); d.Backfill == nil || d.Backfill.Rows != 100 {
			t.Fatalf("a commit without news kept it? %+v", d.Backfill)
		}
		l.SetBackfill(nil)
		if l.Backfill() != nil {
			t.Fatal("Backfill shows the ended backfill")
		}
		if err := l.CommitAndRelease(ctx, checkpoint(2)); err != nil {
			t.Fatal(err)
		}
		if d, _ := f.doc(t); d.Backfill != nil || cursorOf(d) != "2" {
			t.Fatalf("after it ended: %+v, cursor %s", d.Backfill, cursorOf(d))
		}
	})
}

// TestFollowProgress: a following holder's progress goes out with its next write, is cleared by
// its release, and is not carried into a takeover's document when the holder died following.
func TestFollowProgress(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		l := acquire(t, f.manager(t, "A", f.svc))
		l.SetFollow(state.Follow{Since: state.At(time.Unix(1, 0)), Until: state.At(time.Unix(60, 0)), Changes: 12})
		if d, _ := f.doc(t); d.Follow != nil {
			t.Fatalf("written before any write: %+v", d.Follow)
		}
		if err := l.Commit(ctx, checkpoint(1)); err != nil {
			t.Fatal(err)
		}
		if d, _ := f.doc(t); d.Follow == nil || d.Follow.Changes != 12 {
			t.Fatalf("after the commit: %+v", d.Follow)
		}
		if err := l.CommitAndRelease(ctx, checkpoint(2)); err != nil {
			t.Fatal(err)
		}
		if d, _ := f.doc(t); d.Follow != nil {
			t.Fatalf("after the release: %+v", d.Follow)
		}

		// A holder that dies following leaves its progress; the next holder does not show it.
		l = acquire(t, f.manager(t, "B", f.svc))
		l.SetFollow(state.Follow{Since: state.At(time.Unix(1, 0)), Until: state.At(time.Unix(60, 0)), Changes: 5})
		if err := l.Commit(ctx, checkpoint(3)); err != nil {
			t.Fatal(err)
		}
		f.svc.Advance(testTTL + testMargin + time.Second) // B died: its lease expires unreleased
		acquire(t, f.manager(t, "C", f.svc))
		if d, _ := f.doc(t); d.Follow != nil || d.Lease.OwnerID == "" {
			t.Fatalf("the takeover's document: follow %+v, lease %+v", d.Follow, d.Lease)
		}
	})
}
