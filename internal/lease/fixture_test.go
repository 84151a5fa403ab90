package lease_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

const (
	testPoller      = "orders"
	testFingerprint = "sha256:0123456789abcdef"
	testTTL         = 60 * time.Second
	testMargin      = 2 * time.Second
	testInterval    = 15 * time.Second
)

// serviceClock is the storage service's clock in these tests: real time plus an offset that a
// test advances to force expiry without sleeping.
type serviceClock struct{ off atomic.Int64 }

func (c *serviceClock) Now() time.Time                         { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *serviceClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (c *serviceClock) Advance(d time.Duration)                { c.off.Add(int64(d)) }

// fixture is one store under test, with the means to force expiry and lose replies.
type fixture struct {
	st   store.Store   // leases and the test's own reads and writes all go through this
	svc  *serviceClock // the service's clock; holders that should agree with it use it too
	blob string
	// drop arms a fault: the next blob PUT is forwarded and lands, then after() runs, then its
	// reply is lost (and the SDK's retry, if any, finds the condition no longer met).
	drop func(after func())
}

func forEachStore(t *testing.T, fn func(t *testing.T, f *fixture)) {
	t.Run("memstore", func(t *testing.T) {
		t.Parallel()
		svc := &serviceClock{}
		d := &dropStore{Store: memstore.New(svc)}
		fn(t, &fixture{st: d, svc: svc, blob: blobName(), drop: d.arm})
	})
	t.Run("azurite", func(t *testing.T) {
		t.Parallel()
		cs := testenv.Azurite(t)
		tr := &dropTransport{}
		bs, err := blobstore.New(blobstore.Settings{Setting: testenv.AzuriteVar, ConnectionString: cs, Container: testenv.Name("lease-")},
			&blobstore.Options{Transport: tr, Retry: policy.RetryOptions{RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		// Create the container now, so that faults armed later hit the blob's own PUT.
		if _, err := bs.Put(context.Background(), "init", []byte("{}"), store.IfNotExists()); err != nil {
			t.Fatal(err)
		}
		svc := &serviceClock{}
		fn(t, &fixture{st: &shiftedStore{Store: bs, svc: svc, written: map[string]time.Duration{}}, svc: svc, blob: blobName(), drop: tr.arm})
	})
}

func blobName() string { return "state/test/" + testenv.Name("p") + ".json" }

func (f *fixture) manager(t testing.TB, owner string, clk clock.Clock) *lease.Manager {
	t.Helper()
	m, err := lease.New(f.st, lease.Config{
		Poller: testPoller, Blob: f.blob, Owner: owner, Fingerprint: testFingerprint,
		TTL: testTTL, Margin: testMargin, HeartbeatInterval: testInterval,
		Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// acquire reads and acquires, failing the test unless it wins.
func acquire(t testing.TB, m *lease.Manager) *lease.Lease {
	t.Helper()
	res := tryAcquire(t, m)
	if !res.Won() {
		t.Fatalf("acquire: lease held by %q", res.Holder)
	}
	return res.Lease
}

func tryAcquire(t testing.TB, m *lease.Manager) lease.Result {
	t.Helper()
	ctx := context.Background()
	snap, err := m.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	res, err := m.Acquire(ctx, snap)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	return res
}

// doc reads the blob as it is now.
func (f *fixture) doc(t testing.TB) (*state.Doc, store.Blob) {
	t.Helper()
	b, err := f.st.Get(context.Background(), f.blob)
	if err != nil {
		t.Fatalf("get %s: %v", f.blob, err)
	}
	d, err := state.Decode(f.blob, testPoller, b.Data)
	if err != nil {
		t.Fatal(err)
	}
	return d, b
}

// takeOver writes the blob as another owner would after acquiring it: fencing token + 1.
func (f *fixture) takeOver(t testing.TB, owner string) {
	t.Helper()
	d, b := f.doc(t)
	d.Lease.OwnerID = owner
	d.Lease.FencingToken++
	d.Lease.ReleasedAt = state.Time{}
	d.Lease.TTLSeconds = 60
	d.WriteID = "intruder-" + owner
	d.Checkpoint = checkpoint(-1)
	data, err := state.Encode(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Put(context.Background(), f.blob, data, store.IfMatch(b.ETag)); err != nil {
		t.Fatalf("take over: %v", err)
	}
}

func checkpoint(n int) state.Checkpoint {
	return state.Checkpoint{
		Cursor:                &state.Cursor{Kind: state.KindInteger, Value: json.RawMessage(strconv.Itoa(n))},
		LastSuccessfulBatchID: fmt.Sprintf("batch-%d", n),
		Metadata:              state.Metadata{RowCount: 1},
	}
}

func cursorOf(d *state.Doc) string {
	if d.Checkpoint.Cursor == nil {
		return "<none>"
	}
	return string(d.Checkpoint.Cursor.Value)
}

// shiftedStore presents a store whose clock is real time (Azurite) as running on serviceClock:
// Date is shifted by the offset now, Last-Modified by the offset in force when that version was
// written.
type shiftedStore struct {
	store.Store
	svc     *serviceClock
	mu      sync.Mutex
	written map[string]time.Duration
}

func (s *shiftedStore) Get(ctx context.Context, name string) (store.Blob, error) {
	b, err := s.Store.Get(ctx, name)
	if err != nil {
		return b, err
	}
	now := time.Duration(s.svc.off.Load())
	s.mu.Lock()
	at, ok := s.written[b.ETag]
	s.mu.Unlock()
	if !ok {
		at = now // written through a lost reply: it landed just now
	}
	b.Date = b.Date.Add(now)
	b.LastModified = b.LastModified.Add(at)
	return b, nil
}

func (s *shiftedStore) Put(ctx context.Context, name string, data []byte, cond store.Condition) (store.Written, error) {
	now := time.Duration(s.svc.off.Load())
	w, err := s.Store.Put(ctx, name, data, cond)
	if err != nil {
		return w, err
	}
	s.mu.Lock()
	s.written[w.ETag] = now
	s.mu.Unlock()
	w.Date = w.Date.Add(now)
	w.LastModified = w.LastModified.Add(now)
	return w, nil
}

// dropStore loses the reply of an armed Put on the in-memory store, then does what the SDK
// does: it sends the same conditional Put again and returns that answer.
type dropStore struct {
	store.Store
	armed atomic.Pointer[func()]
}

func (d *dropStore) arm(after func()) { d.armed.Store(&after) }

func (d *dropStore) Put(ctx context.Context, name string, data []byte, cond store.Condition) (store.Written, error) {
	after := d.armed.Swap(nil)
	w, err := d.Store.Put(ctx, name, data, cond)
	if after == nil || err != nil {
		return w, err
	}
	(*after)()
	return d.Store.Put(ctx, name, data, cond) // the retry of a write that had landed
}

// dropTransport forwards an armed blob PUT to Azurite, then loses its reply; the SDK retries.
type dropTransport struct {
	armed   atomic.Pointer[func()]
	dropped atomic.Int64
}

func (d *dropTransport) arm(after func()) { d.armed.Store(&after) }

func (d *dropTransport) Do(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPut || strings.Contains(req.URL.RawQuery, "restype=container") {
		return http.DefaultClient.Do(req)
	}
	after := d.armed.Swap(nil)
	resp, err := http.DefaultClient.Do(req)
	if after == nil || err != nil {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	(*after)()
	d.dropped.Add(1)
	return nil, errors.New("test: connection reset after the request was sent (reply lost)")
}

type atomicDuration = atomic.Int64
