package ctl_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/pollers"
)

var ctx = context.Background()

var orders = pollerdef.Of(poller.New("orders", "orders", poller.TimestampPK, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
	poller.WithColumns("id", "updated_at"), poller.WithKey("id"), poller.WithCursorColumn("updated_at")))

// settings name a real SQLite orders table (made by TestMain): resets check their values against
// its column types.
var settings = map[string]string{"ORDERS_DB_DRIVER": "sqlite"}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ctl-test-")
	if err != nil {
		panic(err)
	}
	dsn := filepath.Join(dir, "orders.db")
	db, err := sql.Open("sqlite", dsn)
	if err == nil {
		_, err = db.Exec(`CREATE TABLE orders (id BIGINT PRIMARY KEY, updated_at TEXT NOT NULL)`)
		db.Close()
	}
	if err != nil {
		panic(err)
	}
	settings["ORDERS_DB_CONNECTION"] = dsn
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// world is a state store (memstore on a fake clock, or Azurite) and a pollerctl environment.
type world struct {
	t   *testing.T
	st  store.Store
	clk clock.Clock
	app string
	out bytes.Buffer
}

func forEachStore(t *testing.T, fn func(t *testing.T, w *world)) {
	t.Run("memstore", func(t *testing.T) {
		clk := clock.NewFake(time.Now())
		fn(t, &world{t: t, st: memstore.New(clk), clk: clk, app: "test"})
	})
	t.Run("azurite", func(t *testing.T) {
		cs := testenv.Azurite(t)
		st, err := blobstore.New(blobstore.Settings{Setting: "test", ConnectionString: cs, Container: testenv.Name("ctl-")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		fn(t, &world{t: t, st: st, clk: clock.System{}, app: testenv.Name("app-")})
	})
}

func (w *world) run(args ...string) int {
	w.t.Helper()
	w.out.Reset()
	if f, ok := w.clk.(*clock.Fake); ok {
		f.Advance(time.Millisecond) // commands run at distinct times, as they would
	}
	code := ctl.Run(ctx, args, ctl.Env{
		Store: w.st, App: w.app, Getenv: func(k string) string { return settings[k] },
		Pollers: []*pollerdef.Def{orders}, Out: &w.out, In: strings.NewReader(""), Clock: w.clk, Actor: "pollerctl/test",
	})
	return code
}

func (w *world) blob() string { return "state/" + w.app + "/orders.json" }

func (w *world) raw() store.Blob {
	w.t.Helper()
	b, err := w.st.Get(ctx, w.blob())
	if err != nil {
		w.t.Fatal(err)
	}
	return b
}

func (w *world) doc() *state.Doc {
	w.t.Helper()
	d, err := state.Decode(w.blob(), "orders", w.raw().Data)
	if err != nil {
		w.t.Fatal(err)
	}
	return d
}

// manager is a ticking worker's lease manager, with the configured source's fingerprint.
func (w *world) manager(owner string) *lease.Manager {
	w.t.Helper()
	loc, _ := drivers.ParseLocation("sqlite", settings["ORDERS_DB_CONNECTION"])
	m, err := lease.New(w.st, lease.Config{Poller: "orders", Blob: w.blob(), Owner: owner, Fingerprint: source.Fingerprint("sqlite", loc, orders.Source()), Clock: w.clk})
	if err != nil {
		w.t.Fatal(err)
	}
	return m
}

func (w *world) acquire(owner string) *lease.Lease {
	w.t.Helper()
	m := w.manager(owner)
	snap, err := m.Read(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	res, err := m.Acquire(ctx, snap)
	if err != nil || !res.Won() {
		w.t.Fatalf("acquire: %+v %v", res, err)
	}
	return res.Lease
}

func cp(ts string, id int) state.Checkpoint {
	v, _ := json.Marshal(ts)
	return state.Checkpoint{Cursor: &state.Cursor{Kind: state.KindTimestampPK, Value: v, Tiebreaker: map[string]json.RawMessage{"id": json.RawMessage(itoa(id))}}, LastSuccessfulBatchID: "batch_x"}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestStatusAndResets(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		// No tick has run: the poller is stopped, and status exits 3 so that scripts can tell.
		// (--no-probe: these settings name a database that does not exist.)
		if code := w.run("status", "--no-probe"); code != ctl.ExitUnhealthy || !strings.Contains(w.out.String(), "orders") ||
			!strings.Contains(w.out.String(), "(none)") || !strings.Contains(w.out.String(), "STOPPED") || !strings.Contains(w.out.String(), "no tick recorded yet") {
			t.Fatalf("status without state: %d\n%s", code, w.out.String())
		}
		l := w.acquire("worker-1")
		if err := l.CommitAndRelease(ctx, cp("2026-04-07T01:23:45.123456Z", 42)); err != nil {
			t.Fatal(err)
		}
		if code := w.run("status", "--json", "--no-probe"); code != 0 {
			t.Fatalf("status --json: %d %s", code, w.out.String())
		}
		var rows []ctl.Row
		if err := json.Unmarshal(w.out.Bytes(), &rows); err != nil || len(rows) != 1 || rows[0].State != "ok" || rows[0].FencingToken != 1 ||
			rows[0].Health != "ok" || rows[0].LastTick == nil || rows[0].LastTick.From != "state" ||
			rows[0].LagSeconds != nil || rows[0].LeaseLive || string(rows[0].Cursor.Tiebreaker["id"]) != "42" {
			t.Fatalf("status --json: %v %s", err, w.out.String())
		}

		// A dry run writes nothing: the bytes are unchanged.
		before := w.raw()
		if code := w.run("reset", "orders", "--to-beginning"); code != 0 || !strings.Contains(w.out.String(), "dry run") {
			t.Fatalf("dry run: %d %s", code, w.out.String())
		}
		if after := w.raw(); !bytes.Equal(after.Data, before.Data) || after.ETag != before.ETag {
			t.Fatal("the dry run wrote")
		}

		// --to-cursor, validated against the cursor kind and key.
		for _, bad := range [][]string{
			{"reset", "orders", "--to-cursor", "yesterday", "--pk", "id=1"},
			{"reset", "orders", "--to-cursor", "2026-01-01T00:00:00Z"},
			{"reset", "orders", "--to-cursor", "2026-01-01T00:00:00Z", "--pk", "other=1"},
			{"reset", "orders", "--to-beginning", "--from-file", "x"},
			{"reset", "orders"},
			{"reset", "invoices", "--to-beginning"},
			{"bogus"},
		} {
			if code := w.run(bad...); code != 2 {
				t.Errorf("%v: exit %d, want 2\n%s", bad, code, w.out.String())
			}
		}
		if code := w.run("reset", "orders", "--to-cursor", "2026-01-01T00:00:00Z", "--pk", "id=7", "--yes"); code != 0 {
			t.Fatalf("reset --to-cursor: %d %s", code, w.out.String())
		}
		d := w.doc()
		if d.Lease.FencingToken != 2 || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "7" || !d.Lease.Released() {
			t.Fatalf("after reset: %+v", d)
		}

		// The backup holds the old document and restores with --from-file.
		names, err := w.st.List(ctx, "backups/"+w.app+"/orders/")
		if err != nil || len(names) != 1 {
			t.Fatalf("backups: %v %v", names, err)
		}
		bk, err := w.st.Get(ctx, names[0])
		if err != nil || !bytes.Equal(bk.Data, before.Data) {
			t.Fatalf("the backup is not the old document: %v", err)
		}
		file := filepath.Join(t.TempDir(), "backup.json")
		if err := os.WriteFile(file, bk.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		if code := w.run("reset", "orders", "--from-file", file, "--yes"); code != 0 {
			t.Fatalf("restore: %d %s", code, w.out.String())
		}
		if d := w.doc(); string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "42" || d.Lease.FencingToken != 3 {
			t.Fatalf("after restore: cursor %s token %d", d.Checkpoint.Cursor.Tiebreaker["id"], d.Lease.FencingToken)
		}

		if code := w.run("reset", "orders", "--to-beginning", "--yes"); code != 0 || w.doc().Checkpoint.Cursor != nil {
			t.Fatalf("reset --to-beginning: %d %s", code, w.out.String())
		}

		// clone: the new poller starts at the same checkpoint; an existing one is not overwritten.
		if code := w.run("reset", "orders", "--from-file", file, "--yes"); code != 0 {
			t.Fatal(w.out.String())
		}
		if code := w.run("clone", "orders", "--to", "orders-backfill", "--yes"); code != 0 {
			t.Fatalf("clone: %d %s", code, w.out.String())
		}
		b, err := w.st.Get(ctx, "state/"+w.app+"/orders-backfill.json")
		if err != nil {
			t.Fatal(err)
		}
		cd, err := state.Decode("x", "orders-backfill", b.Data)
		if err != nil || string(cd.Checkpoint.Cursor.Tiebreaker["id"]) != "42" || cd.SourceFingerprint != w.doc().SourceFingerprint {
			t.Fatalf("clone: %+v %v", cd, err)
		}
		if code := w.run("clone", "orders", "--to", "orders-backfill", "--yes"); code != 1 {
			t.Fatalf("a second clone: exit %d, want 1", code)
		}
		if code := w.run("clone", "orders", "--to", "bad/name"); code != 2 {
			t.Fatalf("clone to a bad name: exit %d, want 2", code)
		}
	})
}

func TestGuardrails(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		l := w.acquire("worker-1")
		if err := l.Commit(ctx, cp("2026-04-07T01:23:45.123456Z", 42)); err != nil {
			t.Fatal(err)
		}
		before := w.raw()
		if code := w.run("reset", "orders", "--to-beginning", "--yes"); code != 1 || !strings.Contains(w.out.String(), "--wait") {
			t.Fatalf("reset under a live lease: %d %s", code, w.out.String())
		}
		if after := w.raw(); after.ETag != before.ETag {
			t.Fatal("the refused reset wrote")
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}

		// Production: no terminal, plain --yes is refused; --yes=POLLER confirms.
		w.app = w.app + "-prod"
		l = w.acquire("worker-1")
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if code := w.run("reset", "orders", "--to-beginning", "--yes"); code != 1 || !strings.Contains(w.out.String(), "--yes=orders") {
			t.Fatalf("production without a terminal: %d %s", code, w.out.String())
		}
		if code := w.run("reset", "orders", "--to-beginning", "--yes=orders"); code != 0 {
			t.Fatalf("--yes=orders: %d %s", code, w.out.String())
		}
	})
}

func TestCorruptDocument(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		garbage := []byte(`{"version": 1, "poller_name": "orders", "checkpoint": `)
		if _, err := w.st.Put(ctx, w.blob(), garbage, store.IfNotExists()); err != nil {
			t.Fatal(err)
		}
		if code := w.run("status", "--no-probe"); code != ctl.ExitUnhealthy || !strings.Contains(w.out.String(), "corrupt") || !strings.Contains(w.out.String(), "MISCONFIGURED") {
			t.Fatalf("status: %d %s", code, w.out.String())
		}
		if code := w.run("reset", "orders", "--to-beginning", "--yes"); code != 1 || !strings.Contains(w.out.String(), "--from-file") {
			t.Fatalf("reset of a corrupt doc: %d %s", code, w.out.String())
		}
		if !bytes.Equal(w.raw().Data, garbage) {
			t.Fatal("the corrupt document was overwritten")
		}
		good := &state.Doc{Version: 1, PollerName: "orders", SourceFingerprint: w.managerFingerprint(), Checkpoint: cp("2026-04-07T01:23:45.123456Z", 9)}
		good.Lease.FencingToken = 5
		data, _ := state.Encode(good)
		file := filepath.Join(t.TempDir(), "good.json")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if code := w.run("reset", "orders", "--from-file", file, "--yes"); code != 0 {
			t.Fatalf("--from-file over a corrupt doc: %d %s", code, w.out.String())
		}
		if d := w.doc(); d.Lease.FencingToken != 6 || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "9" {
			t.Fatalf("after the explicit replacement: %+v", d)
		}
		names, _ := w.st.List(ctx, "backups/"+w.app+"/orders/")
		if len(names) != 1 {
			t.Fatalf("the corrupt document was not backed up: %v", names)
		}
		if b, _ := w.st.Get(ctx, names[0]); !bytes.Equal(b.Data, garbage) {
			t.Fatal("the backup is not the corrupt document")
		}
	})
}

