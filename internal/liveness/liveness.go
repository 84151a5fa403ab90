// Package liveness keeps each poller's liveness mark: a small blob, liveness/{app}/{poller}.json
// in the state container, that says when the poller's timer last ran a tick and how that tick
// ended. It covers the ticks that write nothing to the state document too (idle ticks, and ticks
// that fail before they take the lease: a database that cannot be reached, a cursor that no
// longer fits, a fingerprint mismatch, bad settings). Ticks never read it; the status does.
//
// # Cost
//
// A Marker writes a poller's mark when a tick fails (every time, so that the status shows the
// last attempt and since when they fail), and otherwise only when the news changes or has grown
// old: when this process has not written it yet, when a tick ends well after a failed one, or
// when Interval has passed since the last signal. A tick that wrote the state document (it took
// the lease) is a signal too and writes no mark. So an idle poller writes one mark per
// {P}_LIVENESS_INTERVAL (default 5m: 288 writes a day, whatever its schedule) plus one per
// process start, and an idle tick otherwise stays at one blob read and no write; a failing
// poller writes one mark per tick while it fails.
//
// # Safety
//
// The mark is a blob of its own: it never touches the state document, so it plays no part in the
// lease protocol (package lease). Its writes are conditional like every other (If-None-Match: *
// to create, If-Match on the ETag this process last wrote or read); a lost race is settled by
// reading the blob and writing again once, and a mark that still cannot be written is logged and
// dropped: it is a signal, never a reason to fail a tick.
package liveness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// DefaultInterval is {P}_LIVENESS_INTERVAL's default.
const DefaultInterval = 5 * time.Minute

// maxError bounds the error text a mark keeps.
const maxError = 2000

// Mark is the liveness blob's document.
type Mark struct {
	Version int    `json:"version"` // 1
	Poller  string `json:"poller"`
	// At is the handler's clock when the tick ended (for people; the status measures age on the
	// storage service's clock, from the blob's Last-Modified).
	At state.Time `json:"at"`
	// Outcome is the tick's: idle, lease_held, committed, failed, blocked.
	Outcome string `json:"outcome"`
	// Error is the failed tick's error ("" otherwise), as the tick returned it.
	Error string `json:"error,omitempty"`
	// FailingSince is, for a failed tick, when the poller's ticks began to fail: the first failed
	// tick since the last that did not fail (the handler's clock); absent otherwise.
	FailingSince *state.Time `json:"failing_since,omitempty"`
	// RowsWaiting and LagSeconds are the tick's measure of the backlog (-1 and absent: not
	// measured).
	RowsWaiting int64    `json:"rows_waiting"`
	LagSeconds  *float64 `json:"lag_seconds,omitempty"`
	// IntervalSeconds is {P}_LIVENESS_INTERVAL: a running poller's mark or state document is never
	// older than this plus a schedule period.
	IntervalSeconds int64 `json:"interval_seconds"`
	// Owner is the process that wrote it (its lease owner id).
	Owner string `json:"owner,omitempty"`
	// CleanupError is why the tick's cleanup of delivered rows failed (tick.Summary's), which
	// fails no tick; absent when it did not fail.
	CleanupError string `json:"cleanup_error,omitempty"`
}

// Failed reports whether the mark records a failed tick.
func (m Mark) Failed() bool { return m.Error != "" }

// Decode reads a mark strictly.
func Decode(blob string, data []byte) (*Mark, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Mark
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("liveness mark %s: %w", blob, err)
	}
	if m.Version != 1 {
		return nil, fmt.Errorf("liveness mark %s: version %d, this build reads version 1", blob, m.Version)
	}
	return &m, nil
}

// Read returns a poller's mark and the blob it came from (its Last-Modified and the read's Date
// are on the service's clock); a missing mark is (nil, blob, nil).
func Read(ctx context.Context, st interface {
	Get(ctx context.Context, name string) (store.Blob, error)
}, app, pollerName string) (*Mark, store.Blob, error) {
	name := blobpath.Liveness(app, pollerName)
	b, err := st.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, b, nil
	}
	if err != nil {
		return nil, b, fmt.Errorf("reading %s: %w", name, err)
	}
	m, err := Decode(name, b.Data)
	return m, b, err
}

// Tick is how one tick ended, as the Marker sees it.
type Tick struct {
	Poller      string
	Outcome     string
	Err         error // nil unless the tick failed
	RowsWaiting int64
	LagSeconds  *float64
	// WroteState: the tick wrote the state document (it took the lease), which is a liveness
	// signal of its own, so no mark is needed for it.
	WroteState bool
	// Interval is the poller's {P}_LIVENESS_INTERVAL (DefaultInterval when 0).
	Interval time.Duration
	// CleanupErr is why the tick's cleanup of delivered rows failed ("": it did not). A mark is
	// written for every tick whose cleanup fails, and for the first after them whose does not.
	CleanupErr string
}

