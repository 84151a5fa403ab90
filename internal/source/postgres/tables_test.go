package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestLogicalTables: a logical poller of two tables through one slot and publication. cdc enable
// adds the second table to the publication; the changes of both come in commit order, each row
// with its table's columns and key, a transaction's changes numbered across the tables; a table
// of the publication that is not the poller's is left out; a TRUNCATE of both stops the poller
// naming both; the replay of a dead-lettered change finds its table's row.
func TestLogicalTables(t *testing.T) {
	ctx := context.Background()
	db, orders, cfg := logicalTable(t, logicalDDL)
	lines, other := testenv.Name("lines"), testenv.Name("other")
	exec(t, db,
		"CREATE TABLE "+lines+" (order_id bigint, line int, qty int NOT NULL, PRIMARY KEY (order_id, line))",
		"CREATE TABLE "+other+" (id bigint PRIMARY KEY)")
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + lines + ", " + other) })
	cfg.Definition.More = []sourcedef.TableDef{{Table: sourcedef.Table{Name: lines}, Columns: []string{"qty"}, PK: []string{"order_id", "line"}}}

	// The publication publishes the first table alone: the reader refuses, naming the other.
	if _, err := drivers.Open(ctx, cfg); !errors.Is(err, postgres.ErrNotEnabled) || !strings.Contains(err.Error(), "table "+lines) ||
		!strings.Contains(err.Error(), "does not include the table") {
		t.Fatalf("open without the second table in the publication: %v", err)
	}
	cdc, info := inspectCDC(t, cfg)
	plan := cdc.PlanEnable(info)
	want := fmt.Sprintf("ALTER PUBLICATION %s SET TABLE %s, %s", pq(cfg.Definition.Publication), pq(orders), pq(lines))
	if len(plan.Problems) > 0 || !slices.Equal(plan.Steps, []string{want}) {
		t.Fatalf("plan: steps %q problems %q, want the step %q", plan.Steps, plan.Problems, want)
	}
	if _, err := cdc.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	exec(t, db, "ALTER PUBLICATION "+cfg.Definition.Publication+" ADD TABLE "+other) // published, not the poller's

	src, err := drivers.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if fp := source.Fingerprint(postgres.Name, driver.Location{}, cfg.Definition); fp == source.Fingerprint(postgres.Name, driver.Location{}, sourcedef.Definition{
		Table: cfg.Definition.Table, Columns: cfg.Definition.Columns, PK: cfg.Definition.PK, Cursor: cfg.Definition.Cursor, Slot: cfg.Definition.Slot, Publication: cfg.Definition.Publication}) {
		t.Error("the second table does not change the fingerprint")
	}
	if tb := src.Identity().Tables; len(tb) != 1 || tb[0].Table != lines || !slices.Equal(tb[0].Columns, []string{"qty", "order_id", "line"}) {
		t.Errorf("identity's tables %+v", tb)
	}
	for _, stmts := range [][]string{
		{"INSERT INTO " + orders + " VALUES (1, 'a', NULL)", "INSERT INTO " + lines + " VALUES (1, 1, 5)", "UPDATE " + orders + " SET note = 'n' WHERE id = 1"},
		{"INSERT INTO " + lines + " VALUES (1, 2, 7)", "INSERT INTO " + other + " VALUES (9)", "DELETE FROM " + orders + " WHERE id = 1"},
		{"INSERT INTO " + other + " VALUES (10)"},
		{"UPDATE " + lines + " SET qty = 6 WHERE order_id = 1 AND line = 1"},
	} {
		exec(t, db, stmts...)
	}
	var got []string
	var c *state.Cursor
	var lastRow row.Row
	for {
		b, err := src.Fetch(ctx, c, 2) // transactions split over batches
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Rows) == 0 {
			break
		}
		for _, r := range b.Rows {
			tx, ok := r.Transaction()
			if !ok {
				t.Fatalf("no transaction: %v", r.Key())
			}
			j, _ := r.MarshalJSON()
			line := fmt.Sprintf("%s %s %s #%d", r.Table(), r.Op(), j, tx.Index)
			if tx.Last {
				line += " last"
			}
			got = append(got, line)
			lastRow = r
		}
		c = b.To
	}
	o, l := orders, lines
	wantRows := []string{
		o + ` insert {"id":1,"name":"a","note":null} #1`,
		l + ` insert {"qty":5,"order_id":1,"line":1} #2`,
		o + ` update {"id":1,"name":"a","note":"n"} #3 last`,
		l + ` insert {"qty":7,"order_id":1,"line":2} #1`,
		o + ` delete {"id":1,"name":null,"note":null} #2 last`,
		l + ` update {"qty":6,"order_id":1,"line":1} #1 last`,
	}
	if !slices.Equal(got, wantRows) {
		t.Fatalf("changes:\n got %q\nwant %q", got, wantRows)
	}
	if cols := lastRow.Columns(); !slices.Equal(cols, []string{"qty", "order_id", "line"}) {
		t.Errorf("the second table's row has columns %v", cols)
	}
	// A dead letter of the second table's change is replayed from its table.
	cur, _ := lastRow.Cursor()
	r, why, err := src.ReplayChange(ctx, lines, row.OpUpdate, map[string]json.RawMessage{"order_id": json.RawMessage("1"), "line": json.RawMessage("1")}, cur)
	if err != nil || r == nil || r.Table() != lines || r.Get("qty") != int64(6) {
		t.Fatalf("replay of %s's change: %v %q %v", lines, r, why, err)
	}
	if _, _, err := src.ReplayChange(ctx, other, row.OpUpdate, map[string]json.RawMessage{"id": json.RawMessage("9")}, cur); !errors.Is(err, source.ErrCursor) {
		t.Fatalf("replay of a table the poller does not read: %v", err)
	}

	// One table under two names is refused.
	twice := cfg
	twice.Definition.More = []sourcedef.TableDef{{Table: sourcedef.Table{Schema: "public", Name: orders}, Columns: []string{"name"}, PK: []string{"id"}}}
	if _, err := drivers.Open(ctx, twice); !errors.Is(err, sourcedef.ErrDefinition) || !strings.Contains(err.Error(), "are the same table") {
		t.Errorf("%s and public.%s in one poller: %v", orders, orders, err)
	}

	// One TRUNCATE of both tables: one stop, naming both.
	exec(t, db, "TRUNCATE "+orders+", "+lines)
	if _, err := src.Fetch(ctx, c, 10); !errors.Is(err, postgres.ErrTruncate) || !strings.Contains(err.Error(), "tables "+orders+", "+lines) {
		t.Fatalf("fetch after the truncate: %v", err)
	}

	// cdc disable drops the publication only when it publishes the poller's tables alone.
	info, err = cdc.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cdc.PlanDisable(info); !strings.Contains(d.Keep, "other tables too") {
		t.Errorf("disable with another table published: keep %q, steps %q", d.Keep, d.Steps)
	}
	exec(t, db, "ALTER PUBLICATION "+cfg.Definition.Publication+" DROP TABLE "+other)
	if info, err = cdc.Inspect(ctx); err != nil {
		t.Fatal(err)
	}
	if d := cdc.PlanDisable(info); d.Keep != "" || !slices.Contains(d.Steps, cdc.DropPublicationSQL()) {
		t.Errorf("disable of the poller's own publication: keep %q, steps %q", d.Keep, d.Steps)
	}
}

