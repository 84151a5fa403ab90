package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// The connection reads DATE, DATETIME and TIMESTAMP values as MySQL's text, not as time.Time
// (go-sql-driver's parseTime): it would read a zero date (0000-00-00, which a permissive
// sql_mode allows) as 0001-01-01, a real date, and a date with a zero part (2020-02-00) as
// another, valid one (2020-01-31). Value reads them instead.

// Reads: DATE, DATETIME, TIMESTAMP and TIME, which come as text.
func (Driver) Reads(c row.ColumnType) bool {
	switch row.BaseType(c.DBType) {
	case "DATE", "DATETIME", "TIMESTAMP", "TIME":
		return true
	}
	return false
}

// Value reads a DATE, DATETIME or TIMESTAMP as a time in UTC (the session's zone), or, when no
// calendar has it (a zero date, a zero month or day, a day past its month's end), as MySQL's own
// text ("0000-00-00 00:00:00"); a TIME (-838:59:59 to 838:59:59, a duration as much as a time of
// day) as its text.
func (Driver) Value(c row.ColumnType, v any) any {
	b, ok := v.([]byte)
	if !ok {
		return v
	}
	if row.BaseType(c.DBType) == "TIME" {
		return string(b)
	}
	if t, ok := parseDateTime(b); ok {
		return t
	}
	return string(b)
}

// parseDateTime reads MySQL's text of a DATE, DATETIME or TIMESTAMP (YYYY-MM-DD, then
// optionally HH:MM:SS and up to six fractional digits) as a time in UTC; false when it is not
// a date of the calendar.
func parseDateTime(b []byte) (time.Time, bool) {
	n := len(b)
	if n != 10 && n != 19 && (n < 21 || n > 26) {
		return time.Time{}, false
	}
	num := func(i, w int) int {
		v := 0
		for _, c := range b[i : i+w] {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	y, mo, d := num(0, 4), num(5, 2), num(8, 2)
	if b[4] != '-' || b[7] != '-' || y < 0 || mo < 1 || mo > 12 || d < 1 {
		return time.Time{}, false
	}
	var h, mi, s, ns int
	if n > 10 {
		h, mi, s = num(11, 2), num(14, 2), num(17, 2)
		if b[10] != ' ' || b[13] != ':' || b[16] != ':' || h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 59 {
			return time.Time{}, false
		}
		if n > 19 {
			if b[19] != '.' {
				return time.Time{}, false
			}
			f := num(20, n-20)
			if f < 0 {
				return time.Time{}, false
			}
			for i := n - 20; i < 9; i++ {
				f *= 10
			}
			ns = f
		}
	}
	t := time.Date(y, time.Month(mo), d, h, mi, s, ns, time.UTC)
	if t.Day() != d { // past the month's end: time.Date rolled it over
		return time.Time{}, false
	}
	return t, true
}

// sqlTime scans a time the connection returns as text (a DATETIME(6) expression, such as
// UTC_TIMESTAMP(6)) into a time.Time.
type sqlTime struct{ t *time.Time }

func (s sqlTime) Scan(v any) error {
	switch x := v.(type) {
	case time.Time:
		*s.t = x
		return nil
	case []byte:
		if t, ok := parseDateTime(x); ok {
			*s.t = t
			return nil
		}
	case string:
		if t, ok := parseDateTime([]byte(x)); ok {
			*s.t = t
			return nil
		}
	}
	return fmt.Errorf("not a date and time: %v", v)
}

// ColumnTypes: on MariaDB, whose JSON is an alias of LONGTEXT with a CHECK (json_valid(`col`))
// that go-sql-driver reports as TEXT, a text column with that check is JSON, as MySQL 8's JSON
// type is: a row carries its value, not a string holding it. MySQL's own JSON type is reported as
// JSON already.
func (Driver) ColumnTypes(ctx context.Context, db *sql.DB, table sourcedef.Table, cols, types []string) ([]string, error) {
	text := false
	for _, t := range types {
		text = text || strings.HasSuffix(row.BaseType(t), "TEXT")
	}
	if !text {
		return types, nil
	}
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, err
	}
	if !strings.Contains(strings.ToLower(version), "mariadb") {
		return types, nil
	}
	schema := "DATABASE()"
	args := []any{table.Name}
	if table.Schema != "" {
		schema = "?"
		args = append([]any{table.Schema}, args...)
	}
	rows, err := db.QueryContext(ctx, "SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = "+schema+" AND TABLE_NAME = ?", args...)
	if err != nil {
		return nil, fmt.Errorf("reading the table's CHECK constraints (information_schema.CHECK_CONSTRAINTS), which say which columns are JSON: %w", err)
	}
	defer rows.Close()
	checks := map[string]bool{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		checks[strings.ToLower(c)] = true // column names match whatever their case
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := slices.Clone(types)
	for i, t := range types {
		if strings.HasSuffix(row.BaseType(t), "TEXT") && checks[strings.ToLower("json_valid("+Driver{}.Quote(cols[i])+")")] {
			out[i] = "JSON"
		}
	}
	return out, nil
}

// timeCodec carries a DATETIME or TIMESTAMP key as the generic TimeCodec does, and a date no
// calendar has (a zero date, which a permissive sql_mode allows and which sorts first) as MySQL's
// text, which goes back as a string that MySQL compares with the column as a date: a row holding
// one is delivered in its place rather than stopping the poller.
var timeCodec = row.KeyCodec{
	Encode: func(v any) (json.RawMessage, error) {
		if s, ok := v.(string); ok && mysqlDateText.MatchString(s) {
			return json.Marshal(s)
		}
		return row.TimeCodec.Encode(v)
	},
	Decode: func(raw json.RawMessage) (any, error) {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil && mysqlDateText.MatchString(s) {
			return s, nil
		}
		return row.TimeCodec.Decode(raw)
	},
}

// mysqlDateText is MySQL's text of a DATE, DATETIME or TIMESTAMP.
var mysqlDateText = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2}(\.\d{1,6})?)?$`)

// IsNull is col <=> NULL: MySQL's col IS NULL also finds a NOT NULL DATE or DATETIME column's zero
// dates (for ODBC), which are values, read and delivered as such.
func (Driver) IsNull(quoted string) string { return quoted + " <=> NULL" }
