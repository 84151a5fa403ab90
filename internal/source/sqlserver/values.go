package sqlserver

import (
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
)

// Reads: time, which go-mssqldb gives as a time.Time on 0001-01-01.
func (Driver) Reads(c row.ColumnType) bool { return strings.EqualFold(c.DBType, "TIME") }

// Value gives a time as SQL Server writes it, HH:MM:SS with its fractional seconds (up to seven
// digits, trailing zeros dropped): a time of day, not an instant of year 1.
func (Driver) Value(_ row.ColumnType, v any) any {
	if t, ok := v.(time.Time); ok {
		return t.Format("15:04:05.9999999")
	}
	return v
}

// Refuse: sql_variant, whose values carry their own types (a decimal comes as its text, a
// binary as bytes: JSON cannot say which).
func (Driver) Refuse(c row.ColumnType) (string, error) {
	if strings.EqualFold(c.DBType, "SQL_VARIANT") {
		return "an sql_variant's values carry types of their own, which JSON cannot say (a decimal and a string holding its digits would arrive alike); " +
			"read it through a view that CASTs it to the type it holds (CAST(col AS nvarchar(4000)), say), or leave it out of the poller's columns", nil
	}
	return "", nil
}
