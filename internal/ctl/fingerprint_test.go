package ctl_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// ordersAs is the orders poller of these tests (the SQLite table of TestMain) with more options.
func ordersAs(opts ...poller.Option) *pollerdef.Def {
	base := []poller.Option{poller.WithColumns("id", "updated_at"), poller.WithKey("id"), poller.WithCursorColumn("updated_at")}
	return pollerdef.Of(poller.New("orders", "orders", poller.TimestampPK, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
		append(base, opts...)...))
}

// identity is d's source as its ticks record it, with these tests' settings.
func identity(t *testing.T, d *pollerdef.Def) state.SourceDef {
	t.Helper()
	s, _ := appsettings.Load(d, func(k string) string { return settings[k] })
	id, err := s.Identity(d)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// runWith runs pollerctl with d as the app's orders poller.
func (w *world) runWith(d *pollerdef.Def, args ...string) int {
	w.t.Helper()
	w.out.Reset()
	if f, ok := w.clk.(*clock.Fake); ok {
		f.Advance(time.Millisecond) // commands run at distinct times, as they would
	}
	return ctl.Run(ctx, args, ctl.Env{
		Store: w.st, App: w.app, Getenv: func(k string) string { return settings[k] },
		Pollers: []*pollerdef.Def{d}, Out: &w.out, In: strings.NewReader(""), Clock: w.clk, Actor: "pollerctl/test",
	})
}

// put writes the document as a tick of the recorded source would have left it, over what is there.
func (w *world) put(d *state.Doc) {
	w.t.Helper()
	data, err := state.Encode(d)
	if err != nil {
		w.t.Fatal(err)
	}
	cond := store.IfNotExists()
	if b, err := w.st.Get(ctx, w.blob()); err == nil {
		cond = store.IfMatch(b.ETag)
	}
	if _, err := w.st.Put(ctx, w.blob(), data, cond); err != nil {
		w.t.Fatal(err)
	}
}

// TestResetKeepCursor: `reset --keep-cursor` accepts a changed definition and goes on from the
// saved cursor where the cursor keeps its meaning (a filter), refuses it with the reason where it
// would mean nothing (another cursor column, a key its tiebreaker holds, another table), says
// when nothing changed, and for a document that does not record its source checks the cursor
// against the table and says what it could not check. The dry run's columns line up.
func TestResetKeepCursor(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		plain := identity(t, ordersAs())
		filtered := ordersAs(poller.WithFilter("id > 0"))
		doc := func(src *state.SourceDef, fp string) *state.Doc {
			return &state.Doc{Version: 1, PollerName: "orders", SourceFingerprint: fp, Source: src, Checkpoint: cp("2026-04-07T01:23:45.123456Z", 42),
				Lease: state.Lease{FencingToken: 7}}
		}
		w.put(doc(&plain, plain.Fingerprint()))

		// The same definition: nothing to accept.
		before := w.raw()
		if code := w.runWith(ordersAs(), "reset", "orders", "--keep-cursor", "--yes"); code != 0 || !strings.Contains(w.out.String(), "nothing to accept") || w.raw().ETag != before.ETag {
			t.Fatalf("keep-cursor without a change: %d\n%s", code, w.out.String())
		}

		// A filter added: the dry run shows the plan, aligned, and what the change means.
		if code := w.runWith(filtered, "reset", "orders", "--keep-cursor"); code != 0 || !strings.Contains(w.out.String(), "accepted: filter") ||
			!strings.Contains(w.out.String(), "dry run") {
			t.Fatalf("keep-cursor dry run: %d\n%s", code, w.out.String())
		}
		checkAligned(t, w.out.String())
		if code := w.runWith(filtered, "reset", "orders", "--keep-cursor", "--yes"); code != 0 {
			t.Fatalf("keep-cursor: %d\n%s", code, w.out.String())
		}
		d := w.doc()
		want := identity(t, filtered)
		if d.SourceFingerprint != want.Fingerprint() || d.Source == nil || d.Source.Filter != "id > 0" || d.Lease.FencingToken != 8 ||
			string(d.Checkpoint.Cursor.Value) != `"2026-04-07T01:23:45.123456Z"` || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "42" {
			t.Fatalf("after keep-cursor: %+v", d)
		}
		m, err := lease.New(w.st, lease.Config{Poller: "orders", Blob: w.blob(), Owner: "worker", Source: &want, Clock: w.clk})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Read(ctx); err != nil {
			t.Fatalf("a tick of the new definition after keep-cursor: %v", err)
		}

		// Refused: the saved cursor would mean nothing; nothing is written.
		for name, recorded := range map[string]func(s *state.SourceDef){
			"cursor_column": func(s *state.SourceDef) { s.CursorColumn = "created_at" },
			"key":           func(s *state.SourceDef) { s.Key = []string{"id", "region"} },
			"table":         func(s *state.SourceDef) { s.Table = "old_orders" },
		} {
			src := identity(t, ordersAs())
			recorded(&src)
			w.put(doc(&src, src.Fingerprint()))
			before := w.raw()
			if code := w.runWith(ordersAs(), "reset", "orders", "--keep-cursor", "--yes"); code != ctl.ExitRefused || !strings.Contains(w.out.String(), "--keep-cursor refused") ||
				!strings.Contains(w.out.String(), name) || !strings.Contains(w.out.String(), "pollerctl reset orders --to-beginning --yes") {
				t.Fatalf("keep-cursor over a %s change: %d\n%s", name, code, w.out.String())
			}
			if w.raw().ETag != before.ETag {
				t.Fatalf("a refused keep-cursor (%s) wrote", name)
			}
		}

		// A document of the first form, before a payload column was removed: what changed cannot
		// be named; the cursor is checked against the table, and the reset goes on.
		old := identity(t, ordersAs())
		old.Columns = append(old.Columns, "note")
		w.put(doc(nil, old.FingerprintV1()))
		if code := w.runWith(ordersAs(), "reset", "orders", "--keep-cursor", "--yes"); code != 0 || !strings.Contains(w.out.String(), "cannot be named") {
			t.Fatalf("keep-cursor over a v1 document: %d\n%s", code, w.out.String())
		}
		if d := w.doc(); d.SourceFingerprint != plain.Fingerprint() || d.Source == nil || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "42" {
			t.Fatalf("after keep-cursor of a v1 document: %+v", d)
		}
		// ... but not a cursor the table cannot hold (another kind).
		bad := doc(nil, old.FingerprintV1())
		bad.Checkpoint.Cursor = &state.Cursor{Kind: state.KindInteger, Value: []byte("5")}
		w.put(bad)
		if code := w.runWith(ordersAs(), "reset", "orders", "--keep-cursor", "--yes"); code != ctl.ExitUsage || !strings.Contains(w.out.String(), "kind") {
			t.Fatalf("keep-cursor of a cursor of another kind: %d\n%s", code, w.out.String())
		}
	})
}

