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
	holdsBack    bool // the upper bound is the oldest open transaction (Bound.OpenTrx)
	stampArg     any
	stampFix     string
}

// buildQueries renders the keyset queries for a definition with a driver; flavor says how the
// cursor column is bounded by the database's clock (timestamp+pk only).
func buildQueries(dl Driver, d Definition, flavor TSFlavor) queries {
	qkeys := QuoteAll(dl, d.keyColumns())
	cols := strings.Join(QuoteAll(dl, d.selected()), ", ")
	table := QuoteTable(dl, d.Table)
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
		next := func() string { n++; return dl.Placeholder(n) }
		var preds []string
		if after {
			params := make([]string, len(qkeys))
			for i := range params {
				params[i] = next()
			}
			pred, order := dl.Keyset(d.Cursor.Kind, qkeys, params)
			preds, q.keyOrder = append(preds, pred), order
		}
		b := dl.UpperBound(d.Cursor.Kind, flavor, qkeys[0], d.settleLag(), next)
		q.holdsBack = b.OpenTrx
		if backlog && b.OpenTrx {
			b = Bound{} // this bound is the open transactions (and takes no argument)
		}
		var args []any
		if b.Arg != nil {
			args = []any{b.Arg}
		}
		trx := ""
		if q.openTrx && !backlog {
			trx = qkeys[0] + " < " + next()
		}
		for _, p := range []string{b.Pred, trx, filter} {
			if p != "" {
				preds = append(preds, p)
			}
		}
		from := " FROM " + table
		if len(preds) > 0 {
			from += " WHERE " + strings.Join(preds, " AND ")
		}
		limit := next()
		return dl.Limit(cols, from+" ORDER BY "+strings.Join(qkeys, ", "), limit), args
	}
	q.FetchFirst, q.boundArgs = render(false, false)
	q.FetchAfter, _ = render(true, false)
	q.BacklogFirst, _ = render(false, true)
	q.BacklogAfter, _ = render(true, true)
	if d.Cursor.Kind == state.KindTimestampPK {
		if pred, arg, fix := dl.StampCheck(flavor, table, qkeys[0], dl.Placeholder(1)); pred != "" {
			if filter != "" {
				pred += " AND " + filter
			}
			q.StampCheck, q.stampArg, q.stampFix = dl.Limit(strings.Join(qkeys, ", "), " FROM "+table+" WHERE "+pred, "1"), arg, fix
		}
	}
	return q
}
