package sqlite

// pollerctl check and the handler's first look at a source: SQLite's catalog (Driver.CheckSetup).

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

// Script: the sqlite3 shell runs each statement ended by a semicolon.
func (Driver) Script(stmts []string) string { return setup.JoinStatements(stmts) }

// DDLInTransaction: SQLite's DDL is transactional.
func (Driver) DDLInTransaction() bool { return true }

type liteColumn struct {
	name, typ, def string
	pk             int
}

// CheckSetup reads sqlite_master and the table's pragmas.
func (dr Driver) CheckSetup(ctx context.Context, db *sql.DB, d sourcedef.Definition) ([]setup.Finding, error) {
	schema := d.Table.Schema
	if schema == "" {
		schema = "main"
	}
	master := dr.Quote(schema) + ".sqlite_master"
	var typ, ddl string
	err := db.QueryRowContext(ctx, "SELECT type, COALESCE(sql, '') FROM "+master+" WHERE type IN ('table', 'view') AND name = ? COLLATE NOCASE", d.Table.Name).Scan(&typ, &ddl)
	if err == sql.ErrNoRows {
		return []setup.Finding{{Check: setup.CheckTable, Verdict: setup.VerdictProblem,
			Detail: fmt.Sprintf("no table %s in the database file: check the poller's table name and its DSN", d.Table)}}, nil
	}
	if err != nil {
		return nil, err
	}
	view := ""
	if typ == "view" {
		view = "a view"
	}
	cols, err := liteColumns(ctx, db, schema, d.Table.Name)
	if err != nil {
		return nil, err
	}
	var have []string
	for _, c := range cols {
		have = append(have, c.name)
	}
	fs, more := setup.TableAndColumns(d, view, have, true, dr.addCursor(d))
	if !more {
		return append(fs, privileges()), nil
	}

	ix, err := liteIndexes(ctx, db, schema, d.Table.Name)
	if err != nil {
		return nil, err
	}
	// A rowid table's every index ends with the rowid, which an INTEGER PRIMARY KEY names.
	if alias := rowidAlias(cols, ddl); alias != "" {
		for i := range ix {
			ix[i] = append(ix[i], alias)
		}
		ix = append(ix, []string{alias})
	}
	idxName := dr.Quote(setup.IndexName(d))
	if d.Table.Schema != "" {
		idxName = dr.Quote(d.Table.Schema) + "." + idxName
	}
	create := fmt.Sprintf("CREATE INDEX %s ON %s (%s)", idxName, dr.Quote(d.Table.Name), strings.Join(driver.QuoteAll(dr, setup.KeysetColumns(d)), ", "))
	fs = append(fs, setup.IndexFinding(d, ix, true, create))

	var col *liteColumn
	if i := slices.IndexFunc(cols, func(c liteColumn) bool { return strings.EqualFold(c.name, d.Cursor.Column) }); i >= 0 {
		col = &cols[i]
	}
	st, err := dr.stamping(ctx, db, d, master, col)
	if err != nil {
		return nil, err
	}
	fs = append(fs, setup.StampFinding(d.Cursor.Column, st, dr.stampFix(d, st.Insert != setup.VerdictOK, st.Update != setup.VerdictOK)))
	return append(fs, privileges()), nil
}

// privileges: SQLite has none; the file must be readable, which opening it showed.
func privileges() setup.Finding {
	return setup.Finding{Check: setup.CheckPrivileges, Verdict: setup.VerdictOK, Detail: "SQLite has no privileges: the file is readable"}
}

func liteColumns(ctx context.Context, db *sql.DB, schema, table string) ([]liteColumn, error) {
	return source.Collect(ctx, db, func(rows *sql.Rows) (c liteColumn, err error) {
		err = rows.Scan(&c.name, &c.typ, &c.def, &c.pk)
		return c, err
	}, `SELECT name, type, COALESCE(dflt_value, ''), pk FROM pragma_table_info(?, ?) ORDER BY cid`, table, schema)
}

