package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// Store is what the protocol needs of a state store: reads and conditional writes.
type Store interface {
	Get(ctx context.Context, name string) (store.Blob, error)
	Put(ctx context.Context, name string, data []byte, cond store.Condition) (store.Written, error)
}

var (
	// ErrLost: the lease is no longer ours (taken over, trust window passed, blob gone or
	// unreadable). The error wrapping it says why.
	ErrLost = errors.New("lease lost")
	// ErrReleased: the lease was released; it can no longer be written.
	ErrReleased = errors.New("lease released")
	// ErrTokenExhausted: the fencing token reached state.MaxFencingToken.
	ErrTokenExhausted = errors.New("fencing token exhausted")
)

// Defaults.
const (
	DefaultTTL          = 60 * time.Second
	DefaultMargin       = 5 * time.Second
	DefaultWriteTimeout = 15 * time.Second
)

// Config describes one poller's lease. Zero durations take the defaults.
type Config struct {
	Poller      string // poller name, as in the document
	Blob        string // state blob name, state/{app}/{poller}.json
	Owner       string // this process's owner id (NewOwnerID)
	Fingerprint string // the configured source's fingerprint; default Source's
	// Source, if set, is the configured source in full: a document written for it is accepted
	// when only its payload columns differ or it carries the first form of the fingerprint (both
	// logged once), a mismatch names what changed, and every acquire records it (state.CheckSource).
	Source *state.SourceDef
	// Version is the handler's version, recorded in the document by every acquire.
	Version string
	// Initial, if set, is the backfill a document starts with when the first acquire creates it
	// (a change-stream poller's initial snapshot); its StartedAt is then.
	Initial *state.Backfill

	TTL time.Duration // lease time to live; default 60 s
	// HeartbeatInterval is how often KeepAlive extends the lease; default TTL/4, must be < TTL/3.
	HeartbeatInterval time.Duration
	// Margin covers the service clock's one-second resolution and clock drift; default 5 s, at
	// least 1 s, less than TTL/3.
	Margin time.Duration
	// WriteTimeout bounds one write including its SDK retries; default 15 s.
	WriteTimeout time.Duration

	Clock  clock.Clock  // default clock.System
	Rand   io.Reader    // source of write ids; default crypto/rand
	Logger *slog.Logger // default: discard
}

func (c Config) withDefaults() (Config, error) {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = c.TTL / 4
	}
	if c.Margin == 0 {
		c.Margin = min(DefaultMargin, c.TTL/4)
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Rand == nil {
		c.Rand = rand.Reader
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Fingerprint == "" && c.Source != nil {
		c.Fingerprint = c.Source.Fingerprint()
	}
	switch {
	case c.Poller == "" || c.Blob == "" || c.Owner == "":
		return c, errors.New("lease: Poller, Blob and Owner are required")
	case c.Fingerprint == "":
		return c, errors.New("lease: Fingerprint is required")
	case c.Source != nil && c.Fingerprint != c.Source.Fingerprint():
		return c, errors.New("lease: Fingerprint is not Source's")
	case c.Margin < time.Second:
		return c, fmt.Errorf("lease: margin %v is below 1s, the resolution of the storage service's clock", c.Margin)
	case c.TTL < 3*c.Margin:
		return c, fmt.Errorf("lease: TTL %v must be at least 3 times the margin %v", c.TTL, c.Margin)
	case c.HeartbeatInterval <= 0 || 3*c.HeartbeatInterval >= c.TTL:
		return c, fmt.Errorf("lease: heartbeat interval %v must be positive and below TTL/3 (%v)", c.HeartbeatInterval, c.TTL/3)
	case c.WriteTimeout <= 0:
		return c, fmt.Errorf("lease: write timeout %v must be positive", c.WriteTimeout)
	}
	return c, nil
}

// ttlSeconds is the TTL recorded in the document: rounded up, so contenders never wait less.
func (c Config) ttlSeconds() int64 { return int64((c.TTL + time.Second - 1) / time.Second) }

// NewOwnerID returns an owner id "{prefix}/{16 hex digits}": the prefix says where the process
// runs (e.g. the app and instance), the random part makes every process start a new owner, so a
// restarted process never mistakes its predecessor's lease for its own.
func NewOwnerID(prefix string, r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	b := make([]byte, 8)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("lease: owner id: %w", err)
	}
	return prefix + "/" + hex.EncodeToString(b), nil
}