// Marker writes the liveness marks of one process's pollers. It is safe for concurrent use.
type Marker struct {
	Store  store.Store
	App    string
	Owner  string
	Clock  clock.Clock  // default clock.System
	Logger *slog.Logger // default: discard

	mu   sync.Mutex
	last map[string]*signal // per poller: the last signal this process gave
}

type signal struct {
	at     time.Time // this process's clock
	failed bool
	since  time.Time // failed: when the ticks began to fail
	etag   string    // of the mark as this process last wrote or read it ("" unknown)
	// cleanupFailed: the tick's cleanup failed.
	cleanupFailed bool
}

// Record notes how a tick ended and writes the poller's mark when it is due. It never fails the
// caller: a mark that cannot be written is logged. It reports whether it wrote.
func (m *Marker) Record(ctx context.Context, t Tick) bool {
	clk := m.Clock
	if clk == nil {
		clk = clock.System{}
	}
	now := clk.Now()
	interval := t.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	errText := ""
	if t.Err != nil {
		errText = clip(t.Err.Error())
	}
	m.mu.Lock()
	if m.last == nil {
		m.last = map[string]*signal{}
	}
	prev := m.last[t.Poller]
	next := &signal{at: now, failed: t.Err != nil, cleanupFailed: t.CleanupErr != ""}
	if prev != nil {
		next.etag = prev.etag
	}
	due := !t.WroteState && (prev == nil || next.failed || prev.failed || now.Sub(prev.at) >= interval) ||
		next.cleanupFailed || prev != nil && prev.cleanupFailed
	if !due {
		if t.WroteState {
			m.last[t.Poller] = next
		}
		m.mu.Unlock()
		return false
	}
	m.mu.Unlock()

	mark := Mark{Version: 1, Poller: t.Poller, At: state.At(now), Outcome: t.Outcome, Error: errText, RowsWaiting: t.RowsWaiting,
		LagSeconds: t.LagSeconds, IntervalSeconds: int64(interval / time.Second), Owner: m.Owner, CleanupError: clip(t.CleanupErr)}
	if next.failed {
		switch {
		case prev != nil && prev.failed:
			next.since = prev.since
		case prev == nil: // this process's first tick of the poller: the ticks may have failed before it
			next.since, next.etag = m.failingSince(ctx, t.Poller, interval)
		}
		if next.since.IsZero() {
			next.since = now
		}
		since := state.At(next.since)
		mark.FailingSince = &since
	}
	etag, err := m.write(context.WithoutCancel(ctx), mark, next.etag)
	if err != nil {
		log := m.Logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		log.Warn("liveness mark not written", "poller", t.Poller, "blob", blobpath.Liveness(m.App, t.Poller), "error", err.Error())
		return false
	}
	next.etag = etag
	m.mu.Lock()
	m.last[t.Poller] = next
	m.mu.Unlock()
	return true
}

// clip bounds an error's text to maxError.
func clip(s string) string {
	if len(s) > maxError {
		return s[:maxError] + "..."
	}
	return s
}

// failingSince reads the poller's mark as another process (or this one before a restart) left
// it: when it records a failed tick written within interval (ticks that keep failing rewrite it
// every time), the time they began to fail; zero otherwise. It returns the mark's ETag too ("":
// none), for the write that follows.
func (m *Marker) failingSince(ctx context.Context, pollerName string, interval time.Duration) (time.Time, string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	mark, b, err := Read(ctx, m.Store, m.App, pollerName)
	if err != nil || mark == nil {
		return time.Time{}, b.ETag
	}
	if !mark.Failed() || mark.FailingSince == nil || b.Date.IsZero() || b.Date.Sub(b.LastModified) > interval {
		return time.Time{}, b.ETag
	}
	return mark.FailingSince.Time, b.ETag
}

// writeTimeout bounds one mark's write and its settling read.
const writeTimeout = 5 * time.Second

// write puts the mark conditionally: If-Match on etag when known, else If-None-Match: *; a
// condition not met re-reads the blob's ETag and tries once more.
func (m *Marker) write(ctx context.Context, mark Mark, etag string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	data, err := json.Marshal(mark)
	if err != nil {
		return "", err
	}
	name := blobpath.Liveness(m.App, mark.Poller)
	for attempt := 1; ; attempt++ {
		cond := store.IfNotExists()
		if etag != "" {
			cond = store.IfMatch(etag)
		}
		w, err := m.Store.Put(ctx, name, data, cond)
		if err == nil {
			return w.ETag, nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt == 2 {
			return "", err
		}
		b, gerr := m.Store.Get(ctx, name)
		switch {
		case errors.Is(gerr, store.ErrNotFound):
			etag = ""
		case gerr != nil:
			return "", gerr
		default:
			etag = b.ETag
		}
	}
}
