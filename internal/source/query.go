package source

import (
	"fmt"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// queries are the SQL texts one source runs. Arguments, in order: the key values (the *After
// queries only), the upper bound's argument (when boundArg), and the row limit (fetch only).
// StampCheck (see CheckStamps) takes one argument, stampArg, and is empty when the cursor has no
// stamps to check.
type queries struct {
	FetchFirst   string
	FetchAfter   string
	PendingFirst string
	PendingAfter string
	StampCheck   string
	boundArg     bool
	stampArg     any
}

// tsFlavor says how a timestamp cursor column compares with the database's clock.
type tsFlavor int

const (
	tsNone        tsFlavor = iota // not a timestamp cursor
	tsWithZone                    // timestamptz, datetimeoffset
	tsUTC                         // timestamp without time zone, datetime2, datetime: assumed UTC
	tsText                        // SQLite TEXT in the fixed-width UTC layout
	tsUnsupported                 // a timestamp type the dialect cannot bound
)

func quoteIdent(driver, s string) string {
	if driver == SQLServer {
		return "[" + strings.ReplaceAll(s, "]", "]]") + "]"
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

func quoteTable(driver string, t Table) string {
	if t.Schema == "" {
		return quoteIdent(driver, t.Name)
	}
	return quoteIdent(driver, t.Schema) + "." + quoteIdent(driver, t.Name)
}

// placeholder returns the i-th (1-based) parameter marker.
func placeholder(driver string, i int) string {
	switch driver {
	case SQLServer:
		return fmt.Sprintf("@p%d", i)
	case Postgres:
		return fmt.Sprintf("$%d", i)
	}
	return "?"
}

// buildQueries renders the keyset queries for a definition on driver; flavor says how the
// cursor column is bounded by the database's clock (timestamp+pk only).
func buildQueries(driver string, d Definition, flavor tsFlavor) queries {
	keys := d.keyColumns()
	qkeys := make([]string, len(keys))
	for i, k := range keys {
		qkeys[i] = quoteIdent(driver, k)
	}
	cols := d.selected()
	qcols := make([]string, len(cols))
	for i, c := range cols {
		qcols[i] = quoteIdent(driver, c)
	}
	table := quoteTable(driver, d.Table)
	orderBy := " ORDER BY " + strings.Join(qkeys, ", ")

	// render builds one query; after says whether it has the keyset predicate.
	render := func(after, pending bool) (string, bool) {
		n := 0
		next := func() string { n++; return placeholder(driver, n) }
		var preds []string
		if after {
			params := make([]string, len(keys))
			for i := range keys {
				params[i] = next()
				if d.Cursor.Kind == state.KindXID && i == 0 {
					params[i] += "::text::xid8"
				}
			}
			preds = append(preds, keyset(driver, qkeys, params))
		}
		bound, hasArg := upperBound(driver, d.Cursor.Kind, flavor, qkeys[0], next)
		if bound != "" {
			preds = append(preds, bound)
		}
		if f := strings.TrimSpace(d.Filter); f != "" {
			preds = append(preds, "("+f+")")
		}
		where := ""
		if len(preds) > 0 {
			where = " WHERE " + strings.Join(preds, " AND ")
		}
		if pending {
			if driver == SQLServer {
				return "SELECT TOP (1) 1 FROM " + table + where, hasArg
			}
			return "SELECT 1 FROM " + table + where + " LIMIT 1", hasArg
		}
		limit := next()
		if driver == SQLServer {
			return "SELECT TOP (" + limit + ") " + strings.Join(qcols, ", ") + " FROM " + table + where + orderBy, hasArg
		}
		return "SELECT " + strings.Join(qcols, ", ") + " FROM " + table + where + orderBy + " LIMIT " + limit, hasArg
	}
	var q queries
	q.FetchFirst, q.boundArg = render(false, false)
	q.FetchAfter, _ = render(true, false)
	q.PendingFirst, _ = render(false, true)
	q.PendingAfter, _ = render(true, true)
	q.StampCheck, q.stampArg = stampCheck(driver, d, flavor, table, qkeys)
	return q
}

// stampCheck renders the query that finds one row whose cursor value the keyset read could
// never reach (CheckStamps), reading the keyset columns, and its one argument:
//
//   - SQLite TEXT: a value not in the fixed-width layout (GLOB stampPattern). A full scan.
//   - a timestamp without a time zone (PostgreSQL timestamp, SQL Server datetime2, datetime,
//     smalldatetime): a value more than FutureTolerance (the argument, in seconds) ahead of the
//     database's UTC clock. An index seek on the cursor column.
//
// Other kinds and flavors have nothing to check: "", nil.
func stampCheck(driver string, d Definition, flavor tsFlavor, table string, qkeys []string) (string, any) {
	if d.Cursor.Kind != state.KindTimestampPK {
		return "", nil
	}
	col := qkeys[0]
	var pred string
	var arg any
	switch {
	case driver == SQLite && flavor == tsText:
		pred, arg = "NOT ("+col+" GLOB "+placeholder(driver, 1)+")", stampPattern
	case driver == Postgres && flavor == tsUTC:
		pred, arg = col+" > (now() AT TIME ZONE 'UTC') + make_interval(secs => "+placeholder(driver, 1)+")", FutureTolerance.Seconds()
	case driver == SQLServer && flavor == tsUTC:
		pred, arg = col+" > DATEADD(second, "+placeholder(driver, 1)+", SYSUTCDATETIME())", int32(FutureTolerance.Seconds())
	default:
		return "", nil
	}
	if f := strings.TrimSpace(d.Filter); f != "" {
		pred += " AND (" + f + ")"
	}
	if driver == SQLServer {
		return "SELECT TOP (1) " + strings.Join(qkeys, ", ") + " FROM " + table + " WHERE " + pred, arg
	}
	return "SELECT " + strings.Join(qkeys, ", ") + " FROM " + table + " WHERE " + pred + " LIMIT 1", arg
}

// keyset renders "the keys are after the params" in lexicographic order. PostgreSQL and SQLite
// compare row values, which their indexes seek on. SQL Server has no row comparison: it gets the
// expanded form with a leading range on the first key so the index on the keys seeks:
// k0 >= @p1 AND (k0 > @p1 OR (k1 > @p2 OR (k1 = @p2 AND k2 > @p3))).
func keyset(driver string, keys, params []string) string {
	if len(keys) == 1 {
		return keys[0] + " > " + params[0]
	}
	if driver != SQLServer {
		return "(" + strings.Join(keys, ", ") + ") > (" + strings.Join(params, ", ") + ")"
	}
	rest := keys[len(keys)-1] + " > " + params[len(keys)-1]
	for i := len(keys) - 2; i >= 1; i-- {
		rest = "(" + keys[i] + " > " + params[i] + " OR (" + keys[i] + " = " + params[i] + " AND " + rest + "))"
	}
	return keys[0] + " >= " + params[0] + " AND (" + keys[0] + " > " + params[0] + " OR " + rest + ")"
}

// upperBound renders the predicate that keeps a read behind rows that may still commit: the
// settle lag on the database's clock for timestamps, the oldest active transaction for xid and
// rowversion, nothing for integers.
func upperBound(driver, kind string, flavor tsFlavor, col string, next func() string) (string, bool) {
	switch kind {
	case state.KindXID:
		return col + " < pg_snapshot_xmin(pg_current_snapshot())", false
	case state.KindRowversion:
		return col + " < MIN_ACTIVE_ROWVERSION()", false
	case state.KindTimestampPK:
		switch {
		case driver == Postgres && flavor == tsWithZone:
			return col + " < now() - make_interval(secs => " + next() + ")", true
		case driver == Postgres:
			return col + " < (now() AT TIME ZONE 'UTC') - make_interval(secs => " + next() + ")", true
		case driver == SQLServer && flavor == tsWithZone:
			return col + " < DATEADD(millisecond, -" + next() + ", SYSDATETIMEOFFSET())", true
		case driver == SQLServer:
			return col + " < DATEADD(millisecond, -" + next() + ", SYSUTCDATETIME())", true
		case driver == SQLite:
			// 'now' has millisecond resolution; padding to six digits keeps the fixed-width text
			// comparable with stored YYYY-MM-DDTHH:MM:SS.ffffffZ values. The scalar subquery is
			// evaluated once per statement, not once per row.
			return col + " < (SELECT strftime('%Y-%m-%dT%H:%M:%f', 'now', " + next() + ") || '000Z')", true
		}
	}
	return "", false
}