// Manager runs the protocol for one poller's state blob.
type Manager struct {
	st  Store
	cfg Config

	mu    sync.Mutex
	noted state.Accepted // what check last logged, so that idle ticks do not repeat it
}

// New validates cfg and returns a Manager.
func New(st Store, cfg Config) (*Manager, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Manager{st: st, cfg: cfg}, nil
}

// Config returns the configuration with defaults applied.
func (m *Manager) Config() Config { return m.cfg }

// Snapshot is what one read of the state blob saw.
type Snapshot struct {
	Doc          *state.Doc // nil: no blob yet
	ETag         string
	LastModified time.Time // service clock
	Date         time.Time // service clock at the read
}

// Read reads and strictly decodes the state blob. A missing blob is a Snapshot with a nil Doc. A
// corrupt document, another version or poller (*state.Error), or another source fingerprint
// (state.ErrFingerprintMismatch) is an error: the tick must fail and write nothing.
func (m *Manager) Read(ctx context.Context) (Snapshot, error) {
	b, err := m.st.Get(ctx, m.cfg.Blob)
	if errors.Is(err, store.ErrNotFound) {
		return Snapshot{}, nil
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("lease: read %s: %w", m.cfg.Blob, err)
	}
	doc, err := state.Decode(m.cfg.Blob, m.cfg.Poller, b.Data)
	if err != nil {
		return Snapshot{}, err
	}
	if err := m.check(doc); err != nil {
		return Snapshot{}, err
	}
	return Snapshot{Doc: doc, ETag: b.ETag, LastModified: b.LastModified, Date: b.Date}, nil
}

// check refuses a document written for another source (state.ErrFingerprintMismatch) and logs,
// once, a difference it accepts (payload columns, the fingerprint's first form).
func (m *Manager) check(doc *state.Doc) error {
	c := m.cfg
	if c.Source == nil {
		if doc.SourceFingerprint == c.Fingerprint {
			return nil
		}
		return &state.Error{Blob: c.Blob, Err: state.ErrFingerprintMismatch, Detail: fmt.Sprintf(
			"the checkpoint was taken on source %s but the poller is now configured for %s; to start over: pollerctl reset %s --to-beginning --yes",
			doc.SourceFingerprint, c.Fingerprint, c.Poller)}
	}
	accepted, err := state.CheckSource(c.Blob, doc, *c.Source)
	if accepted != "" {
		m.mu.Lock()
		if m.noted != accepted {
			m.noted = accepted
			c.Logger.Info("source definition changed", "poller", c.Poller, "change", string(accepted))
		}
		m.mu.Unlock()
	}
	return err
}

// Holder returns the owner of a lease that is live on the storage service's clock: owned, not
// released, and the read's Date before Last-Modified + ttl_seconds + margin.
func (m *Manager) Holder(s Snapshot) (owner string, live bool) {
	if s.Doc == nil {
		return "", false
	}
	return Live(s.Doc.Lease, s.LastModified, s.Date, m.cfg.Margin)
}

// Live judges a lease on the storage service's clock: it is live while it has an owner, is not
// released, and date (the read's Date) is before lastModified + ttl_seconds + margin.
func Live(l state.Lease, lastModified, date time.Time, margin time.Duration) (owner string, live bool) {
	if l.OwnerID == "" || l.Released() {
		return "", false
	}
	ttl := time.Duration(l.TTLSeconds) * time.Second
	return l.OwnerID, date.Before(lastModified.Add(ttl + margin))
}

// Result is the outcome of an acquire: Lease when won, otherwise Holder names who has it
// (possibly "" when the winner of a race is unknown).
type Result struct {
	Lease  *Lease
	Holder string
}

// Won reports whether the lease was acquired.
func (r Result) Won() bool { return r.Lease != nil }

