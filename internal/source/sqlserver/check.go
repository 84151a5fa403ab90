package sqlserver

// pollerctl check and the handler's first look at a source: SQL Server's catalog views
// (Driver.CheckSetup).

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Script: sqlcmd runs each statement in a batch of its own, ended by GO.
func (Driver) Script(stmts []string) string {
	var b strings.Builder
	for _, s := range stmts {
		b.WriteString(s)
		b.WriteString(";\nGO\n")
	}
	return b.String()
}

// DDLInTransaction: SQL Server's DDL is transactional.
func (Driver) DDLInTransaction() bool { return true }

type msColumn struct {
	name, typ, def string
	identity       bool
}

// CheckSetup reads sys.objects, sys.columns, sys.indexes, sys.triggers and the permissions.
func (dr Driver) CheckSetup(ctx context.Context, db *sql.DB, d sourcedef.Definition) ([]setup.Finding, error) {
	table := driver.QuoteTable(dr, d.Table)
	var typ string
	err := db.QueryRowContext(ctx, "SELECT RTRIM(type) FROM sys.objects WHERE object_id = OBJECT_ID(@p1)", table).Scan(&typ)
	if err == sql.ErrNoRows {
		return []setup.Finding{{Check: setup.CheckTable, Verdict: setup.VerdictProblem,
			Detail: fmt.Sprintf("no table %s that the user can see: check the poller's table name and schema, or grant the user SELECT on it", d.Table)}}, nil
	}
	if err != nil {
		return nil, err
	}
	view := ""
	if typ == "V" {
		view = "a view"
	}
	cols, err := msColumns(ctx, db, table)
	if err != nil {
		return nil, err
	}
	var have []string
	for _, c := range cols {
		have = append(have, c.name)
	}
	fs, more := setup.TableAndColumns(d, view, have, true, dr.addCursor(d))
	if !more {
		return append(fs, dr.privileges(ctx, db, d)), nil
	}

	ix, err := msIndexes(ctx, db, table)
	if err != nil {
		return nil, err
	}
	fs = append(fs, setup.IndexFinding(d, ix, true, dr.createIndex(d)))

	var col *msColumn
	if i := slices.IndexFunc(cols, func(c msColumn) bool { return strings.EqualFold(c.name, d.Cursor.Column) }); i >= 0 {
		col = &cols[i]
	}
	st, err := dr.stamping(ctx, db, d, table, col)
	if err != nil {
		return nil, err
	}
	fs = append(fs, setup.StampFinding(d.Cursor.Column, st, dr.stampFixFor(d, col, st)))
	return append(fs, dr.privileges(ctx, db, d)), nil
}

// createIndex makes the index the keyset read seeks on.
func (dr Driver) createIndex(d sourcedef.Definition) string {
	return fmt.Sprintf("CREATE INDEX %s ON %s (%s)", dr.Quote("ix_"+setup.IndexName(d)), driver.QuoteTable(dr, d.Table),
		strings.Join(driver.QuoteAll(dr, setup.KeysetColumns(d)), ", "))
}

// stampFixFor is the fix of what st found not stamped (none for a rowversion, stamped by its
// type).
func (dr Driver) stampFixFor(d sourcedef.Definition, col *msColumn, st setup.Stamping) []string {
	if d.Cursor.Kind == state.KindRowversion {
		return nil
	}
	return dr.stampFix(d, col, st.Insert != setup.VerdictOK, st.Update != setup.VerdictOK)
}

func msColumns(ctx context.Context, db *sql.DB, table string) ([]msColumn, error) {
	return source.Collect(ctx, db, func(rows *sql.Rows) (c msColumn, err error) {
		err = rows.Scan(&c.name, &c.typ, &c.def, &c.identity)
		return c, err
	}, `SELECT c.name, t.name, COALESCE(OBJECT_DEFINITION(c.default_object_id), ''), c.is_identity
FROM sys.columns c JOIN sys.types t ON t.user_type_id = c.user_type_id WHERE c.object_id = OBJECT_ID(@p1) ORDER BY c.column_id`, table)
}

