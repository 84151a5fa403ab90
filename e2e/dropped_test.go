package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/faultpoint"
)

// TestDroppedInvocationFinishesTheBatch: the host drops the invocation (its shutdown, a Ctrl-C
// of dev.sh) while a batch is being handed over. The handler process lives on: the tick finishes
// the batch in hand, commits it and releases the lease, so the next tick is not lease_held and
// the rows are not delivered twice. Before the fix the request's cancellation cut the commit and
// the release short ("record failure unsettled (put: context canceled)") and the lease stayed
// live for its TTL.
func TestDroppedInvocationFinishesTheBatch(t *testing.T) {
	w := newWorld(t)
	w.insert(40)

	// A controller that holds the first in_handle until the test has dropped the request.
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ctl := newHoldController(t, faultpoint.InHandle, func() { once.Do(func() { close(reached) }) }, release)
	p := startWith(t, buildFaultBinary(t), w.env("ORDERS_BATCH_SIZE=10", faultpointEnv+"="+ctl))

	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url("/orders"), strings.NewReader(hostBody))
	if err != nil {
		t.Fatal(err)
	}
	dropped := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		dropped <- err
	}()
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the tick never reached in_handle")
	}
	cancel() // the host drops the connection mid-batch
	select {
	case err := <-dropped:
		if err == nil {
			t.Fatal("the request was answered before it was dropped")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the dropped request did not end")
	}
	close(release)

	// The batch in hand is committed and the lease released, within a deadline.
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, _ := w.doc()
		if d != nil && d.Lease.Released() && d.Checkpoint.Cursor != nil {
			if d.Failure != nil {
				t.Fatalf("the dropped tick recorded a failure: %+v", d.Failure)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease was not released after the invocation was dropped: %+v\n%s", d, p.out.String())
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	if strings.Contains(p.out.String(), "context canceled") {
		t.Errorf("a lease write was cut short:\n%s", p.out.String())
	}
	// It took no batch after the one in hand: 10 of the 40 rows.
	if n, dups := w.hook.delivered(); n != 10 || len(dups) != 0 {
		t.Fatalf("the dropped tick delivered %d rows (%d duplicates), want the batch in hand: 10", n, len(dups))
	}
	// The next tick takes the lease at once and delivers the rest, each row once.
	r := p.tick()
	if r.status != 200 || r.outcome() != "committed" {
		t.Fatalf("the next tick: %d %s", r.status, r.raw)
	}
	if n, dups := w.hook.delivered(); n != 40 || len(dups) != 0 {
		t.Fatalf("delivered %d rows with %d duplicates, want 40 and none", n, len(dups))
	}
}

// newHoldController serves fault points: at the first hit of hold it calls reached and waits for
// release before answering; everything else continues at once. It returns its URL.
func newHoldController(t *testing.T, hold faultpoint.Point, reached func(), release <-chan struct{}) string {
	t.Helper()
	var mu sync.Mutex
	held := false
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		point, _, _ := strings.Cut(string(b), " ")
		mu.Lock()
		first := faultpoint.Point(point) == hold && !held
		if first {
			held = true
		}
		mu.Unlock()
		if first {
			reached()
			select {
			case <-release:
			case <-stop: // the test ended without releasing it
			}
		}
		_, _ = io.WriteString(rw, string(faultpoint.Continue))
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first
	return srv.URL
}
