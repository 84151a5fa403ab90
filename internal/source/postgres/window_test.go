package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// TestLogicalCatchUpWindow: a backlog many peeks' windows long (300 inserts in transactions of
// five; a peek asks for at least 4 batches and 64 messages, so with the window set below that,
// each peek reads 144 messages), read in batches of 20 as the tick reads it: after each fetch,
// when the source asks for a commit (CommitWanted), the checkpoint before the batch is committed
// and the slot advanced to it. The source asks for one each time its window runs out, the slot
// moves during the catch-up (so that each peek starts near the cursor rather than at the
// backlog's start), and every insert arrives once, in order.
func TestLogicalCatchUpWindow(t *testing.T) {
	defer postgres.SetMaxAsk(64)()
	db, table, cfg := logicalTable(t, logicalDDL)
	for i := range 60 {
		exec(t, db, fmt.Sprintf("INSERT INTO %s SELECT g, 'n' || g, NULL FROM generate_series(%d, %d) g", table, i*5+1, i*5+5))
	}
	ctx := context.Background()
	src, err := drivers.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	start := slotPosition(t, db, cfg.Definition.Slot)
	var c *state.Cursor // the checkpoint: the cursor the batch in hand was read after
	var ids []int64
	wanted, moved := 0, 0
	for {
		b, err := src.Fetch(ctx, c, 20)
		if err != nil {
			t.Fatalf("fetch after %v: %v", c, err)
		}
		if len(b.Rows) == 0 {
			break
		}
		for _, r := range b.Rows {
			ids = append(ids, r.Key()["id"].(int64))
		}
		if src.CommitWanted() && c != nil {
			wanted++
			if err := src.Committed(ctx, c); err != nil {
				t.Fatal(err)
			}
			if at := slotPosition(t, db, cfg.Definition.Slot); at.LSN != mustPos(t, c).LSN {
				t.Fatalf("after the commit the slot is at %s, want the checkpoint's %s", at, mustPos(t, c))
			} else if start.Before(at) {
				moved++
			}
		}
		c = b.To
	}
	if len(ids) != 300 {
		t.Fatalf("%d inserts arrived, want 300", len(ids))
	}
	for i, id := range ids {
		if id != int64(i+1) {
			t.Fatalf("insert %d is id %d, want %d (duplicated or out of order)", i, id, i+1)
		}
	}
	// 300 inserts are 420 messages: windows of 144 run out twice before the last one.
	if wanted < 2 || moved < 2 {
		t.Fatalf("the source asked for %d commits and the slot moved %d times during the catch-up; want a commit each time a window ran out", wanted, moved)
	}
}