// TestTablesRefused: several tables are for the change-stream cursors, start now, and are named once.
func TestTablesRefused(t *testing.T) {
	base := sourcedef.Definition{Table: sourcedef.Table{Name: "a"}, Columns: []string{"id"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindLogical}, Slot: "s", Publication: "s",
		More: []sourcedef.TableDef{{Table: sourcedef.Table{Name: "b"}, Columns: []string{"id"}, PK: []string{"id"}}}}
	for _, c := range []struct {
		name string
		edit func(d *sourcedef.Definition)
		want string
	}{
		{"keyset", func(d *sourcedef.Definition) { d.Cursor = sourcedef.Cursor{Kind: state.KindInteger, Column: "id"} }, "reads one table"},
		{"snapshot", func(d *sourcedef.Definition) { d.Initial = sourcedef.InitialSnapshot }, `starts "now"`},
		{"twice", func(d *sourcedef.Definition) { d.More[0].Table.Name = "A" }, "listed twice"},
		{"no key", func(d *sourcedef.Definition) { d.More[0].PK = nil }, "table b: no key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := base
			d.More = slices.Clone(base.More)
			c.edit(&d)
			_, _, err := source.Offline(postgres.Driver{}, source.Config{Poller: "p", Driver: postgres.Name, Definition: d}, map[string]string{"id": "INT8"})
			if !errors.Is(err, sourcedef.ErrDefinition) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrDefinition saying %q", err, c.want)
			}
		})
	}
}

