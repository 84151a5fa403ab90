package pgcdc

// The logical cursor's filters, applied by PostgreSQL as it decodes (PostgreSQL 15 or later): the
// poller's filter is its publication's row filter, and its columns the publication's column list
// when they are fewer than the table's. pollerctl cdc enable sets them (and changes them when
// they differ); the reader checks them when it opens and stops, printing both and the fix, when
// the publication publishes otherwise than the poller says.
//
// PostgreSQL restricts them. A row filter takes simple expressions of immutable built-in
// functions, and, in a publication of updates and deletes (the poller's always is), only columns
// of the replica identity; a column list must hold the replica identity's columns (all of them
// under REPLICA IDENTITY FULL). The first is checked when the publication is made; the others
// only when a row is updated or deleted: the application's own UPDATE would fail. So the plan
// makes the publication in a transaction it rolls back, runs an UPDATE and a DELETE that change
// nothing (the executor checks the replica identity as it starts, whatever the rows), and reports
// what PostgreSQL refused, with its reason and the fix, before anything is made.
//
// Filters are compared as PostgreSQL reads them: the poller's is deparsed the way PostgreSQL
// deparses a publication's (as a CHECK constraint of a temporary copy of the table, in a
// transaction rolled back), so spacing, casts and parentheses do not make a difference.
//
// An UPDATE that takes a row out of the filter arrives as a DELETE of it, and one that brings a
// row in as an INSERT: PostgreSQL's own transformation, which keeps a replica exact.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// filtersSince is the first server version whose publications take row filters and column lists.
const filtersSince = 150000

// filterTooOld is the problem with a poller's filter on a server older than filtersSince ("" for
// none).
func filterTooOld(d sourcedef.Definition, version int) string {
	if d.Filter == "" || version >= filtersSince {
		return ""
	}
	return fmt.Sprintf("the poller's filter is its publication's row filter, which needs PostgreSQL 15 or later; this server is %s: take the filter out of the poller and filter in the handler, or upgrade the server", versionText(version))
}

// versionText writes server_version_num as people read it: 150004 is 15.4.
func versionText(v int) string { return fmt.Sprintf("%d.%d", v/10000, v%10000) }

// pubTable is how a publication publishes a table: its row filter as PostgreSQL deparses it (""
// for none) and its column list (nil: every column).
type pubTable struct {
	Filter  string   `json:"filter,omitempty"`
	Columns []string `json:"columns,omitempty"`
}

// String is what a person reads of it.
func (p pubTable) String() string {
	cols, filter := "every column", "no row filter"
	if p.Columns != nil {
		cols = "columns (" + strings.Join(p.Columns, ", ") + ")"
	}
	if p.Filter != "" {
		filter = "WHERE " + p.Filter
	}
	return cols + ", " + filter
}

// covers says whether a publication's p serves the poller's want: the same row filter, and
// every column the poller reads.
func (p pubTable) covers(want pubTable) bool {
	if p.Filter != want.Filter {
		return false
	}
	return p.Columns == nil || want.Columns != nil && !slices.ContainsFunc(want.Columns, func(c string) bool { return !slices.Contains(p.Columns, c) })
}

// published reads how publication pub publishes the table of oid ({} when the server is older
// than filtersSince, or the publication is FOR ALL TABLES or by schema: no filter, every column).
func published(ctx context.Context, db *sql.DB, version int, pub string, oid int64) (pubTable, error) {
	if version < filtersSince {
		return pubTable{}, nil
	}
	var filter, cols sql.NullString
	err := db.QueryRowContext(ctx, `SELECT pg_get_expr(pr.prqual, pr.prrelid),
  (SELECT array_to_json(array_agg(a.attname::text ORDER BY a.attnum))::text FROM pg_attribute a WHERE a.attrelid = pr.prrelid AND a.attnum = ANY(pr.prattrs))
FROM pg_publication_rel pr JOIN pg_publication p ON p.oid = pr.prpubid WHERE p.pubname = $1 AND pr.prrelid = $2`, pub, oid).Scan(&filter, &cols)
	if errors.Is(err, sql.ErrNoRows) {
		return pubTable{}, nil
	}
	if err != nil {
		return pubTable{}, fmt.Errorf("reading how publication %q publishes the table: %w", pub, err)
	}
	out := pubTable{Filter: filter.String}
	if cols.Valid {
		if err := json.Unmarshal([]byte(cols.String), &out.Columns); err != nil {
			return pubTable{}, fmt.Errorf("publication %q's column list %s: %w", pub, cols.String, err)
		}
	}
	return out, nil
}

// A Published is a table as the reader of a poller's publication reads it, which
// CheckPublished checks the publication against.
type Published struct {
	Poller      string               // the poller, named in the fix
	Publication string               // the publication's name
	Definition  sourcedef.Definition // the table's part of the poller's definition (its filter)
	Table       string               // the table, quoted
	OID         int64                // the table's oid
	Columns     []string             // the columns the poller reads
	Version     int                  // the server's server_version_num
}