// checkAligned: in the reset plan's table (from the OLD/NEW header on), the OLD and NEW columns
// start at the same offset on every row.
func checkAligned(t *testing.T, out string) {
	t.Helper()
	var oldAt, newAt int
	in := false
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, "OLD"); i > 0 && strings.Contains(line, "NEW") {
			oldAt, newAt, in = i, strings.Index(line, "NEW"), true
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "  ") {
			break
		}
		if line[oldAt-1] != ' ' || line[oldAt] == ' ' || line[newAt-1] != ' ' || line[newAt] == ' ' {
			t.Fatalf("the plan's columns do not line up at %d and %d:\n%s", oldAt, newAt, out)
		}
	}
	if !in {
		t.Fatalf("no plan table:\n%s", out)
	}
}

// TestDeleteKeepsTokensGoingUp: `pollerctl delete` then the next tick: the new document's fencing
// token is above every token handed out before the delete, not 1 again.
func TestDeleteKeepsTokensGoingUp(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		l := w.acquire("worker-1") // token 1
		if err := l.CommitAndRelease(ctx, cp("2026-04-07T01:23:45.123456Z", 42)); err != nil {
			t.Fatal(err)
		}
		if code := w.run("reset", "orders", "--to-beginning", "--yes"); code != 0 { // token 2
			t.Fatalf("reset: %d\n%s", code, w.out.String())
		}
		if code := w.run("delete", "orders", "--yes"); code != 0 {
			t.Fatalf("delete: %d\n%s", code, w.out.String())
		}
		if l := w.acquire("worker-2"); l.Token() != 3 {
			t.Fatalf("the first tick after the delete took fencing token %d, want 3", l.Token())
		}
	})
}