// Acquire takes the lease if s shows it absent, expired or released. Losing to a live holder or
// to a racing contender is a Result without a Lease, not an error.
func (m *Manager) Acquire(ctx context.Context, s Snapshot) (Result, error) {
	c := m.cfg
	var (
		next state.Doc
		cond store.Condition
	)
	if s.Doc == nil {
		next = state.Doc{Version: state.Version, PollerName: c.Poller}
		cond = store.IfNotExists()
		if c.Initial != nil {
			b := *c.Initial
			now := c.Clock.Now()
			b.ID += "_" + now.UTC().Format("20060102T150405Z") // a state made again snapshots again, under a new id
			b.StartedAt = state.At(now)
			next.Backfill = &b
		}
	} else {
		if owner, live := m.Holder(s); live {
			return Result{Holder: owner}, nil
		}
		next = *s.Doc
		next.Follow = nil // a follower that died left it: this holder has not begun following
		cond = store.IfMatch(s.ETag)
	}
	// The configured source, in the fingerprint's current form (an older form accepted by Read
	// moves on here), and who writes.
	next.SourceFingerprint = c.Fingerprint
	if c.Source != nil {
		src := *c.Source
		next.Source = &src
	}
	if c.Version != "" {
		next.HandlerVersion = c.Version
	}
	current := next.Lease.FencingToken
	if current == 0 { // never acquired: a document deleted before may have handed out tokens
		t, _, err := lastToken(ctx, m.st, c.Blob)
		if err != nil {
			return Result{}, err
		}
		current = t.FencingToken
	}
	token, err := nextToken(c.Blob, current)
	if err != nil {
		return Result{}, err
	}
	sent := c.Clock.Now()
	next.Lease = state.Lease{
		OwnerID:      c.Owner,
		FencingToken: token,
		AcquiredAt:   state.At(sent),
		HeartbeatAt:  state.At(sent),
		ExpiresAt:    state.At(sent.Add(c.TTL)),
		TTLSeconds:   c.ttlSeconds(),
	}
	o, err := put(ctx, m.st, c.Blob, c.Poller, c.Rand, c.WriteTimeout, &next, cond)
	switch {
	case err != nil:
		return Result{}, err
	case o.perr == nil:
		return Result{Lease: m.newLease(next, o.etag, sent)}, nil
	// The put failed: settled by the re-read.
	case o.gerr != nil:
		return Result{}, fmt.Errorf("lease: acquire of %s unsettled (put: %v; re-read: %w)", c.Blob, o.perr, o.gerr)
	case o.derr != nil:
		return Result{}, o.derr
	case o.landed:
		c.Logger.Info("lease acquire settled as landed", "poller", c.Poller, "fencing_token", next.Lease.FencingToken, "put_error", o.perr.Error())
		return Result{Lease: m.newLease(next, o.etag, sent)}, nil
	case errors.Is(o.perr, store.ErrConflict) || o.seen.ETag != s.ETag:
		return Result{Holder: o.doc.Lease.OwnerID}, nil
	}
	return Result{}, fmt.Errorf("lease: acquire of %s did not land: %w", c.Blob, o.perr)
}

// nextToken is the one place the fencing token goes up: the token after current (0 when there
// was none), for an acquire or an operator's takeover; ErrTokenExhausted past
// state.MaxFencingToken.
func nextToken(blob string, current int64) (int64, error) {
	if current >= state.MaxFencingToken {
		return 0, fmt.Errorf("lease: %s: %w at %d: run this poller under a new name", blob, ErrTokenExhausted, current)
	}
	return current + 1, nil
}

// lastToken reads the tombstone that a deleted document of blob left (state.TombstoneBlob): the
// last fencing token handed out under the poller's name, which a new document starts above.
// None is the zero Tombstone; one that does not decode is an error (nothing is written then).
func lastToken(ctx context.Context, st Store, blob string) (state.Tombstone, *store.Blob, error) {
	name := blobpath.TombstoneOf(blob)
	b, err := st.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return state.Tombstone{}, nil, nil
	}
	if err != nil {
		return state.Tombstone{}, nil, fmt.Errorf("lease: read %s: %w", name, err)
	}
	t, err := state.DecodeTombstone(name, b.Data)
	if err != nil {
		return state.Tombstone{}, nil, fmt.Errorf("lease: %w: remove it only if no sink compares fencing tokens", err)
	}
	return t, &b, nil
}

