package sink

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/faultproxy"
)

// recorder is a real HTTP server that records what it accepted and injects faults on the first
// request that would take it past the armed number of messages, and every one after: a 503, a
// connection reset instead of an answer (nothing accepted), or a reply lost after it accepted the
// messages.
type recorder struct {
	srv      *httptest.Server
	mu       sync.Mutex
	got      []received
	accepted int64 // messages accepted, under mu
	fault    atomic.Pointer[armed]
	// parse reads the messages of a request (nil: one message per request, its id the
	// Idempotency-Key header).
	parse func(r *http.Request, body []byte) []received
}

type armed struct {
	f    faultproxy.Fault
	skip int64
}

func newRecorder(t *testing.T, tls bool, parse func(r *http.Request, body []byte) []received) *recorder {
	rec := &recorder{parse: parse}
	h := http.HandlerFunc(rec.serve)
	if tls {
		rec.srv = httptest.NewTLSServer(h)
	} else {
		rec.srv = httptest.NewServer(h)
	}
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	msgs := []received{{ID: r.Header.Get("Idempotency-Key"), Body: body, Trace: r.Header.Get("traceparent"), Header: r.Header.Clone()}}
	if rec.parse != nil {
		msgs = rec.parse(r, body)
	}
	rec.mu.Lock()
	a := rec.fault.Load()
	fire := a != nil && rec.accepted+int64(len(msgs)) > a.skip
	if !fire || a.f == faultproxy.DropReply {
		rec.accepted += int64(len(msgs))
		rec.got = append(rec.got, msgs...)
	}
	rec.mu.Unlock()
	switch {
	case !fire:
		w.WriteHeader(http.StatusOK) // Event Grid's answer; a webhook may answer any 2xx
	case a.f == faultproxy.Unavailable:
		http.Error(w, "Server Busy", http.StatusServiceUnavailable)
	default: // Reset: nothing accepted; DropReply: accepted, the answer lost
		hangUp(w)
	}
}

func hangUp(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}

func (rec *recorder) read(*testing.T) []received {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := rec.got
	rec.got = nil
	return out
}

func (rec *recorder) arm(_ *testing.T, f faultproxy.Fault, skip int) func() {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.fault.Store(&armed{f: f, skip: rec.accepted + int64(skip)})
	return func() { rec.fault.Store(nil) }
}

func TestWebhookConformance(t *testing.T) {
	runConformance(t, func(t *testing.T) target {
		rec := newRecorder(t, false, nil)
		return target{
			cfg:   Config{Type: Webhook, URL: "%SUINK_HOOK%", Headers: map[string]string{"Authorization": "Bearer %SUINK_TOKEN%"}},
			env:   []string{"SUINK_HOOK=" + rec.srv.URL + "/hook", "SUINK_TOKEN=s3cret"},
			read:  rec.read,
			fault: rec.arm,
		}
	})
}
