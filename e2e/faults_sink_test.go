package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The fault matrix's webhook: it records every batch with its rows' versions and fencing token,
// refuses a holder older than one it has seen (a fencing sink), counts batches that arrive while
// another holder's batch is live, and stalls or slows batches for the scenarios that need a slow
// handler.

// sink is the webhook: it records every batch with its rows' versions, and counts batches that
// arrive while another holder's batch is still live (its caller still waiting).
type sink struct {
	srv *httptest.Server

	mu         sync.Mutex
	deliveries []sunk
	seen       map[[2]int64]int
	live       map[*sunk]context.Context
	overlaps   int
	maxToken   int64
	fenced     int // batches refused for carrying an older fencing token than one seen
	changed    chan struct{}
	stallAt    int
	stallFor   time.Duration
	onStall    func() // run when the stall begins
	stalls     int
	slowFrom   int // arrivals slowFrom.. slowFrom+slowN-1 take slow each
	slowN      int
	slow       time.Duration
	arrivals   int
}

type sunk struct {
	token int64
	rows  []sunkRow
	last  cursorPos
}

type sunkRow struct{ id, version int64 }

func newSink(t *testing.T) *sink {
	s := &sink{seen: map[[2]int64]int{}, live: map[*sunk]context.Context{}, changed: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct {
			FencingToken int64 `json:"fencing_token"`
			Rows         []struct {
				ID        int64  `json:"id"`
				Amount    any    `json:"amount"`
				UpdatedAt string `json:"updated_at"`
			} `json:"rows"`
		}
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			t.Errorf("webhook: bad body: %v", err)
			w.WriteHeader(400)
			return
		}
		d := &sunk{token: p.FencingToken}
		for _, row := range p.Rows {
			v, err := strconv.ParseFloat(fmt.Sprint(row.Amount), 64)
			if err != nil {
				t.Errorf("webhook: amount %v: %v", row.Amount, err)
			}
			d.rows = append(d.rows, sunkRow{row.ID, int64(v)})
			ts, err := time.Parse(time.RFC3339Nano, row.UpdatedAt)
			if err != nil {
				t.Errorf("webhook: updated_at %q: %v", row.UpdatedAt, err)
			}
			d.last = cursorPos{ts, row.ID}
		}
		s.mu.Lock()
		stale := d.token < s.maxToken
		s.maxToken = max(s.maxToken, d.token)
		if stale { // a fencing sink refuses a holder older than one it has seen
			s.fenced++
			s.mu.Unlock()
			w.WriteHeader(http.StatusConflict)
			return
		}
		s.mu.Unlock()
		s.arrive(d, r.Context())
		defer s.leave(d)
		s.mu.Lock()
		s.arrivals++
		stall := s.arrivals == s.stallAt
		if stall {
			s.stalls++
		}
		onStall := s.onStall
		slow := time.Duration(0)
		if s.arrivals >= s.slowFrom && s.arrivals < s.slowFrom+s.slowN {
			slow = s.slow
		}
		s.mu.Unlock()
		if slow > 0 { // a handler that takes a while: the lease is kept alive by heartbeats
			select {
			case <-r.Context().Done():
			case <-time.After(slow):
			}
		}
		if stall { // the handler hangs until its caller gives up (or the stall ends)
			if onStall != nil {
				onStall()
			}
			select {
			case <-r.Context().Done():
			case <-time.After(s.stallFor):
			}
		}
		s.record(d)
		w.WriteHeader(204)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) stallNth(n int, d time.Duration) { s.stallAt, s.stallFor = n, d }

func (s *sink) slowFor(from, n int, d time.Duration) { s.slowFrom, s.slowN, s.slow = from, n, d }

// arrive registers a batch; another live batch (its caller still waiting for it, after a grace
// for the cancellation of a caller that gave up to reach this server) is an overlap.
func (s *sink) arrive(d *sunk, ctx context.Context) {
	s.mu.Lock()
	others := make([]context.Context, 0, len(s.live))
	for _, c := range s.live {
		others = append(others, c)
	}
	s.live[d] = ctx
	s.mu.Unlock()
	for _, c := range others {
		select {
		case <-c.Done():
		case <-time.After(time.Second):
			s.mu.Lock()
			s.overlaps++
			s.mu.Unlock()
		}
	}
}

func (s *sink) stallCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stalls
}

func (s *sink) leave(d *sunk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, d)
}

func (s *sink) record(d *sunk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deliveries = append(s.deliveries, *d)
	for _, row := range d.rows {
		s.seen[[2]int64{row.id, row.version}]++
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *sink) count(id, version int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[[2]int64{id, version}]
}

// has reports whether every version in truth was delivered.
func (s *sink) has(truth map[int64]int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, v := range truth {
		if s.seen[[2]int64{id, v}] == 0 {
			return false
		}
	}
	return true
}

// waitChange returns when a batch is recorded, or after d.
func (s *sink) waitChange(d time.Duration) {
	s.mu.Lock()
	ch := s.changed
	s.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(d):
	}
}