func (w *world) managerFingerprint() string {
	loc, _ := drivers.ParseLocation("sqlite", settings["ORDERS_DB_CONNECTION"])
	return source.Fingerprint("sqlite", loc, orders.Source())
}

// TestResetRacingTick: a reset and a tick racing never lose a write silently; one fails cleanly.
func TestResetRacingTick(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		l := w.acquire("worker-1")
		if err := l.CommitAndRelease(ctx, cp("2026-04-07T01:00:00.000000Z", 1)); err != nil {
			t.Fatal(err)
		}
		// 1. A tick commits between the reset's read and its write: the reset fails.
		hooked := &slipStore{Store: w.st, blob: w.blob(), slip: func() {
			tl := w.acquire("worker-2")
			if err := tl.CommitAndRelease(ctx, cp("2026-04-07T02:00:00.000000Z", 2)); err != nil {
				t.Error(err)
			}
		}}
		st := w.st
		w.st = hooked
		code := w.run("reset", "orders", "--to-beginning", "--yes")
		w.st = st
		if code != 1 || !strings.Contains(w.out.String(), "changed since it was read") {
			t.Fatalf("the reset after a slipped-in tick: %d %s", code, w.out.String())
		}
		if d := w.doc(); string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "2" {
			t.Fatalf("the tick's commit was lost: %+v", d.Checkpoint)
		}

		// 2. A stalled holder whose lease has expired: the reset goes through, and the holder's
		// next commit is refused.
		fake, ok := w.clk.(*clock.Fake)
		if !ok {
			return // expiry is forced through the fake clock (memstore)
		}
		stale := w.acquire("worker-3")
		fake.Advance(lease.DefaultTTL + lease.DefaultMargin + time.Second)
		if code := w.run("reset", "orders", "--to-beginning", "--yes"); code != 0 {
			t.Fatalf("reset after expiry: %d %s", code, w.out.String())
		}
		if err := stale.Commit(ctx, cp("2026-04-07T03:00:00.000000Z", 3)); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("the stale holder's commit after the reset: %v, want ErrLost", err)
		}
		if d := w.doc(); d.Checkpoint.Cursor != nil {
			t.Fatal("the stale holder overwrote the reset")
		}
	})
}

