package sqlserver

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
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
// (setup.JudgeKey judges them, matching column names whatever their case). A view has keys
// only when it is indexed (a unique clustered index); without one, KeyUnknown. A table the
// catalog does not show (metadata visibility: no VIEW DEFINITION) is KeyUnknown too.
func (d Driver) UniqueKey(ctx context.Context, db *sql.DB, t sourcedef.Table, cols []string) (setup.Uniqueness, error) {
	rows, err := db.QueryContext(ctx, keysQuery, driver.QuoteTable(d, t))
	if err != nil {
		return setup.Uniqueness{}, fmt.Errorf("reading sys.indexes: %w", err)
	}
	defer rows.Close()
	var kind string
	var indexes []setup.UniqueIndex
	found := false
	for rows.Next() {
		var name, col sql.NullString
		var primary, filtered sql.NullBool
		if err := rows.Scan(&kind, &name, &primary, &filtered, &col); err != nil {
			return setup.Uniqueness{}, fmt.Errorf("reading sys.indexes: %w", err)
		}
		found = true
		if !name.Valid {
			continue
		}
		if n := len(indexes); n == 0 || indexes[n-1].Name != name.String {
			indexes = append(indexes, setup.UniqueIndex{Name: name.String, Primary: primary.Bool, Partial: filtered.Bool})
		}
		if col.Valid {
			ix := &indexes[len(indexes)-1]
			ix.Columns = append(ix.Columns, col.String)
		}
	}
	if err := rows.Err(); err != nil {
		return setup.Uniqueness{}, fmt.Errorf("reading sys.indexes: %w", err)
	}
	if !found {
		return setup.Uniqueness{Verdict: setup.KeyUnknown, Why: "the catalog does not show " + t.String() + " to this user (VIEW DEFINITION on it lets sys.indexes show its keys)"}, nil
	}
	if err := checkCodePages(ctx, db, d, t, cols); err != nil {
		return setup.Uniqueness{}, err
	}
	u := setup.JudgeKey(indexes, cols, d.Caseless())
	if u.Verdict == setup.KeyNotUnique && strings.TrimSpace(kind) == "V" {
		return setup.Uniqueness{Verdict: setup.KeyUnknown, Why: t.String() + " is a view without a unique index, which has no keys in the catalog"}, nil
	}
	return u, nil
}

// codePagesQuery lists the columns of table @p1 of a non-Unicode type (char, varchar, text)
// whose collation's code page is not the code page of the database's default collation, with
// both collations and code pages.
const codePagesQuery = `SELECT c.name, c.collation_name, CAST(COLLATIONPROPERTY(c.collation_name, 'CodePage') AS int),
  d.collation, CAST(COLLATIONPROPERTY(d.collation, 'CodePage') AS int)
FROM sys.columns c
JOIN sys.types ty ON ty.user_type_id = c.system_type_id
CROSS JOIN (SELECT CAST(DATABASEPROPERTYEX(DB_NAME(), 'Collation') AS nvarchar(128)) AS collation) d
WHERE c.object_id = OBJECT_ID(@p1) AND ty.name IN ('char', 'varchar', 'text') AND c.collation_name IS NOT NULL
  AND COLLATIONPROPERTY(c.collation_name, 'CodePage') <> COLLATIONPROPERTY(d.collation, 'CodePage')`

// codePage is a column whose collation's code page differs from the database default's.
type codePage struct {
	column, collation, dbCollation string
	page, dbPage                   int64
}

// checkCodePages refuses a char or varchar key column whose collation has another code page than
// the database's default collation: a key argument is cast to varchar (KeyCodec) in the default
// collation's code page, where a character of the column's code page may have no place, and the
// keyset predicate would then compare another value than the cursor's.
func checkCodePages(ctx context.Context, db *sql.DB, d driver.Driver, t sourcedef.Table, keys []string) error {
	rows, err := db.QueryContext(ctx, codePagesQuery, driver.QuoteTable(d, t))
	if err != nil {
		return fmt.Errorf("reading the key columns' collations (sys.columns): %w", err)
	}
	defer rows.Close()
	var found []codePage
	for rows.Next() {
		var c codePage
		if err := rows.Scan(&c.column, &c.collation, &c.page, &c.dbCollation, &c.dbPage); err != nil {
			return fmt.Errorf("reading the key columns' collations (sys.columns): %w", err)
		}
		found = append(found, c)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading the key columns' collations (sys.columns): %w", err)
	}
	return codePageProblem(d, t, keys, found)
}

// codePageProblem is the error for the first key column among found (the error names the
// column; the caller, the poller and the table), nil when none is a key.
func codePageProblem(d driver.Driver, t sourcedef.Table, keys []string, found []codePage) error {
	for _, c := range found {
		if !slices.ContainsFunc(keys, func(k string) bool { return strings.EqualFold(k, c.column) }) {
			continue
		}
		return fmt.Errorf("column %q: %w: the key column's collation %s has code page %d, the database's default collation %s has %d: its values are compared with the cursor's after a conversion to the default's code page, which can change them, so a batch boundary could skip or repeat rows. Give the column the database's collation (ALTER TABLE %s ALTER COLUMN %s ... COLLATE %s), or make it nvarchar",
			c.column, source.ErrSchema, c.collation, c.page, c.dbCollation, c.dbPage, driver.QuoteTable(d, t), d.Quote(c.column), c.dbCollation)
	}
	return nil
}
