package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/faultproxy"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
)

// One fault matrix run's world: the orders table and the writers that insert and update it, the
// two process slots that tick the handler as the Functions host's timer would (restarting a
// process killed at a fault point), and the sampler that reads the state blob straight from
// Azurite to catch the checkpoint moving backwards.

// run is one scenario's world.
type run struct {
	t       *testing.T
	bin     string
	app     string
	dsn     string
	db      *sql.DB
	azurite string
	proxy   *faultproxy.Proxy
	cs      string // the connection string through the proxy
	direct  *blobstore.Store
	ctl     *controller
	sink    *sink
	ttl     time.Duration
	offsets []string // per process slot: PSEUDOTRIGGER_CLOCK_OFFSET
	note    string

	batch           int
	checkpointEvery string
	budget          time.Duration
	follow          time.Duration // ORDERS_FOLLOW; 0: off

	staleRejected atomic.Int64

	slotMu sync.Mutex
	slots  map[int]string
}

func (r *run) setSlot(slot int, status string) {
	r.slotMu.Lock()
	defer r.slotMu.Unlock()
	if r.slots == nil {
		r.slots = map[int]string{}
	}
	r.slots[slot] = status
}

func (r *run) slotStatus() []string {
	r.slotMu.Lock()
	defer r.slotMu.Unlock()
	var out []string
	for _, s := range r.slots {
		out = append(out, s)
	}
	return out
}

func (r *run) openDB() {
	t := r.t
	r.dsn, r.db = pgSchema(t, "fm_")
	// updated_at is taken by the database when the row is written, as an application would.
	if _, err := r.db.Exec(`CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL,
		updated_at TIMESTAMPTZ(6) NOT NULL DEFAULT clock_timestamp()); CREATE INDEX ON orders (updated_at, id)`); err != nil {
		t.Fatal(err)
	}
}

// write inserts new orders (amount 1) and updates existing ones (amount + 1, a new version),
// one short transaction each, for d.
func (r *run) write(seed uint64, d time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 7))
	var next int64
	end := time.Now().Add(d)
	pace := time.NewTicker(3 * time.Millisecond) // the workload's rate, not a wait for anything
	defer pace.Stop()
	for time.Now().Before(end) {
		<-pace.C
		var err error
		if next < 10 || rng.IntN(3) > 0 {
			n := 1 + rng.IntN(5)
			var sb strings.Builder
			sb.WriteString("INSERT INTO orders (id, customer, amount) VALUES ")
			for i := range n {
				next++
				if i > 0 {
					sb.WriteString(", ")
				}
				fmt.Fprintf(&sb, "(%d, 'customer %d', 1)", next, next)
			}
			_, err = r.db.Exec(sb.String())
		} else {
			_, err = r.db.Exec("UPDATE orders SET amount = amount + 1, updated_at = clock_timestamp() WHERE id = $1", 1+rng.Int64N(next))
		}
		if err != nil {
			r.t.Errorf("writer: %v", err)
			return
		}
	}
}

// truth is every committed row version: id -> amount (its version).
func (r *run) truth() map[int64]int64 {
	rows, err := r.db.Query("SELECT id, amount::bigint FROM orders")
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	m := map[int64]int64{}
	for rows.Next() {
		var id, v int64
		if err := rows.Scan(&id, &v); err != nil {
			r.t.Fatal(err)
		}
		m[id] = v
	}
	if err := rows.Err(); err != nil {
		r.t.Fatal(err)
	}
	return m
}

// tickLoop is one process slot, as the Functions host runs a timer: a tick every 30 ms; a
// process that died (killed at a fault point) is started again.
func (r *run) tickLoop(slot int, env []string, stop <-chan struct{}) {
	var p *proc
	pace := time.NewTicker(30 * time.Millisecond) // the timer's schedule
	defer pace.Stop()
	for {
		select {
		case <-stop:
			return
		case <-pace.C:
		}
		if p == nil {
			p = startWith(r.t, r.bin, env)
		}
		r.setSlot(slot, fmt.Sprintf("pid %d in a tick since %s", p.cmd.Process.Pid, time.Now().Format("15:04:05.000")))
		rep := p.tick()
		r.setSlot(slot, fmt.Sprintf("pid %d last tick %d %.200s", p.cmd.Process.Pid, rep.status, rep.raw))
		if os.Getenv("VERIFY_DEBUG") != "" && (rep.status != 200 || rep.outcome() != "lease_held" && rep.outcome() != "idle") {
			r.t.Logf("tick %d: %s", rep.status, rep.raw)
		}
		switch {
		case rep.status == -1: // the process died under the request
			p.kill9()
			p = nil
		case rep.status == 500 && strings.Contains(rep.raw, "lease lost"):
			if os.Getenv("VERIFY_DEBUG") != "" {
				r.t.Logf("tick: %s", rep.raw)
			}
			r.staleRejected.Add(1) // a stale holder's write, refused by the service or its own trust window
		case rep.status != 200 && rep.status != 500:
			r.t.Errorf("tick answered %d: %s", rep.status, rep.raw)
		}
	}
}

// sample reads the blob straight from Azurite, continuously, and reports every move backwards.
func (r *run) sample(ctx context.Context) []string {
	var bad []string
	var last *cursorPos
	name := "state/" + r.app + "/orders.json"
	pace := time.NewTicker(20 * time.Millisecond) // a sample every 20 ms, not a busy loop on Azurite
	defer pace.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return bad
		case <-pace.C:
		}
		b, err := r.direct.Get(ctx, name)
		if err != nil {
			continue
		}
		d, err := state.Decode(name, "orders", b.Data)
		if err != nil {
			bad = append(bad, "undecodable state: "+err.Error())
			continue
		}
		pos := positionOf(d.Checkpoint.Cursor)
		if last != nil && pos.less(*last) {
			bad = append(bad, fmt.Sprintf("sampled checkpoint went from %v back to %v", *last, pos))
		}
		last = &pos
	}
	return bad
}
