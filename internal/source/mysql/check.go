package mysql

// pollerctl check and the handler's first look at a source: information_schema (SetupChecker).

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Script: the mysql client ends each statement with a semicolon; those with semicolons of their
// own (a trigger's BEGIN ... END) go between DELIMITER lines.
func (Driver) Script(stmts []string) string {
	var b strings.Builder
	inBlock := false
	for _, s := range stmts {
		compound := strings.Contains(s, ";")
		switch {
		case compound && !inBlock:
			b.WriteString("DELIMITER //\n")
			inBlock = true
		case !compound && inBlock:
			b.WriteString("DELIMITER ;\n")
			inBlock = false
		}
		b.WriteString(s)
		if inBlock {
			b.WriteString(" //\n")
		} else {
			b.WriteString(";\n")
		}
	}
	if inBlock {
		b.WriteString("DELIMITER ;\n")
	}
	return b.String()
}

// DDLInTransaction: MySQL commits each DDL statement implicitly.
func (Driver) DDLInTransaction() bool { return false }

type myColumn struct {
	name, typ, def, extra string
}

// schemaArg is the table's schema, or the connection's database.
const schemaArg = "COALESCE(NULLIF(?, ''), DATABASE())"

// CheckSetup reads information_schema: TABLES, COLUMNS, STATISTICS, TRIGGERS.
func (dr Driver) CheckSetup(ctx context.Context, db *sql.DB, d source.Definition) ([]source.Finding, error) {
	var typ string
	err := db.QueryRowContext(ctx, "SELECT TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = "+schemaArg+" AND TABLE_NAME = ?", d.Table.Schema, d.Table.Name).Scan(&typ)
	if err == sql.ErrNoRows {
		f := source.Finding{Check: source.CheckTable, Verdict: source.VerdictProblem,
			Detail: fmt.Sprintf("no table %s that the login can see: check the poller's table name, or grant the login SELECT on it", d.Table)}
		if user, err := currentUser(ctx, db); err == nil {
			f.Fix = []string{"GRANT SELECT ON " + source.QuoteTable(dr, d.Table) + " TO " + user}
		}
		return []source.Finding{f}, nil
	}
	if err != nil {
		return nil, err
	}
	view := ""
	if typ == "VIEW" {
		view = "a view"
	}
	cols, err := myColumns(ctx, db, d.Table)
	if err != nil {
		return nil, err
	}
	var have []string
	for _, c := range cols {
		have = append(have, c.name)
	}
	fs, more := source.TableAndColumns(d, view, have, true, dr.addCursor(d))
	if !more {
		return append(fs, dr.privileges(ctx, db, d)), nil
	}

	ix, err := myIndexes(ctx, db, d.Table)
	if err != nil {
		return nil, err
	}
	create := fmt.Sprintf("CREATE INDEX %s ON %s (%s)", dr.Quote("ix_"+source.IndexName(d)), source.QuoteTable(dr, d.Table), strings.Join(source.QuoteAll(dr, source.KeysetColumns(d)), ", "))
	fs = append(fs, source.IndexFinding(d, ix, true, create))

	var col *myColumn
	if i := slices.IndexFunc(cols, func(c myColumn) bool { return strings.EqualFold(c.name, d.Cursor.Column) }); i >= 0 {
		col = &cols[i]
	}
	st, err := dr.stamping(ctx, db, d, col)
	if err != nil {
		return nil, err
	}
	fix := dr.stampFix(d, col, st.Insert != source.VerdictOK, st.Update != source.VerdictOK)
	if col == nil && d.Cursor.Kind == state.KindTimestampPK {
		fix = nil // the column the fix adds is stamped on both
	}
	fs = append(fs, source.StampFinding(d.Cursor.Column, st, fix))
	return append(fs, dr.privileges(ctx, db, d)), nil
}

func myColumns(ctx context.Context, db *sql.DB, t source.Table) ([]myColumn, error) {
	return source.Collect(ctx, db, func(rows *sql.Rows) (c myColumn, err error) {
		err = rows.Scan(&c.name, &c.typ, &c.def, &c.extra)
		return c, err
	}, "SELECT COLUMN_NAME, DATA_TYPE, COALESCE(COLUMN_DEFAULT, ''), EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "+schemaArg+" AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", t.Schema, t.Name)
}

