package source

import (
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// queries are the SQL texts one source runs. Arguments, in order: the key values (the *After
// queries only), boundArgs (the upper bound's argument, if it takes one), the open-transaction
// bound (openTrx only) and the row limit (fetch only). StampCheck (see CheckStamps) takes one argument, stampArg, and is empty when the
// cursor has no stamps to check; stampFix then says how to stamp the column.
type queries struct {
	FetchFirst string
	FetchAfter string
	// BacklogFirst and BacklogAfter read what waits: as the fetches, but without the bound on
	// transactions still open (xid, rowversion, a MySQL timestamp's open-transaction bound), so
	// that rows committed behind a long transaction count as waiting, and age, instead of looking
	// delivered. They keep the settle lag, and take the same arguments but the open-transaction
	// bound's.
	BacklogFirst string
	BacklogAfter string
	StampCheck   string
	keyOrder     []int // the key values' order in the *After queries' markers (nil: as the keys)
	boundArgs    []any
	openTrx      bool // the reads take the open-transaction bound's argument after boundArgs (mysqltrx.go)
	stampArg     any
	stampFix     string
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

func quoteTable(dl dialect, t Table) string {
	if t.Schema == "" {
		return dl.quote(t.Name)
	}
	return dl.quote(t.Schema) + "." + dl.quote(t.Name)
}

func quoteAll(dl dialect, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = dl.quote(n)
	}
	return out
}

// buildQueries renders the keyset queries for a definition in a dialect; flavor says how the
// cursor column is bounded by the database's clock (timestamp+pk only).
func buildQueries(dl dialect, d Definition, flavor tsFlavor) queries {
	qkeys := quoteAll(dl, d.keyColumns())
	cols := strings.Join(quoteAll(dl, d.selected()), ", ")
	table := quoteTable(dl, d.Table)
	filter := ""
	if f := strings.TrimSpace(d.Filter); f != "" {
		filter = "(" + f + ")"
	}

	_, bounded := openTrxBounded(dl, d)
	q := queries{openTrx: bounded}
	// render builds one query; after says whether it has the keyset predicate, backlog whether it
	// leaves out the bounds on open transactions.
	render := func(after, backlog bool) (string, []any) {
		n := 0
		next := func() string { n++; return dl.placeholder(n) }
		var preds []string
		if after {
			params := make([]string, len(qkeys))
			for i := range params {
				params[i] = next()
			}
			preds = append(preds, dl.keyset(d.Cursor.Kind, qkeys, params))
		}
		bound, arg := dl.upperBound(d.Cursor.Kind, flavor, qkeys[0], d.settleLag(), next)
		if backlog && (d.Cursor.Kind == state.KindXID || d.Cursor.Kind == state.KindRowversion) {
			bound, arg = "", nil // these bounds are the open transactions (and take no argument)
		}
		var args []any
		if arg != nil {
			args = []any{arg}
		}
		trx := ""
		if q.openTrx && !backlog {
			trx = qkeys[0] + " < " + next()
		}
		for _, p := range []string{bound, trx, filter} {
			if p != "" {
				preds = append(preds, p)
			}
		}
		from := " FROM " + table
		if len(preds) > 0 {
			from += " WHERE " + strings.Join(preds, " AND ")
		}
		limit := next()
		return dl.limit(cols, from+" ORDER BY "+strings.Join(qkeys, ", "), limit), args
	}
	q.keyOrder = dl.keysetArgs(len(qkeys))
	q.FetchFirst, q.boundArgs = render(false, false)
	q.FetchAfter, _ = render(true, false)
	q.BacklogFirst, _ = render(false, true)
	q.BacklogAfter, _ = render(true, true)
	if d.Cursor.Kind == state.KindTimestampPK {
		if pred, arg, fix := dl.stampCheck(flavor, table, qkeys[0], dl.placeholder(1)); pred != "" {
			if filter != "" {
				pred += " AND " + filter
			}
			q.StampCheck, q.stampArg, q.stampFix = dl.limit(strings.Join(qkeys, ", "), " FROM "+table+" WHERE "+pred, "1"), arg, fix
		}
	}
	return q
}
