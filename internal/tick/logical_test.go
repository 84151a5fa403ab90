package tick_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestLogicalSetupWritesNothing: a logical poller whose slot, publication or wal_level is
// missing fails before any state is read or written, with the error naming the fix; once set up,
// its first tick delivers, counts its ops and reports the slot's retained WAL.
func TestLogicalSetupWritesNothing(t *testing.T) {
	db, dsn, table, slot := testenv.PostgresLogical(t, "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL)")
	p := poller.New("cdc", table, poller.Logical, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
		poller.WithColumns("id", "name"), poller.WithKey("id"))
	settings := appsettings.Settings{Driver: source.Postgres, DSN: dsn, BatchSize: 10, LeaseTTL: lease.DefaultTTL,
		HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: time.Hour, Slot: slot, Publication: slot}
	st := &lease.Counting{Store: memstore.New(nil)}
	for name, mutate := range map[string]func(s *appsettings.Settings){
		"slot":        func(s *appsettings.Settings) { s.Slot = "missing_slot" },
		"publication": func(s *appsettings.Settings) { s.Publication = "missing_pub" },
	} {
		s := settings
		mutate(&s)
		_, err := tick.Open(context.Background(), tick.Config{Poller: p, Store: st, App: "test", Owner: "test/1", Settings: s})
		if !errors.Is(err, source.ErrNotEnabled) || !strings.Contains(err.Error(), "pollerctl cdc enable cdc --yes") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n, _ := st.Counts(); n != 0 {
		t.Errorf("%d state requests before the source was set up", n)
	}
	testenv.ExecFlushed(t, db, "INSERT INTO "+table+" VALUES (1, 'a'), (2, 'b')", "DELETE FROM "+table+" WHERE id = 1")
	r, err := tick.Open(context.Background(), tick.Config{Poller: p, Store: st, App: "test", Owner: "test/1", Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sum, err := r.Tick(context.Background(), "")
	if err != nil || sum.Rows != 3 || sum.Ops["insert"] != 2 || sum.Ops["delete"] != 1 || sum.SlotRetainedBytes == nil || sum.RowsWaiting != 0 {
		t.Fatalf("tick: %+v, %v", sum, err)
	}
	if sum, err := r.Tick(context.Background(), ""); err != nil || sum.Outcome != tick.Idle {
		t.Fatalf("second tick: %+v, %v", sum, err)
	}
}