// TestPollersThisBuildDoesNotHave: a pollerctl built before the app's last change lists the
// poller folders it sees and the state it finds, shows a poller its build does not have as
// unknown with both versions (never stopped, never "delete it"), and refuses to delete it, to
// restore its state or to clone over it without --force.
func TestPollersThisBuildDoesNotHave(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		run := func(args ...string) int {
			t.Helper()
			w.out.Reset()
			if f, ok := w.clk.(*clock.Fake); ok {
				f.Advance(time.Millisecond)
			}
			return ctl.Run(ctx, args, ctl.Env{
				Store: w.st, App: w.app, Getenv: func(k string) string { return settings[k] }, Version: "v1.0.0 rev old",
				Seen: []string{"orders", "invoices"}, Pollers: []*pollerdef.Def{orders}, Out: &w.out, In: strings.NewReader(""), Clock: w.clk, Actor: "pollerctl/test",
			})
		}
		newer := &state.Doc{Version: 1, PollerName: "shipments", SourceFingerprint: "sha256:x", HandlerVersion: "v1.1.0 rev new",
			Checkpoint: cp("2026-04-07T01:23:45.123456Z", 3), Lease: state.Lease{FencingToken: 4}}
		data, err := state.Encode(newer)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.st.Put(ctx, "state/"+w.app+"/shipments.json", data, store.IfNotExists()); err != nil {
			t.Fatal(err)
		}

		run("status", "--no-probe")
		out := w.out.String()
		for _, want := range []string{
			"invoices: unknown: not in this pollerctl's build (pollerctl v1.0.0 rev old; the handler that last wrote its state: not recorded)",
			"shipments: unknown: not in this pollerctl's build (pollerctl v1.0.0 rev old; the handler that last wrote its state: v1.1.0 rev new)",
		} {
			if !strings.Contains(out, want) {
				t.Fatalf("status lacks %q:\n%s", want, out)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if (strings.HasPrefix(line, "invoices") || strings.HasPrefix(line, "shipments")) && (strings.Contains(line, "STOPPED") || strings.Contains(line, "pollerctl delete")) {
				t.Fatalf("a poller this build does not have is called stopped or a leftover: %q", line)
			}
		}

		if code := run("delete", "shipments", "--yes"); code != ctl.ExitRefused || !strings.Contains(w.out.String(), "--force") ||
			!strings.Contains(w.out.String(), "v1.1.0 rev new") {
			t.Fatalf("delete of a poller this build does not have: %d\n%s", code, w.out.String())
		}
		if _, err := w.st.Get(ctx, "state/"+w.app+"/shipments.json"); err != nil {
			t.Fatalf("the refused delete deleted: %v", err)
		}
		if code := run("clone", "orders", "--to", "invoices", "--yes"); code != ctl.ExitRefused || !strings.Contains(w.out.String(), "--force") {
			t.Fatalf("clone over a poller folder this build does not have: %d\n%s", code, w.out.String())
		}
		file := t.TempDir() + "/saved.json"
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if code := run("reset", "shipments", "--from-file", file, "--yes"); code != ctl.ExitRefused || !strings.Contains(w.out.String(), "--force") {
			t.Fatalf("restore of a poller this build does not have: %d\n%s", code, w.out.String())
		}
		if code := run("delete", "shipments", "--yes", "--force"); code != 0 {
			t.Fatalf("delete --force: %d\n%s", code, w.out.String())
		}
	})
}