// liteIndexes lists the table's whole-table indexes, each its columns in order ("" for an
// expression).
func liteIndexes(ctx context.Context, db *sql.DB, schema, table string) ([][]string, error) {
	names, err := source.Collect(ctx, db, source.ScanString, `SELECT name FROM pragma_index_list(?, ?) WHERE NOT partial`, table, schema)
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, n := range names {
		cols, err := source.Collect(ctx, db, source.ScanString, `SELECT COALESCE(name, '') FROM pragma_index_info(?, ?) ORDER BY seqno`, n, schema)
		if err != nil {
			return nil, err
		}
		out = append(out, cols)
	}
	return out, nil
}

// rowidAlias is the column an INTEGER PRIMARY KEY makes the rowid's name ("" when none, or the
// table is WITHOUT ROWID).
func rowidAlias(cols []liteColumn, ddl string) string {
	var pk []liteColumn
	for _, c := range cols {
		if c.pk > 0 {
			pk = append(pk, c)
		}
	}
	if len(pk) != 1 || !strings.EqualFold(pk[0].typ, "INTEGER") || regexp.MustCompile(`(?i)\bWITHOUT\s+ROWID\b`).MatchString(ddl) {
		return ""
	}
	return pk[0].name
}

var (
	// A literal default (a string, a number, NULL) stamps nothing.
	liteConstant = regexp.MustCompile(`(?i)^\s*('([^']|'')*'|[-+]?[0-9.]+|NULL)\s*$`)
	// triggerHead is a CREATE TRIGGER's text from after its name to ON: its time and event.
	triggerHead = regexp.MustCompile(`(?is)^\s*CREATE\s+(?:TEMP\w*\s+)?TRIGGER\s+(?:IF\s+NOT\s+EXISTS\s+)?(?:"(?:[^"]|"")*"|\[[^\]]*\]|` + "`[^`]*`" + `|[\w$]+)(?:\s*\.\s*(?:"(?:[^"]|"")*"|[\w$]+))?\s+(.*?)\bON\b(.*?)\bBEGIN\b(.*)$`)
	word        = func(w string) *regexp.Regexp { return regexp.MustCompile(`(?i)\b` + w + `\b`) }
	updateOf    = regexp.MustCompile(`(?i)\bUPDATE\s+OF\b`)
)

// stamping reads how the cursor column is written: a default that is not a literal stamps
// inserts; a trigger on INSERT or UPDATE whose body sets the column stamps those (col nil: the
// column is missing, and the fix adds it with a literal default).
func (dr Driver) stamping(ctx context.Context, db *sql.DB, d sourcedef.Definition, master string, col *liteColumn) (setup.Stamping, error) {
	st := setup.Stamping{Insert: setup.VerdictProblem, Update: setup.VerdictProblem}
	if col == nil {
		st.Why = append(st.Why, "the column the fix adds has a constant default (SQLite adds no other): triggers must stamp every INSERT and UPDATE")
		return st, nil
	}
	if col.def != "" && !liteConstant.MatchString(col.def) {
		st.Insert = setup.VerdictOK
	}
	rows, err := db.QueryContext(ctx, "SELECT name, COALESCE(sql, '') FROM "+master+" WHERE type = 'trigger' AND tbl_name = ? COLLATE NOCASE", d.Table.Name)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	sets := regexp.MustCompile(`(?is)\bSET\s+(?:[^;]*?,\s*)?["` + "`" + `\[]?` + regexp.QuoteMeta(col.name) + `["` + "`" + `\]]?\s*=`)
	var unread []string
	for rows.Next() {
		var name, text string
		if err := rows.Scan(&name, &text); err != nil {
			return st, err
		}
		m := triggerHead.FindStringSubmatch(text)
		if m == nil {
			unread = append(unread, name)
			continue
		}
		head, cond, body := m[1], m[2], m[3]
		if !sets.MatchString(body) {
			continue
		}
		conditional := word("WHEN").MatchString(cond) || updateOf.MatchString(head)
		verdict := setup.VerdictOK
		if conditional {
			verdict = setup.VerdictUnknown
			unread = append(unread, name)
		}
		if word("INSERT").MatchString(head) && st.Insert != setup.VerdictOK {
			st.Insert = verdict
		}
		if word("UPDATE").MatchString(head) && st.Update != setup.VerdictOK {
			st.Update = verdict
		}
	}
	if err := rows.Err(); err != nil {
		return st, err
	}
	if len(unread) > 0 {
		st.Why = append(st.Why, "trigger "+strings.Join(unread, ", ")+" may stamp it only for some columns or rows (UPDATE OF, WHEN), which the check cannot judge")
	}
	if st.Insert == setup.VerdictProblem {
		why := "no default or INSERT trigger stamps it"
		if col.def != "" {
			why = "its default (" + col.def + ") is a constant and no INSERT trigger stamps it"
		}
		st.Why = append(st.Why, why+": inserted rows keep a value the cursor may have passed")
	}
	if st.Update == setup.VerdictProblem {
		st.Why = append(st.Why, "no UPDATE trigger stamps it: every UPDATE after the insert is never delivered")
	}
	return st, nil
}

