// Package lease implements the lease and checkpoint protocol on one state blob per poller.
//
// # The document
//
// The blob state/{app}/{poller}.json (package state) holds the checkpoint and the lease
// together, so a checkpoint can only move in a write that also proves the writer still holds the
// lease. Every change is a compare-and-swap on the blob's ETag: a create with If-None-Match: *, or
// a write with If-Match on the ETag the writer last saw. Nothing ever writes unconditionally.
//
// # States
//
// A lease is, as the storage service sees it:
//
//   - absent: no blob yet, or the document has no owner (a reset);
//   - held: an owner, not released, and the service's clock before Last-Modified + TTL + margin;
//   - expired: the same, with the service's clock at or past that bound;
//   - released: the holder's last write marked it released; it is free at once.
//
// Acquiring an absent, expired or released lease writes the contender as owner with the fencing
// token incremented by one. A held lease is never taken early, not even by its own owner: the
// "pre-empt the lease at once" optimisation lets two holders coexist (see the TLA+ trace in the
// project's seeds) and is refused here.
//
// # The term: the fencing token
//
// The fencing token counts acquisitions. Each holder's heartbeats and commits are conditional on
// the ETag of its own last write, so any write by anybody else (another holder, a reset) makes
// every later write of the old holder fail. Batches carry the token so that sinks can refuse a
// stale writer too. Tokens stop at 2^53-1 (exact in every JSON reader); acquiring past it is
// refused with ErrTokenExhausted.
//
// # Two clocks, never compared
//
// A contender judges expiry on the storage service's clock only: the lease is expired when the
// Date header of its read is at or past the blob's Last-Modified + ttl_seconds (as recorded in
// the document) + Margin. Both are the service's clock, at one-second resolution.
//
// The holder trusts its lease until sent + TTL - Margin, where sent is the reading of its own
// monotonic clock taken just before it sent its last successful acquire, heartbeat or commit. A
// reply that arrives late does not extend that window: the write may have landed at any moment
// after it was sent, so only the send time is a safe lower bound.
//
// Why the two cannot overlap: the write the holder sent at real time s is stamped Last-Modified
// LM >= s - 1 s (the service truncates to the second). A contender sees expiry no earlier than
// LM + TTL + Margin >= s + TTL + Margin - 1 s, and the holder stopped trusting at s + TTL -
// Margin. With Margin >= 1 s the contender comes strictly later, whatever the wall clocks of
// the two processes say. Margin also absorbs clock rate drift over one TTL.
//
// # Writes are settled, not trusted
//
// A conditional write can land while its reply is lost, and the SDK's retry of it then gets 412
// (409 for a create); a 5xx or a time-out is just as ambiguous. So every write carries a fresh
// random write_id, and on any failure the writer re-reads the blob:
//
//   - its own write_id is there: the write landed; adopt the ETag just read;
//   - another owner or token is there: the lease is lost (a contender: the race is lost);
//     except for a release settled while the lease is still trusted: nobody can take a held
//     lease before its holder's trust window ends, so a newer holder there proves the release
//     landed first (the lease was free at once) and the commit folded into it stands. The fault
//     harness (e2e TestFaultMatrix, "drop_reply on release") found this case reported as lost;
//   - its previous write is still there unchanged: the write did not land; try once more;
//   - the re-read fails too, or the blob is gone or no longer decodes: the holder treats the
//     lease as lost, a contender as not won.
//
// Reads are never conditional (Azurite and Azure differ there); only writes carry conditions.
//
// The acquire, the holder's writes and Operator's (pollerctl's reset, clone, quarantine and
// delete, which write from outside a held lease) all put through one function with write ids from
// one generator, so all are settled alike; Operator reports a write that lost to another writer
// as store.ErrConflict. A delete carries no write id: a failed one is settled by whether the
// re-read still finds the ETag it was conditional on.
//
// # Operators
//
// pollerctl changes a document only through Operator: it reads the document, plans the change
// (shown in a dry run) and writes the plan, refused while the read shows a live lease (it could
// race a tick), after backing the old document up, as a compare-and-swap on the read's ETag. The
// fencing token goes up in one place, for an acquire and for an operator's takeover (a reset)
// alike: a takeover writes the operator as owner with the token one above the document's, and
// releases the lease in the same write, so any older holder's next write fails and the next tick
// acquires at once. An operator's edit (a quarantine request) keeps the lease as it is, and a
// created document (a clone) has none until its first tick acquires token 1.
//
// # Tokens never go backwards for a poller name
//
// An operator's delete first writes the document's token to the poller's tombstone
// (tombstones/{app}/{poller}.json, state.Tombstone). A document that has never been acquired (no
// blob yet, or a clone's token 0) is acquired one above the tombstone's token, and a takeover of
// no document starts above it too: a sink that compares tokens never sees an older one again.
//
// # The source
//
// Read refuses a document written for another source (state.CheckSource: its fingerprint covers
// what decides the order and the position, not the payload columns). It accepts, and logs once,
// a document of the fingerprint's first form for the configured source, or one whose payload
// columns differ; every acquire records the configured source and the handler's version, so the
// document moves on to the current form with the tick's first write.
//
// # One writer per lease
//
// Heartbeats (from KeepAlive's goroutine), commits and the release all go through one mutex in
// Lease, so they never race each other and each is conditional on the newest ETag.
//
// # What each failure does
//
//   - Losing an acquire race is the outcome Result.Holder, not an error.
//   - A heartbeat or commit refused because someone else wrote: ErrLost. The lease's context is
//     cancelled, so the poller's handler stops; nothing is committed.
//   - The trust window passes without a successful write (storage unreachable, process paused):
//     ErrLost; the watchdog cancels the context at that moment, before any contender can take over.
//   - The state blob deleted under a holder: ErrLost; a heartbeat never recreates it.
//   - A commit that did not land: an error, the lease still held; the batch will be delivered again.
//   - A crash at any point: nothing to clean up. The lease expires after its TTL and the next
//     holder resumes from the last committed checkpoint; only the batch in flight repeats.
//
// # Costs
//
// Acquire is one read and one write (and, the first time a poller's document is acquired, one
// read of its tombstone); a heartbeat or a commit is one write; the release is folded
// into the last commit (CommitAndRelease), so a tick of B batches costs B+1 writes.
package lease