// slipStore runs slip once, just before the first conditional write to blob.
type slipStore struct {
	store.Store
	blob string
	slip func()
	done bool
}

func (s *slipStore) Put(ctx context.Context, name string, data []byte, cond store.Condition) (store.Written, error) {
	if name == s.blob && !s.done {
		s.done = true
		s.slip()
	}
	return s.Store.Put(ctx, name, data, cond)
}

// TestScaffold: `pollerctl new` in a copy of the repository produces a poller that compiles,
// passes its own test and the folder/function consistency test.
func TestScaffold(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a copy of the module")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cp := exec.Command("sh", "-c", `tar -C "$0" --exclude=./.git --exclude=./node_modules --exclude=./.test --exclude=./.dev --exclude=./bin -cf - . | tar -C "$1" -xf -`, root, dir)
	if out, err := cp.CombinedOutput(); err != nil {
		t.Fatalf("copying the repository: %v\n%s", err, out)
	}
	var out bytes.Buffer
	env := ctl.Env{Out: &out, Root: dir, Pollers: pollerdef.OfAll(pollers.All()), Getenv: os.Getenv}
	if code := ctl.Run(ctx, []string{"new", "bad name"}, env); code != 2 {
		t.Fatalf("an invalid name: exit %d", code)
	}
	if code := ctl.Run(ctx, []string{"new", "status"}, env); code != 1 || !strings.Contains(out.String(), "status function") {
		t.Fatalf("the status function's name: exit %d, %s", code, out.String())
	}
	if code := ctl.Run(ctx, []string{"new", "invoices-eu"}, env); code != 0 {
		t.Fatalf("new: %d\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "INVOICES_EU_DB_CONNECTION") {
		t.Fatalf("the settings to add are not printed:\n%s", out.String())
	}
	if code := ctl.Run(ctx, []string{"new", "invoices-eu"}, env); code != 1 {
		t.Fatalf("new over an existing poller: exit %d", code)
	}
	test := exec.Command("go", "test", "-count=1", "./pollers/...")
	test.Dir = dir
	if b, err := test.CombinedOutput(); err != nil || !strings.Contains(string(b), "ok  \tgithub.com/pseudotrigger/pseudotrigger/pollers/invoices-eu") {
		t.Fatalf("the scaffold's tests: %v\n%s", err, b)
	}
}

// TestNewExitCodes: pollerctl new exits 2 on package scaffold's usage errors and 1 on its
// refusals, printing the error: an invalid name, an unknown sink, the status function's name,
// and the name of a registered poller.
func TestNewExitCodes(t *testing.T) {
	dir := t.TempDir()
	for args, want := range map[string]int{"bad.name": ctl.ExitUsage, "zz --sink kafka": ctl.ExitUsage,
		"status": ctl.ExitRefused, "orders": ctl.ExitRefused} {
		var out bytes.Buffer
		code := ctl.Run(ctx, append([]string{"new"}, strings.Fields(args)...), ctl.Env{Out: &out, Root: dir, Pollers: []*pollerdef.Def{orders}, Getenv: os.Getenv})
		if code != want || !strings.HasPrefix(out.String(), "pollerctl: ") {
			t.Errorf("new %s: exit %d, want %d: %s", args, code, want, out.String())
		}
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
		t.Errorf("wrote %v (%v)", entries, err)
	}
}

// TestWaitForLiveLease: --wait waits for another owner's lease to expire, then resets.
func TestWaitForLiveLease(t *testing.T) {
	clk := clock.NewFake(time.Now())
	w := &world{t: t, st: memstore.New(clk), clk: clk, app: "test"}
	w.acquire("worker-1") // held, never released: it has to expire
	done := make(chan int, 1)
	var out bytes.Buffer
	go func() {
		done <- ctl.Run(ctx, []string{"reset", "orders", "--to-beginning", "--yes", "--wait"}, ctl.Env{
			Store: w.st, App: w.app, Getenv: func(k string) string { return settings[k] },
			Pollers: []*pollerdef.Def{orders}, Out: &out, In: strings.NewReader(""), Clock: clk, Actor: "pollerctl/test",
		})
	}()
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := clk.BlockUntilWaiters(wait, 1); err != nil {
		t.Fatal("the reset did not wait")
	}
	select {
	case code := <-done:
		t.Fatalf("the reset finished (%d) while the lease was live", code)
	default:
	}
	for range 40 { // past TTL + margin, in the reset's 2 s polling steps
		clk.Advance(2 * time.Second)
		// Either the reset finishes, or it waits again: poll for one or the other.
		for clk.Waiters() == 0 {
			select {
			case code := <-done:
				if code != 0 || w.doc().Lease.FencingToken != 2 {
					t.Fatalf("after waiting: exit %d, token %d\n%s", code, w.doc().Lease.FencingToken, out.String())
				}
				return
			case <-wait.Done():
				t.Fatal("the reset neither finished nor waited again")
			case <-time.After(time.Millisecond):
			}
		}
	}
	t.Fatal("the reset never went through after the lease expired")
}

// TestResetRefusesValuesTheSourceCannotHold: a --pk or --to-cursor value that the table's column
// cannot hold (a key "abc" or 1.5 for the BIGINT id, a cursor that is no timestamp) is refused
// with exit 2 before anything is written, not even a backup; before, it was written and every
// later tick failed. A reset keeps the tick history and records itself in it; a clone cannot take
// a reserved name.
func TestResetRefusesValuesTheSourceCannotHold(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		l := w.acquire("worker-1")
		l.AddHistory(state.Tick{At: state.At(w.clk.Now()), Outcome: "committed", Rows: 3, RowsWaiting: 0})
		if err := l.CommitAndRelease(ctx, cp("2026-04-07T01:23:45.123456Z", 42)); err != nil {
			t.Fatal(err)
		}
		before := w.raw()
		for _, args := range [][]string{
			{"--to-cursor", "2026-04-07T01:23:45Z", "--pk", "id=abc"},
			{"--to-cursor", "2026-04-07T01:23:45Z", "--pk", "id=1.5"},
			{"--to-cursor", "yesterday", "--pk", "id=1"},
			{"--to-cursor", "2026-04-07T01:23:45Z", "--pk", "nope=1"},
			{"--to-cursor", "2026-04-07T01:23:45Z"},
		} {
			code := w.run(append([]string{"reset", "orders", "--yes"}, args...)...)
			if code != ctl.ExitUsage || !strings.Contains(w.out.String(), "nothing written") && !strings.Contains(w.out.String(), "--pk") {
				t.Errorf("reset %v: exit %d\n%s", args, code, w.out.String())
			}
			if after := w.raw(); after.ETag != before.ETag {
				t.Fatalf("reset %v wrote the state document", args)
			}
		}
		if names, _ := w.st.List(ctx, "backups/"); len(names) != 0 {
			t.Fatalf("refused resets left backups: %v", names)
		}
		if code := w.run("reset", "orders", "--to-cursor", "2026-04-07T01:23:45Z", "--pk", "id=7", "--yes"); code != 0 {
			t.Fatalf("a good reset: %d\n%s", code, w.out.String())
		}
		d, err := state.Decode(w.blob(), "orders", w.raw().Data)
		if err != nil {
			t.Fatal(err)
		}
		// SQLite keeps the fixed-width layout; the key is a number; the history goes on.
		if string(d.Checkpoint.Cursor.Value) != `"2026-04-07T01:23:45.000000Z"` || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "7" ||
			len(d.History) != 2 || d.History[0].Outcome != "committed" || d.History[1].Outcome != "reset" {
			t.Fatalf("after the reset: cursor %s %v, history %+v", d.Checkpoint.Cursor.Value, d.Checkpoint.Cursor.Tiebreaker, d.History)
		}

		for _, name := range []string{"status", "Status"} {
			if code := w.run("clone", "orders", "--to", name, "--yes"); code != ctl.ExitUsage || !strings.Contains(w.out.String(), "reserved") {
				t.Errorf("clone --to %s: %d\n%s", name, code, w.out.String())
			}
			if _, err := w.st.Get(ctx, "state/"+w.app+"/"+name+".json"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("clone --to %s wrote state: %v", name, err)
			}
		}
		if code := w.run("clone", "orders", "--to", "backfill", "--yes"); code != 0 {
			t.Fatalf("clone: %d\n%s", code, w.out.String())
		}
		b, _ := w.st.Get(ctx, "state/"+w.app+"/backfill.json")
		c, err := state.Decode("backfill", "backfill", b.Data)
		if err != nil || len(c.History) != 1 || c.History[0].Outcome != "clone" {
			t.Fatalf("the clone's history: %v %+v", err, c)
		}
	})
}

// TestStatusOfUnreadableDefinition: a declared poller whose poller.json cannot be read is
// misconfigured in pollerctl status, naming the file, as the status function says; its probe is
// skipped as unreadable, not blamed on pollerctl's environment.
func TestStatusOfUnreadableDefinition(t *testing.T) {
	clk := clock.NewFake(time.Now())
	broken := pollerdef.Failed("broken", errors.New(`broken/poller.json: sink.queue: "Bad_Name" is not a storage queue name`))
	var out bytes.Buffer
	code := ctl.Run(ctx, []string{"status", "broken", "--json"}, ctl.Env{
		Store: memstore.New(clk), App: "test", Getenv: func(string) string { return "" },
		Pollers: []*pollerdef.Def{orders, broken}, Out: &out, In: strings.NewReader(""), Clock: clk, Actor: "pollerctl/test",
	})
	var rows []ctl.Row
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || code != ctl.ExitUnhealthy || len(rows) != 1 ||
		rows[0].Health != "misconfigured" || !strings.Contains(rows[0].HealthReason, "broken/poller.json: sink.queue") ||
		strings.Contains(out.String(), "pollerctl's environment") {
		t.Fatalf("status broken: exit %d, %v\n%s", code, err, out.String())
	}
}
