// Package faultproxy is an HTTP proxy for tests that injects the faults a real network and
// storage service produce. It stands between a handler and the blob service (Azurite) and can
// delay a request, reset its connection, answer 503 Server Busy without forwarding it, or forward
// it and then drop the reply, so the write lands but the client never learns it.
//
// It knows the state document of package state: each PUT of one is classified as the kind of
// lease write it is (acquire, heartbeat, commit, release), so a rule can aim at, say, the second
// commit. It also keeps the log of every write that landed, in the order the service applied
// them, for checks such as "the checkpoint never moved backwards" and "no stale token committed".
package faultproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Kind is the kind of request, as far as the lease protocol is concerned.
type Kind string

// Kinds. A state write is classified against the last write that landed with the same fencing
// token: the first write of a token is its acquire; one that marks the lease released is a
// release (the last commit is folded into it); one that moves the checkpoint or records a
// failure is a commit; any other is a heartbeat.
const (
	Read      Kind = "read"
	Acquire   Kind = "acquire"
	Heartbeat Kind = "heartbeat"
	Commit    Kind = "commit"
	Release   Kind = "release"
	Other     Kind = "other" // anything else: container creation, deletes, listings
)

// WriteKinds are the kinds of state write.
var WriteKinds = []Kind{Acquire, Heartbeat, Commit, Release}

// Fault is what a rule does to a request.
type Fault string

// Faults.
const (
	Delay       Fault = "delay"      // wait Rule.Delay, then forward
	Reset       Fault = "reset"      // close the connection with a TCP reset, forward nothing
	Unavailable Fault = "503"        // answer 503 Server Busy, forward nothing
	DropReply   Fault = "drop_reply" // forward, let the write land, then reset the connection
	Blackhole   Fault = "blackhole"  // hold the request until the proxy closes or Rule.Delay passes, then reset
)

// Faults lists the faults a matrix runs through.
var Faults = []Fault{Delay, Reset, Unavailable, DropReply}

// Rule fires Fault on requests of Kind: it lets Skip matching requests through, then fires on
// the next Times (0 means 1).
type Rule struct {
	Kind  Kind
	Fault Fault
	Delay time.Duration // for Delay and Blackhole
	Skip  int
	Times int
}

func (r Rule) String() string {
	s := fmt.Sprintf("%s on %s", r.Fault, r.Kind)
	if r.Fault == Delay || r.Fault == Blackhole {
		s += " " + r.Delay.String()
	}
	if r.Skip > 0 {
		s += fmt.Sprintf(" after %d", r.Skip)
	}
	if r.Times > 1 {
		s += fmt.Sprintf(" x%d", r.Times)
	}
	return s
}

// Event records a rule firing.
type Event struct {
	Rule Rule
	At   time.Time
	Path string
}

// Write is a state write that landed (the service answered 201), in the order the service
// applied them.
type Write struct {
	Kind    Kind
	Blob    string
	Doc     *state.Doc
	Dropped bool // the reply was dropped by a rule
}

// Proxy forwards requests to the target and injects faults.
type Proxy struct {
	target *url.URL
	srv    *http.Server
	ln     net.Listener
	client *http.Client
	done   chan struct{}

	mu      sync.Mutex
	rules   []*ruleState
	events  []Event
	writes  []Write
	last    map[string]map[int64]*state.Doc // blob -> token -> last landed doc of that token
	counts  map[Kind]int
	writeMu sync.Mutex // serialises forwarded state writes, so writes is in the service's order

	// Forwarded, when set (before the first request), sees every request the service answered,
	// with its body and the service's status, whether or not a rule then drops the answer.
	Forwarded func(r *http.Request, body []byte, status int)

	latency atomic.Int64 // SetLatency's, in nanoseconds
}

// SetLatency makes every request take d to reach the service and its answer d to come back: a
// network of round trip 2d between the client and the service (0: none, the default).
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// travel waits the proxy's latency, one way (or until it closes).
func (p *Proxy) travel() {
	if d := time.Duration(p.latency.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-p.done:
		}
	}
}

type ruleState struct {
	Rule
	seen, fired int
}

// New starts a proxy on a free 127.0.0.1 port in front of target (for example
// "http://127.0.0.1:10000").
func New(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: target %q is not a URL", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p := &Proxy{
		target: u, ln: ln, done: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}},
		last:   map[string]map[int64]*state.Doc{}, counts: map[Kind]int{},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's base URL, to use in place of the target's.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops the proxy; held (blackholed) requests are reset.
func (p *Proxy) Close() error {
	close(p.done)
	return p.srv.Close()
}

// Add arms a rule.
func (p *Proxy) Add(r Rule) {
	if r.Times <= 0 {
		r.Times = 1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &ruleState{Rule: r})
}

// Clear disarms every rule.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// Events returns the faults fired so far.
func (p *Proxy) Events() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Event(nil), p.events...)
}

// Writes returns the state writes that landed so far, in order.
func (p *Proxy) Writes() []Write {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Write(nil), p.writes...)
}

