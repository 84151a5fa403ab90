package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// UniqueKey reads the table's primary key (pragma_table_info: an INTEGER PRIMARY KEY is the
// rowid and has no index of its own) and unique indexes (pragma_index_list, with their columns
// from pragma_index_info: an expression's part, or the rowid, has no name), which
// setup.JudgeKey judges, matching column names whatever their case. A view has no keys in the
// catalog: KeyUnknown.
func (d Driver) UniqueKey(ctx context.Context, db *sql.DB, t sourcedef.Table, cols []string) (setup.Uniqueness, error) {
	schema := t.Schema
	if schema == "" {
		schema = "main"
	}
	fail := func(what string, err error) (setup.Uniqueness, error) {
		return setup.Uniqueness{}, fmt.Errorf("reading %s: %w", what, err)
	}
	var kind string
	err := db.QueryRowContext(ctx, "SELECT type FROM "+d.Quote(schema)+".sqlite_master WHERE type IN ('table', 'view') AND name = ? COLLATE NOCASE", t.Name).Scan(&kind)
	if errors.Is(err, sql.ErrNoRows) {
		return setup.Uniqueness{}, errors.New("sqlite_master has no table " + t.String())
	}
	if err != nil {
		return fail("sqlite_master", err)
	}
	if kind == "view" {
		return setup.Uniqueness{Verdict: setup.KeyUnknown, Why: t.String() + " is a view, which has no keys in the catalog"}, nil
	}

	var indexes []setup.UniqueIndex
	pk := setup.UniqueIndex{Name: "PRIMARY KEY", Primary: true}
	rows, err := db.QueryContext(ctx, "SELECT name FROM pragma_table_info(?, ?) WHERE pk > 0 ORDER BY pk", t.Name, schema)
	if err != nil {
		return fail("pragma_table_info", err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return fail("pragma_table_info", err)
		}
		pk.Columns = append(pk.Columns, c)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fail("pragma_table_info", err)
	}
	if len(pk.Columns) > 0 {
		indexes = append(indexes, pk)
	}

	rows, err = db.QueryContext(ctx, `SELECT name, partial FROM pragma_index_list(?, ?) WHERE "unique" = 1 ORDER BY seq`, t.Name, schema)
	if err != nil {
		return fail("pragma_index_list", err)
	}
	var listed []setup.UniqueIndex
	for rows.Next() {
		var ix setup.UniqueIndex
		if err := rows.Scan(&ix.Name, &ix.Partial); err != nil {
			rows.Close()
			return fail("pragma_index_list", err)
		}
		listed = append(listed, ix)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fail("pragma_index_list", err)
	}
	for _, ix := range listed {
		rows, err := db.QueryContext(ctx, "SELECT name FROM pragma_index_info(?, ?) ORDER BY seqno", ix.Name, schema)
		if err != nil {
			return fail("pragma_index_info", err)
		}
		for rows.Next() {
			var c sql.NullString
			if err := rows.Scan(&c); err != nil {
				rows.Close()
				return fail("pragma_index_info", err)
			}
			if c.Valid {
				ix.Columns = append(ix.Columns, c.String)
			} else {
				ix.Expression = true
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return fail("pragma_index_info", err)
		}
		indexes = append(indexes, ix)
	}
	return setup.JudgeKey(indexes, cols, d.Caseless()), nil
}

// CreateUniqueIndex names the schema on the index, as SQLite wants it (the table then takes
// none): CREATE UNIQUE INDEX "s"."ux" ON "t" (...).
func (d Driver) CreateUniqueIndex(t sourcedef.Table, index string, cols []string) string {
	name := d.Quote(index)
	if t.Schema != "" {
		name = d.Quote(t.Schema) + "." + name
	}
	return "CREATE UNIQUE INDEX " + name + " ON " + d.Quote(t.Name) + " (" + strings.Join(driver.QuoteAll(d, cols), ", ") + ")"
}
