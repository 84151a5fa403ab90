package lease_test

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// v1Source is the source of ../state/testdata/v1-orders.json, a document written with the first
// form of the fingerprint (which covered the payload columns).
func v1Source() state.SourceDef {
	return state.SourceDef{Driver: "postgres", Server: "db.example.com:5432", Database: "shop", Schema: "public", Table: "orders",
		CursorKind: state.KindTimestampPK, CursorColumn: "updated_at", Key: []string{"id"},
		Columns: []string{"id", "customer", "amount", "updated_at"}}
}

// TestFirstFormIsAcceptedAndMovesOn: a document of the first form, for the configured source, is
// read without an operator's step (logged once), and the next write, the acquire, records the
// second form, the source's parts and the handler's version. A payload column removed after
// that is accepted and logged; a cursor column changed stops the poller with what changed.
func TestFirstFormIsAcceptedAndMovesOn(t *testing.T) {
	golden, err := os.ReadFile("../state/testdata/v1-orders.json")
	if err != nil {
		t.Fatal(err)
	}
	forEachStore(t, func(t *testing.T, f *fixture) {
		if _, err := f.st.Put(ctx, f.blob, golden, store.IfNotExists()); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		manager := func(src state.SourceDef) *lease.Manager {
			m, err := lease.New(f.st, lease.Config{Poller: testPoller, Blob: f.blob, Owner: "A", Source: &src, Version: "v9.9.9 rev test",
				TTL: testTTL, Margin: testMargin, HeartbeatInterval: testInterval, Clock: f.svc,
				Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		m := manager(v1Source())
		for range 2 { // idle ticks read and write nothing: the line is logged once
			if _, err := m.Read(ctx); err != nil {
				t.Fatalf("the v1 document of the configured source: %v", err)
			}
		}
		if n := strings.Count(logs.String(), "first form"); n != 1 {
			t.Fatalf("logged the accepted first form %d times: %s", n, logs.String())
		}
		snap, _ := m.Read(ctx)
		res, err := m.Acquire(ctx, snap)
		if err != nil || !res.Won() {
			t.Fatalf("acquire: %v %+v", err, res)
		}
		if err := res.Lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		b, err := f.st.Get(ctx, f.blob)
		if err != nil {
			t.Fatal(err)
		}
		d, err := state.Decode(f.blob, testPoller, b.Data)
		if err != nil {
			t.Fatal(err)
		}
		want := v1Source()
		if d.SourceFingerprint != want.Fingerprint() || d.Source == nil || d.Source.Table != "orders" || d.HandlerVersion != "v9.9.9 rev test" ||
			d.Lease.FencingToken != 43 || string(d.Checkpoint.Cursor.Value) != `"2026-04-07T01:23:45.123456Z"` {
			t.Fatalf("after the acquire: %s", b.Data)
		}

		logs.Reset()
		fewer := v1Source()
		fewer.Columns = []string{"id", "customer", "updated_at"}
		if _, err := manager(fewer).Read(ctx); err != nil {
			t.Fatalf("a payload column removed: %v", err)
		}
		if !strings.Contains(logs.String(), "removed amount") {
			t.Fatalf("the payload change was not logged: %s", logs.String())
		}
		other := v1Source()
		other.CursorColumn = "modified_at"
		_, err = manager(other).Read(ctx)
		if err == nil || !strings.Contains(err.Error(), `cursor_column "updated_at" -> "modified_at"`) ||
			!strings.Contains(err.Error(), "pollerctl reset orders --to-beginning --yes") {
			t.Fatalf("another cursor column: %v", err)
		}
	})
}

// TestDeleteKeepsTheLastToken: a document deleted by an operator leaves its fencing token in the
// poller's tombstone, so the document that the next tick creates (or a reset, or a clone's first
// tick) starts above it: a sink comparing tokens never sees them go backwards.
func TestDeleteKeepsTheLastToken(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		var backups [][]byte
		op := f.operator(&backups)
		write(t, op, takeover(t, op, 1)) // token 1
		write(t, op, takeover(t, op, 2)) // token 2
		m := f.manager(t, "A", f.svc)
		acquire := func() int64 {
			t.Helper()
			snap, err := m.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			res, err := m.Acquire(ctx, snap)
			if err != nil || !res.Won() {
				t.Fatalf("acquire: %v %+v", err, res)
			}
			if err := res.Lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			return res.Lease.Token()
		}
		if got := acquire(); got != 3 {
			t.Fatalf("token %d, want 3", got)
		}
		if err := op.Remove(ctx, read(t, op)); err != nil {
			t.Fatal(err)
		}
		tb, err := f.st.Get(ctx, blobpath.TombstoneOf(f.blob))
		if err != nil || !strings.Contains(string(tb.Data), `"fencing_token": 3`) {
			t.Fatalf("tombstone: %s %v", tb.Data, err)
		}
		if got := acquire(); got != 4 {
			t.Fatalf("the first tick after the delete took token %d, want 4 (above the deleted document's 3)", got)
		}
		// Deleted again, then a reset of the deleted poller, then a clone's created document.
		if err := op.Remove(ctx, read(t, op)); err != nil {
			t.Fatal(err)
		}
		if d := write(t, op, takeover(t, op, 5)); d.Lease.FencingToken != 5 {
			t.Fatalf("a reset after a delete wrote token %d, want 5", d.Lease.FencingToken)
		}
		if err := op.Remove(ctx, read(t, op)); err != nil {
			t.Fatal(err)
		}
		created := op.Create(func(d *state.Doc, now time.Time) { d.SourceFingerprint = testFingerprint; d.Checkpoint = checkpoint(6) })
		write(t, op, created)
		if got := acquire(); got != 6 {
			t.Fatalf("the first tick of a created document took token %d, want 6", got)
		}
		// A tombstone that does not decode stops the acquire of a new document: nothing written.
		if err := op.Remove(ctx, read(t, op)); err != nil {
			t.Fatal(err)
		}
		cur, _ := f.st.Get(ctx, blobpath.TombstoneOf(f.blob))
		if _, err := f.st.Put(ctx, blobpath.TombstoneOf(f.blob), []byte("{"), store.IfMatch(cur.ETag)); err != nil {
			t.Fatal(err)
		}
		snap, _ := m.Read(ctx)
		if _, err := m.Acquire(ctx, snap); err == nil || !strings.Contains(err.Error(), "tombstones/") {
			t.Fatalf("a corrupt tombstone: %v", err)
		}
	})
}
