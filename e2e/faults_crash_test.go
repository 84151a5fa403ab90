package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/faultpoint"
)

// Crashes and pauses at fault points: the handler built with -tags faultpoints asks a controller
// at each named point of a tick whether to go on, and the controller kills the process there or
// freezes it (SIGSTOP) for a while. TestFaultPointsOnlyInTaggedBuilds proves the production build
// never asks it and the faultpoints build reaches every point.

// buildFaultBinary builds the handler with -tags faultpoints, once.
func buildFaultBinary(t *testing.T) string {
	return buildOnce(t, "handler-faultpoints", "-tags", "faultpoints", "../cmd/handler")
}

const faultpointEnv = "PSEUDOTRIGGER_FAULTPOINTS"

// controller answers the fault points of every process of a run.
type controller struct {
	srv *httptest.Server

	mu     sync.Mutex
	hits   map[faultpoint.Point]int
	events []string
	plan   []planned
}

type planned struct {
	point  faultpoint.Point
	nth    int
	action faultpoint.Action
	freeze time.Duration
	done   bool
}

func newController(t *testing.T) *controller {
	c := &controller{hits: map[faultpoint.Point]int{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		point, pid, _ := strings.Cut(string(b), " ")
		action, freeze := c.decide(faultpoint.Point(point))
		if n, err := strconv.Atoi(pid); err == nil && freeze > 0 {
			if err := syscall.Kill(n, syscall.SIGSTOP); err != nil {
				t.Errorf("SIGSTOP %d: %v", n, err)
			}
			<-time.After(freeze) // the freeze is the fault itself
			if err := syscall.Kill(n, syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT %d: %v", n, err)
			}
		}
		_, _ = io.WriteString(w, string(action))
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *controller) killAt(p faultpoint.Point, nth int) {
	c.plan = append(c.plan, planned{point: p, nth: nth, action: faultpoint.Kill})
}

// freezeAt stops the process (SIGSTOP) at the nth hit of p for d, then lets it go on.
func (c *controller) freezeAt(p faultpoint.Point, nth int, d time.Duration) {
	c.plan = append(c.plan, planned{point: p, nth: nth, action: faultpoint.Continue, freeze: d})
}

func (c *controller) decide(p faultpoint.Point) (faultpoint.Action, time.Duration) {
	// The returned duration is how long to freeze the process first.
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hits[p]++
	for i := range c.plan {
		pl := &c.plan[i]
		if !pl.done && pl.point == p && pl.nth == c.hits[p] {
			pl.done = true
			c.events = append(c.events, fmt.Sprintf("%s #%d: %s, frozen %v", p, pl.nth, pl.action, pl.freeze))
			return pl.action, pl.freeze
		}
	}
	return faultpoint.Continue, 0
}

func (c *controller) fired() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

func (c *controller) log() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

func (c *controller) hitCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.hits {
		n += v
	}
	return n
}

// TestFaultPointsOnlyInTaggedBuilds: the production build never calls a fault point controller;
// the faultpoints build calls it at every point of a committed tick.
func TestFaultPointsOnlyInTaggedBuilds(t *testing.T) {
	bin := buildFaultBinary(t)
	w := newWorld(t)
	w.insert(30)
	ctl := newController(t)
	env := w.env("ORDERS_BATCH_SIZE=10", faultpointEnv+"="+ctl.srv.URL)
	prod := start(t, env)
	drain(t, prod, time.Minute)
	if n := ctl.hitCount(); n != 0 {
		t.Fatalf("the production build called the fault point controller %d times", n)
	}
	w.insert(30)
	tagged := startWith(t, bin, env)
	drain(t, tagged, time.Minute)
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	for _, p := range faultpoint.Points {
		if ctl.hits[p] == 0 {
			t.Errorf("the faultpoints build never reached %s (hits: %v)", p, ctl.hits)
		}
	}
}
