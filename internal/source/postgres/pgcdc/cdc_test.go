package pgcdc_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// cdcSetup is one test's table (with a primary key id) and the config of a logical poller of it
// whose slot and publication are named after the table; both are dropped when the test ends.
type cdcSetup struct {
	db    *sql.DB
	dsn   string
	table string
	cfg   source.Config
}

func newCDCSetup(t *testing.T) cdcSetup {
	t.Helper()
	dsn := testenv.Postgres(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	table := testenv.Name("cdc")
	cdcExec(t, db, fmt.Sprintf("CREATE TABLE %s (id BIGINT PRIMARY KEY, v TEXT NOT NULL)", table))
	t.Cleanup(func() {
		db.Exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", table)
		db.Exec("DROP PUBLICATION IF EXISTS " + table)
		db.Exec("DROP TABLE IF EXISTS " + table)
	})
	cfg := source.Config{Poller: "p", Driver: postgres.Name, DSN: dsn, Definition: sourcedef.Definition{
		Table: sourcedef.Table{Name: table}, Columns: []string{"id", "v"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindLogical}, Slot: table, Publication: table,
	}}
	return cdcSetup{db: db, dsn: dsn, table: table, cfg: cfg}
}

func cdcExec(t *testing.T, db *sql.DB, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func (c cdcSetup) open(t *testing.T) *pgcdc.Admin {
	t.Helper()
	cdc, err := pgcdc.Open(context.Background(), drivers.All(), c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cdc.Close() })
	return cdc
}

// exists says whether the slot and the publication exist.
func (c cdcSetup) exists(t *testing.T) (slot, pub bool) {
	t.Helper()
	if err := c.db.QueryRow("SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1), EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)",
		c.table).Scan(&slot, &pub); err != nil {
		t.Fatal(err)
	}
	return slot, pub
}

func TestCDCEnableDisable(t *testing.T) {
	c := newCDCSetup(t)
	cdc := c.open(t)
	ctx := context.Background()
	info, err := cdc.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.WALLevel != "logical" || !info.TableExists || info.ReplicaIdentity != "default" || strings.Join(info.IdentityColumns, ",") != "id" ||
		info.Slot.Exists || info.Publication.Exists {
		t.Fatalf("info before: %+v", info)
	}
	if !strings.Contains(info.IdentityMeaning(), "only the primary key (id)") {
		t.Errorf("meaning: %s", info.IdentityMeaning())
	}
	plan := cdc.PlanEnable(info)
	if len(plan.Problems) > 0 || len(plan.Steps) != 2 || !strings.HasPrefix(plan.Steps[0], "CREATE PUBLICATION") ||
		!strings.Contains(plan.Steps[1], "pg_create_logical_replication_slot('"+c.table+"', 'pgoutput')") {
		t.Fatalf("plan: %+v", plan)
	}
	done, err := cdc.Enable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !done.CreatedPublication || !done.CreatedSlot || !done.Slot.Exists || done.Slot.Plugin != "pgoutput" || !done.Slot.Here ||
		done.Slot.RetainedBytes == nil || done.Slot.ConfirmedFlush == "" {
		t.Fatalf("enabled: %+v", done)
	}
	if _, ok := done.Slot.Confirmed(); !ok {
		t.Errorf("confirmed %q does not parse", done.Slot.ConfirmedFlush)
	}
	// The reader opens on what Enable made.
	src, err := drivers.Open(ctx, c.cfg)
	if err != nil {
		t.Fatalf("Open after Enable: %v", err)
	}
	details, err := src.Inspect(ctx, "lg")
	src.Close()
	if err != nil || len(details) != 1 || details[0].Key != "slot" || !details[0].Value.(pgcdc.SlotState).Exists {
		t.Fatalf("Source.Inspect: %+v %v", details, err)
	}
	// Again: nothing to do.
	if done, err := cdc.Enable(ctx); err != nil || done.CreatedPublication || done.CreatedSlot {
		t.Fatalf("second enable: %+v %v", done, err)
	}

	info, err = cdc.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dp := cdc.PlanDisable(info)
	if len(dp.Problems) > 0 || len(dp.Steps) != 2 || dp.Keep != "" {
		t.Fatalf("disable plan: %+v", dp)
	}
	dd, err := cdc.Disable(ctx)
	if err != nil || !dd.DroppedSlot || !dd.DroppedPublication {
		t.Fatalf("disable: %+v %v", dd, err)
	}
	if slot, pub := c.exists(t); slot || pub {
		t.Fatalf("after disable: slot %v publication %v", slot, pub)
	}
	if dd, err := cdc.Disable(ctx); err != nil || dd.DroppedSlot || dd.DroppedPublication {
		t.Fatalf("second disable: %+v %v", dd, err)
	}
}

// TestCDCEnableRefusals: each set-up error has its message, and nothing is created.
func TestCDCEnableRefusals(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		setup func(t *testing.T, c *cdcSetup)
		want  string
		slot  bool // the slot exists before (and after)
		pub   bool
	}{
		{"replica identity nothing", func(t *testing.T, c *cdcSetup) {
			cdcExec(t, c.db, "ALTER TABLE "+c.table+" REPLICA IDENTITY NOTHING")
		}, "REPLICA IDENTITY NOTHING", false, false},
		{"no primary key", func(t *testing.T, c *cdcSetup) {
			cdcExec(t, c.db, "ALTER TABLE "+c.table+" DROP CONSTRAINT "+c.table+"_pkey")
		}, "has no primary key", false, false},
		{"key differs", func(t *testing.T, c *cdcSetup) {
			c.cfg.Definition.PK = []string{"v"}
		}, "the poller's key (v) is not what a delete", false, false},
		{"publication without the table", func(t *testing.T, c *cdcSetup) {
			other := c.table + "_other"
			cdcExec(t, c.db, "CREATE TABLE "+other+" (id int PRIMARY KEY)", "CREATE PUBLICATION "+c.table+" FOR TABLE "+other)
			t.Cleanup(func() { c.db.Exec("DROP TABLE " + other) })
		}, "exists but does not publish table", false, true},
		{"publication without deletes", func(t *testing.T, c *cdcSetup) {
			cdcExec(t, c.db, "CREATE PUBLICATION "+c.table+" FOR TABLE "+c.table+" WITH (publish = 'insert, update')")
		}, "publishes only insert, update", false, true},
		{"slot with another plugin", func(t *testing.T, c *cdcSetup) {
			cdcExec(t, c.db, "SELECT pg_create_logical_replication_slot('"+c.table+"', 'test_decoding')")
		}, `plugin "test_decoding"`, true, false},
		{"no such table", func(t *testing.T, c *cdcSetup) {
			c.cfg.Definition.Table.Name = c.table + "_missing"
		}, "does not exist", false, false},
		{"role without privileges", func(t *testing.T, c *cdcSetup) {
			role := c.table + "_r"
			cdcExec(t, c.db, "CREATE ROLE "+role+" LOGIN", "GRANT SELECT ON "+c.table+" TO "+role)
			t.Cleanup(func() { c.db.Exec("DROP OWNED BY " + role); c.db.Exec("DROP ROLE " + role) })
			u, _ := url.Parse(c.dsn)
			u.User = url.User(role)
			c.cfg.DSN = u.String()
		}, "needs the REPLICATION attribute", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCDCSetup(t)
			tc.setup(t, &c)
			cdc := c.open(t)
			_, err := cdc.Enable(ctx)
			if !errors.Is(err, pgcdc.ErrSetup) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nothing was created") {
				t.Fatalf("error %v, want ErrSetup with %q and 'nothing was created'", err, tc.want)
			}
			if slot, pub := c.exists(t); slot != tc.slot || pub != tc.pub {
				t.Fatalf("after the refusal: slot %v (want %v), publication %v (want %v)", slot, tc.slot, pub, tc.pub)
			}
		})
	}
}

