package source

import (
	"context"
	"fmt"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// keyset reads a table in keyset order: every cursor kind that is not a change stream.
type keyset struct{ s *Source }

func (k *keyset) fetch(ctx context.Context, after *state.Cursor, limit int) (*row.Batch, error) {
	if k.s.dupCheck {
		return k.fetchChecked(ctx, after, limit)
	}
	return k.read(ctx, after, limit, false)
}

func (k *keyset) oldest(ctx context.Context, after *state.Cursor) (*row.Batch, error) {
	return k.read(ctx, after, 1, true)
}

// read is fetch; backlog reads what waits instead (queries.BacklogFirst and BacklogAfter).
func (k *keyset) read(ctx context.Context, after *state.Cursor, limit int, backlog bool) (*row.Batch, error) {
	s := k.s
	q, args, err := k.query(ctx, after, limit, backlog)
	if err != nil {
		return nil, err
	}
	if b, handled, err := k.readRaw(ctx, q, args, after, limit); handled {
		return b, err
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("source: poller %q, table %s: fetch: %w", s.poller, s.def.Table, err)
	}
	return s.scan(rows, after, limit)
}

func (k *keyset) waiting(ctx context.Context, after *state.Cursor, limit int) (int64, error) {
	s := k.s
	q, args, err := k.query(ctx, after, limit, true)
	if err != nil {
		return 0, err
	}
	var n int64
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM ("+q+") w", args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("source: poller %q, table %s: counting waiting rows: %w", s.poller, s.def.Table, err)
	}
	return n, nil
}

// query returns the query that reads up to limit rows after the cursor, and its arguments;
// backlog: the query that reads what waits (queries.BacklogFirst and BacklogAfter).
func (k *keyset) query(ctx context.Context, after *state.Cursor, limit int, backlog bool) (string, []any, error) {
	s := k.s
	first, then := s.q.FetchFirst, s.q.FetchAfter
	if backlog {
		first, then = s.q.BacklogFirst, s.q.BacklogAfter
	}
	q, args := first, []any(nil)
	if after != nil {
		keys, err := s.keyArgs(after)
		if err != nil {
			return "", nil, err
		}
		q, args = then, inMarkerOrder(keys, s.q.keyOrder)
	}
	args = append(args, s.q.boundArgs...)
	if s.bound != nil && !backlog {
		bound, err := k.boundArg(ctx)
		if err != nil {
			return "", nil, err
		}
		args = append(args, bound)
	}
	return q, append(args, limit), nil
}

// inMarkerOrder returns a keyset predicate's key values in the order of its markers (Driver.Keyset's
// order; nil: as they are).
func inMarkerOrder(vals []any, order []int) []any {
	if order == nil {
		return vals
	}
	out := make([]any, len(order))
	for i, k := range order {
		out[i] = vals[k]
	}
	return out
}

// markers returns n placeholders from next.
func markers(n int, next func() string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = next()
	}
	return out
}

// keyMarkers returns a marker from next for each key column of codecs, as its codec writes it
// (KeyCodec.Marker).
func keyMarkers(codecs []row.KeyCodec, next func() string) []string {
	out := markers(len(codecs), next)
	for i, c := range codecs {
		out[i] = c.Mark(out[i])
	}
	return out
}

// boundArg is the read bound's argument for a read.
func (k *keyset) boundArg(ctx context.Context) (any, error) {
	s := k.s
	bound, err := s.bound.Arg(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("source: poller %q, table %s: %w", s.poller, s.def.Table, err)
	}
	return bound, nil
}

// refresh reads the read bound, if the source has one, so that Stats says it as it is now.
func (k *keyset) refresh(ctx context.Context) error {
	if k.s.bound == nil {
		return nil
	}
	_, err := k.boundArg(ctx)
	return err
}

func (k *keyset) checkCursor(c *state.Cursor) error {
	_, err := k.s.keyArgs(c)
	return err
}

func (k *keyset) committed(context.Context, *state.Cursor) error { return nil }

func (k *keyset) stats() driver.Stats {
	var st driver.Stats
	if k.s.bound != nil {
		st = k.s.bound.Stats()
	}
	st.HoldBack = st.HoldBack || k.s.q.holdsBack
	return st
}

// queries are the SQL texts one source runs. Arguments, in order: the key values (the *After
// queries only), boundArgs (the upper bound's argument, if it takes one), the read bound's
// (readBound only, never the backlog's) and the row limit (fetch only). StampCheck (see CheckStamps) takes one argument, stampArg, and is empty when the
// cursor has no stamps to check; stampFix then says how to stamp the column.
type queries struct {
	FetchFirst string
	FetchAfter string
	// BacklogFirst and BacklogAfter read what waits: as the fetches, but without the bound on
	// transactions still open (xid, rowversion, a read bound), so
	// that rows committed behind a long transaction count as waiting, and age, instead of looking
	// delivered. They keep the settle lag, and take the same arguments but the read bound's.
	BacklogFirst string
	BacklogAfter string
	StampCheck   string
	keyOrder     []int // the key values' order in the *After queries' markers (nil: as the keys)
	boundArgs    []any
	readBound    bool // the fetches take the read bound's argument after boundArgs (ReadBound)
	holdsBack    bool // the upper bound is the oldest open transaction (Bound.OpenTrx)
	stampArg     any
	stampFix     string
}

// buildQueries renders the keyset queries for a definition with a driver, reading the select
// list cols and, in the stamp check, the key columns' keys (Source.selectCols); codecs are the key
// columns' (their markers), flavor says how the cursor column is bounded by the database's clock
// (timestamp+pk only), readBound whether the fetches take a read bound (ReadBound).
func buildQueries(dl driver.Driver, d sourcedef.Definition, cols, keys string, codecs []row.KeyCodec, flavor row.TSFlavor, readBound bool) queries {
	qkeys := driver.QuoteAll(dl, d.KeyColumns())
	table := driver.QuoteTable(dl, d.Table)
	filter := ""
	if f := strings.TrimSpace(d.Filter); f != "" {
		filter = "(" + f + ")"
	}

	q := queries{readBound: readBound}
	// render builds one query; after says whether it has the keyset predicate, backlog whether it
	// leaves out the bounds on open transactions.
	render := func(after, backlog bool) (string, []any) {
		n := 0
		next := func() string { n++; return dl.Placeholder(n) }
		var preds []string
		if after {
			pred, order := dl.Keyset(d.Cursor.Kind, qkeys, keyMarkers(codecs, next), driver.After)
			preds, q.keyOrder = append(preds, pred), order
		}
		b := dl.UpperBound(d.Cursor.Kind, flavor, qkeys[0], d.SettleLagOrDefault(), next)
		q.holdsBack = b.OpenTrx
		if backlog && b.OpenTrx {
			b = driver.Bound{} // this bound is the open transactions (and takes no argument)
		}
		var args []any
		if b.Arg != nil {
			args = []any{b.Arg}
		}
		trx := ""
		if q.readBound && !backlog {
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
			q.StampCheck, q.stampArg, q.stampFix = dl.Limit(keys, " FROM "+table+" WHERE "+pred, "1"), arg, fix
		}
	}
	return q
}