// Count returns how many requests of kind passed through (faulted or not).
func (p *Proxy) Count(k Kind) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[k]
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	kind, doc := p.classify(r, body)
	rule := p.match(kind, r.URL.Path)
	p.travel() // the request's way there

	if rule != nil {
		switch rule.Fault {
		case Delay:
			select {
			case <-time.After(rule.Delay):
			case <-p.done:
			}
		case Reset:
			reset(w)
			return
		case Unavailable:
			p.travel() // the answer's way back
			w.Header().Set("x-ms-error-code", "ServerBusy")
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>injected by faultproxy</Message></Error>`)
			return
		case Blackhole:
			d := rule.Delay
			if d <= 0 {
				d = time.Hour
			}
			select {
			case <-time.After(d):
			case <-p.done:
			case <-r.Context().Done():
			}
			reset(w)
			return
		}
	}

	isWrite := doc != nil
	if isWrite {
		p.writeMu.Lock()
	}
	resp, err := p.forward(r, body)
	if err != nil {
		if isWrite {
			p.writeMu.Unlock()
		}
		http.Error(w, "faultproxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(resp.Body)
	dropped := rule != nil && rule.Fault == DropReply
	if err == nil && p.Forwarded != nil {
		p.Forwarded(r, body, resp.StatusCode)
	}
	if isWrite {
		if err == nil && resp.StatusCode == http.StatusCreated {
			p.landed(kind, r.URL.Path, doc, dropped)
		}
		p.writeMu.Unlock()
	}
	if err != nil {
		reset(w)
		return
	}
	if dropped {
		reset(w)
		return
	}
	p.travel() // the answer's way back
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(respBody)
}

func (p *Proxy) forward(r *http.Request, body []byte) (*http.Response, error) {
	u := *p.target
	u.Path = r.URL.Path
	u.RawPath = r.URL.RawPath
	u.RawQuery = r.URL.RawQuery
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out.Header = r.Header.Clone()
	out.Host = p.target.Host
	out.ContentLength = int64(len(body))
	return p.client.Do(out)
}

// classify names the request's kind; for a state write it also returns the document.
func (p *Proxy) classify(r *http.Request, body []byte) (Kind, *state.Doc) {
	switch {
	case r.Method == http.MethodGet && !strings.Contains(r.URL.RawQuery, "comp=list") && !strings.Contains(r.URL.RawQuery, "restype=container"):
		return Read, nil
	case r.Method != http.MethodPut || r.Header.Get("x-ms-blob-type") == "" || !strings.Contains(r.URL.Path, "/state/"):
		return Other, nil
	}
	var d state.Doc
	if json.Unmarshal(body, &d) != nil || d.Version == 0 {
		return Other, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.last[r.URL.Path][d.Lease.FencingToken]
	switch {
	case prev == nil:
		return Acquire, &d
	case d.Lease.Released():
		return Release, &d
	case !sameCheckpoint(prev.Checkpoint, d.Checkpoint) || d.Failure != nil && prev.Failure == nil:
		return Commit, &d
	default:
		return Heartbeat, &d
	}
}

func sameCheckpoint(a, b state.Checkpoint) bool {
	ja, _ := json.Marshal(a.Cursor)
	jb, _ := json.Marshal(b.Cursor)
	return bytes.Equal(ja, jb) && a.LastSuccessfulBatchID == b.LastSuccessfulBatchID
}

// match counts the request against the rules and returns the one that fires, if any.
func (p *Proxy) match(kind Kind, path string) *Rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[kind]++
	for _, rs := range p.rules {
		if rs.Kind != kind || rs.fired >= rs.Times {
			continue
		}
		rs.seen++
		if rs.seen <= rs.Skip {
			continue
		}
		rs.fired++
		p.events = append(p.events, Event{Rule: rs.Rule, At: time.Now(), Path: path})
		r := rs.Rule
		return &r
	}
	return nil
}

func (p *Proxy) landed(kind Kind, blob string, d *state.Doc, dropped bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last[blob] == nil {
		p.last[blob] = map[int64]*state.Doc{}
	}
	p.last[blob][d.Lease.FencingToken] = d
	p.writes = append(p.writes, Write{Kind: kind, Blob: blob, Doc: d, Dropped: dropped})
}

// reset closes the client's connection with a TCP reset instead of an answer.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("faultproxy: the connection cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}

// ForConnectionString starts a proxy in front of the blob endpoint of an Azure Storage
// connection string (as Azurite's, with an explicit BlobEndpoint) and returns it with the
// connection string rewritten to go through it.
func ForConnectionString(cs string) (*Proxy, string, error) { return ForEndpoint(cs, "BlobEndpoint") }

// ForEndpoint is ForConnectionString for the endpoint key of another service, e.g.
// QueueEndpoint.
func ForEndpoint(cs, key string) (*Proxy, string, error) {
	parts := strings.Split(cs, ";")
	for i, part := range parts {
		k, v, ok := strings.Cut(part, "=")
		if !ok || !strings.EqualFold(k, key) {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || u.Host == "" {
			return nil, "", fmt.Errorf("faultproxy: %s %q is not a URL", key, v)
		}
		p, err := New(u.Scheme + "://" + u.Host)
		if err != nil {
			return nil, "", err
		}
		u.Host = p.ln.Addr().String()
		parts[i] = k + "=" + u.String()
		return p, strings.Join(parts, ";"), nil
	}
	return nil, "", fmt.Errorf("faultproxy: the connection string has no %s", key)
}
