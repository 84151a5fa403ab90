package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// keysQuery lists a table's type and the columns of its unique indexes (the primary key is
// PRIMARY), from information_schema, in the schema named or the connection's database. A
// functional key part (MySQL 8.0.13+) has no COLUMN_NAME. One row with a NULL index when it has
// none; no row when the table is not there (or not visible to the user).
const keysQuery = `SELECT t.TABLE_TYPE, s.INDEX_NAME, s.COLUMN_NAME
FROM information_schema.TABLES t
LEFT JOIN information_schema.STATISTICS s
  ON s.TABLE_SCHEMA = t.TABLE_SCHEMA AND s.TABLE_NAME = t.TABLE_NAME AND s.NON_UNIQUE = 0
WHERE t.TABLE_SCHEMA = COALESCE(?, DATABASE()) AND t.TABLE_NAME = ?
ORDER BY s.INDEX_NAME, s.SEQ_IN_INDEX`

// UniqueKey reads information_schema.STATISTICS: the table's primary key and unique indexes
// (setup.JudgeKey judges them, matching column names whatever their case). A unique prefix
// index (a column's first n characters) counts: unique prefixes make the whole values unique. A
// view has no keys in the catalog: KeyUnknown.
func (d Driver) UniqueKey(ctx context.Context, db *sql.DB, t sourcedef.Table, cols []string) (setup.Uniqueness, error) {
	var schema any
	if t.Schema != "" {
		schema = t.Schema
	}
	rows, err := db.QueryContext(ctx, keysQuery, schema, t.Name)
	if err != nil {
		return setup.Uniqueness{}, fmt.Errorf("reading information_schema.STATISTICS: %w", err)
	}
	defer rows.Close()
	var kind string
	var indexes []setup.UniqueIndex
	found := false
	for rows.Next() {
		var name, col sql.NullString
		if err := rows.Scan(&kind, &name, &col); err != nil {
			return setup.Uniqueness{}, fmt.Errorf("reading information_schema.STATISTICS: %w", err)
		}
		found = true
		if !name.Valid {
			continue
		}
		if n := len(indexes); n == 0 || indexes[n-1].Name != name.String {
			indexes = append(indexes, setup.UniqueIndex{Name: name.String, Primary: name.String == "PRIMARY"})
		}
		ix := &indexes[len(indexes)-1]
		if col.Valid {
			ix.Columns = append(ix.Columns, col.String)
		} else {
			ix.Expression = true
		}
	}
	if err := rows.Err(); err != nil {
		return setup.Uniqueness{}, fmt.Errorf("reading information_schema.STATISTICS: %w", err)
	}
	if !found {
		return setup.Uniqueness{}, errors.New("information_schema.TABLES has no table " + t.String())
	}
	u := setup.JudgeKey(indexes, cols, d.Caseless())
	if u.Verdict == setup.KeyNotUnique && kind != "BASE TABLE" {
		return setup.Uniqueness{Verdict: setup.KeyUnknown, Why: t.String() + " is a view, which has no keys in the catalog"}, nil
	}
	return u, nil
}
