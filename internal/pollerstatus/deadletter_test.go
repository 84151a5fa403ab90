package pollerstatus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// noLetterReads is a Reader that fails the test if the status reads a dead letter's body: their
// count and the oldest one's age come from one listing, however many there are.
type noLetterReads struct {
	pollerstatus.Reader
	t *testing.T
}

func (r noLetterReads) Get(ctx context.Context, name string) (store.Blob, error) {
	if strings.HasPrefix(name, "deadletter/") {
		r.t.Errorf("the status read the dead letter %s", name)
	}
	return r.Reader.Get(ctx, name)
}

// ListTimed passes the wrapped store's timed listing on.
func (r noLetterReads) ListTimed(ctx context.Context, prefix string) (store.Listing, error) {
	return r.Reader.(store.TimedLister).ListTimed(ctx, prefix)
}

func writeLetter(t *testing.T, st store.Store, batchID string) {
	t.Helper()
	if _, err := deadletter.Write(ctx, st, "test", &deadletter.Letter{Poller: "orders", BatchID: batchID}); err != nil {
		t.Fatal(err)
	}
}

// TestDeadLettersDegraded: a poller whose ticks succeed but that has dead letters is degraded,
// with their count, the oldest one's age (from the listing, on the store's clock) and the command
// that lists them; a failing tick still wins, and once they are gone it is ok again.
func TestDeadLettersDegraded(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	st := memstore.New(clk)
	probe := pollerstatus.Probe{OK: true, RowsWaiting: 0, LagSeconds: ptr(0)}
	cfg := pollerstatus.Config{App: "test", Now: clk.Now,
		Registered: []pollerstatus.Registered{{Name: "orders", Schedule: "*/10 * * * * *", LivenessInterval: time.Minute, MaxLag: time.Minute}},
		Probe:      func(context.Context, string, *state.Doc) pollerstatus.Probe { return probe },
	}
	writeLetter(t, st, "b-old")
	clk.Advance(time.Hour)
	writeLetter(t, st, "b-new")
	clk.Advance(time.Hour)
	doc := &state.Doc{Version: 1, PollerName: "orders", SourceFingerprint: "sha256:x",
		Lease: state.Lease{OwnerID: "test/host/1", FencingToken: 3, TTLSeconds: 60, ReleasedAt: state.At(clk.Now())}}
	doc.AddHistory(state.Tick{At: state.At(clk.Now()), Outcome: "committed", Rows: 5, RowsWaiting: 0, LagSeconds: ptr(0)})
	putDoc(t, st, doc)

	read := func(step, want string) pollerstatus.Row {
		t.Helper()
		r := pollerstatus.Read(ctx, noLetterReads{st, t}, cfg, "orders")
		if r.Health != want {
			t.Fatalf("%s: health %q (%s), want %q", step, r.Health, r.HealthReason, want)
		}
		return r
	}
	r := read("two letters", pollerstatus.HealthDegraded)
	for _, s := range []string{"2 dead letters", "the oldest written 2h0m0s ago", "pollerctl deadletter list orders", "pollerctl deadletter replay orders BATCH_ID"} {
		if !strings.Contains(r.HealthReason, s) {
			t.Errorf("the reason %q does not say %q", r.HealthReason, s)
		}
	}
	if d := r.DeadLetters; d.Count != 2 || d.OldestAgeSeconds == nil || *d.OldestAgeSeconds != 7200 || d.List != "pollerctl deadletter list orders" {
		t.Errorf("dead letters %+v", d)
	}
	var page strings.Builder
	if err := pollerstatus.RenderPage(&page, pollerstatus.NewPage(pollerstatus.Report{Pollers: []pollerstatus.Row{r}})); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`data-health="degraded"`, "the oldest written 2h0m0s ago", "pollerctl deadletter list orders"} {
		if !strings.Contains(page.String(), s) {
			t.Errorf("the page does not show %q", s)
		}
	}

	// Lagging too: degraded is the more urgent.
	probe = pollerstatus.Probe{OK: true, RowsWaiting: 9, LagSeconds: ptr(600)}
	read("lagging with letters", pollerstatus.HealthDegraded)
	// A failing source is more urgent still.
	probe = pollerstatus.ProbeFailed(context.DeadlineExceeded)
	read("failing with letters", pollerstatus.HealthFailing)

	// Resolved: ok again.
	probe = pollerstatus.Probe{OK: true, RowsWaiting: 0, LagSeconds: ptr(0)}
	for _, id := range []string{"b-old", "b-new"} {
		_, b, err := deadletter.Read(ctx, st, "test", "orders", id)
		if err != nil {
			t.Fatal(err)
		}
		if err := deadletter.Delete(ctx, st, "test", "orders", id, b.ETag); err != nil {
			t.Fatal(err)
		}
	}
	if r := read("resolved", pollerstatus.HealthOK); r.DeadLetters.Count != 0 || r.DeadLetters.OldestAgeSeconds != nil || r.DeadLetters.List != "" {
		t.Errorf("no letters: %+v", r.DeadLetters)
	}
}

// TestDeadLettersAgeAzurite: the blob store's listing gives the oldest letter's age on the
// service's clock, with no letter read.
func TestDeadLettersAgeAzurite(t *testing.T) {
	cs := testenv.Azurite(t)
	st, err := blobstore.New(blobstore.Settings{Setting: testenv.AzuriteVar, ConnectionString: cs, Container: testenv.Name("deadletters-")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeLetter(t, st, "b1")
	writeLetter(t, st, "b2")
	cfg := pollerstatus.Config{App: "test", Registered: []pollerstatus.Registered{{Name: "orders"}}}
	r := pollerstatus.Read(ctx, noLetterReads{st, t}, cfg, "orders")
	d := r.DeadLetters
	if d.Count != 2 || d.OldestAgeSeconds == nil || *d.OldestAgeSeconds < 0 || *d.OldestAgeSeconds > 60 {
		t.Fatalf("dead letters %+v (oldest %v)", d, d.OldestAgeSeconds)
	}
}

// TestLagText: one rendering of the lag for the page and pollerctl status: never a made-up 0 for
// a cursor with no clock in it.
func TestLagText(t *testing.T) {
	xid := &state.Cursor{Kind: state.KindXID, Value: []byte(`"100"`)}
	ts := &state.Cursor{Kind: state.KindTimestampPK, Value: []byte(`"2026-11-22T12:00:00Z"`)}
	for _, c := range []struct {
		r    pollerstatus.Row
		want string
	}{
		{pollerstatus.Row{Cursor: xid, RowsWaiting: 5}, "unknown (the xid cursor has no clock: see the rows waiting)"},
		{pollerstatus.Row{Cursor: xid, RowsWaiting: -1}, "unknown (the xid cursor has no clock: see the rows waiting)"},
		{pollerstatus.Row{Cursor: xid, RowsWaiting: 0, LagSeconds: ptr(0)}, "0s (nothing waits)"},
		{pollerstatus.Row{Cursor: ts, RowsWaiting: 3, LagSeconds: ptr(2.5)}, "2.5s"},
		{pollerstatus.Row{Cursor: ts, RowsWaiting: -1}, "-"},
		{pollerstatus.Row{RowsWaiting: -1}, "-"},
	} {
		if got := c.r.Backlog().LagText(); got != c.want {
			t.Errorf("LagText(%s, %d waiting, lag %v) = %q, want %q", c.r.Cursor.Text(), c.r.RowsWaiting, c.r.LagSeconds, got, c.want)
		}
	}
}