// myIndexes lists the table's B-tree indexes, each its columns in order ("" for an expression or
// a prefix of a column); InnoDB ends each secondary index with the primary key's columns.
func myIndexes(ctx context.Context, db *sql.DB, t source.Table) ([][]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT INDEX_NAME, CASE WHEN SUB_PART IS NULL THEN COALESCE(COLUMN_NAME, '') ELSE '' END FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = "+schemaArg+" AND TABLE_NAME = ? AND INDEX_TYPE = 'BTREE' ORDER BY INDEX_NAME, SEQ_IN_INDEX", t.Schema, t.Name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		names []string
		cols  = map[string][]string{}
	)
	for rows.Next() {
		var n, c string
		if err := rows.Scan(&n, &c); err != nil {
			return nil, err
		}
		if _, ok := cols[n]; !ok {
			names = append(names, n)
		}
		cols[n] = append(cols[n], c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out [][]string
	for _, n := range names {
		ix := cols[n]
		if n != "PRIMARY" {
			ix = append(ix, cols["PRIMARY"]...)
		}
		out = append(out, ix)
	}
	return out, nil
}

// stamping reads how the cursor column is written: a CURRENT_TIMESTAMP default and ON UPDATE,
// or triggers that SET NEW.column (col nil: the column is missing, as the fix adds it).
func (dr Driver) stamping(ctx context.Context, db *sql.DB, d source.Definition, col *myColumn) (source.Stamping, error) {
	st := source.Stamping{Insert: source.VerdictProblem, Update: source.VerdictProblem}
	if col == nil {
		if d.Cursor.Kind == state.KindTimestampPK {
			st.Why = append(st.Why, "the column is missing: the fix above adds it with DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6), which stamps both")
		} else {
			st.Why = append(st.Why, "the column the fix adds starts at 0: a counter must stamp every INSERT and UPDATE")
		}
		return st, nil
	}
	def, extra := strings.ToLower(col.def), strings.ToLower(col.extra)
	if strings.HasPrefix(def, "current_timestamp") || strings.Contains(def, "utc_timestamp") || strings.HasPrefix(def, "now(") {
		st.Insert = source.VerdictOK
	}
	if strings.Contains(extra, "on update current_timestamp") {
		st.Update = source.VerdictOK
	}
	rows, err := db.QueryContext(ctx, "SELECT ACTION_TIMING, EVENT_MANIPULATION, ACTION_STATEMENT FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = "+schemaArg+" AND EVENT_OBJECT_TABLE = ?", d.Table.Schema, d.Table.Name)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	sets := regexp.MustCompile(`(?is)\bSET\s+(?:[^;]*?,\s*)?NEW\s*\.\s*` + "`?" + regexp.QuoteMeta(col.name) + "`?" + `\s*=`)
	for rows.Next() {
		var timing, event, body string
		if err := rows.Scan(&timing, &event, &body); err != nil {
			return st, err
		}
		if timing != "BEFORE" || !sets.MatchString(body) {
			continue
		}
		switch event {
		case "INSERT":
			st.Insert = source.VerdictOK
		case "UPDATE":
			st.Update = source.VerdictOK
		}
	}
	if err := rows.Err(); err != nil {
		return st, err
	}
	if (st.Insert != source.VerdictOK || st.Update != source.VerdictOK) && !dr.sees(ctx, db, d, "TRIGGER") {
		for _, v := range []*source.Verdict{&st.Insert, &st.Update} {
			if *v == source.VerdictProblem {
				*v = source.VerdictUnknown
			}
		}
		st.Why = append(st.Why, "the login lacks the TRIGGER privilege, without which MySQL hides the table's triggers: run pollerctl check as the table's owner")
		return st, nil
	}
	if strings.Contains(extra, "auto_increment") && st.Update == source.VerdictProblem {
		st.Update = source.VerdictUnknown
		st.Why = append(st.Why, "an AUTO_INCREMENT column never changes on UPDATE: right only for an append-only table (else use docs/mysql.md's integer recipe)")
	}
	if st.Insert == source.VerdictProblem {
		st.Why = append(st.Why, "no CURRENT_TIMESTAMP default or BEFORE INSERT trigger stamps it")
	}
	if st.Update == source.VerdictProblem {
		st.Why = append(st.Why, "no ON UPDATE CURRENT_TIMESTAMP or BEFORE UPDATE trigger stamps it: every UPDATE after the insert is never delivered")
	}
	return st, nil
}

// addCursor is the fix that adds the missing cursor column, as docs/mysql.md's recipes do.
func (dr Driver) addCursor(d source.Definition) []string {
	table, col := source.QuoteTable(dr, d.Table), dr.Quote(d.Cursor.Column)
	switch d.Cursor.Kind {
	case state.KindTimestampPK:
		return []string{"ALTER TABLE " + table + " ADD COLUMN " + col + " TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)"}
	case state.KindInteger:
		return []string{"ALTER TABLE " + table + " ADD COLUMN " + col + " BIGINT NOT NULL DEFAULT 0"}
	}
	return nil
}

// stampFix makes BEFORE triggers that stamp the cursor column on INSERT and on UPDATE (those
// not stamped yet); an integer cursor takes its values from a one-row counter.
func (dr Driver) stampFix(d source.Definition, col *myColumn, insert, update bool) []string {
	table, qcol := source.QuoteTable(dr, d.Table), dr.Quote(d.Cursor.Column)
	expr := "CURRENT_TIMESTAMP(6)"
	if col != nil && col.typ == "datetime" {
		expr = "UTC_TIMESTAMP(6)"
	}
	body := "SET NEW." + qcol + " = " + expr
	var out []string
	if d.Cursor.Kind == state.KindInteger {
		counter := source.QuoteTable(dr, source.Table{Schema: d.Table.Schema, Name: source.CounterName(d)})
		out = append(out,
			"CREATE TABLE IF NOT EXISTS "+counter+" (n BIGINT NOT NULL)",
			"INSERT INTO "+counter+" (n) SELECT COALESCE(MAX("+qcol+"), 0) FROM "+table+" WHERE NOT EXISTS (SELECT 1 FROM "+counter+")")
		body = "BEGIN\n  UPDATE " + counter + " SET n = LAST_INSERT_ID(n + 1);\n  SET NEW." + qcol + " = LAST_INSERT_ID();\nEND"
	}
	trigger := func(event string) string {
		name := source.QuoteTable(dr, source.Table{Schema: d.Table.Schema, Name: source.StampName(d) + "_" + strings.ToLower(event)})
		return "CREATE TRIGGER " + name + " BEFORE " + event + " ON " + table + " FOR EACH ROW\n" + body
	}
	if insert {
		out = append(out, trigger("INSERT"))
	}
	if update {
		out = append(out, trigger("UPDATE"))
	}
	return out
}

// currentUser is the login as GRANT names it: 'user'@'host'.
func currentUser(ctx context.Context, db *sql.DB) (string, error) {
	var u string
	if err := db.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&u); err != nil {
		return "", err
	}
	name, host, _ := strings.Cut(u, "@")
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	return q(name) + "@" + q(host), nil
}

