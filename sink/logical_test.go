package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestLogicalToWebhook: a logical poller's inserts, updates and deletes reach a webhook sink as
// CONTRACT's messages: the op, the key, null for a delete's row (REPLICA IDENTITY DEFAULT), a
// distinct id per change even for one key changed twice in a transaction.
func TestLogicalToWebhook(t *testing.T) {
	db, dsn, table, slot := testenv.PostgresLogical(t, "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL)")
	var mu sync.Mutex
	var got []Change
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var c Change
		if err := json.Unmarshal(body, &c); err != nil {
			t.Errorf("body %s: %v", body, err)
		}
		mu.Lock()
		got = append(got, c)
		mu.Unlock()
	}))
	defer srv.Close()
	s := MustNew(Config{Type: Webhook, URL: srv.URL, Concurrency: 1})
	if err := s.Setup(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	p := poller.New("cdc", table, poller.Logical, Handler[poller.Row](s), poller.WithColumns("id", "name"), poller.WithKey("id"))
	testenv.ExecFlushed(t, db,
		"INSERT INTO "+table+" VALUES (1, 'a')", "UPDATE "+table+" SET name = 'b' WHERE id = 1",
		"INSERT INTO "+table+" VALUES (2, 'c')", "DELETE FROM "+table+" WHERE id = 2")
	sum, err := tickOnce(t, p, dsn, slot)
	if err != nil || sum.Rows != 4 || sum.Ops["delete"] != 1 || sum.Ops["insert"] != 2 || sum.Ops["update"] != 1 {
		t.Fatalf("tick: %+v %v", sum, err)
	}
	var ops []string
	ids := map[string]bool{}
	for _, c := range got {
		ops = append(ops, c.Op+" "+string(c.Row))
		ids[c.ID] = true
		if c.Cursor.Kind != "logical" || c.Key["id"] == nil {
			t.Errorf("change %+v", c)
		}
	}
	if want := `insert {"id":1,"name":"a"}, update {"id":1,"name":"b"}, insert {"id":2,"name":"c"}, delete null`; strings.Join(ops, ", ") != want {
		t.Errorf("messages: %s\nwant:     %s", strings.Join(ops, ", "), want)
	}
	if len(ids) != 4 {
		t.Errorf("%d distinct ids for 4 changes", len(ids))
	}
}