func (m *Manager) newLease(doc state.Doc, etag string, sent time.Time) *Lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &Lease{m: m, owner: doc.Lease.OwnerID, token: doc.Lease.FencingToken, doc: doc, etag: etag, lastSent: sent, ctx: ctx, cancel: cancel}
	l.trustedUntil = l.trustEnd(sent)
	return l
}

// Lease is a held lease. Its methods are safe for concurrent use; every write is serialised.
type Lease struct {
	m     *Manager
	owner string // fixed for the lease's life
	token int64  // fixed for the lease's life

	writeMu sync.Mutex   // one writer: heartbeats, commits and the release
	history []state.Tick // queued for the next write (under writeMu)
	// backfill, when backfillSet, is the backfill's progress queued for the next write (nil: it
	// ended); under writeMu.
	backfill    *state.Backfill
	backfillSet bool
	// follow, when followSet, is a following tick's progress queued for the next write (a
	// release clears it whatever is queued).
	follow    *state.Follow
	followSet bool
	doc       state.Doc // as we last wrote it
	etag      string    // of our last write
	lastSent  time.Time // clock reading before our last successful write was sent

	mu           sync.Mutex
	trustedUntil time.Time
	err          error // why the lease ended; nil while held

	ctx       context.Context
	cancel    context.CancelCauseFunc
	keepalive sync.Once
}

func (l *Lease) trustEnd(sent time.Time) time.Time {
	return sent.Add(l.m.cfg.TTL - l.m.cfg.Margin)
}

// Token returns the fencing token.
func (l *Lease) Token() int64 { return l.token }

// Owner returns the owner id.
func (l *Lease) Owner() string { return l.owner }

// Context is cancelled the moment the lease is lost, its trust window passes, or it is released.
// context.Cause tells which. Run the poller's handler under it.
func (l *Lease) Context() context.Context { return l.ctx }

// Checkpoint returns the checkpoint as last written.
func (l *Lease) Checkpoint() state.Checkpoint {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	return l.doc.Checkpoint
}

// Failure returns the failed attempts recorded at the current checkpoint, or nil.
func (l *Lease) Failure() *state.Failure {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	return l.doc.Failure
}

// TrustedUntil returns the holder's clock reading after which it no longer trusts the lease.
func (l *Lease) TrustedUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.trustedUntil
}

// Trusted reports whether the lease is held and its trust window has not passed.
func (l *Lease) Trusted() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err == nil && l.m.cfg.Clock.Now().Before(l.trustedUntil)
}

// Err returns nil while the lease is held, else why it ended (wrapping ErrLost or ErrReleased).
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// end records why the lease ended (the first reason wins), cancels its context and returns the
// reason.
func (l *Lease) end(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
		l.cancel(err)
		if errors.Is(err, ErrLost) {
			c := l.m.cfg
			c.Logger.Warn("lease lost", "poller", c.Poller, "owner", l.owner, "fencing_token", l.token, "reason", err.Error())
		}
	}
	return l.err
}

func lostf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrLost}, args...)...)
}

// Heartbeat extends the lease by one write.
func (l *Lease) Heartbeat(ctx context.Context) error {
	return l.write(ctx, "heartbeat", nil, false)
}

// Commit advances the checkpoint to cp, clears any recorded failure, and extends the lease, in
// one write. Its UpdatedAt is set to now. An error wrapping ErrLost means the batch must not count
// as committed.
func (l *Lease) Commit(ctx context.Context, cp state.Checkpoint) error {
	return l.write(ctx, "commit", commitTo(cp), false)
}

// CommitAndRelease commits cp and releases the lease in the same write. Whatever the outcome,
// the lease is over for this process afterwards.
func (l *Lease) CommitAndRelease(ctx context.Context, cp state.Checkpoint) error {
	return l.write(ctx, "commit and release", commitTo(cp), true)
}

// Release gives the lease up without moving the checkpoint. Whatever the outcome, the lease is
// over for this process afterwards; a release that fails leaves the lease to expire.
func (l *Lease) Release(ctx context.Context) error {
	return l.write(ctx, "release", nil, true)
}

