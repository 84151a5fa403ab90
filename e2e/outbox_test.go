package e2e

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/pseudotrigger/pseudotrigger/internal/faultpoint"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// An outbox as the services that publish events use it (docs/outbox.md): producers write a
// business row and its event in one transaction, some of them rolled back; a declared poller
// routes each event by its aggregate type to one of three sinks (two webhooks, one of them
// taking many events to a POST, and a storage queue) and deletes what it delivered; handler processes are killed with SIGKILL mid-batch and
// between a commit and its cleanup. Every committed event arrives, rolled-back ones never; each
// aggregate's events arrive at its webhook in commit order; re-deliveries carry the same id; no
// event is deleted before it was delivered; the table is empty at the end.

// event is what a producer writes as an event's payload, and what a sink receives back.
type event struct {
	Agg int `json:"agg"`
	Seq int `json:"seq"` // the aggregate's sequence number, taken in the event's transaction
}

// arrival is one event as a sink received it.
type arrival struct {
	ID string
	event
	At time.Time
}

// eventSink records the events a webhook receives, in arrival order: a POST's payload and
// Idempotency-Key, or (a sink in mode batch) each CloudEvent of a batch in its order.
type eventSink struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []arrival
}

func newEventSink(t *testing.T) *eventSink {
	s := &eventSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		type cloudEvent struct {
			ID   string `json:"id"`
			Data event  `json:"data"`
		}
		var evs []cloudEvent
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/cloudevents-batch+json") {
			if err := json.NewDecoder(r.Body).Decode(&evs); err != nil || len(evs) == 0 {
				t.Errorf("webhook: the body is not a CloudEvents batch of payloads: %v", err)
				w.WriteHeader(400)
				return
			}
		} else {
			var e event
			if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
				t.Errorf("webhook: the body is not the event's payload: %v", err)
				w.WriteHeader(400)
				return
			}
			evs = []cloudEvent{{ID: r.Header.Get("Idempotency-Key"), Data: e}}
		}
		now := time.Now()
		s.mu.Lock()
		for _, e := range evs {
			if e.ID == "" {
				t.Errorf("webhook: an event without its id")
			}
			s.got = append(s.got, arrival{ID: e.ID, event: e.Data, At: now})
		}
		s.mu.Unlock()
		w.WriteHeader(204)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *eventSink) arrivals() []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// outboxWorld is the test's database, sinks and app folder.
type outboxWorld struct {
	t        *testing.T
	dsn      string
	db       *sql.DB
	hooks    map[string]*eventSink // by aggregate type
	queue    *azqueue.QueueClient  // shipment's
	queueGot []arrival
	root     string
	env      []string
	// messages: the emit-message variant's prefix (no outbox table; "" for the table's).
	messages string

	mu        sync.Mutex
	committed map[string]event // id -> event, of committed transactions
	rolled    map[string]bool  // ids of rolled-back transactions
}

var aggregateTypes = []string{"order", "payment", "shipment"}

const outboxAggregates = 200

