package tick_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// windowSource serves batches 1..n of size rows (cursor: the batch's number) and asks for a
// commit (CommitWanted) right after it served batch wantAt, as a logical cursor whose peek's
// window ran out does; it records the checkpoints it is told are committed.
type windowSource struct {
	noBackfill
	n, size, wantAt, served int
	committed               []string
}

func (s *windowSource) Fetch(_ context.Context, after *state.Cursor, _ int) (*row.Batch, error) {
	k := 0
	if after != nil {
		k, _ = strconv.Atoi(string(after.Value))
	}
	if k >= s.n {
		return &row.Batch{From: after}, nil
	}
	s.served = k + 1
	return &row.Batch{From: after, Rows: make([]row.Row, s.size),
		To: &state.Cursor{Kind: state.KindInteger, Value: json.RawMessage(strconv.Itoa(k + 1))}}, nil
}
func (s *windowSource) CommitWanted() bool  { return s.served == s.wantAt }
func (s *windowSource) Fingerprint() string { return "sha256:window" }
func (s *windowSource) Backlog(context.Context, *state.Cursor, int) (driver.Stats, error) {
	return driver.Stats{}, nil
}
func (s *windowSource) CheckStamps(context.Context) error { return nil }
func (s *windowSource) Committed(_ context.Context, c *state.Cursor) error {
	s.committed = append(s.committed, string(c.Value))
	return nil
}
func (s *windowSource) Stats() driver.Stats { return driver.Stats{} }

// TestTickCommitsWhenTheSourceAsks: with a checkpoint interval that never passes, a tick of ten
// batches commits once, at its end, unless the source asks for a commit; when it asks after
// serving batch 4, the tick commits the checkpoint before that batch (3) before handling it,
// and the source is told so.
func TestTickCommitsWhenTheSourceAsks(t *testing.T) {
	for _, tc := range []struct {
		wantAt int
		want   []string
	}{{0, []string{"10"}}, {4, []string{"3", "10"}}} {
		clk := clock.NewFake(time.Date(2026, 4, 7, 2, 0, 0, 0, time.UTC))
		st := memstore.New(clk)
		m, err := lease.New(st, lease.Config{Poller: "orders", Blob: blobpath.State("test", "orders"), Owner: "A", Fingerprint: "sha256:window", Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		src := &windowSource{n: 10, size: 5, wantAt: tc.wantAt}
		r := &tick.Runner{Poller: pollerdef.Of(ordersPoller(func(context.Context, *poller.Batch[poller.Row]) error { return nil })),
			Lease: m, Source: src, Clock: clk,
			Settings: appsettings.Settings{BatchSize: 5, LeaseTTL: lease.DefaultTTL, HeartbeatInterval: lease.DefaultTTL / 4,
				TickBudget: time.Minute, CheckpointInterval: time.Hour}}
		sum, err := r.Tick(ctx, "inv")
		if err != nil || sum.Rows != 50 {
			t.Fatalf("tick: %+v %v", sum, err)
		}
		if !slices.Equal(src.committed, tc.want) {
			t.Errorf("asked after batch %d: checkpoints committed %v, want %v", tc.wantAt, src.committed, tc.want)
		}
	}
}