// AddHistory queues an entry for the document's history (state.Doc.History); the lease's next
// successful write carries it.
func (l *Lease) AddHistory(t state.Tick) {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.history = append(l.history, t)
}

// SetBackfill queues the backfill's progress (nil: it ended, or was cancelled) for the lease's
// next successful write, whatever that write is, as AddHistory does: call it once what it
// records has been delivered.
func (l *Lease) SetBackfill(b *state.Backfill) {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if b != nil {
		c := *b
		b = &c
	}
	l.backfill, l.backfillSet = b, true
}

// SetFollow queues a following tick's progress for the lease's next successful write, as
// SetBackfill does. A release clears it from the document.
func (l *Lease) SetFollow(f state.Follow) {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.follow, l.followSet = &f, true
}

// Backfill returns the backfill as last written, or queued since (nil: none runs).
func (l *Lease) Backfill() *state.Backfill {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	b := l.doc.Backfill
	if l.backfillSet {
		b = l.backfill
	}
	if b == nil {
		return nil
	}
	c := *b
	return &c
}

// FailAndRelease records a failed attempt at the batch after the checkpoint and releases the
// lease, in one write. cp, when not nil, first commits the progress made before the failure.
// The attempt count continues the document's when the failure is at the same checkpoint.
// keys names the batch's rows (first..last key).
func (l *Lease) FailAndRelease(ctx context.Context, cp *state.Checkpoint, batchID, keys string, cause error) error {
	return l.write(ctx, "record failure", func(d *state.Doc, now time.Time) {
		if cp != nil {
			commitTo(*cp)(d, now)
		}
		f := state.Failure{Attempts: 1, BatchID: batchID, FirstFailureAt: state.At(now), LastFailureAt: state.At(now), LastError: cause.Error(), Keys: keys}
		if prev := d.Failure; prev != nil {
			f.Attempts = prev.Attempts + 1
			f.FirstFailureAt = prev.FirstFailureAt
			f.Quarantine = prev.Quarantine
		}
		if len(f.LastError) > 2000 {
			f.LastError = f.LastError[:2000] + "..."
		}
		d.Failure = &f
	}, true)
}

// commitTo is the change a commit makes: the new checkpoint, stamped, and no failure.
func commitTo(cp state.Checkpoint) func(d *state.Doc, now time.Time) {
	return func(d *state.Doc, now time.Time) {
		d.Checkpoint = cp
		d.Checkpoint.UpdatedAt = state.At(now)
		d.Failure = nil
	}
}

// write is the one writer: every change to the blob by this holder goes through here.
func (l *Lease) write(ctx context.Context, what string, change func(d *state.Doc, now time.Time), release bool) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	err := l.writeLocked(ctx, what, change, release)
	if release {
		// Over for this process whatever the outcome; a release that did not land expires.
		if err == nil {
			l.end(fmt.Errorf("%w by %s", ErrReleased, what))
		} else {
			l.end(err)
		}
	}
	return err
}

