package postgres_test

import (
	"context"
	"database/sql"
	"net/url"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// checkTable makes a table of its own from ddl (%s: its name) and returns its name.
func checkTable(t *testing.T, db *sql.DB, ddl ...string) sourcedef.Table {
	t.Helper()
	return sourcetest.CheckTable(t, db, "", []string{"DROP VIEW IF EXISTS @_v", "DROP TABLE IF EXISTS @ CASCADE", "DROP TABLE IF EXISTS @_txid_counter, @_version_counter"}, ddl...)
}

func TestCheckSetup(t *testing.T) {
	dsn := testenv.Postgres(t)
	db := testenv.DB(t, "pgx", dsn)
	const base = `CREATE TABLE @ (id BIGINT PRIMARY KEY, amount NUMERIC NOT NULL`
	drv := postgres.Driver{}

	t.Run("xid with only a default", func(t *testing.T) {
		tb := checkTable(t, db, base+`, txid XID8 NOT NULL DEFAULT pg_current_xact_id())`)
		s := sourcetest.Setup(t, drv, dsn, tb, state.KindXID, "txid")
		sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictProblem, []string{"only a default", "never delivered"},
			"NEW.\"txid\" := pg_current_xact_id()", "BEFORE UPDATE ON \""+tb.Name+"\"")
		sourcetest.Expect(t, s, setup.CheckIndex, setup.VerdictProblem, []string{"(txid, id)"}, `CREATE INDEX "`+tb.Name+`_txid_id" ON "`+tb.Name+`" ("txid", "id")`)
		sourcetest.Expect(t, s, setup.CheckPrivileges, setup.VerdictOK, nil)
		sourcetest.FixAndRecheck(t, s)
	})
	t.Run("xid with the trigger", func(t *testing.T) {
		tb := checkTable(t, db, base+`, txid XID8 NOT NULL DEFAULT pg_current_xact_id())`,
			`CREATE INDEX ON @ (txid, id)`,
			`CREATE FUNCTION @_f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.txid := pg_current_xact_id(); RETURN NEW; END $$`,
			`CREATE TRIGGER t BEFORE UPDATE ON @ FOR EACH ROW EXECUTE FUNCTION @_f()`)
		s := sourcetest.Setup(t, drv, dsn, tb, state.KindXID, "txid")
		if n := setup.Problems(s.Findings); n != 0 {
			t.Fatalf("%d problems: %+v", n, s.Findings)
		}
		sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictOK, nil)
		sourcetest.Expect(t, s, setup.CheckIndex, setup.VerdictOK, nil)
	})
	t.Run("updated_at with only a default", func(t *testing.T) {
		tb := checkTable(t, db, base+`, updated_at TIMESTAMPTZ NOT NULL DEFAULT now())`, `CREATE INDEX ON @ (updated_at, id)`)
		s := sourcetest.Setup(t, drv, dsn, tb, state.KindTimestampPK, "updated_at")
		sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictProblem, []string{"only a default (now())"}, "clock_timestamp()")
		sourcetest.Expect(t, s, setup.CheckIndex, setup.VerdictOK, nil)
		sourcetest.FixAndRecheck(t, s)
	})
	t.Run("no default, a timestamp without time zone", func(t *testing.T) {
		tb := checkTable(t, db, base+`, updated_at TIMESTAMP NOT NULL)`)
		s := sourcetest.Setup(t, drv, dsn, tb, state.KindTimestampPK, "updated_at")
		sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictProblem, []string{"BEFORE INSERT"}, "BEFORE INSERT OR UPDATE", "clock_timestamp() AT TIME ZONE 'UTC'")
		sourcetest.FixAndRecheck(t, s)
	})
	t.Run("a trigger in a language the check cannot read", func(t *testing.T) {
		tb := checkTable(t, db, base+`, updated_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
			`CREATE TRIGGER t BEFORE UPDATE ON @ FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()`)
		s := sourcetest.Setup(t, drv, dsn, tb, state.KindTimestampPK, "updated_at")
		sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictUnknown, []string{"trigger t may stamp it"})
	})
	t.Run("the cursor column missing", func(t *testing.T) {
		tb := checkTable(t, db, base+`)`)
		s := sourcetest.Setup(t, drv, dsn, tb, state.KindInteger, "version")
		sourcetest.Expect(t, s, setup.CheckColumns, setup.VerdictProblem, []string{"no cursor column version"}, `ADD COLUMN "version" BIGINT NOT NULL DEFAULT 0`)
		sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictProblem, nil, "_version_counter", "BEFORE INSERT OR UPDATE")
		sourcetest.FixAndRecheck(t, s)
	})
	t.Run("a payload column missing", func(t *testing.T) {
		tb := checkTable(t, db, `CREATE TABLE @ (id BIGINT PRIMARY KEY, updated_at TIMESTAMPTZ NOT NULL)`)
		s := sourcetest.Setup(t, drv, dsn, tb, state.KindTimestampPK, "updated_at")
		f := sourcetest.Expect(t, s, setup.CheckColumns, setup.VerdictProblem, []string{"no column amount", "take it out of the poller's definition"})
		if len(f.Fix) != 0 {
			t.Errorf("a payload column has no fix in SQL: %q", f.Fix)
		}
	})
	t.Run("no table", func(t *testing.T) {
		s := sourcetest.Setup(t, drv, dsn, sourcedef.Table{Name: "no_such_table_here"}, state.KindTimestampPK, "updated_at")
		sourcetest.Expect(t, s, setup.CheckTable, setup.VerdictProblem, []string{"no table no_such_table_here"})
	})
	t.Run("a view", func(t *testing.T) {
		tb := checkTable(t, db, base+`, updated_at TIMESTAMPTZ NOT NULL DEFAULT now())`, `CREATE VIEW @_v AS SELECT * FROM @`)
		s := sourcetest.Setup(t, drv, dsn, sourcedef.Table{Name: tb.Name + "_v"}, state.KindTimestampPK, "updated_at")
		sourcetest.Expect(t, s, setup.CheckTable, setup.VerdictUnknown, []string{"is a view"})
		if n := setup.Problems(s.Findings); n != 0 {
			t.Fatalf("a view: %d problems, want none (cannot tell): %+v", n, s.Findings)
		}
	})
	t.Run("a logical poller not enabled", func(t *testing.T) {
		tb := checkTable(t, db, base+`)`)
		slot := strings.ToLower(tb.Name)
		def := sourcedef.Definition{Table: tb, Columns: []string{"id", "amount"}, Cursor: sourcedef.Cursor{Kind: state.KindLogical}, PK: []string{"id"}, Slot: slot, Publication: slot}
		s, err := source.CheckSetup(context.Background(), driver.Drivers{drv}, source.Config{Poller: "chk", Driver: postgres.Name, DSN: dsn, Definition: def})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		sourcetest.Expect(t, s, setup.CheckCDC, setup.VerdictProblem, []string{"not enabled: run `pollerctl cdc enable chk --yes`"})
		sourcetest.Expect(t, s, setup.CheckPrivileges, setup.VerdictOK, nil)
		for _, f := range s.Findings {
			if f.Check == setup.CheckIndex || f.Check == setup.CheckStamped {
				t.Errorf("a change stream has no cursor column to check: %+v", f)
			}
		}
		// Before images are offered, with their cost, and taken only when asked.
		if _, err := db.Exec("INSERT INTO " + tb.Name + " SELECT g, g FROM generate_series(1, 1000) g; ANALYZE " + tb.Name); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := s.Check(ctx); err != nil {
			t.Fatal(err)
		}
		sourcetest.Expect(t, s, setup.CheckBefore, setup.VerdictOffer, []string{"no before image", "REPLICA IDENTITY FULL sends the old row", "B more per update and delete (the table's average row"},
			`ALTER TABLE "`+tb.Name+`" REPLICA IDENTITY FULL`)
		if n := setup.Problems(s.Findings); n != 1 {
			t.Errorf("%d problems, want 1 (not enabled; an offer is not one)", n)
		}
		if ran, err := s.Apply(ctx); err != nil || len(ran) != 0 {
			t.Errorf("without Offers, the fix ran %q, %v", ran, err)
		}
		s.Offers = true
		if ran, err := s.Apply(ctx); err != nil || len(ran) != 1 {
			t.Fatalf("with Offers, the fix ran %q, %v", ran, err)
		}
		if err := s.Check(ctx); err != nil {
			t.Fatal(err)
		}
		sourcetest.Expect(t, s, setup.CheckBefore, setup.VerdictOK, []string{"REPLICA IDENTITY FULL: updates and deletes carry the row before them"})
	})
	t.Run("a role without SELECT", func(t *testing.T) {
		tb := checkTable(t, db, base+`, updated_at TIMESTAMPTZ NOT NULL DEFAULT now())`)
		role := testenv.Name("chk_role_")
		for _, q := range []string{`CREATE ROLE ` + role + ` LOGIN`, `GRANT USAGE ON SCHEMA public TO ` + role} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { db.Exec(`DROP OWNED BY ` + role); db.Exec(`DROP ROLE ` + role) })
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(role)
		s := sourcetest.Setup(t, drv, u.String(), tb, state.KindTimestampPK, "updated_at")
		sourcetest.Expect(t, s, setup.CheckPrivileges, setup.VerdictProblem, []string{"lacks SELECT on " + tb.Name}, `GRANT SELECT ON "`+tb.Name+`" TO "`+role+`"`)

		// A cleanup needs DELETE too: an error finding with its GRANT, which fixes it.
		if _, err := db.Exec(`GRANT SELECT ON ` + tb.Name + ` TO ` + role); err != nil {
			t.Fatal(err)
		}
		def := sourcetest.CheckDef(tb, state.KindTimestampPK, "updated_at")
		def.Cleanup = &sourcedef.Cleanup{Delete: true}
		s = sourcetest.SetupDef(t, drv, u.String(), def)
		sourcetest.Expect(t, s, setup.CheckPrivileges, setup.VerdictProblem, []string{"lacks DELETE on " + tb.Name + " (its cleanup deletes the delivered rows)"},
			`GRANT DELETE ON "`+tb.Name+`" TO "`+role+`"`)
		if _, err := db.Exec(`GRANT DELETE ON ` + tb.Name + ` TO ` + role); err != nil {
			t.Fatal(err)
		}
		sourcetest.Expect(t, sourcetest.SetupDef(t, drv, u.String(), def), setup.CheckPrivileges, setup.VerdictOK, nil)
	})
}
