package e2e

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/faultpoint"
	"github.com/pseudotrigger/pseudotrigger/internal/faultproxy"
)

// The fault matrix's scenarios: no fault; a kill at every fault point of a tick; every storage
// fault of faultproxy (delay, reset, 503, dropped reply) on every kind of lease write (acquire,
// heartbeat, commit, release); a handler slow past the lease's TTL, with and without storage;
// a process frozen past the TTL; in follow mode, kills and a freeze; clock skew with a kill.
// TestFaultMatrix runs each and checks that none loses a row, moves the checkpoint back or lets a
// stale holder through.

// scenario is one row of the matrix; setup arms its fault in a fresh run.
type scenario struct {
	name  string
	setup func(r *run, rng *rand.Rand)
}

func matrix() []scenario {
	s := []scenario{{name: "no fault", setup: func(*run, *rand.Rand) {}}}
	for _, p := range faultpoint.Points {
		s = append(s, scenario{name: "kill at " + string(p), setup: func(r *run, rng *rand.Rand) {
			n := 1 + rng.IntN(3)
			r.ctl.killAt(p, n)
			r.note = fmt.Sprintf("(hit %d)", n)
		}})
	}
	for _, kind := range faultproxy.WriteKinds {
		for _, f := range faultproxy.Faults {
			s = append(s, scenario{name: string(f) + " on " + string(kind), setup: func(r *run, rng *rand.Rand) {
				rule := faultproxy.Rule{Kind: kind, Fault: f, Skip: rng.IntN(2), Times: 1 + rng.IntN(4)}
				switch kind {
				case faultproxy.Commit: // commits that are not releases: several batches a tick
					r.checkpointEvery, r.batch = "0s", 3+rng.IntN(10)
				case faultproxy.Heartbeat: // heartbeats: a few batches take longer than the interval
					r.sink.slowFor(1+rng.IntN(3), 5, 1300*time.Millisecond)
					r.budget = 3 * time.Second
				}
				if f == faultproxy.Delay {
					rule.Delay = time.Duration(100+rng.IntN(1400)) * time.Millisecond
				}
				r.proxy.Add(rule)
				r.note = rule.String()
			}})
		}
	}
	s = append(s,
		scenario{name: "slow handler past the TTL", setup: func(r *run, rng *rand.Rand) {
			// Heartbeats keep the lease: no takeover, no duplicate.
			r.sink.stallNth(2+rng.IntN(3), r.ttl+2*time.Second)
			r.budget = 10 * time.Second
		}},
		scenario{name: "slow handler, storage unreachable", setup: func(r *run, rng *rand.Rand) {
			// The holder's heartbeats vanish while its handler is stalled: its lease ends by its
			// trust window, its handler is cancelled, and another process takes over.
			r.sink.stallNth(2+rng.IntN(3), 3*r.ttl)
			r.sink.onStall = func() {
				r.proxy.Add(faultproxy.Rule{Kind: faultproxy.Heartbeat, Fault: faultproxy.Blackhole, Delay: r.ttl, Times: 3})
			}
			r.budget = 10 * time.Second
		}},
		scenario{name: "process frozen past the TTL", setup: func(r *run, rng *rand.Rand) {
			// SIGSTOP, as a VM or GC pause: no heartbeat either. Another process takes over; the
			// frozen one wakes up past its trust window and must not commit.
			p := []faultpoint.Point{faultpoint.AfterFetch, faultpoint.InHandle, faultpoint.BeforeCommit}[rng.IntN(3)]
			n := 1 + rng.IntN(3)
			r.ctl.freezeAt(p, n, r.ttl+3*time.Second)
			r.note = fmt.Sprintf("(at %s, hit %d)", p, n)
		}},
		// Follow mode: a tick follows 2 s of its 3 s budget, the writers' whole time, so the
		// kills, freezes and takeovers land in a tick that follows (with the lease, or watching
		// without it).
		scenario{name: "following, kill in the handler", setup: func(r *run, rng *rand.Rand) {
			r.follow, r.budget = 2*time.Second, 3*time.Second
			n := 2 + rng.IntN(4)
			r.ctl.killAt(faultpoint.InHandle, n)
			r.note = fmt.Sprintf("(hit %d)", n)
		}},
		scenario{name: "following, kill before a commit", setup: func(r *run, rng *rand.Rand) {
			r.follow, r.budget = 2*time.Second, 3*time.Second
			n := 1 + rng.IntN(3)
			r.ctl.killAt(faultpoint.BeforeCommit, n)
			r.note = fmt.Sprintf("(hit %d)", n)
		}},
		scenario{name: "following, frozen past the TTL", setup: func(r *run, rng *rand.Rand) {
			r.follow, r.budget = 2*time.Second, 3*time.Second
			n := 2 + rng.IntN(3)
			r.ctl.freezeAt(faultpoint.InHandle, n, r.ttl+3*time.Second)
			r.note = fmt.Sprintf("(at %s, hit %d)", faultpoint.InHandle, n)
		}},
		scenario{name: "clock skew ±10m, kill", setup: func(r *run, rng *rand.Rand) {
			r.offsets = []string{"10m", "-10m"}
			p, n := faultpoint.Points[rng.IntN(len(faultpoint.Points))], 1+rng.IntN(3)
			r.ctl.killAt(p, n)
			r.note = fmt.Sprintf("(kill at %s, hit %d)", p, n)
		}},
	)
	return s
}
