package source

import (
	"context"
	"database/sql"
)

// Collect runs query and returns its rows, each read by scan: the one loop of the drivers'
// catalog reads (columns, indexes). scan reads the current row (rows.Scan).
func Collect[T any](ctx context.Context, db *sql.DB, scan func(*sql.Rows) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// ScanString reads a row of one text column, for Collect.
func ScanString(rows *sql.Rows) (s string, err error) {
	err = rows.Scan(&s)
	return s, err
}
