package pgcdc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestLogicalFilter: a logical poller's filter is its publication's row filter.
//   - On a column outside the replica identity, cdc enable refuses it before making anything,
//     with PostgreSQL's reason and the fix (the table's updates would fail otherwise).
//   - Under REPLICA IDENTITY FULL it is made: filtered-out rows never arrive, an update that
//     takes a row out arrives as its delete and one that brings it in as its insert.
//   - A publication changed by hand to filter otherwise stops the reader, printing both and the
//     fix; cdc enable changes it back, and spacing alone is not a difference.
func TestLogicalFilter(t *testing.T) {
	c := newCDCSetup(t)
	ctx := context.Background()
	cdcExec(t, c.db, "ALTER TABLE "+c.table+" ADD COLUMN status TEXT NOT NULL DEFAULT 'open'")
	c.cfg.Definition.Columns = []string{"id", "v", "status"}
	c.cfg.Definition.Filter = "status   <> 'draft'"
	cdc := c.open(t)
	info, err := cdc.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	plan := cdc.PlanEnable(info)
	if len(plan.Problems) != 1 || !strings.Contains(plan.Problems[0], "not part of the replica identity") || !strings.Contains(plan.Problems[0], "REPLICA IDENTITY FULL") ||
		!strings.Contains(plan.Problems[0], "every UPDATE or DELETE of the table would fail") {
		t.Fatalf("a filter on a column outside the replica identity: %q", plan.Problems)
	}
	if _, err := cdc.Enable(ctx); !errors.Is(err, pgcdc.ErrSetup) {
		t.Fatalf("enable: %v", err)
	}
	if slot, pub := c.exists(t); slot || pub {
		t.Fatalf("the refused enable made slot %v, publication %v", slot, pub)
	}
	cdcExec(t, c.db, "ALTER TABLE "+c.table+" REPLICA IDENTITY FULL")
	if info, err = cdc.Inspect(ctx); err != nil {
		t.Fatal(err)
	}
	plan = cdc.PlanEnable(info)
	if len(plan.Problems) != 0 || !strings.Contains(plan.Steps[0], "WHERE ((status <> 'draft'::text))") {
		t.Fatalf("under FULL: %+v", plan)
	}
	if _, err := cdc.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	src, err := drivers.Open(ctx, c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	tbl := c.table
	testenv.ExecFlushed(t, c.db,
		"INSERT INTO "+tbl+" VALUES (1, 'a', 'draft'), (2, 'b', 'open')",
		"UPDATE "+tbl+" SET v = 'a2' WHERE id = 1",         // a draft: nothing
		"UPDATE "+tbl+" SET status = 'draft' WHERE id = 2", // out: a delete
		"UPDATE "+tbl+" SET status = 'open' WHERE id = 1",  // in: an insert
		"DELETE FROM "+tbl+" WHERE id = 2")                 // a draft: nothing
	b, err := src.Fetch(ctx, nil, 10) // every change, in one batch
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Committed(ctx, b.To); err != nil {
		t.Fatal(err)
	}
	src.Close()
	got := changes(b)
	// The update of 2 out of the filter is a delete of its old row (under FULL, with it).
	if want := "insert 2 open, delete 2 open, insert 1 open"; strings.Join(got, ", ") != want {
		t.Errorf("changes: %s\nwant:    %s", strings.Join(got, ", "), want)
	}
	if len(b.Rows) > 1 && !b.Rows[1].HasRow() {
		t.Errorf("the delete of a row leaving the filter has no old row under FULL")
	}

	// A publication that filters otherwise stops the reader, with both and the fix.
	cdcExec(t, c.db, "ALTER PUBLICATION "+tbl+" SET TABLE "+tbl+" WHERE (status = 'closed')")
	_, err = drivers.Open(ctx, c.cfg)
	if !errors.Is(err, source.ErrMisconfigured) || !strings.Contains(err.Error(), "WHERE (status = 'closed'::text)") ||
		!strings.Contains(err.Error(), "WHERE (status <> 'draft'::text)") || !strings.Contains(err.Error(), "pollerctl cdc enable p --yes") {
		t.Fatalf("open with a publication that filters otherwise: %v", err)
	}
	if info, err = cdc.Inspect(ctx); err != nil {
		t.Fatal(err)
	}
	if plan = cdc.PlanEnable(info); len(plan.Problems) != 0 || len(plan.Steps) != 1 || !strings.HasPrefix(plan.Steps[0], `ALTER PUBLICATION "`+tbl+`" SET TABLE`) {
		t.Fatalf("the plan for a publication that filters otherwise: %+v", plan)
	}
	if done, err := cdc.Enable(ctx); err != nil || !done.AlteredPublication {
		t.Fatalf("enable: %+v %v", done, err)
	}
	src, err = drivers.Open(ctx, c.cfg)
	if err != nil {
		t.Fatalf("open after cdc enable changed the publication back: %v", err)
	}
	defer src.Close()
	testenv.ExecFlushed(t, c.db, "INSERT INTO "+tbl+" VALUES (3, 'c', 'draft'), (4, 'd', 'open')")
	more, err := src.Fetch(ctx, b.To, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := changes(more); len(got) != 1 || got[0] != "insert 4 open" {
		t.Errorf("after the fix: %v", got)
	}
}

// TestLogicalColumnList: a logical poller that reads fewer columns than the table has gets them
// as its publication's column list; a publication whose list leaves out a column the poller
// reads stops the reader.
func TestLogicalColumnList(t *testing.T) {
	c := newCDCSetup(t)
	ctx := context.Background()
	cdcExec(t, c.db, "ALTER TABLE "+c.table+" ADD COLUMN secret TEXT")
	cdc := c.open(t)
	info, err := cdc.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if plan := cdc.PlanEnable(info); len(plan.Problems) != 0 || !strings.Contains(plan.Steps[0], `FOR TABLE "`+c.table+`" ("id", "v") WITH`) {
		t.Fatalf("plan: %+v", plan)
	}
	if _, err := cdc.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	src, err := drivers.Open(ctx, c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.ExecFlushed(t, c.db, "INSERT INTO "+c.table+" VALUES (1, 'a', 'hidden')")
	b, err := src.Fetch(ctx, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Rows) != 1 || b.Rows[0].Get("v") != "a" {
		t.Errorf("changes: %v", changes(b))
	}
	src.Close()
	c.cfg.Definition.Columns = []string{"id", "v", "secret"}
	if _, err := drivers.Open(ctx, c.cfg); !errors.Is(err, source.ErrMisconfigured) || !strings.Contains(err.Error(), `columns (id, v)`) {
		t.Fatalf("open reading a column the publication leaves out: %v", err)
	}
}

// changes are a batch's changes as "op id status" (status: <nil> when the batch lacks it).
func changes(b *row.Batch) []string {
	var out []string
	for _, r := range b.Rows {
		out = append(out, fmt.Sprintf("%s %v %v", r.Op(), r.Key()["id"], r.Get("status")))
	}
	return out
}
