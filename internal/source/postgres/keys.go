package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// keysQuery lists a relation's kind and its valid unique indexes (primary keys and unique
// constraints are ones too): each index's name, whether it is the primary key, partial (indpred)
// or on an expression (indexprs), and its key columns in order (the first indnkeyatts of indkey:
// INCLUDE columns make nothing unique; 0 is an expression's part). One row with a NULL index
// when it has none; no row when $1 names no relation.
const keysQuery = `SELECT c.relkind::text, ix.name, ix.is_primary, ix.partial, ix.expr, ix.cols
FROM pg_class c
LEFT JOIN LATERAL (
  SELECT i.indexrelid::regclass::text AS name, i.indisprimary AS is_primary, i.indpred IS NOT NULL AS partial,
         i.indexprs IS NOT NULL AS expr,
         COALESCE((SELECT json_agg(a.attname::text ORDER BY k.n)
                   FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, n)
                   JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
                   WHERE k.n <= i.indnkeyatts), '[]')::text AS cols
  FROM pg_index i
  WHERE i.indrelid = c.oid AND i.indisunique AND i.indisvalid
) ix ON true
WHERE c.oid = to_regclass($1)`

// UniqueKey reads pg_index: the table's primary key and unique indexes (setup.JudgeKey judges
// them). A view or a foreign table has none that the catalog knows of: KeyUnknown. Column names
// match exactly (PostgreSQL's are case-sensitive once quoted).
func (d Driver) UniqueKey(ctx context.Context, db *sql.DB, t sourcedef.Table, cols []string) (setup.Uniqueness, error) {
	rows, err := db.QueryContext(ctx, keysQuery, driver.QuoteTable(d, t))
	if err != nil {
		return setup.Uniqueness{}, fmt.Errorf("reading pg_index: %w", err)
	}
	defer rows.Close()
	var kind string
	var indexes []setup.UniqueIndex
	found := false
	for rows.Next() {
		var name, colsJSON sql.NullString
		var primary, partial, expr sql.NullBool
		if err := rows.Scan(&kind, &name, &primary, &partial, &expr, &colsJSON); err != nil {
			return setup.Uniqueness{}, fmt.Errorf("reading pg_index: %w", err)
		}
		found = true
		if !name.Valid {
			continue
		}
		ix := setup.UniqueIndex{Name: name.String, Primary: primary.Bool, Partial: partial.Bool, Expression: expr.Bool}
		if err := json.Unmarshal([]byte(colsJSON.String), &ix.Columns); err != nil {
			return setup.Uniqueness{}, fmt.Errorf("reading pg_index: index %s: %w", name.String, err)
		}
		indexes = append(indexes, ix)
	}
	if err := rows.Err(); err != nil {
		return setup.Uniqueness{}, fmt.Errorf("reading pg_index: %w", err)
	}
	if !found {
		return setup.Uniqueness{}, errors.New("pg_class has no relation " + driver.QuoteTable(d, t))
	}
	u := setup.JudgeKey(indexes, cols, d.Caseless())
	if u.Verdict == setup.KeyNotUnique {
		switch kind {
		case "v":
			return setup.Uniqueness{Verdict: setup.KeyUnknown, Why: t.String() + " is a view, which has no keys in the catalog"}, nil
		case "f":
			return setup.Uniqueness{Verdict: setup.KeyUnknown, Why: t.String() + " is a foreign table, whose keys are on its server"}, nil
		}
	}
	return u, nil
}