// TestCDCRoleNeeds: a role without REPLICATION, CREATE or ownership is told each privilege.
func TestCDCRoleNeeds(t *testing.T) {
	c := newCDCSetup(t)
	role := c.table + "_n"
	cdcExec(t, c.db, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() { c.db.Exec("DROP OWNED BY " + role); c.db.Exec("DROP ROLE " + role) })
	u, _ := url.Parse(c.dsn)
	u.User = url.User(role)
	c.cfg.DSN = u.String()
	info, err := c.open(t).Inspect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range info.Needs() {
		if n.Has {
			t.Errorf("%s: has it, want not", n.What)
		}
		if n.Fix == "" {
			t.Errorf("%s: no fix", n.What)
		}
	}
	plan := c.open(t).PlanEnable(info)
	all := strings.Join(plan.Problems, "\n")
	for _, want := range []string{"REPLICATION", "CREATE on database", "needs its ownership"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
}

func TestCDCDisableKeepsSharedPublication(t *testing.T) {
	c := newCDCSetup(t)
	other := c.table + "_o"
	cdcExec(t, c.db, "CREATE TABLE "+other+" (id int PRIMARY KEY)", "CREATE PUBLICATION "+c.table+" FOR TABLE "+c.table+", "+other,
		"SELECT pg_create_logical_replication_slot('"+c.table+"', 'pgoutput')")
	t.Cleanup(func() { c.db.Exec("DROP TABLE " + other) })
	cdc := c.open(t)
	dd, err := cdc.Disable(context.Background())
	if err != nil || !dd.DroppedSlot || dd.DroppedPublication {
		t.Fatalf("disable: %+v %v", dd, err)
	}
	if slot, pub := c.exists(t); slot || !pub {
		t.Fatalf("slot %v (want gone), publication %v (want kept)", slot, pub)
	}
}

func TestOpenRefusesOtherKinds(t *testing.T) {
	cfg := source.Config{Poller: "p", Driver: postgres.Name, DSN: "postgres://u@h/db", Definition: sourcedef.Definition{
		Table: sourcedef.Table{Name: "t"}, PK: []string{"id"}, Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "id"}}}
	_, err := pgcdc.Open(context.Background(), drivers.All(), cfg)
	if !errors.Is(err, pgcdc.ErrSetup) || !strings.Contains(err.Error(), "logical pollers only") {
		t.Fatalf("got %v", err)
	}
}
