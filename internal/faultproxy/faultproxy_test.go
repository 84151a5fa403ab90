package faultproxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/faultproxy"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// world is a lease on Azurite, reached through a proxy.
type world struct {
	proxy *faultproxy.Proxy
	m     *lease.Manager
	blob  string
}

func newWorld(t *testing.T, ttl time.Duration) *world {
	t.Helper()
	p, cs, err := faultproxy.ForConnectionString(testenv.Azurite(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	st, err := blobstore.New(blobstore.Settings{Setting: "test", ConnectionString: cs, Container: "db-state"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	blob := "state/" + testenv.Name("proxy-") + "/orders.json"
	m, err := lease.New(st, lease.Config{Poller: "orders", Blob: blob, Owner: "owner-a", Fingerprint: "sha256:x", TTL: ttl, Margin: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &world{proxy: p, m: m, blob: blob}
}

// acquire takes the lease, which must be free.
func (w *world) acquire(t *testing.T) *lease.Lease {
	t.Helper()
	snap, err := w.m.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.m.Acquire(context.Background(), snap)
	if err != nil || !res.Won() {
		t.Fatal(res, err)
	}
	return res.Lease
}

func checkpoint(n int) state.Checkpoint {
	return state.Checkpoint{Cursor: &state.Cursor{Kind: state.KindInteger, Value: json.RawMessage(fmt.Sprint(n))}, LastSuccessfulBatchID: fmt.Sprint("batch_", n)}
}

// run takes the lease, heartbeats, commits and commits with the release.
func (w *world) run(ctx context.Context) (*lease.Lease, []error) {
	snap, err := w.m.Read(ctx)
	if err != nil {
		return nil, []error{fmt.Errorf("read: %w", err)}
	}
	res, err := w.m.Acquire(ctx, snap)
	if err != nil || !res.Won() {
		return nil, []error{fmt.Errorf("acquire: won %v, %v", res.Won(), err)}
	}
	l := res.Lease
	return l, []error{l.Heartbeat(ctx), l.Commit(ctx, checkpoint(1)), l.CommitAndRelease(ctx, checkpoint(2))}
}

// TestEveryFaultOnEveryWrite: each fault fires once on each kind of write; the SDK's retry and
// the lease's settlement by write id absorb it, so every step succeeds, each write lands exactly
// once, and the proxy classifies and logs them in order.
func TestEveryFaultOnEveryWrite(t *testing.T) {
	for _, kind := range faultproxy.WriteKinds {
		for _, fault := range faultproxy.Faults {
			t.Run(string(fault)+"_on_"+string(kind), func(t *testing.T) {
				t.Parallel()
				w := newWorld(t, 30*time.Second)
				w.proxy.Add(faultproxy.Rule{Kind: kind, Fault: fault, Delay: 50 * time.Millisecond})
				ctx := context.Background()
				_, errs := w.run(ctx)
				for i, err := range errs {
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				}
				ev := w.proxy.Events()
				if len(ev) != 1 || ev[0].Rule.Kind != kind || ev[0].Rule.Fault != fault {
					t.Fatalf("events %+v, want one %s on %s", ev, fault, kind)
				}
				var kinds []faultproxy.Kind
				for _, wr := range w.proxy.Writes() {
					kinds = append(kinds, wr.Kind)
					if wr.Dropped != (fault == faultproxy.DropReply && wr.Kind == kind) {
						t.Errorf("write %s dropped=%v", wr.Kind, wr.Dropped)
					}
				}
				if fmt.Sprint(kinds) != "[acquire heartbeat commit release]" {
					t.Fatalf("landed writes %v, want each once in order", kinds)
				}
				last := w.proxy.Writes()[3].Doc
				if string(last.Checkpoint.Cursor.Value) != "2" || !last.Lease.Released() || last.Lease.FencingToken != 1 {
					t.Fatalf("last write %+v", last)
				}
			})
		}
	}
}

// TestPersistentUnavailable: a commit answered 503 on every try fails without landing; the lease
// stays held and the next commit lands.
func TestPersistentUnavailable(t *testing.T) {
	w := newWorld(t, 30*time.Second)
	ctx := context.Background()
	l := w.acquire(t)
	w.proxy.Add(faultproxy.Rule{Kind: faultproxy.Commit, Fault: faultproxy.Unavailable, Times: 10})
	if err := l.Commit(ctx, checkpoint(1)); err == nil {
		t.Fatal("a commit answered 503 on every try succeeded")
	}
	if err := l.Err(); err != nil {
		t.Fatalf("the lease ended: %v", err)
	}
	if n := len(w.proxy.Events()); n < 2 {
		t.Fatalf("%d faults fired: the SDK did not retry", n)
	}
	w.proxy.Clear()
	if err := l.CommitAndRelease(ctx, checkpoint(2)); err != nil {
		t.Fatal(err)
	}
	writes := w.proxy.Writes()
	if len(writes) != 2 || writes[1].Kind != faultproxy.Release || string(writes[1].Doc.Checkpoint.Cursor.Value) != "2" {
		t.Fatalf("landed writes %+v, want the acquire and the final commit", writes)
	}
}

// TestSkip: a rule lets Skip matching requests through first.
func TestSkip(t *testing.T) {
	w := newWorld(t, 30*time.Second)
	w.proxy.Add(faultproxy.Rule{Kind: faultproxy.Commit, Fault: faultproxy.Unavailable, Skip: 1, Times: 1})
	if _, errs := w.run(context.Background()); errs[1] != nil || errs[2] != nil {
		t.Fatal(errs)
	}
	if n := w.proxy.Count(faultproxy.Commit); n != 1 {
		t.Fatalf("%d commits passed, want 1 (the second commit is the release)", n)
	}
	if ev := w.proxy.Events(); len(ev) != 0 {
		t.Fatalf("the rule skipping the first commit fired on it: %+v", ev)
	}
}

// TestBlackholeEndsTheLease: heartbeats that never come back leave the holder without proof: its
// lease ends when the trust window passes, and its commit after that is refused without being sent.
func TestBlackholeEndsTheLease(t *testing.T) {
	w := newWorld(t, 4*time.Second)
	ctx := context.Background()
	l := w.acquire(t)
	w.proxy.Add(faultproxy.Rule{Kind: faultproxy.Heartbeat, Fault: faultproxy.Blackhole, Times: 100})
	l.KeepAlive()
	select {
	case <-l.Context().Done():
	case <-time.After(time.Minute):
		t.Fatal("the lease was still trusted a minute after its heartbeats stopped arriving")
	}
	if !errors.Is(l.Err(), lease.ErrLost) {
		t.Fatalf("lease error %v, want ErrLost", l.Err())
	}
	before := w.proxy.Count(faultproxy.Commit) + w.proxy.Count(faultproxy.Release)
	if err := l.CommitAndRelease(ctx, checkpoint(1)); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("commit after the trust window: %v, want ErrLost", err)
	}
	if after := w.proxy.Count(faultproxy.Commit) + w.proxy.Count(faultproxy.Release); after != before {
		t.Fatal("a commit was sent after the trust window passed")
	}
	if ws := w.proxy.Writes(); len(ws) != 1 {
		t.Fatalf("%d writes landed, want only the acquire", len(ws))
	}
}

// TestLatency: with SetLatency(d) a request reaches the service at least d after it was sent, and
// its answer the client at least d after the service answered.
func TestLatency(t *testing.T) {
	var arrived atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Store(time.Now().UnixNano())
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	p, err := faultproxy.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const d = 30 * time.Millisecond
	p.SetLatency(d)
	sent := time.Now()
	resp, err := http.Post(p.URL()+"/x", "text/plain", strings.NewReader("hi"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	back := time.Now()
	at := time.Unix(0, arrived.Load())
	if string(body) != "ok" || at.Sub(sent) < d || back.Sub(at) < d {
		t.Fatalf("%q: there in %v, back in %v; want each at least %v", body, at.Sub(sent), back.Sub(at), d)
	}
}