// msIndexes lists the table's unfiltered B-tree indexes, each its key columns in order; a
// nonclustered index ends with the clustered index's key.
func msIndexes(ctx context.Context, db *sql.DB, table string) ([][]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT i.index_id, i.type, c.name
FROM sys.indexes i JOIN sys.index_columns ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id
JOIN sys.columns c ON c.object_id = ic.object_id AND c.column_id = ic.column_id
WHERE i.object_id = OBJECT_ID(@p1) AND i.has_filter = 0 AND i.type IN (1, 2) AND ic.key_ordinal > 0
ORDER BY i.index_id, ic.key_ordinal`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		ids       []int
		cols      = map[int][]string{}
		clustered []string
	)
	for rows.Next() {
		var (
			id, typ int
			c       string
		)
		if err := rows.Scan(&id, &typ, &c); err != nil {
			return nil, err
		}
		if _, ok := cols[id]; !ok {
			ids = append(ids, id)
		}
		cols[id] = append(cols[id], c)
		if typ == 1 {
			clustered = append(clustered, c)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out [][]string
	for _, id := range ids {
		ix := cols[id]
		if id != 1 {
			ix = append(ix, clustered...)
		}
		out = append(out, ix)
	}
	return out, nil
}

// stamping reads how the cursor column is written: rowversion by its type; a default that is
// not a literal stamps inserts; an AFTER trigger whose body SETs the column stamps its events
// (col nil: the column is missing, as the fix adds it).
func (dr Driver) stamping(ctx context.Context, db *sql.DB, d sourcedef.Definition, table string, col *msColumn) (setup.Stamping, error) {
	ok := setup.Stamping{Insert: setup.VerdictOK, Update: setup.VerdictOK}
	st := setup.Stamping{Insert: setup.VerdictProblem, Update: setup.VerdictProblem}
	switch {
	case d.Cursor.Kind == state.KindRowversion:
		if col == nil || col.typ == "timestamp" || col.typ == "rowversion" {
			return ok, nil
		}
		st.Why = append(st.Why, "a "+col.typ+" column is not a rowversion, which SQL Server stamps itself")
		return st, nil
	case col == nil && d.Cursor.Kind == state.KindInteger:
		st.Why = append(st.Why, "the column the fix adds starts at 0: a counter must stamp every INSERT and UPDATE")
		return st, nil
	case col == nil:
		st.Insert = setup.VerdictOK
		st.Why = append(st.Why, "the column the fix adds has a default, which stamps inserts only: an UPDATE needs the trigger")
		return st, nil
	}
	if col.def != "" && !regexp.MustCompile(`^\(*(N?'([^']|'')*'|[-+]?[0-9.]+|NULL)\)*$`).MatchString(col.def) {
		st.Insert = setup.VerdictOK
	}
	rows, err := db.QueryContext(ctx, `SELECT t.name, COALESCE(OBJECT_DEFINITION(t.object_id), ''), te.type_desc
FROM sys.triggers t JOIN sys.trigger_events te ON te.object_id = t.object_id
WHERE t.parent_id = OBJECT_ID(@p1) AND t.is_disabled = 0`, table)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	q := regexp.QuoteMeta(col.name)
	sets := regexp.MustCompile(`(?is)\bSET\s+(?:[^;]*?,\s*)?(?:\w+\.)?(\[` + q + `\]|\b` + q + `\b)\s*=`)
	conditional := regexp.MustCompile(`(?i)\bUPDATE\s*\(|\bCOLUMNS_UPDATED\s*\(`)
	var unread []string
	for rows.Next() {
		var name, body, event string
		if err := rows.Scan(&name, &body, &event); err != nil {
			return st, err
		}
		v := setup.VerdictOK
		switch {
		case body == "": // WITH ENCRYPTION
			v = setup.VerdictUnknown
			unread = append(unread, name)
		case !sets.MatchString(body):
			continue
		case conditional.MatchString(body):
			v = setup.VerdictUnknown
			unread = append(unread, name)
		}
		for _, side := range []struct {
			event string
			v     *setup.Verdict
		}{{"INSERT", &st.Insert}, {"UPDATE", &st.Update}} {
			if event == side.event && *side.v != setup.VerdictOK {
				*side.v = v
			}
		}
	}
	if err := rows.Err(); err != nil {
		return st, err
	}
	if len(unread) > 0 {
		st.Why = append(st.Why, "trigger "+strings.Join(unread, ", ")+" may stamp it: its body is encrypted or stamps only when some columns change, which the check cannot read")
	}
	if col.identity && st.Update == setup.VerdictProblem {
		st.Update = setup.VerdictUnknown
		st.Why = append(st.Why, "an IDENTITY column never changes on UPDATE: right only for an append-only table (else use rowversion)")
	}
	if st.Insert == setup.VerdictProblem {
		st.Why = append(st.Why, "no default or INSERT trigger stamps it")
	}
	if st.Update == setup.VerdictProblem {
		why := "no UPDATE trigger stamps it"
		if col.def != "" {
			why = "only a default " + col.def + " stamps it, on INSERT; no UPDATE trigger does"
		}
		st.Why = append(st.Why, why+": every UPDATE after the insert is never delivered")
	}
	return st, nil
}

