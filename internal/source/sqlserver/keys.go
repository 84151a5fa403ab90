package sqlserver

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
)

// keysQuery lists an object's type (sys.objects: U a table, V a view) and the key columns of
// its unique indexes (sys.indexes: primary keys and unique constraints are ones too; disabled
// and hypothetical ones enforce nothing; a filtered one, has_filter, is unique among some rows
// only), in key order (sys.index_columns: included columns make nothing unique). One row with a
// NULL index when it has none; no row when @p1 names no object the user can see.
const keysQuery = `SELECT RTRIM(o.type), i.name, i.is_primary_key, i.has_filter, c.name
FROM sys.objects o
LEFT JOIN sys.indexes i
  ON i.object_id = o.object_id AND i.is_unique = 1 AND i.is_disabled = 0 AND i.is_hypothetical = 0
LEFT JOIN sys.index_columns ic
  ON ic.object_id = i.object_id AND ic.index_id = i.index_id AND ic.is_included_column = 0 AND ic.key_ordinal > 0
LEFT JOIN sys.columns c
  ON c.object_id = ic.object_id AND c.column_id = ic.column_id
WHERE o.object_id = OBJECT_ID(@p1)
ORDER BY i.index_id, ic.key_ordinal`

// UniqueKey reads sys.indexes: the table's primary key, unique constraints and unique indexes
// (source.JudgeKey judges them, matching column names whatever their case). A view has keys
// only when it is indexed (a unique clustered index); without one, KeyUnknown. A table the
// catalog does not show (metadata visibility: no VIEW DEFINITION) is KeyUnknown too.
func (d Driver) UniqueKey(ctx context.Context, db *sql.DB, t source.Table, cols []string) (source.Uniqueness, error) {
	rows, err := db.QueryContext(ctx, keysQuery, source.QuoteTable(d, t))
	if err != nil {
		return source.Uniqueness{}, fmt.Errorf("reading sys.indexes: %w", err)
	}
	defer rows.Close()
	var kind string
	var indexes []source.UniqueIndex
	found := false
	for rows.Next() {
		var name, col sql.NullString
		var primary, filtered sql.NullBool
		if err := rows.Scan(&kind, &name, &primary, &filtered, &col); err != nil {
			return source.Uniqueness{}, fmt.Errorf("reading sys.indexes: %w", err)
		}
		found = true
		if !name.Valid {
			continue
		}
		if n := len(indexes); n == 0 || indexes[n-1].Name != name.String {
			indexes = append(indexes, source.UniqueIndex{Name: name.String, Primary: primary.Bool, Partial: filtered.Bool})
		}
		if col.Valid {
			ix := &indexes[len(indexes)-1]
			ix.Columns = append(ix.Columns, col.String)
		}
	}
	if err := rows.Err(); err != nil {
		return source.Uniqueness{}, fmt.Errorf("reading sys.indexes: %w", err)
	}
	if !found {
		return source.Uniqueness{Verdict: source.KeyUnknown, Why: "the catalog does not show " + t.String() + " to this user (VIEW DEFINITION on it lets sys.indexes show its keys)"}, nil
	}
	u := source.JudgeKey(indexes, cols, d.Caseless())
	if u.Verdict == source.KeyNotUnique && strings.TrimSpace(kind) == "V" {
		return source.Uniqueness{Verdict: source.KeyUnknown, Why: t.String() + " is a view without a unique index, which has no keys in the catalog"}, nil
	}
	return u, nil
}

var _ source.KeyChecker = Driver{}