// newOutboxWorld makes the world of the outbox table's poller, or with messages of the
// emit-message variant's (a logical poller reading the messages of that prefix).
func newOutboxWorld(t *testing.T, messages bool) *outboxWorld {
	t.Helper()
	w := &outboxWorld{t: t, hooks: map[string]*eventSink{}, committed: map[string]event{}, rolled: map[string]bool{}}
	w.dsn, w.db = pgSchema(t, "ob_")
	if _, err := w.db.Exec(`
		CREATE TABLE accounts (id INT PRIMARY KEY, seq INT NOT NULL DEFAULT 0);
		INSERT INTO accounts (id) SELECT generate_series(1, ` + fmt.Sprint(outboxAggregates) + `);`); err != nil {
		t.Fatal(err)
	}
	source := `"source": {"table": "outbox", "columns": ["id"], "key": ["id"], "cursor": {"kind": "xid", "column": "txid"}},
		"outbox": {"id": "id", "aggregate_type": "aggregate_type", "aggregate_id": "aggregate_id", "payload": "payload"},
		"cleanup": "delete",`
	var extra []string
	if messages {
		w.messages = testenv.Name("events-")
		slot := strings.ReplaceAll(testenv.Name("ob_"), "-", "_")
		for _, q := range []string{"CREATE PUBLICATION " + slot, fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", slot)} {
			if _, err := w.db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		t.Cleanup(func() {
			_, _ = w.db.Exec("SELECT pg_drop_replication_slot($1)", slot)
			_, _ = w.db.Exec("DROP PUBLICATION IF EXISTS " + slot)
		})
		source = fmt.Sprintf(`"source": {"cursor": {"kind": "logical"}},
		"outbox": {"messages": %q, "id": "id", "aggregate_type": "aggregate_type", "aggregate_id": "aggregate_id"},`, w.messages)
		extra = []string{"OUTBOX_CDC_SLOT=" + slot, "OUTBOX_CDC_PUBLICATION=" + slot}
	} else if _, err := w.db.Exec(`
		CREATE TABLE outbox (
			id TEXT PRIMARY KEY,
			aggregate_type TEXT NOT NULL,
			aggregate_id TEXT NOT NULL,
			payload JSONB NOT NULL,
			txid XID8 NOT NULL DEFAULT pg_current_xact_id());
		CREATE INDEX outbox_txid_id ON outbox (txid, id);
		CREATE TABLE deleted (id TEXT PRIMARY KEY, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
		CREATE FUNCTION outbox_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO deleted (id) VALUES (OLD.id); RETURN OLD; END $$;
		CREATE TRIGGER outbox_deleted AFTER DELETE ON outbox FOR EACH ROW EXECUTE FUNCTION outbox_deleted();`); err != nil {
		t.Fatal(err)
	}
	for _, typ := range aggregateTypes[:2] {
		w.hooks[typ] = newEventSink(t)
	}
	qcs := testenv.AzuriteQueue(t)
	queue := testenv.Name("outbox-")
	svc, err := azqueue.NewServiceClientFromConnectionString(qcs, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.queue = svc.NewQueueClient(queue)
	if _, err := w.queue.Create(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	w.root = t.TempDir()
	dir := filepath.Join(w.root, "outbox")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	function := `{"bindings":[{"type":"timerTrigger","direction":"in","name":"timer","schedule":"%OUTBOX_SCHEDULE%","useMonitor":false}]}`
	spec := fmt.Sprintf(`{
		`+source+`
		"batch_size": 50,
		"route": {"column": "aggregate_type", "sinks": {
			"order": {"type": "webhook", "url": %q, "concurrency": 8},
			"payment": {"type": "webhook", "url": %q, "concurrency": 8, "mode": "batch"},
			"shipment": {"type": "storagequeue", "connection": "Q", "queue": %q}}}
	}`, w.hooks["order"].srv.URL, w.hooks["payment"].srv.URL, queue)
	for name, data := range map[string]string{"function.json": function, "poller.json": spec} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"StateStorage=" + testenv.Azurite(t),
		"POLLER_APP_NAME=" + testenv.Name("ob-"),
		"AzureWebJobsScriptRoot=" + w.root,
		"OUTBOX_DB_DRIVER=postgres",
		"OUTBOX_DB_CONNECTION=" + w.dsn,
		"OUTBOX_LEASE_TTL=4s",
		"OUTBOX_HEARTBEAT_INTERVAL=1s",
		"OUTBOX_CHECKPOINT_INTERVAL=0s",
		"Q=" + qcs,
	}
	w.env = append(w.env, extra...)
	return w
}

// produce writes events for d: each transaction locks its aggregate (an advisory lock, taken
// before its first write, so that the xid it is then given orders it after the aggregate's
// previous event), takes the aggregate's next sequence number and inserts the event; one in
// eight is rolled back.
func (w *outboxWorld) produce(producer int, d time.Duration) {
	rng := rand.New(rand.NewPCG(uint64(producer), 45))
	end := time.Now().Add(d)
	pace := time.NewTicker(2 * time.Millisecond) // the workload's rate, not a wait for anything
	defer pace.Stop()
	for n := 0; time.Now().Before(end); n++ {
		<-pace.C
		agg := 1 + rng.IntN(outboxAggregates)
		id := fmt.Sprintf("p%d-%d", producer, n)
		rollback := rng.IntN(8) == 0
		err := func() error {
			tx, err := w.db.Begin()
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := tx.Exec(`SELECT pg_advisory_xact_lock($1)`, agg); err != nil {
				return err
			}
			var seq int
			if err := tx.QueryRow(`UPDATE accounts SET seq = seq + 1 WHERE id = $1 RETURNING seq`, agg).Scan(&seq); err != nil {
				return err
			}
			typ := aggregateTypes[agg%len(aggregateTypes)]
			if w.messages != "" { // the event's fields in its payload
				payload, _ := json.Marshal(map[string]any{"id": id, "aggregate_type": typ, "aggregate_id": fmt.Sprint(agg), "agg": agg, "seq": seq})
				if _, err := tx.Exec(`SELECT pg_logical_emit_message(true, $1, $2::text)`, w.messages, string(payload)); err != nil {
					return err
				}
			} else {
				payload, _ := json.Marshal(event{Agg: agg, Seq: seq})
				if _, err := tx.Exec(`INSERT INTO outbox (id, aggregate_type, aggregate_id, payload) VALUES ($1, $2, $3, $4)`,
					id, typ, fmt.Sprint(agg), payload); err != nil {
					return err
				}
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if rollback {
				w.rolled[id] = true
				return nil // the deferred Rollback
			}
			if err := tx.Commit(); err != nil {
				return err
			}
			w.committed[id] = event{Agg: agg, Seq: seq}
			return nil
		}()
		if err != nil {
			w.t.Errorf("producer %d: %v", producer, err)
			return
		}
	}
}

// drainQueue reads the messages of the shipment queue, up to 640 a call.
func (w *outboxWorld) drainQueue() {
	ctx := context.Background()
	n, hidden := int32(32), int32(3600)
	for range 20 {
		// Read, not deleted: hidden for an hour, longer than the test.
		resp, err := w.queue.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{NumberOfMessages: &n, VisibilityTimeout: &hidden})
		if err != nil {
			w.t.Fatal(err)
		}
		if len(resp.Messages) == 0 {
			return
		}
		for _, m := range resp.Messages {
			body, err := base64.StdEncoding.DecodeString(*m.MessageText)
			if err != nil {
				w.t.Fatalf("a queue message is not base64: %v", err)
			}
			var e event
			if err := json.Unmarshal(body, &e); err != nil {
				w.t.Fatalf("a queue message is not the event's payload: %v: %s", err, body)
			}
			w.queueGot = append(w.queueGot, arrival{event: e, At: time.Now()})
		}
	}
}

// tickLoop is one process slot: a tick every 30 ms, as the host's timer would, starting a
// process again when the last one died at a fault point. It counts the processes killed.
func (w *outboxWorld) tickLoop(bin string, env []string, stop <-chan struct{}, killed *atomic.Int64) {
	var p *proc
	pace := time.NewTicker(30 * time.Millisecond) // the timer's schedule
	defer pace.Stop()
	defer func() {
		if p != nil {
			p.kill9()
		}
	}()
	for {
		select {
		case <-stop:
			return
		case <-pace.C:
		}
		if p == nil {
			p = startWith(w.t, bin, env)
		}
		rep := p.tickOutbox()
		switch {
		case rep.status == -1: // killed under the request
			p.kill9()
			p = nil
			killed.Add(1)
		case rep.status == 500 && strings.Contains(rep.raw, "lease"):
		case rep.status != 200:
			w.t.Errorf("tick answered %d: %s", rep.status, rep.raw)
		}
	}
}

func TestOutboxReplica(t *testing.T) {
	w := newOutboxWorld(t, false)
	c := newController(t)
	c.killAt(faultpoint.InHandle, 5)
	c.killAt(faultpoint.InHandle, 12)
	c.killAt(faultpoint.BeforeCleanup, 3)
	w.run(t, c)
}

// TestOutboxMessagesReplica is TestOutboxReplica for PostgreSQL's outbox without a table: the
// producers emit each event with pg_logical_emit_message in their transaction, and a logical
// poller reads them from its slot, in commit order.
func TestOutboxMessagesReplica(t *testing.T) {
	w := newOutboxWorld(t, true)
	c := newController(t)
	c.killAt(faultpoint.InHandle, 5)
	c.killAt(faultpoint.InHandle, 12)
	w.run(t, c)
}

// run writes events from 4 producers for 8 s while two process slots tick the poller, killed
// where c says, then waits until every committed event arrived (and, for a table, the table is
// empty) and checks what arrived.
func (w *outboxWorld) run(t *testing.T, c *controller) {
	bin := buildFaultBinary(t)
	env := slices.Clip(append(slices.Clone(w.env), faultpointEnv+"="+c.srv.URL)) // each start appends its port to a copy
	stop := make(chan struct{})
	var killed atomic.Int64
	var loops sync.WaitGroup
	for range 2 {
		loops.Add(1)
		go func() { defer loops.Done(); w.tickLoop(bin, env, stop, &killed) }()
	}
	var producers sync.WaitGroup
	for p := range 4 {
		producers.Add(1)
		go func() { defer producers.Done(); w.produce(p, 8*time.Second) }()
	}
	producers.Wait()

	// Caught up: every committed event delivered and the table empty, within a deadline.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		left := 0
		if w.messages == "" {
			if err := w.db.QueryRow(`SELECT count(*) FROM outbox`).Scan(&left); err != nil {
				t.Fatal(err)
			}
		}
		w.drainQueue()
		if left == 0 && w.deliveredAll() {
			break
		}
		if time.Now().After(deadline) {
			close(stop)
			loops.Wait()
			t.Fatalf("not caught up in 2 minutes: %d rows left in the outbox; faults: %v", left, c.log())
		}
		<-time.After(100 * time.Millisecond) // polling with a deadline
	}
	close(stop)
	loops.Wait()
	if n, want := c.fired(), len(c.plan); n != want {
		t.Fatalf("%d of the %d planned kills happened: %v", n, want, c.log())
	}
	w.verify(t)
	t.Logf("%d events committed, %d rolled back; %d processes killed; faults: %v", len(w.committed), len(w.rolled), killed.Load(), c.log())
}

// deliveredAll says whether every committed event has reached a sink.
func (w *outboxWorld) deliveredAll() bool {
	seen := map[string]bool{}
	for _, h := range w.hooks {
		for _, a := range h.arrivals() {
			seen[a.ID] = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	shipped := 0
	for id, e := range w.committed {
		if aggregateTypes[e.Agg%len(aggregateTypes)] == "shipment" {
			shipped++
			continue
		}
		if !seen[id] {
			return false
		}
	}
	distinct := map[event]bool{}
	for _, a := range w.queueGot {
		distinct[a.event] = true
	}
	return len(distinct) >= shipped
}

// verify checks what arrived against what was committed.
func (w *outboxWorld) verify(t *testing.T) {
	t.Helper()
	byID := map[string]event{}
	firstAt := map[string]time.Time{}
	for typ, h := range w.hooks {
		lastSeq := map[int]int{}
		for _, a := range h.arrivals() {
			want, ok := w.committed[a.ID]
			switch {
			case w.rolled[a.ID]:
				t.Fatalf("%s: event %s of a rolled-back transaction arrived", typ, a.ID)
			case !ok:
				t.Fatalf("%s: event %s was never written", typ, a.ID)
			case want != a.event:
				t.Fatalf("%s: event %s arrived as %+v, written as %+v", typ, a.ID, a.event, want)
			case aggregateTypes[a.Agg%len(aggregateTypes)] != typ:
				t.Fatalf("%s: event %s of aggregate %d is routed to the wrong sink", typ, a.ID, a.Agg)
			}
			if _, again := byID[a.ID]; again {
				continue // a re-delivery, under the same id
			}
			byID[a.ID], firstAt[a.ID] = a.event, a.At
			if a.Seq <= lastSeq[a.Agg] {
				t.Fatalf("%s: aggregate %d's event %d arrived after its event %d", typ, a.Agg, a.Seq, lastSeq[a.Agg])
			}
			lastSeq[a.Agg] = a.Seq
		}
	}
	shipped := map[event]bool{}
	for _, a := range w.queueGot {
		if aggregateTypes[a.Agg%len(aggregateTypes)] != "shipment" {
			t.Fatalf("queue: aggregate %d's event is routed to the wrong sink", a.Agg)
		}
		shipped[a.event] = true
	}
	for id, e := range w.committed {
		if aggregateTypes[e.Agg%len(aggregateTypes)] == "shipment" {
			if !shipped[e] {
				t.Fatalf("event %s (%+v) never reached the queue", id, e)
			}
		} else if _, ok := byID[id]; !ok {
			t.Fatalf("event %s (%+v) never arrived", id, e)
		}
	}
	if w.messages != "" {
		return // no table
	}
	// No event deleted before it was delivered: each deletion is later than the event's first
	// arrival (the webhooks'; the queue's arrivals are read afterwards).
	rows, err := w.db.Query(`SELECT id, at FROM deleted`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	deleted := 0
	for rows.Next() {
		var id string
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			t.Fatal(err)
		}
		deleted++
		if first, ok := firstAt[id]; ok && at.Before(first) {
			t.Fatalf("event %s was deleted at %v, before it arrived at %v", id, at, first)
		}
	}
	if deleted != len(w.committed) {
		t.Fatalf("%d events deleted, %d committed", deleted, len(w.committed))
	}
}
