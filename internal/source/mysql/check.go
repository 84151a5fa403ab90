package mysql

// pollerctl check and the handler's first look at a source: information_schema (Driver.CheckSetup).

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
	colType, comment      string // COLUMN_TYPE ("datetime(6)"), COLUMN_COMMENT
	nullable              bool
}

// schemaArg is the table's schema, or the connection's database.
const schemaArg = "COALESCE(NULLIF(?, ''), DATABASE())"

// CheckSetup reads information_schema: TABLES, COLUMNS, STATISTICS, TRIGGERS.
func (dr Driver) CheckSetup(ctx context.Context, db *sql.DB, d sourcedef.Definition) ([]setup.Finding, error) {
	var typ string
	err := db.QueryRowContext(ctx, "SELECT TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = "+schemaArg+" AND TABLE_NAME = ?", d.Table.Schema, d.Table.Name).Scan(&typ)
	if err == sql.ErrNoRows {
		f := setup.Finding{Check: setup.CheckTable, Verdict: setup.VerdictProblem,
			Detail: fmt.Sprintf("no table %s that the login can see: check the poller's table name, or grant the login SELECT on it", d.Table)}
		if user, err := currentUser(ctx, db); err == nil {
			f.Fix = []string{"GRANT SELECT ON " + driver.QuoteTable(dr, d.Table) + " TO " + user}
		}
		return []setup.Finding{f}, nil
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
	fs, more := setup.TableAndColumns(d, view, have, true, dr.addCursor(d))
	if !more {
		return append(fs, dr.privileges(ctx, db, d)), nil
	}

	ix, err := myIndexes(ctx, db, d.Table)
	if err != nil {
		return nil, err
	}
	create := fmt.Sprintf("CREATE INDEX %s ON %s (%s)", dr.Quote("ix_"+setup.IndexName(d)), driver.QuoteTable(dr, d.Table), strings.Join(driver.QuoteAll(dr, setup.KeysetColumns(d)), ", "))
	fs = append(fs, setup.IndexFinding(d, ix, true, create))

	var col *myColumn
	if i := slices.IndexFunc(cols, func(c myColumn) bool { return strings.EqualFold(c.name, d.Cursor.Column) }); i >= 0 {
		col = &cols[i]
	}
	st, by, err := dr.stamping(ctx, db, d, col)
	if err != nil {
		return nil, err
	}
	fix := dr.stampFix(d, col, st.Insert != setup.VerdictOK, st.Update != setup.VerdictOK, by)
	if col == nil && d.Cursor.Kind == state.KindTimestampPK {
		fix = nil // the column the fix adds is stamped on both
	}
	f := setup.StampFinding(d.Cursor.Column, st, fix)
	if f.Verdict == setup.VerdictProblem && slices.ContainsFunc(f.Fix, func(q string) bool { return strings.HasPrefix(q, "CREATE TRIGGER") }) {
		if note := triggerPrivilegeNote(ctx, db); note != "" {
			f.Detail += "; " + note
		}
	}
	fs = append(fs, f)
	return append(fs, dr.privileges(ctx, db, d)), nil
}

// triggerPrivilegeNote says, when it applies, that the fix's CREATE TRIGGER needs SUPER: with
// binary logging on (MySQL 8's default) and log_bin_trust_function_creators OFF (its default),
// MySQL refuses CREATE TRIGGER to a user without SUPER with ERROR 1419
// (ER_BINLOG_CREATE_ROUTINE_NEED_SUPER): mysql-server sql/sql_trigger.cc,
// Sql_cmd_create_trigger::execute ("trust_function_creators applies to them too"; MySQL 8.0
// also takes SET_USER_ID there), and the manual's
// https://dev.mysql.com/doc/refman/8.4/en/stored-programs-logging.html ("Triggers are similar to
// stored functions"). MariaDB does the same (its error 1419, seen here). Azure Database for
// MySQL sets log_bin_trust_function_creators ON, and grants no SUPER
// (https://learn.microsoft.com/en-us/azure/mysql/howto-troubleshoot-common-errors). Both
// variables are readable by any user; "" when they cannot be read or the note does not apply.
func triggerPrivilegeNote(ctx context.Context, db *sql.DB) string {
	var logBin, trust sql.NullBool
	if err := db.QueryRowContext(ctx, "SELECT @@global.log_bin, @@global.log_bin_trust_function_creators").Scan(&logBin, &trust); err != nil {
		return ""
	}
	return triggerNote(logBin.Bool, trust.Bool)
}

// triggerNote is triggerPrivilegeNote's text for the two variables' values.
func triggerNote(logBin, trust bool) string {
	if !logBin || trust {
		return ""
	}
	return "this server logs binary (log_bin=ON) with log_bin_trust_function_creators=OFF, so CREATE TRIGGER needs the SUPER privilege " +
		"(without it: ERROR 1419 \"You do not have the SUPER privilege and binary logging is enabled\"): run the fix as an admin that has SUPER, " +
		"or SET GLOBAL log_bin_trust_function_creators = ON first (Azure Database for MySQL has it ON; see docs/mysql.md)"
}

func myColumns(ctx context.Context, db *sql.DB, t sourcedef.Table) ([]myColumn, error) {
	return source.Collect(ctx, db, func(rows *sql.Rows) (c myColumn, err error) {
		var nullable string
		err = rows.Scan(&c.name, &c.typ, &c.def, &c.extra, &c.colType, &nullable, &c.comment)
		c.nullable = nullable == "YES"
		return c, err
	}, "SELECT COLUMN_NAME, DATA_TYPE, COALESCE(COLUMN_DEFAULT, ''), EXTRA, COLUMN_TYPE, IS_NULLABLE, COLUMN_COMMENT FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "+schemaArg+" AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", t.Schema, t.Name)
}

// myIndexes lists the table's B-tree indexes, each its columns in order ("" for an expression or
// a prefix of a column); InnoDB ends each secondary index with the primary key's columns.
func myIndexes(ctx context.Context, db *sql.DB, t sourcedef.Table) ([][]string, error) {
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
// or triggers that SET NEW.column (col nil: the column is missing, as the fix adds it). A
// DATETIME column stamped by the local clock is then judged by the server's time zone
// (zoneRule).
func (dr Driver) stamping(ctx context.Context, db *sql.DB, d sourcedef.Definition, col *myColumn) (setup.Stamping, stampedBy, error) {
	st, by, err := dr.stampSides(ctx, db, d, col)
	if err != nil || col == nil || col.typ != "datetime" {
		return st, by, err
	}
	v, why := dr.zoneVerdict(ctx, db, col, st, by)
	if v == setup.VerdictOK {
		return st, by, nil
	}
	if st.Update == setup.VerdictOK && onUpdateLocal(col, by) {
		st.Update = v
	}
	for _, side := range []struct {
		v  *setup.Verdict
		by string
	}{{&st.Insert, by.insert}, {&st.Update, by.update}} {
		if *side.v == setup.VerdictOK && localClock(side.by) {
			*side.v = v
		}
	}
	st.Why = append(st.Why, why)
	return st, by, nil
}

// zoneVerdict judges a DATETIME column's stamping (st, by) in the server's zone (zoneRule): ok
// when no side the column is stamped on is stamped by the local clock.
func (dr Driver) zoneVerdict(ctx context.Context, db *sql.DB, col *myColumn, st setup.Stamping, by stampedBy) (setup.Verdict, string) {
	var local []string
	for _, side := range []struct {
		name string
		v    setup.Verdict
		by   string
	}{{"INSERT", st.Insert, by.insert}, {"UPDATE", st.Update, by.update}} {
		if side.v == setup.VerdictOK && localClock(side.by) {
			local = append(local, side.name+" by "+side.by)
		}
	}
	if onUpdateLocal(col, by) {
		local = append(local, "UPDATE by ON UPDATE CURRENT_TIMESTAMP, which MySQL 8 applies after the BEFORE triggers in a multi-table UPDATE")
	}
	if len(local) == 0 {
		return setup.VerdictOK, ""
	}
	z, err := readZone(ctx, db)
	if err != nil { // judged as a zone the server cannot convert: cannot tell
		z = serverZone{global: "unread: " + err.Error()}
	}
	return zoneRule(col.name, local, z)
}

// onUpdateLocal says whether a column's ON UPDATE CURRENT_TIMESTAMP stamps it by the local clock
// although a BEFORE UPDATE trigger sets it otherwise (by.update): a single-table UPDATE applies
// the trigger last, but MySQL 8's multi-table UPDATE applies the ON UPDATE after the BEFORE
// triggers (mysql-server sql/sql_update.cc, the rows not updated on the fly).
func onUpdateLocal(col *myColumn, by stampedBy) bool {
	return strings.Contains(strings.ToLower(col.extra), "on update current_timestamp") && by.update != "current_timestamp"
}

// zoneProblem is zoneRule's problem for d's cursor column, as the read's guard refuses it
// (zoneGuard): when the table's newest stamp shows it too (stampedLocal); "" when there is none,
// or when it cannot be told.
func (dr Driver) zoneProblem(ctx context.Context, db *sql.DB, d sourcedef.Definition) string {
	cols, err := myColumns(ctx, db, d.Table)
	if err != nil {
		return ""
	}
	i := slices.IndexFunc(cols, func(c myColumn) bool { return strings.EqualFold(c.name, d.Cursor.Column) })
	if i < 0 || cols[i].typ != "datetime" {
		return ""
	}
	st, by, err := dr.stampSides(ctx, db, d, &cols[i])
	if err != nil {
		return ""
	}
	v, why := dr.zoneVerdict(ctx, db, &cols[i], st, by)
	if v != setup.VerdictProblem || !dr.stampedLocal(ctx, db, d) {
		return ""
	}
	return why
}

// stampedLocal says whether the table's newest stamp shows the local clock: within 10 minutes of
// the server's local time now, and half an hour or more from UTC now. The catalog alone can be
// wrong the other way (writers whose sessions run in UTC stamp CURRENT_TIMESTAMP in UTC; triggers
// a login without the TRIGGER privilege cannot see), so the reads are refused only on this
// evidence; pollerctl check reports the catalog's verdict whatever the data says.
func (dr Driver) stampedLocal(ctx context.Context, db *sql.DB, d sourcedef.Definition) bool {
	col := dr.Quote(d.Cursor.Column)
	var fromUTC, fromLocal sql.NullInt64
	err := db.QueryRowContext(ctx, "SELECT TIMESTAMPDIFF(SECOND, MAX("+col+"), UTC_TIMESTAMP()), TIMESTAMPDIFF(SECOND, MAX("+col+"), CONVERT_TZ(UTC_TIMESTAMP(), '+00:00', @@global.time_zone)) FROM "+driver.QuoteTable(dr, d.Table)).Scan(&fromUTC, &fromLocal)
	if err != nil || !fromUTC.Valid || !fromLocal.Valid {
		return false
	}
	return abs(fromLocal.Int64) <= 600 && abs(fromUTC.Int64) >= 1800
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// stampedBy names what stamps each side of a column: the function of its default or ON UPDATE,
// or of the BEFORE trigger that sets it (which runs after the default and wins), lower case
// without arguments ("current_timestamp", "utc_timestamp", "now"...; "" when none was seen or
// the trigger sets an expression this package does not judge).
type stampedBy struct{ insert, update string }

// localClock says whether a stamp function gives the session's local time: CURRENT_TIMESTAMP,
// NOW(), LOCALTIME, LOCALTIMESTAMP and SYSDATE() do, UTC_TIMESTAMP() does not
// (https://dev.mysql.com/doc/refman/8.4/en/date-and-time-functions.html#function_now: "The value
// is expressed in the session time zone").
func localClock(fn string) bool {
	switch fn {
	case "current_timestamp", "now", "localtime", "localtimestamp", "sysdate":
		return true
	}
	return false
}

// stampFunc is the function an expression (a column default, a trigger's right-hand side)
// begins with, lower case, without its arguments.
func stampFunc(expr string) string {
	expr = strings.TrimLeft(strings.ToLower(strings.TrimSpace(expr)), "(")
	end := strings.IndexFunc(expr, func(r rune) bool { return !(r == '_' || r >= 'a' && r <= 'z') })
	if end < 0 {
		end = len(expr)
	}
	return expr[:end]
}

// serverZone is the time zone NOW() and CURRENT_TIMESTAMP follow in a session that keeps the
// server's default: @@global.time_zone (SYSTEM: the server's system zone, @@system_time_zone).
// The source's own sessions run in UTC (time_zone='+00:00', driver.go), so the zone is read as
// CONVERT_TZ to @@global.time_zone, at four dates a season apart: a zone with daylight saving
// time is UTC for part of the year only. Offsets are in minutes east of UTC; ok is false when
// the server could not convert (a named zone without its time zone tables).
type serverZone struct {
	global, system      string
	now, least, largest int64
	ok                  bool
}

// zoneQuery reads serverZone. CONVERT_TZ takes 'SYSTEM' and the values @@time_zone takes
// (https://dev.mysql.com/doc/refman/8.4/en/date-and-time-functions.html#function_convert-tz,
// https://dev.mysql.com/doc/refman/8.4/en/time-zone-support.html); it gives NULL for a zone it
// does not know.
const zoneQuery = `SELECT @@global.time_zone, @@system_time_zone,
  MAX(CASE WHEN season = 0 THEN TIMESTAMPDIFF(MINUTE, t, CONVERT_TZ(t, '+00:00', @@global.time_zone)) END),
  MIN(TIMESTAMPDIFF(MINUTE, t, CONVERT_TZ(t, '+00:00', @@global.time_zone))),
  MAX(TIMESTAMPDIFF(MINUTE, t, CONVERT_TZ(t, '+00:00', @@global.time_zone)))
FROM (SELECT 0 AS season, UTC_TIMESTAMP() AS t UNION ALL SELECT 1, UTC_TIMESTAMP() + INTERVAL 3 MONTH
  UNION ALL SELECT 2, UTC_TIMESTAMP() + INTERVAL 6 MONTH UNION ALL SELECT 3, UTC_TIMESTAMP() + INTERVAL 9 MONTH) AS seasons`

func readZone(ctx context.Context, db *sql.DB) (serverZone, error) {
	var (
		z           serverZone
		system      sql.NullString
		now, lo, hi sql.NullInt64
	)
	if err := db.QueryRowContext(ctx, zoneQuery).Scan(&z.global, &system, &now, &lo, &hi); err != nil {
		return z, err
	}
	z.system, z.now, z.least, z.largest = system.String, now.Int64, lo.Int64, hi.Int64
	z.ok = now.Valid && lo.Valid && hi.Valid
	return z, nil
}

// zoneRule judges a DATETIME cursor column stamped by the local clock (local: each side and
// what stamps it) in the server's zone z. DATETIME keeps no zone and the source reads it as UTC
// (driver.go: its settle-lag bound is UTC_TIMESTAMP(6) - lag, its open-transaction bound is on
// the UTC clock), while MySQL converts only TIMESTAMP to and from UTC
// (https://dev.mysql.com/doc/refman/8.4/en/datetime.html: "This does not occur for other types
// such as DATETIME"). West of UTC the stamps sit hours behind both bounds, which then hold
// nothing back: a transaction that commits late lands behind the cursor, lost without a word
// (east of UTC the stamps are in the future, which the read's stamp check reports). So anything
// but UTC all year round is a problem; a zone the server cannot convert cannot be told.
//
// The remedy offered is the stamp fix: the column's DEFAULT made UTC_TIMESTAMP and its ON UPDATE
// dropped (utcDefault), and BEFORE triggers, SET NEW.col = UTC_TIMESTAMP(6). (Comparing in the
// column's own zone instead was rejected: a zone with daylight saving time repeats an hour of
// local times each autumn, so local stamps do not increase with commits.)
func zoneRule(col string, local []string, z serverZone) (setup.Verdict, string) {
	zone := fmt.Sprintf("@@global.time_zone %q", z.global)
	if strings.EqualFold(z.global, "SYSTEM") {
		zone += fmt.Sprintf(", @@system_time_zone %q", z.system)
	}
	stamped := fmt.Sprintf("DATETIME column %s is stamped by the server's local clock (%s)", col, strings.Join(local, ", "))
	if !z.ok {
		return setup.VerdictUnknown, stamped + ", and the server cannot say how far its zone (" + zone + ") is from UTC: the source reads DATETIME as UTC, so this is right only if that zone is UTC all year"
	}
	if z.now == 0 && z.least == 0 && z.largest == 0 {
		return setup.VerdictOK, ""
	}
	off := fmt.Sprintf("UTC%+g h now", float64(z.now)/60)
	if z.least != z.largest {
		off += fmt.Sprintf(", from UTC%+g to UTC%+g h over the year", float64(z.least)/60, float64(z.largest)/60)
	}
	return setup.VerdictProblem, stamped + " in a server whose zone is not UTC (" + zone + ": " + off + "). " +
		"The source reads DATETIME as UTC, so west of UTC every stamp sits hours behind the settle lag and the open-transaction bound, " +
		"which then hold nothing back: a transaction that commits late lands behind the cursor and its rows are never delivered. " +
		"The fix makes its DEFAULT UTC_TIMESTAMP and drops its ON UPDATE (MySQL 8 applies ON UPDATE after BEFORE triggers in a multi-table UPDATE), and stamps it with UTC_TIMESTAMP(6) in BEFORE triggers " +
		"(rows stamped before keep their local times; the application then reads UTC in this column). " +
		"Or make it TIMESTAMP(6), which MySQL keeps in UTC (ALTER TABLE ... MODIFY it in a session whose time_zone is the server's, so the old values convert), " +
		"or run the server in UTC (time_zone='+00:00'). Writers that SET their own session time_zone stamp NOW() in that zone, whatever the server's"
}

// stampSides reads how each side is stamped, and by what (stampedBy).
func (dr Driver) stampSides(ctx context.Context, db *sql.DB, d sourcedef.Definition, col *myColumn) (setup.Stamping, stampedBy, error) {
	var by stampedBy
	st := setup.Stamping{Insert: setup.VerdictProblem, Update: setup.VerdictProblem}
	if col == nil {
		if d.Cursor.Kind == state.KindTimestampPK {
			st.Why = append(st.Why, "the column is missing: the fix above adds it with DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6), which stamps both")
		} else {
			st.Why = append(st.Why, "the column the fix adds starts at 0: a counter must stamp every INSERT and UPDATE")
		}
		return st, by, nil
	}
	def, extra := strings.ToLower(col.def), strings.ToLower(col.extra)
	if strings.HasPrefix(def, "current_timestamp") || strings.Contains(def, "utc_timestamp") || strings.HasPrefix(def, "now(") {
		st.Insert, by.insert = setup.VerdictOK, stampFunc(def)
	}
	if strings.Contains(extra, "on update current_timestamp") {
		st.Update, by.update = setup.VerdictOK, "current_timestamp"
	}
	rows, err := db.QueryContext(ctx, "SELECT ACTION_TIMING, EVENT_MANIPULATION, ACTION_STATEMENT FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = "+schemaArg+" AND EVENT_OBJECT_TABLE = ? ORDER BY ACTION_ORDER", d.Table.Schema, d.Table.Name)
	if err != nil {
		return st, by, err
	}
	defer rows.Close()
	sets := regexp.MustCompile(`(?is)\bSET\s+(?:[^;]*?,\s*)?NEW\s*\.\s*` + "`?" + regexp.QuoteMeta(col.name) + "`?" + `\s*=\s*([^;,]*)`)
	for rows.Next() {
		var timing, event, body string
		if err := rows.Scan(&timing, &event, &body); err != nil {
			return st, by, err
		}
		m := sets.FindAllStringSubmatch(body, -1)
		if timing != "BEFORE" || m == nil {
			continue
		}
		fn := stampFunc(m[len(m)-1][1]) // the last trigger to run, and its last SET, wins
		switch event {
		case "INSERT":
			st.Insert, by.insert = setup.VerdictOK, fn
		case "UPDATE":
			st.Update, by.update = setup.VerdictOK, fn
		}
	}
	if err := rows.Err(); err != nil {
		return st, by, err
	}
	if (st.Insert != setup.VerdictOK || st.Update != setup.VerdictOK) && !dr.sees(ctx, db, d, "TRIGGER") {
		for _, v := range []*setup.Verdict{&st.Insert, &st.Update} {
			if *v == setup.VerdictProblem {
				*v = setup.VerdictUnknown
			}
		}
		st.Why = append(st.Why, "the login lacks the TRIGGER privilege, without which MySQL hides the table's triggers: run pollerctl check as the table's owner")
		return st, by, nil
	}
	if strings.Contains(extra, "auto_increment") && st.Update == setup.VerdictProblem {
		st.Update = setup.VerdictUnknown
		st.Why = append(st.Why, "an AUTO_INCREMENT column never changes on UPDATE: right only for an append-only table (else use docs/mysql.md's integer recipe)")
	}
	if st.Insert == setup.VerdictProblem {
		st.Why = append(st.Why, "no CURRENT_TIMESTAMP default or BEFORE INSERT trigger stamps it")
	}
	if st.Update == setup.VerdictProblem {
		st.Why = append(st.Why, "no ON UPDATE CURRENT_TIMESTAMP or BEFORE UPDATE trigger stamps it: every UPDATE after the insert is never delivered")
	}
	return st, by, nil
}

// addCursor is the fix that adds the missing cursor column, as docs/mysql.md's recipes do.
func (dr Driver) addCursor(d sourcedef.Definition) []string {
	table, col := driver.QuoteTable(dr, d.Table), dr.Quote(d.Cursor.Column)
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
// A side a BEFORE trigger already stamps in UTC (by) gets no trigger: only the column's
// definition is mended (utcDefault).
func (dr Driver) stampFix(d sourcedef.Definition, col *myColumn, insert, update bool, by stampedBy) []string {
	table, qcol := driver.QuoteTable(dr, d.Table), dr.Quote(d.Cursor.Column)
	expr := "CURRENT_TIMESTAMP(6)"
	if col != nil && col.typ == "datetime" {
		expr = "UTC_TIMESTAMP(6)"
	}
	body := "SET NEW." + qcol + " = " + expr
	var out []string
	if d.Cursor.Kind == state.KindInteger {
		counter := driver.QuoteTable(dr, sourcedef.Table{Schema: d.Table.Schema, Name: setup.CounterName(d)})
		out = append(out,
			"CREATE TABLE IF NOT EXISTS "+counter+" (n BIGINT NOT NULL)",
			"INSERT INTO "+counter+" (n) SELECT COALESCE(MAX("+qcol+"), 0) FROM "+table+" WHERE NOT EXISTS (SELECT 1 FROM "+counter+")")
		body = "BEGIN\n  UPDATE " + counter + " SET n = LAST_INSERT_ID(n + 1);\n  SET NEW." + qcol + " = LAST_INSERT_ID();\nEND"
	}
	trigger := func(event string) string {
		name := driver.QuoteTable(dr, sourcedef.Table{Schema: d.Table.Schema, Name: setup.StampName(d) + "_" + strings.ToLower(event)})
		return "CREATE TRIGGER " + name + " BEFORE " + event + " ON " + table + " FOR EACH ROW\n" + body
	}
	if insert && by.insert != "utc_timestamp" {
		out = append(out, trigger("INSERT"))
	}
	if update && by.update != "utc_timestamp" {
		out = append(out, trigger("UPDATE"))
	}
	// Last: a CREATE TRIGGER refused (ERROR 1419) leaves the column as it was.
	if m := utcDefault(table, qcol, col, insert, update); m != "" {
		out = append(out, m)
	}
	return out
}

// utcDefault is, for a DATETIME column whose DEFAULT (insert: the fix stamps inserts) or ON
// UPDATE (update) stamps it by the local clock (CURRENT_TIMESTAMP, NOW()...), the statement that
// makes its DEFAULT UTC_TIMESTAMP and drops its ON UPDATE; "" for any other column. The BEFORE triggers of the stamp fix alone would not do:
// MySQL 8 applies ON UPDATE CURRENT_TIMESTAMP after the BEFORE triggers in a multi-table UPDATE
// (mysql-server sql/sql_update.cc: the triggers run, then the auto-set fields are stamped, sparing
// only the columns the statement itself set), which would stamp the column in local time again.
// The column keeps its type, nullability, visibility and comment (COLUMN_TYPE, IS_NULLABLE,
// EXTRA's INVISIBLE, COLUMN_COMMENT), which MODIFY would otherwise drop. Expression defaults need MySQL 8.0.13 (https://dev.mysql.com/doc/refman/8.4/en/data-type-defaults.html)
// or MariaDB 10.2.
func utcDefault(table, qcol string, col *myColumn, insert, update bool) string {
	if col == nil || col.typ != "datetime" || col.colType == "" ||
		!(insert && localClock(stampFunc(col.def))) && !(update && strings.Contains(strings.ToLower(col.extra), "on update")) {
		return ""
	}
	fsp := ""
	if i := strings.IndexByte(col.colType, '('); i >= 0 {
		fsp = strings.TrimSuffix(col.colType[i+1:], ")")
	}
	m := "ALTER TABLE " + table + " MODIFY " + qcol + " " + col.colType + " NOT NULL"
	if col.nullable {
		m = strings.TrimSuffix(m, " NOT NULL") + " NULL"
	}
	m += " DEFAULT (UTC_TIMESTAMP(" + fsp + "))"
	if strings.Contains(strings.ToLower(col.extra), "invisible") {
		m += " INVISIBLE"
	}
	if col.comment != "" {
		m += " COMMENT '" + strings.ReplaceAll(strings.ReplaceAll(col.comment, `\`, `\\`), "'", "''") + "'"
	}
	return m
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
func (dr Driver) sees(ctx context.Context, db *sql.DB, d sourcedef.Definition, priv string) bool {
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
// privilege on it does); a cleanup's DELETE, granted globally, on the schema or on the table.
func (dr Driver) privileges(ctx context.Context, db *sql.DB, d sourcedef.Definition) setup.Finding {
	user, _ := currentUser(ctx, db)
	f := setup.Finding{Check: setup.CheckPrivileges, Verdict: setup.VerdictOK, Detail: user + " may read the table"}
	rows, err := db.QueryContext(ctx, "SELECT * FROM "+driver.QuoteTable(dr, d.Table)+" WHERE 1=0")
	if err == nil {
		rows.Close()
		if d.Cleanup != nil && !dr.sees(ctx, db, d, "DELETE") {
			f.Verdict, f.Detail = setup.VerdictProblem, user+" lacks DELETE on the table, which its cleanup deletes the delivered rows with: run the fix as the table's owner or an admin"
			f.Fix = []string{"GRANT DELETE ON " + driver.QuoteTable(dr, d.Table) + " TO " + user}
		}
		return f
	}
	f.Verdict, f.Detail = setup.VerdictProblem, user+" cannot read the table ("+err.Error()+"): run the fix as the table's owner or an admin"
	f.Fix = []string{"GRANT SELECT ON " + driver.QuoteTable(dr, d.Table) + " TO " + user}
	return f
}
