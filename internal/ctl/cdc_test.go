package ctl_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// cdcWorld is a logical poller "lg" of a PostgreSQL table of its own, a state store and its
// pollerctl environment; the app's name is fresh, so the slot names are too.
type cdcWorld struct {
	t     *testing.T
	st    store.Store
	clk   clock.Clock
	app   string
	db    *sql.DB
	table string
	env   map[string]string
	lg    *pollerdef.Def
	out   bytes.Buffer

	mu        sync.Mutex
	delivered []string // "op key row" of each row the handler got
}

func forEachCDCStore(t *testing.T, fn func(t *testing.T, w *cdcWorld)) {
	dsn := testenv.Postgres(t)
	setup := func(t *testing.T, st store.Store, clk clock.Clock) *cdcWorld {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		w := &cdcWorld{t: t, st: st, clk: clk, app: testenv.Name("app"), db: db, table: testenv.Name("lg")}
		w.env = map[string]string{"POLLER_APP_NAME": w.app, "LG_DB_DRIVER": "postgres", "LG_DB_CONNECTION": dsn, "LG_SCHEDULE": "*/10 * * * * *"}
		w.exec("CREATE TABLE " + w.table + " (id BIGINT PRIMARY KEY, v TEXT NOT NULL)")
		t.Cleanup(func() {
			for _, s := range []string{w.slot("lg"), w.slot("lgcopy")} {
				db.Exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", s)
				db.Exec("DROP PUBLICATION IF EXISTS " + s)
			}
			db.Exec("DROP TABLE IF EXISTS " + w.table)
			db.Close()
		})
		w.lg = pollerdef.Of(poller.New("lg", w.table, poller.Logical, func(_ context.Context, b *poller.Batch[poller.Row]) error {
			w.mu.Lock()
			defer w.mu.Unlock()
			for _, r := range b.Raw {
				row, _ := json.Marshal(r)
				w.delivered = append(w.delivered, fmt.Sprintf("%s %v %s", r.Op(), r.Key()["id"], row))
			}
			return nil
		}, poller.WithColumns("id", "v"), poller.WithKey("id")))
		return w
	}
	t.Run("memstore", func(t *testing.T) {
		clk := clock.NewFake(time.Now())
		fn(t, setup(t, memstore.New(clk), clk))
	})
	t.Run("azurite", func(t *testing.T) {
		cs := testenv.Azurite(t)
		st, err := blobstore.New(blobstore.Settings{Setting: "test", ConnectionString: cs, Container: testenv.Name("ctl-")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		fn(t, setup(t, st, clock.System{}))
	})
}

func (w *cdcWorld) slot(pollerName string) string { return appsettings.SlotName(w.app, pollerName) }

func (w *cdcWorld) exec(qs ...string) {
	w.t.Helper()
	for _, q := range qs {
		if _, err := w.db.Exec(q); err != nil {
			w.t.Fatalf("%s: %v", q, err)
		}
	}
}

func (w *cdcWorld) run(args ...string) int {
	w.t.Helper()
	w.out.Reset()
	if f, ok := w.clk.(*clock.Fake); ok {
		f.Advance(time.Millisecond)
	}
	return ctl.Run(ctx, args, ctl.Env{
		Store: w.st, App: w.app, Getenv: func(k string) string { return w.env[k] },
		Pollers: []*pollerdef.Def{orders, w.lg}, Out: &w.out, In: strings.NewReader(""), Clock: w.clk, Actor: "pollerctl/test",
	})
}

// must runs a command that must exit with code and say each of says.
func (w *cdcWorld) must(code int, args []string, says ...string) string {
	w.t.Helper()
	if got := w.run(args...); got != code {
		w.t.Fatalf("pollerctl %s: exit %d, want %d\n%s", strings.Join(args, " "), got, code, w.out.String())
	}
	for _, s := range says {
		if !strings.Contains(w.out.String(), s) {
			w.t.Errorf("pollerctl %s does not say %q:\n%s", strings.Join(args, " "), s, w.out.String())
		}
	}
	return w.out.String()
}

func (w *cdcWorld) exists(name string) (slot, pub bool) {
	w.t.Helper()
	if err := w.db.QueryRow("SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1), EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)",
		name).Scan(&slot, &pub); err != nil {
		w.t.Fatal(err)
	}
	return slot, pub
}

func (w *cdcWorld) confirmed(slot string) pgcdc.Position {
	w.t.Helper()
	st, err := pgcdc.SlotStatus(ctx, w.db, slot)
	if err != nil || !st.Exists {
		w.t.Fatalf("slot %s: %+v %v", slot, st, err)
	}
	p, ok := st.Confirmed()
	if !ok {
		w.t.Fatalf("slot %s: no confirmed position", slot)
	}
	return p
}

func (w *cdcWorld) doc(name string) *state.Doc {
	w.t.Helper()
	b, err := w.st.Get(ctx, blobpath.State(w.app, name))
	if err != nil {
		w.t.Fatal(err)
	}
	d, err := state.Decode(name, name, b.Data)
	if err != nil {
		w.t.Fatal(err)
	}
	return d
}

// TestCDCEnableDisable: cdc enable is a dry run until --yes, says what it needs and what the
// replica identity means, then creates the publication and the slot; disable refuses while a
// tick holds the lease, says what is lost, and drops both. Neither works on a keyset poller.
func TestCDCEnableDisable(t *testing.T) {
	forEachCDCStore(t, func(t *testing.T, w *cdcWorld) {
		slot := w.slot("lg")
		w.must(ctl.ExitUsage, []string{"cdc", "enable", "orders"}, "has a timestamp+pk cursor", "cursor kind is logical")
		w.must(ctl.ExitUsage, []string{"cdc", "disable", "orders"}, "has a timestamp+pk cursor")
		w.must(ctl.ExitUsage, []string{"cdc", "enable", "nope"}, "not registered")
		w.must(ctl.ExitOK, []string{"cdc", "enable", "lg"}, "CREATE PUBLICATION \""+slot+"\" FOR TABLE \""+w.table+"\"",
			"pg_create_logical_replication_slot('"+slot+"', 'pgoutput')", "REPLICA IDENTITY DEFAULT: a delete carries only the primary key (id)",
			"[ok] REPLICATION attribute", "[ok] CREATE on database", "dry run: nothing created")
		if s, p := w.exists(slot); s || p {
			t.Fatalf("the dry run created: slot %v publication %v", s, p)
		}
		w.must(ctl.ExitOK, []string{"cdc", "enable", "lg", "--yes"}, "created publication "+slot, "created replication slot "+slot+" at ",
			"has no checkpoint yet")
		if s, p := w.exists(slot); !s || !p {
			t.Fatalf("after enable: slot %v publication %v", s, p)
		}
		w.must(ctl.ExitOK, []string{"cdc", "enable", "lg", "--yes"}, "is enabled already: nothing to do")

		// The state, then a tick's live lease: disable refuses.
		w.must(ctl.ExitOK, []string{"reset", "lg", "--to-beginning", "--yes"})
		m := w.managerLG("worker-1")
		snap, err := m.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res, err := m.Acquire(ctx, snap)
		if err != nil || !res.Won() {
			t.Fatalf("acquire: %+v %v", res, err)
		}
		w.must(ctl.ExitRefused, []string{"cdc", "disable", "lg", "--yes"}, "worker-1 holds a live lease on lg")
		if err := res.Lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		w.must(ctl.ExitOK, []string{"cdc", "disable", "lg"}, "pg_drop_replication_slot('"+slot+"')", "DROP PUBLICATION \""+slot+"\"",
			"lost: the slot's stream", "dry run: nothing dropped")
		if s, p := w.exists(slot); !s || !p {
			t.Fatalf("the dry run dropped: slot %v publication %v", s, p)
		}
		w.must(ctl.ExitOK, []string{"cdc", "disable", "lg", "--yes"}, "dropped replication slot "+slot, "dropped publication "+slot)
		if s, p := w.exists(slot); s || p {
			t.Fatalf("after disable: slot %v publication %v", s, p)
		}
		w.must(ctl.ExitOK, []string{"cdc", "disable", "lg", "--yes"}, "nothing to do")

		// A setup error: its message, and nothing created.
		w.exec("ALTER TABLE " + w.table + " REPLICA IDENTITY NOTHING")
		w.must(ctl.ExitRefused, []string{"cdc", "enable", "lg", "--yes"}, "REPLICA IDENTITY NOTHING", "nothing was created")
		if s, p := w.exists(slot); s || p {
			t.Fatalf("a refused enable created: slot %v publication %v", s, p)
		}
	})
}

// TestLogicalResetCloneStatus: a reset may not go before the slot's confirmed position; the
// beginning is where the slot is; a clone reads its own slot and copies the checkpoint only when
// that slot can serve it; the status shows the slot.
func TestLogicalResetCloneStatus(t *testing.T) {
	forEachCDCStore(t, func(t *testing.T, w *cdcWorld) {
		slot := w.slot("lg")
		w.must(ctl.ExitOK, []string{"cdc", "enable", "lg", "--yes"})
		testenv.ExecFlushed(t, w.db, "INSERT INTO "+w.table+" VALUES (1, 'a')")
		at := w.confirmed(slot)
		w.must(ctl.ExitOK, []string{"reset", "lg", "--to-beginning"}, "the beginning is where its slot "+slot+" is now, "+at.String(), "dry run")
		w.must(ctl.ExitOK, []string{"reset", "lg", "--to-beginning", "--yes"})
		before := w.doc("lg")
		w.must(ctl.ExitRefused, []string{"reset", "lg", "--to-cursor", "0/1", "--yes"}, "position 0/1 is before replication slot "+slot+"'s confirmed position "+at.String(),
			"that WAL is gone", "--to-cursor "+at.String(), "nothing written")
		w.must(ctl.ExitUsage, []string{"reset", "lg", "--to-cursor", "yesterday", "--yes"}, "nothing written")
		w.must(ctl.ExitRefused, []string{"reset", "lg", "--to-cursor", "FF/FFFFFFFF", "--yes"}, "position FF/FFFFFFFF is past the end of the WAL", "nothing written")
		w.must(ctl.ExitOK, []string{"delete", "lg"}, "starts where its replication slot is", "pollerctl cdc disable lg --yes` first", "dry run")
		if d := w.doc("lg"); d.Lease.FencingToken != before.Lease.FencingToken {
			t.Fatal("a refused reset wrote the state")
		}
		later := pgcdc.Position{LSN: at.LSN + 16, Changes: 2}
		w.must(ctl.ExitOK, []string{"reset", "lg", "--to-cursor", later.String(), "--yes"}, "is at or after replication slot")
		if c := w.doc("lg").Checkpoint.Cursor; c == nil || string(c.Value) != `"`+later.String()+`"` || c.Kind != state.KindLogical {
			t.Fatalf("after the reset: %+v", c)
		}

		// The status shows the slot, and JSON carries it.
		w.run("status", "lg", "--json")
		var rows []struct {
			Slot *struct {
				pgcdc.SlotState
				From             string `json:"from"`
				MaxRetainedBytes int64  `json:"max_retained_bytes"`
			} `json:"slot"`
			Probe *json.RawMessage `json:"probe"`
		}
		if err := json.Unmarshal(w.out.Bytes(), &rows); err != nil || len(rows) != 1 {
			t.Fatalf("status --json: %v\n%s", err, w.out.String())
		}
		if s := rows[0].Slot; s == nil || s.Name != slot || s.From != "probe" || s.RetainedBytes == nil || s.MaxRetainedBytes != appsettings.DefaultMaxRetained {
			t.Fatalf("status: slot %+v (probe %s)", rows[0].Slot, *rows[0].Probe)
		}
		w.run("status", "lg")
		if !strings.Contains(w.out.String(), "lg: replication slot "+slot+": keeps ") {
			t.Errorf("status does not show the slot:\n%s", w.out.String())
		}

		// Clone: its own slot, which does not exist yet.
		copySlot := w.slot("lgcopy")
		w.must(ctl.ExitRefused, []string{"clone", "lg", "--to", "lgcopy", "--yes"}, "reads its own replication slot "+copySlot,
			"run `pollerctl cdc enable lgcopy --yes` first", "nothing written")
		// Made now, the new slot starts after lg's checkpoint? lg is at `later`, past the WAL of
		// now only if nothing was written since: write something, so the new slot is ahead.
		testenv.ExecFlushed(t, w.db, "INSERT INTO "+w.table+" VALUES (2, 'b')")
		w.exec("SELECT pg_create_logical_replication_slot('" + copySlot + "', 'pgoutput')")
		w.must(ctl.ExitOK, []string{"reset", "lg", "--to-cursor", at.String(), "--yes"})
		w.must(ctl.ExitRefused, []string{"clone", "lg", "--to", "lgcopy", "--yes"}, "after where lg is (its checkpoint is "+at.String()+")",
			"copying the checkpoint would skip them silently", "--from-slot-start")
		if _, err := w.st.Get(ctx, blobpath.State(w.app, "lgcopy")); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a refused clone wrote state: %v", err)
		}
		// Once lg's checkpoint is at or past the new slot, the clone goes on exactly there.
		ahead := w.confirmed(copySlot)
		ahead.Changes = 1
		w.must(ctl.ExitOK, []string{"reset", "lg", "--to-cursor", ahead.String(), "--yes"})
		w.must(ctl.ExitOK, []string{"clone", "lg", "--to", "lgcopy", "--yes"}, "goes on exactly where lg is", "read through lgcopy's own slot")
		c := w.doc("lgcopy")
		if cur := c.Checkpoint.Cursor; cur == nil || string(cur.Value) != `"`+ahead.String()+`"` || c.SourceFingerprint == w.doc("lg").SourceFingerprint {
			t.Fatalf("the clone: cursor %+v, fingerprint %s (lg's %s)", cur, c.SourceFingerprint, w.doc("lg").SourceFingerprint)
		}
	})
}

// TestLogicalDeadLetterReplay: a dead-lettered change of a logical poller is replayed by its
// letter's key as the row's current state: an update of the row as it is, a delete of a key
// still gone; a change undone by a later one is not replayed. Letters record each row's op.
func TestLogicalDeadLetterReplay(t *testing.T) {
	forEachCDCStore(t, func(t *testing.T, w *cdcWorld) {
		w.must(ctl.ExitOK, []string{"cdc", "enable", "lg", "--yes"})
		w.must(ctl.ExitOK, []string{"reset", "lg", "--to-beginning", "--yes"})
		w.exec("INSERT INTO " + w.table + " VALUES (1, 'now'), (3, 'back')")
		pos := pgcdc.Position{LSN: 0x100}.Cursor()
		key := func(id int) map[string]json.RawMessage {
			return map[string]json.RawMessage{"id": json.RawMessage(fmt.Sprint(id))}
		}
		letter := &deadletter.Letter{Poller: "lg", BatchID: "batch_0123456789abcdef01234567", SourceFingerprint: w.doc("lg").SourceFingerprint,
			BatchRows: 4, Rows: []deadletter.Row{
				{Op: "insert", Key: key(1), Cursor: pos, Data: json.RawMessage(`{"id":1,"v":"then"}`), Error: "500", Attempts: 5},
				{Op: "delete", Key: key(2), Cursor: pos, Data: json.RawMessage(`{"id":2,"v":null}`), Error: "500", Attempts: 5},
				{Op: "delete", Key: key(3), Cursor: pos, Data: json.RawMessage(`{"id":3,"v":null}`), Error: "500", Attempts: 5},
				{Op: "update", Key: key(4), Cursor: pos, Data: json.RawMessage(`{"id":4,"v":"x"}`), Error: "500", Attempts: 5},
			}}
		if _, err := deadletter.Write(ctx, w.st, w.app, letter); err != nil {
			t.Fatal(err)
		}
		w.must(ctl.ExitOK, []string{"deadletter", "replay", "lg", letter.BatchID}, "each as the row is now", "dry run")
		w.must(ctl.ExitOK, []string{"deadletter", "replay", "lg", letter.BatchID, "--yes"}, "replayed 2 row(s)",
			`delete {"id":3} (the row exists again: a later insert supersedes this delete)`, `update {"id":4} (the row is gone`)
		want := []string{`update 1 {"id":1,"v":"now"}`, `delete 2 {"id":2,"v":null}`}
		if strings.Join(w.delivered, "\n") != strings.Join(want, "\n") {
			t.Fatalf("delivered:\n%s\nwant:\n%s", strings.Join(w.delivered, "\n"), strings.Join(want, "\n"))
		}
		if _, err := w.st.Get(ctx, blobpath.DeadLetter(w.app, "lg", letter.BatchID)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the replayed letter is still there: %v", err)
		}
	})
}

// managerLG is a ticking worker's lease manager on lg, with the fingerprint its reset recorded.
func (w *cdcWorld) managerLG(owner string) *lease.Manager {
	w.t.Helper()
	m, err := lease.New(w.st, lease.Config{Poller: "lg", Blob: blobpath.State(w.app, "lg"), Owner: owner, Fingerprint: w.doc("lg").SourceFingerprint, Clock: w.clk})
	if err != nil {
		w.t.Fatal(err)
	}
	return m
}

// TestCDCEnableFirstTick: after cdc enable --yes, a poller without a checkpoint is told where its
// first tick starts, by its initial mode: the changes committed from now on, or (with "initial":
// "snapshot") the table's rows first.
func TestCDCEnableFirstTick(t *testing.T) {
	forEachCDCStore(t, func(t *testing.T, w *cdcWorld) {
		snap := pollerdef.Of(poller.New("lgsnap", w.table, poller.Logical, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
			poller.WithColumns("id", "v"), poller.WithKey("id"), poller.WithInitialSnapshot()))
		run := func(args ...string) string {
			t.Helper()
			var out bytes.Buffer
			if code := ctl.Run(ctx, args, ctl.Env{
				Store: w.st, App: w.app, Getenv: func(k string) string { return w.env[k] }, Pollers: []*pollerdef.Def{w.lg, snap},
				Out: &out, In: strings.NewReader(""), Clock: w.clk, Actor: "pollerctl/test",
			}); code != ctl.ExitOK {
				t.Fatalf("pollerctl %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
			}
			return out.String()
		}
		w.env["LGSNAP_DB_DRIVER"], w.env["LGSNAP_DB_CONNECTION"] = w.env["LG_DB_DRIVER"], w.env["LG_DB_CONNECTION"]
		t.Cleanup(func() { run("cdc", "disable", "lgsnap", "--yes") })
		now := "its first tick reads from the slot's position, the changes committed from now on"
		rowsFirst := "its first tick reads the table's rows first"
		if out := run("cdc", "enable", "lg", "--yes"); !strings.Contains(out, "lg has no checkpoint yet: "+now) || strings.Contains(out, rowsFirst) {
			t.Errorf("a poller that starts now:\n%s", out)
		}
		if out := run("cdc", "enable", "lgsnap", "--yes"); !strings.Contains(out, `lgsnap has no checkpoint yet and starts with a snapshot ("initial": "snapshot"): `+rowsFirst) ||
			strings.Contains(out, now) {
			t.Errorf("a poller that starts with a snapshot:\n%s", out)
		}
	})
}