// addCursor is the fix that adds the missing cursor column, as docs/sqlite.md's recipes do:
// SQLite adds a column with a constant default only, so the rows there get a stamp of now.
func (dr Driver) addCursor(d sourcedef.Definition) []string {
	table, col := driver.QuoteTable(dr, d.Table), dr.Quote(d.Cursor.Column)
	switch d.Cursor.Kind {
	case state.KindTimestampPK:
		return []string{
			"ALTER TABLE " + table + " ADD COLUMN " + col + " TEXT NOT NULL DEFAULT '1970-01-01T00:00:00.000000Z'",
			"UPDATE " + table + " SET " + col + " = " + StampExpr,
		}
	case state.KindInteger:
		return []string{"ALTER TABLE " + table + " ADD COLUMN " + col + " INTEGER NOT NULL DEFAULT 0"}
	}
	return nil
}

// stampFix makes the AFTER triggers that stamp the cursor column on INSERT and on UPDATE (those
// not stamped yet); an integer cursor takes its values from a one-row counter.
func (dr Driver) stampFix(d sourcedef.Definition, insert, update bool) []string {
	table, col := dr.Quote(d.Table.Name), dr.Quote(d.Cursor.Column)
	var where []string
	for _, k := range d.PK {
		where = append(where, dr.Quote(k)+" = NEW."+dr.Quote(k))
	}
	stamp := "  UPDATE " + table + " SET " + col + " = " + StampExpr + " WHERE " + strings.Join(where, " AND ") + ";\n"
	var out []string
	if d.Cursor.Kind == state.KindInteger {
		counter := dr.Quote(setup.CounterName(d))
		qcounter := driver.QuoteTable(dr, sourcedef.Table{Schema: d.Table.Schema, Name: setup.CounterName(d)})
		out = append(out,
			"CREATE TABLE IF NOT EXISTS "+qcounter+" (n INTEGER NOT NULL)",
			"INSERT INTO "+qcounter+" (n) SELECT COALESCE(MAX("+col+"), 0) FROM "+driver.QuoteTable(dr, d.Table)+" WHERE NOT EXISTS (SELECT 1 FROM "+qcounter+")")
		stamp = "  UPDATE " + counter + " SET n = n + 1;\n  UPDATE " + table + " SET " + col + " = (SELECT n FROM " + counter + ") WHERE " + strings.Join(where, " AND ") + ";\n"
	}
	trigger := func(event string) string {
		name := dr.Quote(setup.StampName(d) + "_" + strings.ToLower(event))
		if d.Table.Schema != "" {
			name = dr.Quote(d.Table.Schema) + "." + name
		}
		return "CREATE TRIGGER " + name + " AFTER " + event + " ON " + table + " FOR EACH ROW\nBEGIN\n" + stamp + "END"
	}
	if insert {
		out = append(out, trigger("INSERT"))
	}
	if update {
		out = append(out, trigger("UPDATE"))
	}
	return out
}
