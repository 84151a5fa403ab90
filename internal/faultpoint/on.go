//go:build faultpoints

package faultpoint

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Enabled tells whether fault points are compiled in.
const Enabled = true

// Env names the controller's URL; EnvClockOffset the wall-clock skew.
const (
	Env            = "PSEUDOTRIGGER_FAULTPOINTS"
	EnvClockOffset = "PSEUDOTRIGGER_CLOCK_OFFSET"
)

var hook atomic.Pointer[func(Point)]

func init() {
	if url := os.Getenv(Env); url != "" {
		Set(remote(url))
	}
}

// Hit runs the hook set for the point, if any.
func Hit(p Point) {
	if h := hook.Load(); h != nil {
		(*h)(p)
	}
}

// Set installs f as the hook run at every point (nil removes it) and returns a function that
// restores the previous hook.
func Set(f func(Point)) (restore func()) {
	var prev *func(Point)
	if f == nil {
		prev = hook.Swap(nil)
	} else {
		prev = hook.Swap(&f)
	}
	return func() { hook.Store(prev) }
}

// ClockOffset parses PSEUDOTRIGGER_CLOCK_OFFSET.
func ClockOffset() (time.Duration, error) {
	v := os.Getenv(EnvClockOffset)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration: %w", EnvClockOffset, v, err)
	}
	return d, nil
}

// remote asks the controller at url what to do at each point. A controller that cannot be
// reached, or an answer it does not understand, kills the process: a fault test that lost its
// controller must not go on as if nothing happened.
func remote(url string) func(Point) {
	client := &http.Client{} // no time-out: the controller holds the reply to pause us
	return func(p Point) {
		body := fmt.Sprintf("%s %d", p, os.Getpid())
		resp, err := client.Post(url, "text/plain", strings.NewReader(body))
		if err != nil {
			die(fmt.Sprintf("fault point %s: controller %s: %v", p, url, err))
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
		resp.Body.Close()
		switch Action(strings.TrimSpace(string(b))) {
		case Continue:
		case Kill:
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		case Exit:
			os.Exit(3)
		default:
			die(fmt.Sprintf("fault point %s: controller answered %d %q", p, resp.StatusCode, b))
		}
	}
}

func die(msg string) {
	fmt.Fprintln(os.Stdout, `{"level":"ERROR","msg":`+fmt.Sprintf("%q", msg)+`}`)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}