// CheckPublished is the reader's check, when it opens, of how the publication publishes p's
// table against the poller's filter and the columns it reads: problem says how they differ, or
// that the server cannot filter (older than PostgreSQL 15), with the fix for the poller; err is
// a failure to read either.
func CheckPublished(ctx context.Context, db *sql.DB, p Published) (problem string, err error) {
	d, version, pub, poller := p.Definition, p.Version, p.Publication, p.Poller
	if problem := filterTooOld(d, version); problem != "" {
		return problem, nil
	}
	got, err := published(ctx, db, version, pub, p.OID)
	if err != nil {
		return "", err
	}
	if got.Filter == "" && d.Filter == "" && got.Columns == nil {
		return "", nil
	}
	normalized, err := normalizeFilter(ctx, db, p.Table, d.Filter)
	if err != nil {
		return "", fmt.Errorf("%v (the role needs TEMPORARY on the database to read a filter as PostgreSQL does)", err)
	}
	want := pubTable{Filter: normalized, Columns: p.Columns}
	if !got.covers(want) {
		return fmt.Sprintf("publication %q publishes the table with %s, and the poller reads %s: it would deliver other changes than the poller says. `pollerctl cdc enable %s --yes` makes it so (pollerctl cdc enable %s shows the statement first)",
			pub, got, want, poller, poller), nil
	}
	return "", nil
}

// normalizeFilter deparses filter (a predicate on table, quoted) as PostgreSQL deparses a
// publication's row filter, in a transaction it rolls back: "" for none. Its error is
// PostgreSQL's, for a filter it cannot parse.
func normalizeFilter(ctx context.Context, db *sql.DB, table, filter string) (string, error) {
	if strings.TrimSpace(filter) == "" {
		return "", nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	const copyName = "pseudotrigger_filter_check"
	var out string
	for _, q := range []string{
		"CREATE TEMPORARY TABLE " + copyName + " (LIKE " + table + ") ON COMMIT DROP",
		"ALTER TABLE " + copyName + " ADD CONSTRAINT f CHECK (" + filter + ") NOT VALID",
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return "", fmt.Errorf("reading the filter %q as PostgreSQL does: %w", filter, err)
		}
	}
	err = tx.QueryRowContext(ctx, "SELECT pg_get_expr(conbin, conrelid) FROM pg_constraint WHERE conrelid = '"+copyName+"'::regclass AND conname = 'f'").Scan(&out)
	return out, err
}

// wantTable is how the poller's publication should publish the table: the poller's filter, and
// its columns as the column list when they are fewer than the table's (tableCols) and the
// replica identity is not FULL, which needs every column in the list.
func wantTable(d sourcedef.Definition, normalized string, tableCols []string, ident string) pubTable {
	want := pubTable{Filter: normalized}
	sel := d.Selected()
	if !d.ReadsAllColumns() && ident != "full" && ident != "f" && len(sel) < len(tableCols) {
		for _, c := range tableCols { // the table's order, as PostgreSQL lists it
			if slices.Contains(sel, c) {
				want.Columns = append(want.Columns, c)
			}
		}
	}
	return want
}

// tableSpec is the table as a publication's table list names it: with its column list and row
// filter.
func tableSpec(table string, p pubTable) string {
	s := table
	if p.Columns != nil {
		cols := make([]string, len(p.Columns))
		for i, c := range p.Columns {
			cols[i] = pgIdent(c)
		}
		s += " (" + strings.Join(cols, ", ") + ")"
	}
	if p.Filter != "" {
		s += " WHERE (" + p.Filter + ")"
	}
	return s
}

// alterSQL changes how publication pub publishes the table to want: SET TABLE when it publishes
// that table alone, else the table dropped and added again (in one transaction).
func alterSQL(pub, table string, tables int, want pubTable) string {
	if tables <= 1 {
		return "ALTER PUBLICATION " + pgIdent(pub) + " SET TABLE " + tableSpec(table, want)
	}
	return "ALTER PUBLICATION " + pgIdent(pub) + " DROP TABLE " + table + "; ALTER PUBLICATION " + pgIdent(pub) + " ADD TABLE " + tableSpec(table, want)
}

// probe makes the publication as wanted in a transaction it rolls back, and runs a DELETE of the
// table that deletes nothing: PostgreSQL's refusal ("" for none), which the application's own
// first update or delete would otherwise meet. (The executor checks, as it starts, that the
// publication's row filter and column list fit the replica identity, for updates and deletes
// alike; a DELETE's statement triggers fire, in the transaction rolled back.) create is the
// statement that makes or changes the publication.
func probe(ctx context.Context, db *sql.DB, create, table string) (string, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	refused := func(err error, codes ...string) (string, bool) {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || len(codes) > 0 && !slices.Contains(codes, pe.Code) {
			return "", false
		}
		why := pe.Message
		if pe.Detail != "" {
			why += ": " + pe.Detail
		}
		return strings.TrimSuffix(why, "."), true
	}
	if _, err := tx.ExecContext(ctx, create); err != nil {
		if why, ok := refused(err); ok {
			return why, nil
		}
		return "", err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+table+" WHERE false"); err != nil {
		if why, ok := refused(err, "42P10"); ok { // invalid_column_reference: CheckCmdReplicaIdentity
			return why, nil
		}
		return "", fmt.Errorf("trying the publication: %w", err)
	}
	return "", nil
}
