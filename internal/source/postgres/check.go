package postgres

// pollerctl check and the handler's first look at a source: PostgreSQL's catalog (Driver.CheckSetup).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Script: psql runs each statement ended by a semicolon.
func (Driver) Script(stmts []string) string { return setup.JoinStatements(stmts) }

// DDLInTransaction: PostgreSQL's DDL is transactional.
func (Driver) DDLInTransaction() bool { return true }

// ErrorDetail is the DETAIL and HINT of a PostgreSQL error, which pgconn's error text leaves out
// ("Key (id)=(1) is duplicated." of a unique index that cannot be made).
func (Driver) ErrorDetail(err error) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return ""
	}
	var parts []string
	if pe.Detail != "" {
		parts = append(parts, pe.Detail)
	}
	if pe.Hint != "" {
		parts = append(parts, "hint: "+pe.Hint)
	}
	return strings.Join(parts, " ")
}

// pgColumn is a column as pg_attribute has it.
type pgColumn struct {
	name, typ, def string
	identity       bool
}

// CheckSetup reads pg_class, pg_attribute, pg_index, pg_trigger and the privileges.
func (dr Driver) CheckSetup(ctx context.Context, db *sql.DB, d sourcedef.Definition) ([]setup.Finding, error) {
	table := driver.QuoteTable(dr, d.Table)
	var (
		oid     sql.NullInt64
		relkind string
	)
	err := db.QueryRowContext(ctx, `SELECT c.oid, c.relkind::text FROM pg_class c WHERE c.oid = to_regclass($1)`, table).Scan(&oid, &relkind)
	if err == sql.ErrNoRows {
		return []setup.Finding{{Check: setup.CheckTable, Verdict: setup.VerdictProblem,
			Detail: fmt.Sprintf("no table %s (or it is not on the login's search_path): check the poller's table name and schema", d.Table)}}, nil
	}
	if err != nil {
		return nil, err
	}
	view := ""
	if relkind == "v" || relkind == "m" || relkind == "f" {
		view = "a view or a foreign table"
	}
	cols, err := pgColumns(ctx, db, oid.Int64)
	if err != nil {
		return nil, err
	}
	var have []string
	for _, c := range cols {
		have = append(have, c.name)
	}
	fs, more := setup.TableAndColumns(d, view, have, false, dr.addCursor(d))
	if !more { // the rest would judge a definition that does not fit
		fs = append(fs, dr.privileges(ctx, db, d, oid.Int64)...)
		if d.Cursor.Kind == state.KindLogical && view == "" {
			f, err := pgcdc.BeforeImages(ctx, db, d, table, oid.Int64)
			if err != nil {
				return nil, err
			}
			fs = append(fs, f)
		}
		return fs, nil
	}

	ix, err := pgIndexes(ctx, db, oid.Int64)
	if err != nil {
		return nil, err
	}
	create := fmt.Sprintf("CREATE INDEX %s ON %s (%s)", dr.Quote(setup.IndexName(d)), table, strings.Join(driver.QuoteAll(dr, setup.KeysetColumns(d)), ", "))
	fs = append(fs, setup.IndexFinding(d, ix, false, create))

	var col *pgColumn
	if i := slices.IndexFunc(cols, func(c pgColumn) bool { return c.name == d.Cursor.Column }); i >= 0 {
		col = &cols[i]
	}
	st, err := dr.stamping(ctx, db, d, oid.Int64, col)
	if err != nil {
		return nil, err
	}
	typ := "timestamptz"
	if col != nil {
		typ = col.typ
	}
	fs = append(fs, setup.StampFinding(d.Cursor.Column, st, dr.stampFix(d, typ, st.Insert != setup.VerdictOK)))
	return append(fs, dr.privileges(ctx, db, d, oid.Int64)...), nil
}

