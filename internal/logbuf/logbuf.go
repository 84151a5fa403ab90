// Package logbuf holds the handler's log output: lines written to stdout in batches rather than
// one write call each, and the slog handler that writes warnings and errors at once.
//
// A catch-up logs two lines per batch (the tick's and, often, the poller's own), and a write to
// stdout is a system call each: about a tenth of the handler's CPU catching up on a million rows
// (scripts/bench.sh e2e). Lines are held at most Delay before they are written; a warning or an
// error is written at once with every line before it, so a failure's line is never held, and
// the order of lines is kept.
package logbuf

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Delay is how long a line is held at most before it is written.
const Delay = 20 * time.Millisecond

// limit is the bytes held that make a write at once.
const limit = 64 << 10

// A Writer holds what is written to it and writes it to its output in one call at most Delay
// later, when it holds limit bytes, or on Flush. It is safe for concurrent use.
type Writer struct {
	out io.Writer

	mu      sync.Mutex
	buf     []byte
	spare   []byte
	pending bool // a flush is scheduled
	err     error
}

// New returns a Writer to out.
func New(out io.Writer) *Writer { return &Writer{out: out} }

// Write holds p (a copy) for a later write. It returns the error of an earlier write to the
// output, if one failed.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.err != nil {
		defer w.mu.Unlock()
		return 0, w.err
	}
	w.buf = append(w.buf, p...)
	full := len(w.buf) >= limit
	schedule := !full && !w.pending
	if schedule {
		w.pending = true
	}
	w.mu.Unlock()
	if full {
		return len(p), w.Flush()
	}
	if schedule {
		time.AfterFunc(Delay, func() { _ = w.Flush() })
	}
	return len(p), nil
}

// Flush writes what is held, in one call to the output.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = false
	if len(w.buf) == 0 || w.err != nil {
		return w.err
	}
	// Written under the lock: a later line never overtakes an earlier one.
	if _, err := w.out.Write(w.buf); err != nil {
		w.err = err
	}
	w.buf, w.spare = w.spare[:0], w.buf
	return w.err
}

// Handler returns a slog handler that writes records through h and flushes w after each one at
// Warn or above (h writes to w).
func Handler(h slog.Handler, w *Writer) slog.Handler { return &flushing{h, w} }

type flushing struct {
	slog.Handler
	w *Writer
}

func (f *flushing) Handle(ctx context.Context, r slog.Record) error {
	err := f.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		if ferr := f.w.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

func (f *flushing) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &flushing{f.Handler.WithAttrs(attrs), f.w}
}

func (f *flushing) WithGroup(name string) slog.Handler {
	return &flushing{f.Handler.WithGroup(name), f.w}
}
