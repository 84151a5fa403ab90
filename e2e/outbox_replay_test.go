package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestOutboxQuarantineReplay: with OUTBOX_ON_POISON=quarantine, the events whose aggregate type
// no route names (refund) are dead-lettered alone while the others are delivered, and (the
// table's variant) the cleanup deletes their rows with the others'; once poller.json routes
// refunds to a sink, `pollerctl deadletter replay --yes` delivers them from their letter, with
// their ids and payloads, in their order, and deletes the letter. The same for the emit-message
// variant, which has no table to read them again from.
func TestOutboxQuarantineReplay(t *testing.T) {
	for _, messages := range []bool{false, true} {
		t.Run(map[bool]string{false: "table", true: "messages"}[messages], func(t *testing.T) {
			w := newOutboxWorld(t, messages)
			env := append(slices.Clone(w.env), "OUTBOX_ON_POISON=quarantine")
			p := start(t, env)

			tickOutboxUntilIdle(t, p, time.Minute) // a logical poller's first tick starts where the WAL is ("initial": "now")
			events := []struct {
				id, typ string
				agg     int
			}{{"e1", "order", 1}, {"r1", "refund", 2}, {"e2", "payment", 3}, {"r2", "refund", 2}, {"e3", "order", 1}}
			for i, e := range events {
				payload, _ := json.Marshal(event{Agg: e.agg, Seq: i + 1})
				if messages { // flushed: logical decoding reads what is flushed, and the test server commits asynchronously
					fields, _ := json.Marshal(map[string]any{"id": e.id, "aggregate_type": e.typ, "aggregate_id": fmt.Sprint(e.agg), "agg": e.agg, "seq": i + 1})
					testenv.ExecFlushed(t, w.db, fmt.Sprintf(`SELECT pg_logical_emit_message(true, '%s', '%s')`, w.messages, fields))
				} else if _, err := w.db.Exec(`INSERT INTO outbox (id, aggregate_type, aggregate_id, payload) VALUES ($1, $2, $3, $4)`,
					e.id, e.typ, fmt.Sprint(e.agg), payload); err != nil {
					t.Fatal(err)
				}
			}
			tickOutboxUntilIdle(t, p, time.Minute)

			app := strings.TrimPrefix(env[slices.IndexFunc(env, func(s string) bool { return strings.HasPrefix(s, "POLLER_APP_NAME=") })], "POLLER_APP_NAME=")
			st, err := blobstore.New(blobstore.Settings{Setting: "test", ConnectionString: testenv.Azurite(t), Container: "db-state"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ids, err := deadletter.List(context.Background(), st, app, "outbox")
			if err != nil || len(ids) == 0 {
				t.Fatalf("no dead letter (%v); the handler printed:\n%s", err, p.out.String())
			}
			var dead []string
			for _, id := range ids {
				l, _, err := deadletter.Read(context.Background(), st, app, "outbox", id)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range l.Rows {
					dead = append(dead, string(r.Key["id"]))
					if !strings.Contains(r.Error, "refund") {
						t.Errorf("dead row %s: error %q does not name the value", r.Key["id"], r.Error)
					}
				}
			}
			if want := []string{`"r1"`, `"r2"`}; !slices.Equal(dead, want) {
				t.Fatalf("dead rows %v; want %v", dead, want)
			}
			got := func(s *eventSink) (ids []string) {
				for _, a := range s.arrivals() {
					ids = append(ids, a.ID)
				}
				return ids
			}
			if o, pay := got(w.hooks["order"]), got(w.hooks["payment"]); !slices.Equal(o, []string{"e1", "e3"}) || !slices.Equal(pay, []string{"e2"}) {
				t.Fatalf("delivered: order %v, payment %v", o, pay)
			}
			if !messages {
				var left int
				if err := w.db.QueryRow(`SELECT count(*) FROM outbox`).Scan(&left); err != nil || left != 0 {
					t.Fatalf("%d rows left in the outbox (%v): the cleanup deletes the dead-lettered events' rows too", left, err)
				}
			}

			// Route refunds to a webhook, and replay.
			refunds := newEventSink(t)
			spec := filepath.Join(w.root, "outbox", "poller.json")
			b, err := os.ReadFile(spec)
			if err != nil {
				t.Fatal(err)
			}
			routed := strings.Replace(string(b), `"order": {`, fmt.Sprintf(`"refund": {"type": "webhook", "url": %q}, "order": {`, refunds.srv.URL), 1)
			if err := os.WriteFile(spec, []byte(routed), 0o644); err != nil {
				t.Fatal(err)
			}
			out := ctlRun(t, env, "deadletter", "replay", "outbox", ids[0], "--yes")
			if !strings.Contains(out, "as the dead letter holds them") || !strings.Contains(out, "replayed 2 row") {
				t.Errorf("pollerctl deadletter replay:\n%s", out)
			}
			arr := refunds.arrivals()
			if len(arr) != 2 || arr[0].ID != "r1" || arr[1].ID != "r2" || arr[0].event != (event{Agg: 2, Seq: 2}) || arr[1].event != (event{Agg: 2, Seq: 4}) {
				t.Fatalf("the refund webhook got %+v; want r1 {2 2} then r2 {2 4}", arr)
			}
			if left, err := deadletter.List(context.Background(), st, app, "outbox"); err != nil || len(left) != 0 {
				t.Fatalf("letters left after the replay: %v %v", left, err)
			}
		})
	}
}

// tickOutboxUntilIdle ticks p's outbox poller until a tick is idle.
func tickOutboxUntilIdle(t *testing.T, p *proc, deadline time.Duration) {
	t.Helper()
	untilIdle(t, p, p.tickOutbox, deadline)
}

// tickOutbox is a timer's invocation of the outbox poller.
func (p *proc) tickOutbox() reply {
	return p.post("/outbox", strings.ReplaceAll(hostBody, `"orders"`, `"outbox"`))
}
