package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestConformancePostgres runs the source conformance suite against the PostgreSQL scripts/test.sh starts.
func TestConformancePostgres(t *testing.T) {
	dsn := testenv.Postgres(t)
	sourcetest.Run(t, sourcetest.Harness{Driver: postgres.Driver{}, DSN: dsn, DB: sourcetest.DB(t, "pgx", dsn), Fixture: fixture})
}

// fixture is PostgreSQL's side of the conformance suite: orders stamped in timestamptz, with the
// xid8 column the xid cursor reads (it reads in commit order, below the oldest running
// transaction), and the hazard of a timestamp column without a time zone.
var fixture = sourcetest.Fixture{
	Orders: func(name string) []string {
		return []string{
			`CREATE TABLE ` + name + ` (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL,
			  updated_at TIMESTAMPTZ(6) NOT NULL, txid XID8 NOT NULL DEFAULT pg_current_xact_id())`,
			`CREATE INDEX ON ` + name + ` (updated_at, id)`,
			`CREATE INDEX ON ` + name + ` (txid, id)`,
		}
	},
	Committed: &sourcetest.Committed{
		Kind:   state.KindXID,
		Column: "txid",
		Behind: func(table string) string {
			return "SELECT COUNT(*) FROM " + table + " WHERE txid >= pg_snapshot_xmin(pg_current_snapshot())"
		},
		Update: "txid = pg_current_xact_id()",
	},
	ConcurrentWriters: true,
	Values: &sourcetest.Values{
		Table: "postgres",
		// Logical decoding reads flushed WAL only; the test server commits without waiting.
		Session: []string{"SET synchronous_commit = on"},
		Setup: []string{
			`DO $$ BEGIN CREATE TYPE pt_mood AS ENUM ('sad', 'ok', 'happy'); EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`,
			`DO $$ BEGIN CREATE DOMAIN pt_positive AS numeric(10,2) CHECK (VALUE > 0); EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`,
			`DO $$ BEGIN CREATE DOMAIN pt_count AS integer CHECK (VALUE >= 0); EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`,
			`DO $$ BEGIN CREATE TYPE pt_pair AS (a int, b text); EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`,
		},
		Changes: logicalValues,
		// Types without an equality (json, xml, point) compare by their text; json's is its input's,
		// spaces and all, so it compares as jsonb.
		Same: func(typ, a, b string) string {
			if typ == "json" {
				return a + "::jsonb IS NOT DISTINCT FROM " + b + "::jsonb"
			}
			return a + "::text IS NOT DISTINCT FROM " + b + "::text"
		},
		// As a consumer would: json_populate_record reads a JSON string with the type's input
		// function and an array from a JSON array; bytea is base64.
		FromJSON: func(typ, table, param string) string {
			if typ == "bytea" {
				return "decode(" + param + "::json #>> '{}', 'base64')"
			}
			if typ == "bytea[]" {
				return "CASE WHEN json_typeof(" + param + "::json) = 'array' THEN ARRAY(SELECT decode(e, 'base64') FROM json_array_elements_text(" + param + "::json) e) END"
			}
			if typ == "date" || typ == "timestamp" || typ == "timestamptz" {
				// ISO 8601's expanded years (+294276-...) and astronomical years (0000 is 1 BC),
				// which PostgreSQL's input reads as years and BC.
				s := "(" + param + "::json #>> '{}')"
				y := "(substring(" + s + " from '^[+-]?[0-9]+'))::int"
				rest := "regexp_replace(" + s + ", '^[+-]?[0-9]+', '')"
				return "(CASE WHEN " + s + " !~ '^[+-]?[0-9]+-' THEN " + s + " WHEN " + y + " > 0 THEN " + y + "::text || " + rest +
					" ELSE lpad((1 - " + y + ")::text, 4, '0') || " + rest + " || ' BC' END)::" + typ
			}
			return "(json_populate_record(NULL::" + table + ", json_build_object('v', " + param + "::json))).v"
		},
	},
	Stamp:  "TIMESTAMPTZ(6)",
	Schema: func(testing.TB, *sql.DB) string { return "public" },
	Types: func(_ testing.TB, _ *sql.DB, name string, ts time.Time) sourcetest.TypesTable {
		return sourcetest.TypesTable{
			DDL:    `CREATE TABLE ` + name + ` (id BIGINT PRIMARY KEY, d NUMERIC(12,2), big NUMERIC(38,10), ts TIMESTAMPTZ(6) NOT NULL, bin BYTEA, u UUID, j JSONB, n INT, t TEXT, f DOUBLE PRECISION, b BOOLEAN, i4 INT, i2 SMALLINT, r REAL)`,
			Insert: `INSERT INTO ` + name + ` VALUES (1, 12.50, 12345678901234567890.0123456789, $1, '\xdeadbeef', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '{"a": [1, 2]}', NULL, 'grüße "q"', 1.5, true, 7, 3, 0.25)`,
			Args:   []any{ts},
			TS:     ts,
			JSON:   `{"id":1,"d":"12.50","big":"12345678901234567890.0123456789","ts":"2026-04-07T01:23:45.123456Z","bin":"3q2+7w==","u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","j":{"a":[1,2]},"n":null,"t":"grüße \"q\"","f":1.5,"b":true,"i4":7,"i2":3,"r":0.25}`,
		}
	},
	// The orders table's timestamptz ahead of now is only early; a timestamp column stamped in
	// local time east of UTC is the hazard.
	FutureStamps: &sourcetest.FutureStamps{
		Zoned: "now() + interval '2 hours'",
		NaiveOrders: func(name string) []string {
			return []string{
				"CREATE TABLE " + name + " (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL, updated_at TIMESTAMP(6) NOT NULL)",
				"CREATE INDEX ON " + name + " (updated_at, id)",
			}
		},
		Ahead: func(n int, unit string) string {
			return fmt.Sprintf("(now() AT TIME ZONE 'UTC') + interval '%d %ss'", n, unit)
		},
		Fix: func(table string) string {
			return `UPDATE "` + table + `" SET "updated_at" = now() AT TIME ZONE 'UTC' WHERE "updated_at" > (now() AT TIME ZONE 'UTC') + interval '10 minutes'`
		},
	},
}

// logicalValues reads the values' table through a logical cursor: a publication and a slot of its
// own, made before write inserts the rows, then drained.
func logicalValues(t *testing.T, table string, write func()) []row.Row {
	db := testenv.DB(t, "pgx", testenv.Postgres(t))
	slot := strings.ToLower(table)
	for _, q := range []string{
		"CREATE PUBLICATION " + slot + " FOR TABLE " + table,
		"SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", testenv.Postgres(t))
		if err != nil {
			return
		}
		defer db.Close()
		db.Exec("SELECT pg_drop_replication_slot($1)", slot)
		db.Exec("DROP PUBLICATION IF EXISTS " + slot)
	})
	write()
	src, err := drivers.Open(context.Background(), source.Config{Poller: "values", Driver: postgres.Name, DSN: testenv.Postgres(t), Definition: sourcedef.Definition{
		Table: sourcedef.Table{Name: table}, Columns: []string{"id", "v"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindLogical}, Slot: slot, Publication: slot,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	var rows []row.Row
	var c *state.Cursor
	for {
		b, err := src.Fetch(context.Background(), c, 1000)
		if err != nil {
			t.Fatalf("logical fetch: %v", err)
		}
		if len(b.Rows) == 0 {
			return rows
		}
		rows, c = append(rows, b.Rows...), b.To
	}
}