// pq quotes a table name as the publication's statements do.
func pq(name string) string { return postgres.Driver{}.Quote(name) }

// TestLogicalTablesCreate: cdc enable of a poller of two tables whose publication does not
// exist, the first reading fewer columns than it has and the second filtered: one CREATE
// PUBLICATION of both, each with its column list or row filter; a filter PostgreSQL refuses
// (not on the replica identity) is refused before anything is made, naming its table.
func TestLogicalTablesCreate(t *testing.T) {
	ctx := context.Background()
	db, orders, cfg := logicalTable(t, logicalDDL)
	lines := testenv.Name("lines")
	exec(t, db, "CREATE TABLE "+lines+" (order_id bigint, line int, qty int NOT NULL, PRIMARY KEY (order_id, line))",
		"DROP PUBLICATION "+cfg.Definition.Publication)
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + lines) })
	cfg.Definition.Columns = []string{"id", "name"}
	cfg.Definition.More = []sourcedef.TableDef{{Table: sourcedef.Table{Name: lines}, Columns: []string{"qty"}, PK: []string{"order_id", "line"}, Filter: "qty > 0"}}
	plan := func() pgcdc.EnablePlan {
		t.Helper()
		cdc, info := inspectCDC(t, cfg)
		return cdc.PlanEnable(info)
	}
	// qty is not in the lines' replica identity (its primary key): PostgreSQL refuses the filter.
	if p := plan(); len(p.Problems) != 1 || !strings.Contains(p.Problems[0], "table public."+lines) || !strings.Contains(p.Problems[0], "replica identity") {
		t.Fatalf("a filter on a column outside the replica identity: problems %q", p.Problems)
	}
	cfg.Definition.More[0].Filter = "line > 0"
	p := plan()
	want := fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s (%s, %s), %s WHERE ((line > 0)) WITH (publish = 'insert, update, delete, truncate')",
		pq(cfg.Definition.Publication), pq(orders), pq("id"), pq("name"), pq(lines))
	if len(p.Problems) > 0 || len(p.Steps) == 0 || p.Steps[0] != want {
		t.Fatalf("plan: steps %q problems %q\nwant the first step %q", p.Steps, p.Problems, want)
	}
	cdc, _ := inspectCDC(t, cfg)
	if _, err := cdc.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	src, err := drivers.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	src.Close()
}

// inspectCDC opens the set-up of cfg's poller (closed when the test ends) and reads it.
func inspectCDC(t *testing.T, cfg source.Config) (*pgcdc.Admin, pgcdc.Info) {
	t.Helper()
	cdc, err := pgcdc.Open(context.Background(), drivers.All(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cdc.Close() })
	info, err := cdc.Inspect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cdc, info
}