// addCursor is the fix that adds the missing cursor column, as docs/sqlserver.md's recipes do.
func (dr Driver) addCursor(d sourcedef.Definition) []string {
	table, col := driver.QuoteTable(dr, d.Table), dr.Quote(d.Cursor.Column)
	df := dr.Quote("df_" + d.Table.Name + "_" + d.Cursor.Column)
	switch d.Cursor.Kind {
	case state.KindTimestampPK:
		return []string{"ALTER TABLE " + table + " ADD " + col + " DATETIME2(7) NOT NULL CONSTRAINT " + df + " DEFAULT SYSUTCDATETIME()"}
	case state.KindInteger:
		return []string{"ALTER TABLE " + table + " ADD " + col + " BIGINT NOT NULL CONSTRAINT " + df + " DEFAULT 0"}
	case state.KindRowversion:
		return []string{"ALTER TABLE " + table + " ADD " + col + " ROWVERSION"}
	}
	return nil
}

// stampFix makes an AFTER trigger that stamps the cursor column on INSERT and UPDATE (those not
// stamped yet); an integer cursor takes its values from a one-row counter.
func (dr Driver) stampFix(d sourcedef.Definition, col *msColumn, insert, update bool) []string {
	table, qcol := driver.QuoteTable(dr, d.Table), dr.Quote(d.Cursor.Column)
	var on []string
	for _, k := range d.PK {
		on = append(on, "o."+dr.Quote(k)+" = i."+dr.Quote(k))
	}
	expr := "SYSUTCDATETIME()"
	if col != nil && col.typ == "datetimeoffset" {
		expr = "SYSDATETIMEOFFSET()"
	}
	join := "  FROM " + table + " AS o JOIN inserted AS i ON " + strings.Join(on, " AND ") + ";\n"
	body := "  UPDATE o SET " + qcol + " = " + expr + "\n" + join
	var out []string
	if d.Cursor.Kind == state.KindInteger {
		counter := driver.QuoteTable(dr, sourcedef.Table{Schema: d.Table.Schema, Name: setup.CounterName(d)})
		lit := "N'" + strings.ReplaceAll(counter, "'", "''") + "'"
		out = append(out,
			"IF OBJECT_ID("+lit+") IS NULL CREATE TABLE "+counter+" (n BIGINT NOT NULL)",
			"INSERT INTO "+counter+" (n) SELECT COALESCE(MAX("+qcol+"), 0) FROM "+table+" WHERE NOT EXISTS (SELECT 1 FROM "+counter+")")
		body = "  DECLARE @n BIGINT;\n  UPDATE " + counter + " SET @n = n = n + 1;\n  UPDATE o SET " + qcol + " = @n\n" + join
	}
	var events []string
	if insert {
		events = append(events, "INSERT")
	}
	if update {
		events = append(events, "UPDATE")
	}
	if len(events) == 0 {
		return out
	}
	name := driver.QuoteTable(dr, sourcedef.Table{Schema: d.Table.Schema, Name: setup.StampName(d)})
	return append(out, "CREATE TRIGGER "+name+" ON "+table+" AFTER "+strings.Join(events, ", ")+" AS\nBEGIN\n  SET NOCOUNT ON;\n"+body+"END")
}

// privileges: SELECT on the table; a changetracking cursor's VIEW CHANGE TRACKING; a cleanup's
// DELETE.
func (dr Driver) privileges(ctx context.Context, db *sql.DB, d sourcedef.Definition) setup.Finding {
	table := driver.QuoteTable(dr, d.Table)
	var (
		user          string
		sel, vct, del int
	)
	err := db.QueryRowContext(ctx, `SELECT USER_NAME(), COALESCE(HAS_PERMS_BY_NAME(@p1, 'OBJECT', 'SELECT'), 0), COALESCE(HAS_PERMS_BY_NAME(@p1, 'OBJECT', 'VIEW CHANGE TRACKING'), 0), COALESCE(HAS_PERMS_BY_NAME(@p1, 'OBJECT', 'DELETE'), 0)`, table).Scan(&user, &sel, &vct, &del)
	f := setup.Finding{Check: setup.CheckPrivileges, Verdict: setup.VerdictOK, Detail: "user " + user + " may read the table"}
	if err != nil {
		f.Verdict, f.Detail = setup.VerdictUnknown, "reading the permissions: "+err.Error()
		return f
	}
	var lack []string
	if sel == 0 {
		lack = append(lack, "SELECT")
		f.Fix = append(f.Fix, "GRANT SELECT ON "+table+" TO "+dr.Quote(user))
	}
	if d.Cursor.Kind == state.KindChangeTracking && vct == 0 {
		lack = append(lack, "VIEW CHANGE TRACKING")
		f.Fix = append(f.Fix, "GRANT VIEW CHANGE TRACKING ON "+table+" TO "+dr.Quote(user))
	}
	if d.Cleanup != nil && del == 0 {
		lack = append(lack, "DELETE (its cleanup deletes the delivered rows)")
		f.Fix = append(f.Fix, "GRANT DELETE ON "+table+" TO "+dr.Quote(user))
	}
	if len(lack) > 0 {
		f.Verdict = setup.VerdictProblem
		f.Detail = "user " + user + " lacks " + strings.Join(lack, " and ") + " on the table (run the fix as the table's owner)"
	}
	return f
}