// sees says whether the login holds priv on the table: globally, on its schema or on it.
func (dr Driver) sees(ctx context.Context, db *sql.DB, d source.Definition, priv string) bool {
	user, err := currentUser(ctx, db)
	if err != nil {
		return false
	}
	var n int
	err = db.QueryRowContext(ctx, `SELECT
  (SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = ? AND PRIVILEGE_TYPE = ?) +
  (SELECT COUNT(*) FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = ? AND PRIVILEGE_TYPE = ? AND TABLE_SCHEMA = `+schemaArg+`) +
  (SELECT COUNT(*) FROM information_schema.TABLE_PRIVILEGES WHERE GRANTEE = ? AND PRIVILEGE_TYPE = ? AND TABLE_SCHEMA = `+schemaArg+` AND TABLE_NAME = ?)`,
		user, priv, user, priv, d.Table.Schema, user, priv, d.Table.Schema, d.Table.Name).Scan(&n)
	return err == nil && n > 0
}

// privileges: SELECT on the table, tried (information_schema showed the table, which any
// privilege on it does).
func (dr Driver) privileges(ctx context.Context, db *sql.DB, d source.Definition) source.Finding {
	user, _ := currentUser(ctx, db)
	f := source.Finding{Check: source.CheckPrivileges, Verdict: source.VerdictOK, Detail: user + " may read the table"}
	rows, err := db.QueryContext(ctx, "SELECT * FROM "+source.QuoteTable(dr, d.Table)+" WHERE 1=0")
	if err == nil {
		rows.Close()
		return f
	}
	f.Verdict, f.Detail = source.VerdictProblem, user+" cannot read the table ("+err.Error()+"): run the fix as the table's owner or an admin"
	f.Fix = []string{"GRANT SELECT ON " + source.QuoteTable(dr, d.Table) + " TO " + user}
	return f
}
