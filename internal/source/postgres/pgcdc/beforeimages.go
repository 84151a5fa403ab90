package pgcdc

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// BeforeImages is pollerctl check's finding (setup.CheckBefore) on the before images of a
// logical poller of d, whose table is table (quoted) of oid: under REPLICA IDENTITY FULL an
// update or a delete carries the row before it (and an update the columns it changed); under any
// other identity the check offers FULL with its cost: each update and delete writes the old row
// to the WAL too, about the table's average row (its size over its rows, as last counted).
//
// A publication's column list must hold every column under FULL (or the table's updates fail):
// when the poller's publication has one, the offer first publishes every column.
func BeforeImages(ctx context.Context, db *sql.DB, d sourcedef.Definition, table string, oid int64) (setup.Finding, error) {
	var ident string
	var avg sql.NullFloat64
	var version, tables int
	err := db.QueryRowContext(ctx, `SELECT c.relreplident::text, CASE WHEN c.reltuples > 0 THEN pg_relation_size(c.oid) / c.reltuples END,
  current_setting('server_version_num')::int, (SELECT count(*) FROM pg_publication_tables pt WHERE pt.pubname = $2)::int
FROM pg_class c WHERE c.oid = $1`, oid, d.Publication).Scan(&ident, &avg, &version, &tables)
	if err != nil {
		return setup.Finding{}, err
	}
	f := setup.Finding{Check: setup.CheckBefore, Verdict: setup.VerdictOK,
		Detail: "REPLICA IDENTITY FULL: updates and deletes carry the row before them (before), updates the columns they changed (changed)"}
	if ident == "f" {
		return f, nil
	}
	pub, err := published(ctx, db, version, d.Publication, oid)
	if err != nil {
		return setup.Finding{}, err
	}
	cost := "about one row of the table more per update and delete"
	if avg.Valid {
		cost = fmt.Sprintf("about %s more per update and delete (the table's average row, as PostgreSQL last counted it)", bytesText(int64(avg.Float64)))
	}
	f.Verdict, f.Fix = setup.VerdictOffer, []string{"ALTER TABLE " + table + " REPLICA IDENTITY FULL"}
	if pub.Columns != nil {
		f.Fix = append([]string{alterSQL(d.Publication, table, tables, pubTable{Filter: pub.Filter})}, f.Fix...)
		cost += "; the publication then publishes every column, as PostgreSQL requires under FULL"
	}
	f.Detail = "updates and deletes carry no before image and updates no changed columns, since the table's replica identity sends the old key only; REPLICA IDENTITY FULL sends the old row, at a cost in WAL (and in what the slot keeps): " + cost
	return f, nil
}
