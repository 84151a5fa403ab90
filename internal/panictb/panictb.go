// Package panictb is a testing.TB for Example functions, which get no *testing.T: test helpers
// such as pollertest.New take one. A failure panics with its message (the example fails and
// says why), a skip panics too (an example that cannot run must not pass silently), TempDir
// and Cleanup work, and Close runs the cleanups:
//
//	t := panictb.New() // in a test, pass its own *testing.T instead
//	defer t.Close()
//	h := pollertest.New(t, p)
//
// River's examples do the same (rivershared/util/testutil.PanicTB).
package panictb

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
)

// TB is a testing.TB for one Example.
type TB struct {
	testing.TB // nil: only for testing.TB's unexported method; every method is TB's own

	ctx      context.Context
	cancel   context.CancelFunc
	cleanups []func()
	dirs     []string
	skipped  bool
}

// New returns a TB; defer its Close.
func New() *TB {
	ctx, cancel := context.WithCancel(context.Background())
	return &TB{ctx: ctx, cancel: cancel}
}

// Close runs the cleanups in the reverse order of their registration, cancels Context and
// removes the directories TempDir made.
func (t *TB) Close() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	t.cleanups = nil
	t.cancel()
	for _, d := range t.dirs {
		_ = os.RemoveAll(d)
	}
	t.dirs = nil
}

// Cleanup registers f for Close.
func (t *TB) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }

// TempDir returns a new directory, removed by Close.
func (t *TB) TempDir() string {
	d, err := os.MkdirTemp("", "example")
	if err != nil {
		panic("panictb: TempDir: " + err.Error())
	}
	t.dirs = append(t.dirs, d)
	return d
}

// ArtifactDir is TempDir: an example keeps no artifacts.
func (t *TB) ArtifactDir() string { return t.TempDir() }

// Context is cancelled by Close, before the directories are removed.
func (t *TB) Context() context.Context { return t.ctx }

// Error, Errorf, Fail, FailNow, Fatal and Fatalf panic: an example has no way to fail and go on.
func (t *TB) Error(args ...any) { panic(fmt.Sprint(args...)) }

// Errorf panics with the formatted message.
func (t *TB) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// Fail panics.
func (t *TB) Fail() { panic("Fail called") }

// FailNow panics.
func (t *TB) FailNow() { panic("FailNow called") }

// Failed is false: a failure never returns.
func (t *TB) Failed() bool { return false }

// Fatal panics with the message.
func (t *TB) Fatal(args ...any) { panic(fmt.Sprint(args...)) }

// Fatalf panics with the formatted message.
func (t *TB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// Skip, Skipf and SkipNow panic: an example that cannot run fails rather than passes.
func (t *TB) Skip(args ...any) { t.skipped = true; panic("skipped: " + fmt.Sprint(args...)) }

// Skipf panics with the formatted message.
func (t *TB) Skipf(format string, args ...any) {
	t.skipped = true
	panic("skipped: " + fmt.Sprintf(format, args...))
}

// SkipNow panics.
func (t *TB) SkipNow() { t.skipped = true; panic("skipped") }

// Skipped reports whether a skip was attempted.
func (t *TB) Skipped() bool { return t.skipped }

// Helper does nothing: a panic's stack shows the caller.
func (t *TB) Helper() {}

// Log and Logf write to standard error, which an example's output does not include.
func (t *TB) Log(args ...any) { fmt.Fprintln(os.Stderr, args...) }

// Logf writes the formatted message and a newline to standard error.
func (t *TB) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// Output is standard error.
func (t *TB) Output() io.Writer { return os.Stderr }

// Name is "Example".
func (t *TB) Name() string { return "Example" }

// Attr does nothing.
func (t *TB) Attr(key, value string) {}

// Setenv and Chdir panic: they change the whole process, which an example must not.
func (t *TB) Setenv(key, value string) { panic("panictb: Setenv " + key + ": not in an example") }

// Chdir panics.
func (t *TB) Chdir(dir string) { panic("panictb: Chdir " + dir + ": not in an example") }
