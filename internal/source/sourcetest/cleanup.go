package sourcetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// testCleanup: with each keyset cursor kind, a cleanup deletes exactly the rows at or before a
// checkpoint (the tiebreaker decides between rows of one cursor value), of the poller's filter,
// and with older_than only those older than it by the database's clock; each statement deletes
// at most its limit; what it left counts as awaiting cleanup until it is gone.
func (h Harness) testCleanup(t *testing.T) {
	for _, kind := range h.kinds() {
		t.Run(kind, func(t *testing.T) {
			table := h.orders(t)
			// 1-20: two days old, pairs sharing a timestamp (10 and 11 share theirs); 21-30: an
			// hour old. Row 3 is a draft, which the poller's filter leaves out.
			now := time.Now().UTC().Truncate(time.Microsecond)
			var rows []order
			for id := int64(1); id <= 30; id++ {
				ts := now.Add(-48 * time.Hour).Add(time.Duration(id/2) * time.Second)
				if id > 20 {
					ts = now.Add(-time.Hour).Add(time.Duration(id) * time.Second)
				}
				customer := fmt.Sprintf("customer %d", id)
				if id == 3 {
					customer = "draft"
				}
				rows = append(rows, order{ID: id, Customer: customer, Amount: "1.00", Updated: ts})
			}
			h.insert(t, h.DB.Exec, table, rows)
			h.settle(t, table, kind)
			def := h.ordersDef(table, kind)
			def.Filter = h.q("customer") + " <> 'draft'"
			def.Cleanup = &sourcedef.Cleanup{Delete: true}
			src := h.open(t, def)
			if !src.Cleans() {
				t.Fatal("a source with a cleanup says it does not clean")
			}

			// The checkpoint after the tenth row read: 1-11 but the draft, in every kind's order
			// (a commit-order kind's rows share one transaction, ordered by id).
			r := &reader{t: t, src: src}
			if got := r.next(10); len(got) != 10 {
				t.Fatalf("read %v, want 10 rows", got)
			}
			upTo := r.cursor
			awaiting := func(want int64) {
				t.Helper()
				n, err := src.AwaitingCleanup(ctx, upTo, 100)
				if err != nil || n != want {
					t.Fatalf("awaiting cleanup: %d, %v; want %d", n, err, want)
				}
			}
			awaiting(10)
			if n, err := src.AwaitingCleanup(ctx, upTo, 1); err != nil || n != 1 {
				t.Fatalf("awaiting cleanup, up to 1: %d, %v", n, err)
			}
			if n, err := src.Cleanup(ctx, upTo, 4); err != nil || n != 4 {
				t.Fatalf("cleanup of at most 4: deleted %d, %v", n, err)
			}
			awaiting(6)
			if n, err := src.Cleanup(ctx, upTo, 100); err != nil || n != 6 {
				t.Fatalf("cleanup of the rest: deleted %d, %v; want 6", n, err)
			}
			awaiting(0)
			if n, err := src.Cleanup(ctx, upTo, 100); err != nil || n != 0 {
				t.Fatalf("cleanup with nothing left: deleted %d, %v", n, err)
			}
			left := h.expected(t, table, "id")
			want := []int64{3}
			for id := int64(12); id <= 30; id++ {
				want = append(want, id)
			}
			if !slices.Equal(left, want) {
				t.Fatalf("rows left %v, want %v (the draft and those after the checkpoint)", left, want)
			}

			// older_than keeps the rows younger than it: the hour-old ones behind a checkpoint
			// at the end stay; the rest go.
			def.Cleanup = &sourcedef.Cleanup{OlderThan: 24 * time.Hour, Column: "updated_at"}
			if kind == state.KindTimestampPK {
				def.Cleanup.Column = "" // the cursor column
			}
			aged := h.open(t, def)
			r = &reader{t: t, src: aged}
			r.drain(100)
			upTo = r.cursor
			if n, err := aged.AwaitingCleanup(ctx, upTo, 100); err != nil || n != 9 {
				t.Fatalf("awaiting cleanup older than a day: %d, %v; want 9 (12-20)", n, err)
			}
			if n, err := aged.Cleanup(ctx, upTo, 100); err != nil || n != 9 {
				t.Fatalf("cleanup older than a day: deleted %d, %v; want 9", n, err)
			}
			left = h.expected(t, table, "id")
			want = []int64{3}
			for id := int64(21); id <= 30; id++ {
				want = append(want, id)
			}
			if !slices.Equal(left, want) {
				t.Fatalf("rows left after the cleanup older than a day: %v, want %v", left, want)
			}
		})
	}
}
