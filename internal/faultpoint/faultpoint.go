// Package faultpoint names the places in a tick where tests inject faults: a test can pause a
// handler there (a barrier) or kill its process there.
//
// The hooks exist only in builds with the tag faultpoints (go build -tags faultpoints). In every
// other build, production's included, Hit is an empty function the compiler removes, Enabled is
// false, and the environment variables below are never read.
//
// In a faultpoints build, the process asks a controller what to do at each point when
// PSEUDOTRIGGER_FAULTPOINTS names one (an http:// URL): it POSTs the point's name and waits for
// the reply, so the controller pauses the process simply by not answering yet. The reply body is
// one word: "continue", "kill" (SIGKILL to itself, as the Functions host kills on a time-out) or
// "exit" (exit status 3 without cleanup). PSEUDOTRIGGER_CLOCK_OFFSET (a Go duration, may be
// negative) skews the process's wall clock, to test that no decision depends on it.
package faultpoint

// Point names a place in a tick.
type Point string

// The fault points, in the order a tick passes them.
const (
	AfterAcquire Point = "after_acquire" // the lease was won; nothing fetched under it yet
	AfterFetch   Point = "after_fetch"   // a batch with rows was read; not handed to the handler
	InHandle     Point = "in_handle"     // the batch is being handed to the poller's handler
	BeforeCommit Point = "before_commit" // the batch was handled; its checkpoint is not written
	AfterCommit  Point = "after_commit"  // the tick committed and released; the host has no reply
)

// The points of quarantining a poison batch (package tick).
const (
	QuarantineTry   Point = "quarantine_try"    // a part of the batch is about to be handed over alone
	AfterDeadLetter Point = "after_dead_letter" // the dead letter is stored; the checkpoint is not moved yet
)

// The point of a logical cursor's commit (package tick): the checkpoint is in the blob, and
// the replication slot is about to be advanced to it.
const BeforeSlotAdvance Point = "before_slot_advance"

// The point of a cleanup (package tick): the checkpoint is committed, and the delivered rows
// behind it are about to be deleted.
const BeforeCleanup Point = "before_cleanup"

// The point of a backfill's chunk (package tick): its reads are being handed to the handler; its
// progress is not written.
const InBackfill Point = "in_backfill"

// Points lists the points of every tick.
var Points = []Point{AfterAcquire, AfterFetch, InHandle, BeforeCommit, AfterCommit}

// QuarantinePoints lists the points of a quarantine, in order.
var QuarantinePoints = []Point{QuarantineTry, AfterDeadLetter}

// Action is what a controller tells a process to do at a point.
type Action string

// Actions.
const (
	Continue Action = "continue"
	Kill     Action = "kill"
	Exit     Action = "exit"
)