// TestLogicalImagesToWebhook: under REPLICA IDENTITY FULL the messages carry before, changed and
// tx as docs/contract.md shows them, each body byte for byte what json.Marshal(Change) writes.
func TestLogicalImagesToWebhook(t *testing.T) {
	db, dsn, table, slot := testenv.PostgresLogical(t, "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL, note text)")
	testenv.ExecFlushed(t, db, "ALTER TABLE "+table+" REPLICA IDENTITY FULL")
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var c Change
		if err := json.Unmarshal(body, &c); err != nil {
			t.Errorf("body %s: %v", body, err)
		}
		if again, _ := json.Marshal(c); string(again) != string(body) {
			t.Errorf("body %s\nis not json.Marshal's %s", body, again)
		}
		if c.Tx == nil || c.Tx.CommitTime == nil || c.Tx.CommitLSN == "" || c.Tx.ID == 0 || c.Table != table {
			t.Errorf("body %s: no transaction, or not table %s", body, table)
		}
		line := c.Op + " " + string(c.Row)
		if c.Before != nil {
			line += " before " + string(c.Before)
		}
		if c.Changed != nil {
			line += fmt.Sprintf(" changed %q", *c.Changed)
		}
		if c.Tx != nil {
			line += fmt.Sprintf(" #%d %v", c.Tx.Index, c.Tx.Last)
		}
		mu.Lock()
		got = append(got, line)
		mu.Unlock()
	}))
	defer srv.Close()
	s := MustNew(Config{Type: Webhook, URL: srv.URL, Concurrency: 1})
	if err := s.Setup(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	p := poller.New("cdc", table, poller.Logical, Handler[poller.Row](s), poller.WithColumns("id", "name", "note"), poller.WithKey("id"))
	testenv.ExecFlushed(t, db, "INSERT INTO "+table+" VALUES (1, 'a', NULL)", "UPDATE "+table+" SET name = 'b' WHERE id = 1")
	testenv.ExecFlushed(t, db, "DELETE FROM "+table+" WHERE id = 1")
	if sum, err := tickOnce(t, p, dsn, slot); err != nil || sum.Rows != 3 {
		t.Fatalf("tick: %+v %v", sum, err)
	}
	want := []string{
		`insert {"id":1,"name":"a","note":null} #1 false`,
		`update {"id":1,"name":"b","note":null} before {"id":1,"name":"a","note":null} changed ["name"] #2 true`,
		`delete {"id":1,"name":"b","note":null} before {"id":1,"name":"b","note":null} #1 true`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// tickOnce runs one tick of the logical poller p over the slot and publication slot, with a
// state store in memory.
func tickOnce(t *testing.T, p *poller.Poller, dsn, slot string) (tick.Summary, error) {
	t.Helper()
	r := logicalRunner(t, p, dsn, slot)
	defer r.Close()
	return r.Tick(context.Background(), "")
}

// logicalRunner is a tick runner of p, a logical poller reading slot on dsn, with its state in
// memory: its ticks go on from each other's checkpoints.
func logicalRunner(t *testing.T, p *poller.Poller, dsn, slot string) *tick.Runner {
	t.Helper()
	r, err := tick.Open(context.Background(), tick.Config{Poller: pollerdef.Of(p), Store: &lease.Counting{Store: memstore.New(nil)}, App: "test", Owner: "test/1",
		Settings: appsettings.Settings{Driver: postgres.Name, DSN: dsn, BatchSize: 10, LeaseTTL: lease.DefaultTTL,
			HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: time.Hour, Slot: slot, Publication: slot}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestOneKeyInOrder: at any concurrency, the messages of one key go one after another, in
// order, while different keys overlap.
func TestOneKeyInOrder(t *testing.T) {
	var msgs []Message
	for i := range 60 {
		msgs = append(msgs, Message{Key: fmt.Sprint(i % 3), ID: fmt.Sprint(i)})
	}
	var mu sync.Mutex
	last := map[string]int{}
	inflight := map[string]bool{}
	err := eachInOrder(context.Background(), msgs, 16, func(_ context.Context, m Message) error {
		mu.Lock()
		if inflight[m.Key] {
			t.Errorf("two messages of key %s at once", m.Key)
		}
		inflight[m.Key] = true
		var id int
		fmt.Sscan(m.ID, &id)
		if prev, ok := last[m.Key]; ok && prev > id {
			t.Errorf("key %s: message %d after %d", m.Key, id, prev)
		}
		last[m.Key] = id
		mu.Unlock()
		runtime.Gosched()
		mu.Lock()
		inflight[m.Key] = false
		mu.Unlock()
		return nil
	})
	if err != nil || len(last) != 3 || last["0"] != 57 || last["1"] != 58 || last["2"] != 59 {
		t.Fatalf("%v, last %v", err, last)
	}
}

// TestSeveralTablesIDs: the message ids of a poller of two tables mix in each row's table (the
// batch's Tables say it reads two); a batch made by hand without Tables, its rows of both
// tables, gets the same ids as the poller's own.
func TestSeveralTablesIDs(t *testing.T) {
	db, dsn, orders, slot := testenv.PostgresLogical(t, "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL)")
	lines := testenv.Name("lines")
	testenv.ExecFlushed(t, db, "CREATE TABLE "+lines+" (id bigint PRIMARY KEY, qty int NOT NULL)", "ALTER PUBLICATION "+slot+" ADD TABLE "+lines)
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + lines) })
	var got *poller.Batch[poller.Row]
	p := poller.New("cdc2", orders, poller.Logical, func(_ context.Context, b *poller.Batch[poller.Row]) error { got = b; return nil },
		poller.WithColumns("id", "name"), poller.WithKey("id"), poller.WithTables(poller.Table{Name: lines, Columns: []string{"id", "qty"}, Key: []string{"id"}}))
	testenv.ExecFlushed(t, db, "BEGIN; INSERT INTO "+orders+" VALUES (1, 'a'); INSERT INTO "+lines+" VALUES (1, 5); COMMIT")
	if sum, err := tickOnce(t, p, dsn, slot); err != nil || sum.Rows != 2 {
		t.Fatalf("tick: %+v %v", sum, err)
	}
	if len(got.Tables) != 2 {
		t.Fatalf("the batch names tables %v", got.Tables)
	}
	msgs, err := Messages(got, ModeRow)
	if err != nil || len(msgs) != 2 || msgs[0].ID == msgs[1].ID {
		t.Fatalf("messages %+v %v: want two of their own ids", msgs, err)
	}
	byHand := *got
	byHand.Tables = nil
	again, err := Messages(&byHand, ModeRow)
	if err != nil || again[0].ID != msgs[0].ID || again[1].ID != msgs[1].ID {
		t.Fatalf("made by hand: %+v %v, want the ids %s and %s", again, err, msgs[0].ID, msgs[1].ID)
	}
}

// TestLogicalOutbox: a logical outbox's events reach the webhook as their payloads: an event
// inserted and deleted in one transaction (the table stays empty) once, an update as the event
// again under its id, and no delete at all; a batch of deletes alone commits with nothing sent,
// and the next tick finds nothing.
func TestLogicalOutbox(t *testing.T) {
	db, dsn, table, slot := testenv.PostgresLogical(t, "CREATE TABLE %s (seq bigint PRIMARY KEY, event_id uuid NOT NULL, agg_type text NOT NULL, agg_id bigint NOT NULL, payload jsonb NOT NULL)")
	var (
		mu  sync.Mutex
		got []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Header.Get("Idempotency-Key")+" "+r.Header.Get("Content-Type")+" "+string(body))
		mu.Unlock()
	}))
	defer srv.Close()
	s := MustNew(Config{Type: Webhook, URL: srv.URL, Concurrency: 1})
	if err := s.Setup(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	p := poller.New("cdc-outbox", table, poller.Logical, Handler[poller.Row](s), poller.WithColumns("seq"), poller.WithKey("seq"),
		poller.WithOutbox(poller.Outbox{ID: "event_id", AggregateType: "agg_type", AggregateID: "agg_id", Payload: "payload"}))
	r := logicalRunner(t, p, dsn, slot)
	defer r.Close()
	const e1, e2 = "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"
	testenv.ExecFlushed(t, db, "INSERT INTO "+table+` VALUES (1, '`+e1+`', 'order', 7, '{"n": 1}')`, "DELETE FROM "+table+" WHERE seq = 1")
	testenv.ExecFlushed(t, db, "INSERT INTO "+table+` VALUES (2, '`+e2+`', 'order', 7, '{"n": 2}')`)
	testenv.ExecFlushed(t, db, "UPDATE "+table+` SET payload = '{"n": 3}' WHERE seq = 2`)
	sum, err := r.Tick(context.Background(), "")
	if err != nil || sum.Rows != 4 {
		t.Fatalf("tick: %+v %v", sum, err)
	}
	want := e1 + ` application/json {"n": 1}, ` + e2 + ` application/json {"n": 2}, ` + e2 + ` application/json {"n": 3}`
	if strings.Join(got, ", ") != want {
		t.Errorf("received %s\nwant     %s", strings.Join(got, ", "), want)
	}
	got = nil
	testenv.ExecFlushed(t, db, "DELETE FROM "+table+" WHERE seq = 2")
	if sum, err = r.Tick(context.Background(), ""); err != nil || sum.Rows != 1 || sum.Batches != 1 || len(got) != 0 {
		t.Fatalf("a batch of a delete alone: %+v %v, received %q", sum, err, got)
	}
	if sum, err = r.Tick(context.Background(), ""); err != nil || sum.Outcome != "idle" {
		t.Fatalf("the tick after it: %+v %v (the delete's batch was not committed)", sum, err)
	}
}
