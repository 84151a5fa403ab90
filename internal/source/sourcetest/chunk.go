package sourcetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// testChunks: a backfill reads the table's current rows in key order, a chunk at a time, with
// the definition's filter and its own; for each keyset kind a row whose version is after the live
// position (here: after the first 10 rows in cursor order, one of which then moves past it) is
// left to the live changes, the others are sent; the chunks' keys chain with none skipped; a
// --where the database rejects is an error naming it.
func (h Harness) testChunks(t *testing.T) {
	table := h.orders(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var rows []order
	for id := int64(1); id <= 25; id++ {
		rows = append(rows, order{ID: id, Customer: "c" + strconv.FormatInt(id, 10), Amount: "1.00", Updated: base.Add(time.Duration(id) * time.Second)})
	}
	h.insert(t, h.DB.Exec, table, rows)
	for _, kind := range h.kinds() {
		t.Run(kind, func(t *testing.T) {
			h.settle(t, table, kind)
			src := h.open(t, h.ordersDef(table, kind))
			b, err := src.Fetch(ctx, nil, 10)
			if err != nil || len(b.Rows) != 10 {
				t.Fatalf("fetch: %v, %v", b, err)
			}
			delivered := map[int64]bool{} // what the live side has delivered: at or before the position
			for _, r := range b.Rows {
				delivered[r.Get("id").(int64)] = true
			}
			// Move one delivered row past the position, as an update the live side has not read yet.
			moved := b.Rows[2].Get("id").(int64)
			switch {
			case kind == "timestamp+pk":
				h.exec(t, "UPDATE "+table+" SET updated_at = "+h.ph(1)+" WHERE id = "+h.ph(2), h.ts(time.Now()), moved)
				delivered[moved] = false
			case h.inCommitOrder(kind) && h.Fixture.Committed.Update != "":
				h.exec(t, "UPDATE "+table+" SET "+h.Fixture.Committed.Update+" WHERE id = "+h.ph(1), moved)
				delivered[moved] = false
			}

			var sent []int64
			var key map[string]json.RawMessage
			left, chunks := 0, 0
			for {
				c, err := src.ReadChunk(ctx, key, "id <> 5", b.To, 7)
				if err != nil {
					t.Fatalf("chunk %d after %s: %v", chunks+1, key, err)
				}
				chunks++
				for _, r := range c.Rows {
					id := r.Get("id").(int64)
					if !delivered[id] {
						t.Errorf("chunk %d sent row %d, whose version is after the live position", chunks, id)
					}
					if r.Get("customer") != "c"+strconv.FormatInt(id, 10) {
						t.Errorf("row %d read as %v", id, r.Values())
					}
					sent = append(sent, id)
				}
				left += c.Left
				if want := chunks < 4; c.Full != want || (c.Next == nil) {
					t.Fatalf("chunk %d: full %v, next %s; want full %v and a key", chunks, c.Full, c.Next, want)
				}
				var last int64
				if err := json.Unmarshal(c.Next["id"], &last); err != nil || len(c.Next) != 1 {
					t.Fatalf("chunk %d's key %s: %v", chunks, c.Next, err)
				}
				if want := []int64{8, 15, 22, 25}[chunks-1]; last != want { // 5 left out by the filter
					t.Fatalf("chunk %d ends at key %d, want %d", chunks, last, want)
				}
				key = c.Next
				if !c.Full {
					break
				}
			}
			var want []int64
			for id := int64(1); id <= 25; id++ {
				if id != 5 && delivered[id] {
					want = append(want, id)
				}
			}
			if !slices.Equal(sent, want) || left != 24-len(want) {
				t.Fatalf("sent %v and left %d; want %v and %d", sent, left, want, 24-len(want))
			}
			if c, err := src.ReadChunk(ctx, key, "", b.To, 7); err != nil || len(c.Rows) != 0 || c.Left != 0 || c.Next != nil || c.Full {
				t.Fatalf("after the last key: %+v, %v; want nothing", c, err)
			}
			if c, err := src.ReadChunk(ctx, nil, "", nil, 30); err != nil || len(c.Rows) != 0 || c.Left != 25 {
				t.Fatalf("from the beginning: %d sent, %d left, %v; want every row left to the live changes", len(c.Rows), c.Left, err)
			}
			if n, err := src.CountChunkRows(ctx, "id <> 5", 100); err != nil || n != 24 {
				t.Fatalf("counting the backfill's rows: %d, %v; want 24", n, err)
			}
			if n, err := src.CountChunkRows(ctx, "", 10); err != nil || n != 10 {
				t.Fatalf("counting up to 10: %d, %v", n, err)
			}
			if _, err := src.CountChunkRows(ctx, "no_such_column = 1", 10); err == nil || !strings.Contains(err.Error(), "--where") {
				t.Fatalf("counting with a --where the database rejects: %v", err)
			}
			_, err = src.ReadChunk(ctx, nil, "no_such_column = 1", b.To, 7)
			if err == nil || !strings.Contains(err.Error(), `--where "no_such_column = 1"`) {
				t.Fatalf("a --where the database rejects: %v", err)
			}
			_, err = src.ReadChunk(ctx, map[string]json.RawMessage{"nope": json.RawMessage("1")}, "", b.To, 7)
			if !errors.Is(err, source.ErrChunkKey) || !strings.Contains(err.Error(), `"id"`) {
				t.Fatalf("a key of another column: %v", err)
			}
		})
	}
}

// A WatermarkWant is what CheckWatermark expects of one change after a change-stream chunk: its
// id (column "id"), whether the chunk's watermark finds it Newer, and whether the stream is past
// the watermark (Reached) at the cursor after it.
type WatermarkWant struct {
	ID             int64
	Newer, Reached bool
}

// CheckWatermark fetches src's changes after at, one a batch, and checks them against wants
// with c's watermark; it returns the changes.
func CheckWatermark(t testing.TB, src *source.Source, c *source.Chunk, at *state.Cursor, wants []WatermarkWant) []row.Row {
	t.Helper()
	var rows []row.Row
	var cursors []*state.Cursor
	for cur := at; ; {
		b, err := src.Fetch(context.Background(), cur, 1)
		if err != nil {
			t.Fatal(err)
		}
		if b.To == nil {
			break
		}
		cur = b.To
		for _, r := range b.Rows {
			rows = append(rows, r)
			cursors = append(cursors, b.To)
		}
	}
	if len(rows) != len(wants) {
		t.Fatalf("%d changes after the chunk's, want %d (%v)", len(rows), len(wants), wants)
	}
	for i, w := range wants {
		r := rows[i]
		if id := r.Get("id"); id != w.ID {
			t.Fatalf("change %d is of id %v, want %d", i, id, w.ID)
		}
		if got := c.Watermark.Newer(r); got != w.Newer {
			t.Errorf("the %s of id %d: Newer %v, want %v", r.Op(), w.ID, got, w.Newer)
		}
		if got := c.Watermark.Reached(cursors[i]); got != w.Reached {
			t.Errorf("the cursor after the %s of id %d (%s): Reached %v, want %v", r.Op(), w.ID, cursors[i].Value, got, w.Reached)
		}
	}
	return rows
}