func pgColumns(ctx context.Context, db *sql.DB, oid int64) ([]pgColumn, error) {
	return source.Collect(ctx, db, func(rows *sql.Rows) (c pgColumn, err error) {
		err = rows.Scan(&c.name, &c.typ, &c.def, &c.identity)
		return c, err
	}, `SELECT a.attname, format_type(a.atttypid, a.atttypmod), COALESCE(pg_get_expr(d.adbin, d.adrelid), ''), a.attidentity <> ''
FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, oid)
}

// pgIndexes lists the table's valid, whole-table B-tree indexes, each its columns in order (""
// for an expression).
func pgIndexes(ctx context.Context, db *sql.DB, oid int64) ([][]string, error) {
	return source.Collect(ctx, db, func(rows *sql.Rows) ([]string, error) {
		s, err := source.ScanString(rows)
		return strings.Split(s, "\x1f"), err
	}, `SELECT array_to_string(ARRAY(
  SELECT COALESCE(a.attname, '') FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(n, o)
  LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n ORDER BY k.o), chr(31))
FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am am ON am.oid = ic.relam
WHERE i.indrelid = $1 AND i.indisvalid AND i.indpred IS NULL AND am.amname = 'btree'`, oid)
}

// A constant default (a literal, perhaps cast) stamps nothing.
var pgConstant = regexp.MustCompile(`^\(?('([^']|'')*'|-?[0-9.]+|NULL)\)?(::[a-z0-9 ()_"]+)*$`)

// The trigger types' bits (pg_trigger.tgtype).
const (
	tgRow    = 1
	tgBefore = 2
	tgInsert = 4
	tgUpdate = 16
)

// stamping reads how the cursor column is written: its default, and the triggers that assign
// NEW.column (col nil: the column is missing, as the fix adds it: a stamping default).
func (dr Driver) stamping(ctx context.Context, db *sql.DB, d sourcedef.Definition, oid int64, col *pgColumn) (setup.Stamping, error) {
	st := setup.Stamping{Insert: setup.VerdictProblem, Update: setup.VerdictProblem}
	if col == nil {
		if d.Cursor.Kind == state.KindInteger {
			st.Why = append(st.Why, "the column the fix adds starts at 0: a counter must stamp every INSERT and UPDATE")
			return st, nil
		}
		st.Insert = setup.VerdictOK
		st.Why = append(st.Why, "the column the fix adds has a default, which stamps inserts only: an UPDATE needs the trigger")
		return st, nil
	}
	if col.def != "" && !pgConstant.MatchString(col.def) {
		st.Insert = setup.VerdictOK
	}
	rows, err := db.QueryContext(ctx, `SELECT t.tgname, t.tgtype, t.tgattr::text <> '' OR t.tgqual IS NOT NULL, l.lanname, COALESCE(p.prosrc, '')
FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid JOIN pg_language l ON l.oid = p.prolang
WHERE t.tgrelid = $1 AND NOT t.tgisinternal AND t.tgenabled <> 'D'`, oid)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	assigns := regexp.MustCompile(`(?is)(\bNEW\s*\.\s*"?` + regexp.QuoteMeta(col.name) + `"?\s*:?=)|(\bINTO\s+NEW\s*\.\s*"?` + regexp.QuoteMeta(col.name) + `"?)`)
	var unread []string
	for rows.Next() {
		var (
			name, lang, body string
			typ              int
			conditional      bool
		)
		if err := rows.Scan(&name, &typ, &conditional, &lang, &body); err != nil {
			return st, err
		}
		if typ&tgRow == 0 || typ&tgBefore == 0 || typ&(tgInsert|tgUpdate) == 0 {
			continue // only a BEFORE row trigger assigns NEW
		}
		readable := lang == "plpgsql" || lang == "sql"
		switch {
		case readable && !conditional && assigns.MatchString(body):
			if typ&tgInsert != 0 {
				st.Insert = setup.VerdictOK
			}
			if typ&tgUpdate != 0 {
				st.Update = setup.VerdictOK
			}
		case !readable || conditional && assigns.MatchString(body):
			unread = append(unread, name)
			for _, side := range []struct {
				bit int
				v   *setup.Verdict
			}{{tgInsert, &st.Insert}, {tgUpdate, &st.Update}} {
				if typ&side.bit != 0 && *side.v == setup.VerdictProblem {
					*side.v = setup.VerdictUnknown
				}
			}
		}
	}
	if err := rows.Err(); err != nil {
		return st, err
	}
	if col.identity || strings.HasPrefix(col.def, "nextval(") {
		if st.Update == setup.VerdictProblem {
			st.Update = setup.VerdictUnknown
			st.Why = append(st.Why, "an identity or serial column never changes on UPDATE: right only for an append-only table (else use docs/postgres.md's integer recipe)")
		}
	}
	if len(unread) > 0 {
		st.Why = append(st.Why, "trigger "+strings.Join(unread, ", ")+" may stamp it: its function is not PL/pgSQL or SQL, or it fires only for some columns or rows, which the check cannot read")
	}
	if st.Insert == setup.VerdictProblem {
		st.Why = append(st.Why, "no default or BEFORE INSERT trigger stamps it: rows inserted without it are never delivered")
	}
	if st.Update == setup.VerdictProblem {
		why := "no BEFORE UPDATE trigger assigns it"
		if col.def != "" {
			why = "only a default (" + col.def + ") stamps it, on INSERT; no BEFORE UPDATE trigger assigns it"
		}
		st.Why = append(st.Why, why+": every UPDATE after the insert is never delivered")
	}
	return st, nil
}

// stampExpr is what the trigger stamps a cursor column of type typ with.
func stampExpr(kind, typ string) string {
	switch {
	case kind == state.KindXID:
		return "pg_current_xact_id()"
	case typ == "timestamp without time zone" || strings.HasPrefix(typ, "timestamp(") && !strings.Contains(typ, "with time zone"):
		return "clock_timestamp() AT TIME ZONE 'UTC'"
	}
	return "clock_timestamp()"
}

// addCursor is the fix that adds the missing cursor column, as docs/postgres.md's recipes do.
func (dr Driver) addCursor(d sourcedef.Definition) []string {
	table, col := driver.QuoteTable(dr, d.Table), dr.Quote(d.Cursor.Column)
	switch d.Cursor.Kind {
	case state.KindTimestampPK:
		return []string{"ALTER TABLE " + table + " ADD COLUMN " + col + " TIMESTAMPTZ(6) NOT NULL DEFAULT clock_timestamp()"}
	case state.KindXID:
		return []string{"ALTER TABLE " + table + " ADD COLUMN " + col + " XID8 NOT NULL DEFAULT pg_current_xact_id()"}
	case state.KindInteger:
		return []string{"ALTER TABLE " + table + " ADD COLUMN " + col + " BIGINT NOT NULL DEFAULT 0"}
	}
	return nil
}

// inSchema quotes name in the table's schema, if it has one.
func (dr Driver) inSchema(d sourcedef.Definition, name string) string {
	return driver.QuoteTable(dr, sourcedef.Table{Schema: d.Table.Schema, Name: name})
}

// stampFix makes a BEFORE trigger that stamps the cursor column on UPDATE (and on INSERT too,
// when inserts are not stamped yet); an integer cursor takes its values from a one-row counter.
func (dr Driver) stampFix(d sourcedef.Definition, typ string, insertToo bool) []string {
	table, col := driver.QuoteTable(dr, d.Table), dr.Quote(d.Cursor.Column)
	fn := dr.inSchema(d, setup.StampName(d))
	events := "UPDATE"
	if insertToo || d.Cursor.Kind == state.KindInteger {
		events = "INSERT OR UPDATE"
	}
	var pre []string
	assign := "  NEW." + col + " := " + stampExpr(d.Cursor.Kind, typ) + ";\n"
	if d.Cursor.Kind == state.KindInteger {
		counter := dr.inSchema(d, setup.CounterName(d))
		pre = []string{
			"CREATE TABLE IF NOT EXISTS " + counter + " (n BIGINT NOT NULL)",
			"INSERT INTO " + counter + " (n) SELECT COALESCE(MAX(" + col + "), 0) FROM " + table + " WHERE NOT EXISTS (SELECT 1 FROM " + counter + ")",
		}
		assign = "  UPDATE " + counter + " SET n = n + 1 RETURNING n INTO NEW." + col + ";\n"
	}
	return append(pre,
		"CREATE OR REPLACE FUNCTION "+fn+"() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n"+assign+"  RETURN NEW;\nEND $$",
		"CREATE TRIGGER "+dr.Quote(setup.StampName(d))+" BEFORE "+events+" ON "+table+" FOR EACH ROW EXECUTE FUNCTION "+fn+"()")
}

// privileges: SELECT on the table and USAGE on its schema; a logical cursor's REPLICATION; a
// cleanup's DELETE.
func (dr Driver) privileges(ctx context.Context, db *sql.DB, d sourcedef.Definition, oid int64) []setup.Finding {
	var (
		user                  string
		sel, usage, repl, del bool
		schema                string
	)
	err := db.QueryRowContext(ctx, `SELECT current_user, has_table_privilege(c.oid, 'SELECT'), has_schema_privilege(c.relnamespace, 'USAGE'), n.nspname,
  (SELECT r.rolreplication OR r.rolsuper FROM pg_roles r WHERE r.rolname = current_user), has_table_privilege(c.oid, 'DELETE')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`, oid).Scan(&user, &sel, &usage, &schema, &repl, &del)
	f := setup.Finding{Check: setup.CheckPrivileges, Verdict: setup.VerdictOK, Detail: "role " + user + " may read the table"}
	if err != nil {
		f.Verdict, f.Detail = setup.VerdictUnknown, "reading the privileges: "+err.Error()
		return []setup.Finding{f}
	}
	role := dr.Quote(user)
	var lack []string
	if !usage {
		lack = append(lack, "USAGE on schema "+schema)
		f.Fix = append(f.Fix, "GRANT USAGE ON SCHEMA "+dr.Quote(schema)+" TO "+role)
	}
	if !sel {
		lack = append(lack, "SELECT on "+d.Table.String())
		f.Fix = append(f.Fix, "GRANT SELECT ON "+driver.QuoteTable(dr, d.Table)+" TO "+role)
	}
	if d.Cursor.Kind == state.KindLogical && !repl {
		lack = append(lack, "the REPLICATION attribute (logical cursor)")
		f.Fix = append(f.Fix, "ALTER ROLE "+role+" WITH REPLICATION")
	}
	if d.Cleanup != nil && !del {
		lack = append(lack, "DELETE on "+d.Table.String()+" (its cleanup deletes the delivered rows)")
		f.Fix = append(f.Fix, "GRANT DELETE ON "+driver.QuoteTable(dr, d.Table)+" TO "+role)
	}
	if len(lack) > 0 {
		f.Verdict = setup.VerdictProblem
		f.Detail = "role " + user + " lacks " + strings.Join(lack, ", ") + " (run the fix as the table's owner or an admin)"
	}
	return []setup.Finding{f}
}
