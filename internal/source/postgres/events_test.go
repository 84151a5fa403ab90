package postgres_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// messagesOutbox makes a publication of no table and a slot, owned by the test, and returns the
// database and a Config reading the messages of a prefix of the test's own as a messages outbox
// (id from the payload's "event_id" field, type and headers too).
func messagesOutbox(t *testing.T) (*sql.DB, string, source.Config) {
	t.Helper()
	dsn := testenv.Postgres(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	slot := strings.ToLower(testenv.Name("ev"))
	for _, q := range []string{"CREATE PUBLICATION " + slot, "SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		db.Exec("SELECT pg_drop_replication_slot($1)", slot)
		db.Exec("DROP PUBLICATION IF EXISTS " + slot)
	})
	prefix := slot + "-events"
	return db, prefix, source.Config{Poller: "ev", Driver: postgres.Name, DSN: dsn, Definition: sourcedef.Definition{
		Cursor: sourcedef.Cursor{Kind: state.KindLogical}, Slot: slot, Publication: slot,
		Outbox: &sourcedef.Outbox{Messages: prefix, ID: "event_id", AggregateType: "agg", AggregateID: "agg_id", Type: "kind", Headers: "meta"},
	}}
}

// openEvents opens the source of cfg, closed when the test ends.
func openEvents(t *testing.T, cfg source.Config) *source.Source {
	t.Helper()
	src, err := drivers.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// emit is a statement writing a transactional message of prefix with the event's payload.
func emit(prefix string, event int, agg string) string {
	return fmt.Sprintf(`SELECT pg_logical_emit_message(true, '%s', '{"event_id": "e%d", "agg": "order", "agg_id": "%s", "kind": "created", "meta": {"trace": "t%d"}, "n": %d}')`,
		prefix, event, agg, event, event)
}

// event is a delivered message as a test sees it.
type event struct{ id, aggType, aggID, payload, typ, headers, pos string }

// drainEvents fetches batches of size after c until none is left, committing each when commit is
// set, and returns the events and the last cursor.
func drainEvents(t *testing.T, src *source.Source, c *state.Cursor, size int, commit bool) ([]event, *state.Cursor) {
	t.Helper()
	ctx := context.Background()
	var out []event
	for {
		b, err := src.Fetch(ctx, c, size)
		if err != nil {
			t.Fatalf("fetch after %v: %v", c, err)
		}
		if len(b.Rows) == 0 {
			return out, c
		}
		if got := strings.Join(b.Columns(), ","); got != strings.Join(sourcedef.MessageColumns, ",") {
			t.Fatalf("columns %s, want %s", got, strings.Join(sourcedef.MessageColumns, ","))
		}
		for _, r := range b.Rows {
			if r.Op() != "insert" {
				t.Errorf("op %q, want insert", r.Op())
			}
			cur, _ := r.Cursor()
			v := r.Values()
			str := func(x any) string {
				switch x := x.(type) {
				case nil:
					return "<nil>"
				case string:
					return x
				case json.RawMessage:
					return string(x)
				}
				return fmt.Sprintf("%T %v", x, x)
			}
			if k := r.Key()["id"]; k != v[0] {
				t.Errorf("key %v, id %v", k, v[0])
			}
			out = append(out, event{str(v[0]), str(v[1]), str(v[2]), str(v[3]), str(v[4]), str(v[5]), string(cur.Value)})
		}
		c = b.To
		if commit {
			if err := src.Committed(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func ids(evs []event) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.id)
	}
	return strings.Join(out, " ")
}

// TestMessagesOutbox: the transactional messages of the poller's prefix arrive as events in
// commit order (two transactions committed in the other order than they began), batches
// spanning transactions; a rolled-back transaction's, a non-transactional one and another
// prefix's never; each event's columns come from the payload's fields, the payload verbatim.
func TestMessagesOutbox(t *testing.T) {
	db, prefix, cfg := messagesOutbox(t)
	ctx := context.Background()
	src := openEvents(t, cfg)

	exec(t, db, emit(prefix, 1, "a"), emit(prefix, 2, "b"))
	// Transaction B begins (writes) first and commits second: commit order is A's events first.
	txB, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txB.Exec(emit(prefix, 5, "a")); err != nil {
		t.Fatal(err)
	}
	exec(t, db, emit(prefix, 3, "b"), emit(prefix, 4, "c"))
	if _, err := txB.Exec("SET LOCAL synchronous_commit = on"); err != nil {
		t.Fatal(err)
	}
	if err := txB.Commit(); err != nil {
		t.Fatal(err)
	}
	rb, _ := db.Begin()
	rb.Exec(emit(prefix, 99, "a"))
	rb.Rollback()
	exec(t, db,
		fmt.Sprintf(`SELECT pg_logical_emit_message(false, '%s', '{"event_id": "e98", "agg": "order", "agg_id": "a"}')`, prefix),
		emit(prefix+"-other", 97, "a"),
		emit("", 96, "a"))
	exec(t, db, emit(prefix, 6, "c"))

	evs, last := drainEvents(t, src, nil, 2, true)
	if got, want := ids(evs), "e1 e2 e3 e4 e5 e6"; got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
	e := evs[0]
	if e.aggType != "order" || e.aggID != "a" || e.typ != "created" || e.headers != `{"trace": "t1"}` {
		t.Errorf("event e1's columns: %+v", e)
	}
	if want := `{"event_id": "e1", "agg": "order", "agg_id": "a", "kind": "created", "meta": {"trace": "t1"}, "n": 1}`; e.payload != want {
		t.Errorf("payload %s, want it verbatim: %s", e.payload, want)
	}
	if at, err := pgcdc.CursorPosition(last); err != nil || slotPosition(t, db, cfg.Definition.Slot).LSN != at.LSN {
		t.Errorf("the slot is not at the last checkpoint %v (%v)", at, err)
	}
	// What the status probe counts: another process's source, its peek the slot's lag.
	exec(t, db, emit(prefix, 7, "a"), emit(prefix, 8, "a"))
	if n, err := openEvents(t, cfg).Waiting(ctx, last, 100); err != nil || n != 2 {
		t.Errorf("waiting: %d, %v; want 2", n, err)
	}
	// No table: no backfill, and the refusal says so.
	if err := src.Backfills(); err == nil || !strings.Contains(err.Error(), "this outbox has none: its events are the messages of prefix "+strconv.Quote(prefix)) {
		t.Errorf("Backfills: %v", err)
	}
}

// TestMessagesOutboxResume: a reader that stops mid-way without committing, and a new one
// (another process after a crash) reading from the last committed checkpoint, deliver every
// event, the ones delivered before again with the same ids and positions; with no id field
// named, the id is the message's LSN, the same on each reading.
func TestMessagesOutboxResume(t *testing.T) {
	db, prefix, cfg := messagesOutbox(t)
	cfg.Definition.Outbox.ID = ""
	ctx := context.Background()
	open := func() *source.Source { return openEvents(t, cfg) }
	for i := range 5 {
		exec(t, db, emit(prefix, 2*i, "a"), emit(prefix, 2*i+1, "b"))
	}
	first := open()
	b1, err := first.Fetch(ctx, nil, 3)
	if err != nil || len(b1.Rows) != 3 {
		t.Fatalf("first batch: %v rows, %v", b1, err)
	}
	if err := first.Committed(ctx, b1.To); err != nil {
		t.Fatal(err)
	}
	b2, err := first.Fetch(ctx, b1.To, 3) // delivered, never committed: the process dies here
	if err != nil || len(b2.Rows) != 3 {
		t.Fatalf("second batch: %v rows, %v", b2, err)
	}
	again, _ := drainEvents(t, open(), b1.To, 4, true)
	if len(again) != 7 {
		t.Fatalf("after the restart: %d events, want the 7 after the checkpoint", len(again))
	}
	for i, r := range b2.Rows {
		if id := r.Values()[0]; id != again[i].id {
			t.Errorf("event %d: re-delivered as id %s, delivered first as %v", i, again[i].id, id)
		}
		if _, err := pglogrepl.ParseLSN(again[i].id); err != nil || !strings.Contains(again[i].payload, fmt.Sprintf(`"e%d"`, 3+i)) {
			t.Errorf("event %d: id %s (want an LSN), payload %s", i, again[i].id, again[i].payload)
		}
	}
}

// TestMessagesOutboxBadPayload: a message that is not an event the outbox reads stops the poller
// at it, after the events before it, with an error naming its LSN and the reset past it; after
// that reset the next events arrive.
func TestMessagesOutboxBadPayload(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"not JSON", `not json`, "is not a JSON object"},
		{"an array", `[1, 2]`, "is not a JSON object"},
		{"no aggregate id", `{"event_id": "x", "agg": "order"}`, `has no field "agg_id" (outbox.aggregate_id)`},
		{"an object id", `{"event_id": {}, "agg": "order", "agg_id": "a"}`, `field "event_id" (outbox.id): it is "{}", not a string or a number`},
		{"headers not an object", `{"event_id": "x", "agg": "order", "agg_id": "a", "meta": 3}`, `field "meta" (outbox.headers) is "3", not a JSON object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, prefix, cfg := messagesOutbox(t)
			ctx := context.Background()
			src := openEvents(t, cfg)
			var lsn string
			exec(t, db, emit(prefix, 1, "a"))
			tx, _ := db.Begin()
			tx.Exec("SET LOCAL synchronous_commit = on")
			if err := tx.QueryRow(`SELECT pg_logical_emit_message(true, $1, $2::text)::text`, prefix, tc.content).Scan(&lsn); err != nil {
				t.Fatal(err)
			}
			tx.Exec(emit(prefix, 2, "a"))
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			exec(t, db, emit(prefix, 3, "a"))
			b, err := src.Fetch(ctx, nil, 10)
			if err != nil || len(b.Rows) != 1 || b.Rows[0].Values()[0] != "e1" {
				t.Fatalf("the events before the bad one: %v, %v", b, err)
			}
			_, err = src.Fetch(ctx, b.To, 10)
			if !errors.Is(err, postgres.ErrBadEvent) || !errors.Is(err, source.ErrMisconfigured) {
				t.Fatalf("fetch at the bad message: %v, want ErrBadEvent", err)
			}
			for _, w := range []string{"LSN " + lsn, tc.want, "pollerctl reset ev --to-cursor "} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
			if _, again := src.Fetch(ctx, b.To, 10); again == nil || again.Error() != err.Error() {
				t.Errorf("the next fetch goes on: %v", again)
			}
			skip, _, _ := strings.Cut(err.Error()[strings.Index(err.Error(), "--to-cursor ")+len("--to-cursor "):], " ")
			c, err := src.CursorFromText(skip, nil)
			if err != nil {
				t.Fatal(err)
			}
			evs, _ := drainEvents(t, src, c, 10, false)
			if got := ids(evs); got != "e2 e3" {
				t.Errorf("after the reset past it: %s, want e2 e3", got)
			}
		})
	}
}