func (l *Lease) writeLocked(ctx context.Context, what string, change func(d *state.Doc, now time.Time), release bool) error {
	c := l.m.cfg
	for attempt := 1; ; attempt++ {
		if err := l.Err(); err != nil {
			return err
		}
		sent := c.Clock.Now()
		if until := l.TrustedUntil(); !sent.Before(until) {
			return l.end(lostf("%s refused: the trust window ended %v ago", what, sent.Sub(until)))
		}
		next := l.doc
		if change != nil {
			change(&next, sent)
		}
		for _, h := range l.history {
			next.AddHistory(h)
		}
		if l.backfillSet {
			next.Backfill = l.backfill
		}
		if l.followSet {
			next.Follow = l.follow
		}
		if release {
			next.Follow = nil
		}
		next.Lease.HeartbeatAt = state.At(sent)
		next.Lease.ExpiresAt = state.At(sent.Add(c.TTL))
		if release {
			next.Lease.ReleasedAt = state.At(sent)
			next.Lease.ExpiresAt = state.At(sent)
		}
		o, err := put(ctx, l.m.st, c.Blob, c.Poller, c.Rand, c.WriteTimeout, &next, store.IfMatch(l.etag))
		if err != nil {
			return err
		}
		if o.perr == nil {
			l.adopt(next, o.etag, sent)
			l.history, l.backfillSet, l.followSet = nil, false, false
			return nil
		}

		// The put failed: settled by the re-read.
		perr, doc := o.perr, o.doc
		switch {
		case errors.Is(o.gerr, store.ErrNotFound):
			return l.end(lostf("%s: the state blob %s was deleted", what, c.Blob))
		case o.gerr != nil:
			return l.end(lostf("%s unsettled (put: %v; re-read: %v)", what, perr, o.gerr))
		case o.derr != nil:
			return l.end(lostf("%s: the state blob no longer decodes: %v", what, o.derr))
		case o.landed:
			c.Logger.Info("lease write settled as landed", "poller", c.Poller, "write", what, "put_error", perr.Error())
			l.adopt(next, o.etag, sent)
			l.history, l.backfillSet, l.followSet = nil, false, false
			return nil
		case release && doc.Lease.OwnerID != "" && doc.Lease.FencingToken > l.token && c.Clock.Now().Before(l.TrustedUntil()):
			// A newer holder, seen while our lease is still trusted: nobody can take a held
			// lease before its trust window ends, so our release landed first and the lease,
			// free at once, was taken since. Our commit stands.
			c.Logger.Info("lease write settled as landed: released, then taken by a newer holder", "poller", c.Poller, "write", what,
				"holder", doc.Lease.OwnerID, "fencing_token", doc.Lease.FencingToken, "put_error", perr.Error())
			l.adopt(next, "", sent)
			l.history, l.backfillSet, l.followSet = nil, false, false
			return nil
		case doc.Lease.OwnerID != l.owner || doc.Lease.FencingToken != l.token:
			return l.end(lostf("%s refused: %s now holds fencing token %d (ours is %d)", what, doc.Lease.OwnerID, doc.Lease.FencingToken, l.token))
		case doc.WriteID == l.doc.WriteID && o.seen.ETag == l.etag:
			if attempt < 2 {
				continue // it did not land and nothing changed: try once more
			}
			return fmt.Errorf("lease: %s of %s did not land: %w", what, c.Blob, perr)
		default:
			return l.end(lostf("%s: the state blob was rewritten under our owner and token", what))
		}
	}
}

// adopt records a write that landed. The trust window runs from when it was sent.
func (l *Lease) adopt(doc state.Doc, etag string, sent time.Time) {
	l.doc, l.etag, l.lastSent = doc, etag, sent
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.trustEnd(sent); t.After(l.trustedUntil) {
		l.trustedUntil = t
	}
}

// KeepAlive starts, once, the heartbeat goroutine (a write every HeartbeatInterval unless a
// commit wrote more recently) and the watchdog (which ends the lease the moment its trust window
// passes). Both stop when the lease ends.
func (l *Lease) KeepAlive() {
	l.keepalive.Do(func() {
		go l.heartbeats()
		go l.watchdog()
	})
}

func (l *Lease) heartbeats() {
	c := l.m.cfg
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-c.Clock.After(c.HeartbeatInterval):
		}
		l.writeMu.Lock()
		due := c.Clock.Now().Sub(l.lastSent) >= c.HeartbeatInterval/2
		l.writeMu.Unlock()
		if !due {
			continue
		}
		err := l.Heartbeat(context.Background())
		switch {
		case err == nil:
		case errors.Is(err, ErrLost), errors.Is(err, ErrReleased):
			return
		default:
			c.Logger.Warn("heartbeat failed; will retry", "poller", c.Poller, "error", err.Error())
		}
	}
}

func (l *Lease) watchdog() {
	c := l.m.cfg
	for {
		until := l.TrustedUntil()
		now := c.Clock.Now()
		if !now.Before(until) {
			l.end(lostf("no successful heartbeat within the trust window (it ended at %s)", until.UTC().Format(time.RFC3339Nano)))
			return
		}
		select {
		case <-l.ctx.Done():
			return
		case <-c.Clock.After(until.Sub(now)):
		}
	}
}
