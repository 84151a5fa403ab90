package logbuf

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is an output that records each write call.
type recorder struct {
	mu     sync.Mutex
	writes []string
	err    error
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return 0, r.err
	}
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func (r *recorder) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

func TestLinesAreWrittenTogetherWithinDelay(t *testing.T) {
	out := &recorder{}
	w := New(out)
	t0 := time.Now()
	for i := range 100 {
		if _, err := w.Write([]byte(strings.Repeat("x", i%7) + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	if got := out.calls(); len(got) != 0 {
		t.Fatalf("written at once: %d calls", len(got))
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(out.calls()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("nothing written within 5 s")
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
	if took := time.Since(t0); took < Delay {
		t.Errorf("written after %v, before the delay %v", took, Delay)
	}
	got := out.calls()
	if len(got) != 1 || strings.Count(got[0], "\n") != 100 {
		t.Fatalf("want the 100 lines in one write call, got %d calls", len(got))
	}
}

func TestWarningFlushesEverythingBeforeItInOrder(t *testing.T) {
	out := &recorder{}
	w := New(out)
	log := slog.New(Handler(slog.NewTextHandler(w, nil), w)).With("poller", "orders")
	log.Info("first")
	log.Info("second")
	if n := len(out.calls()); n != 0 {
		t.Fatalf("info lines written at once: %d calls", n)
	}
	log.Warn("third")
	got := strings.Join(out.calls(), "")
	i1, i2, i3 := strings.Index(got, "msg=first"), strings.Index(got, "msg=second"), strings.Index(got, "msg=third")
	if i1 < 0 || i2 < i1 || i3 < i2 || !strings.Contains(got, "poller=orders") {
		t.Fatalf("after a warning, want first, second, third written in order with the logger's attributes, got %q", got)
	}
	log.WithGroup("g").Error("fourth")
	if got := strings.Join(out.calls(), ""); !strings.Contains(got, "msg=fourth") {
		t.Fatalf("an error through a group's handler was not written at once: %q", got)
	}
}

func TestFullBufferIsWrittenAtOnce(t *testing.T) {
	out := &recorder{}
	w := New(out)
	line := bytes.Repeat([]byte("y"), 1023)
	line = append(line, '\n')
	for range limit / len(line) {
		if _, err := w.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	got := out.calls()
	if len(got) != 1 || len(got[0]) != limit {
		t.Fatalf("want one write of %d bytes once %d are held, got %d calls", limit, limit, len(got))
	}
}

func TestWriteErrorIsReturned(t *testing.T) {
	broken := errors.New("stdout closed")
	out := &recorder{err: broken}
	w := New(out)
	if _, err := w.Write([]byte("a\n")); err != nil {
		t.Fatalf("the first write is held: %v", err)
	}
	if err := w.Flush(); !errors.Is(err, broken) {
		t.Fatalf("Flush: %v, want %v", err, broken)
	}
	if _, err := w.Write([]byte("b\n")); !errors.Is(err, broken) {
		t.Fatalf("a write after a failed one: %v, want %v", err, broken)
	}
}
