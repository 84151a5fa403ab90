// Package sqlite is the source driver for SQLite, through modernc.org/sqlite (pure Go): its
// SQL, its type affinities, and its TEXT timestamps, which compare in time order only in one
// fixed-width layout.
package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // no cgo

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Driver is SQLite through modernc.org/sqlite (no cgo). A timestamp cursor column is TEXT in the
// fixed-width UTC layout state.TimeLayout, whose text order is time order.
type Driver struct{ driver.Defaults }

// Name is the driver's name in a poller's settings ({P}_DB_DRIVER).
const Name = "sqlite"

// stampPattern is the GLOB every SQLite TEXT cursor value must match (state.TimeLayout).
const stampPattern = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]Z"

// StampExpr is the SQLite expression that stamps a TEXT cursor column in the fixed-width
// layout: strftime's %f has milliseconds, padded to six digits ("2026-11-23T03:40:32.287000Z").
const StampExpr = "strftime('%Y-%m-%dT%H:%M:%f000Z','now')"

// Open adds a busy time-out, so that a writer does not fail reads at once. It refuses modernc's
// _texttotime, which would turn the text of the columns Select reads as +"col" into times too.
func (Driver) Open(dsn string) (*sql.DB, error) {
	if strings.Contains(strings.ToLower(dsn), "_texttotime") {
		return nil, fmt.Errorf("the sqlite connection string sets _texttotime, which would turn text into times, losing its form (docs/types.md): remove it")
	}
	return sql.Open("sqlite", sqliteDSN(dsn))
}

// Name is "sqlite".
func (Driver) Name() string { return Name }

func sqliteDSN(dsn string) string {
	if !strings.Contains(dsn, "busy_timeout") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + "_pragma=busy_timeout(10000)"
	}
	return dsn
}

// Location: no server; the database is the file's path.
func (Driver) Location(dsn string) (driver.Location, error) {
	path := strings.TrimPrefix(dsn, "file:")
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if path == "" || path == ":memory:" {
		return driver.Location{Database: path}, nil
	}
	return driver.Location{Database: filepath.Clean(path)}, nil
}

// Caseless: SQLite matches column names whatever their case.
func (Driver) Caseless() bool { return true }

// Placeholder is "?".
func (Driver) Placeholder(int) string { return "?" }

// UpperBound: 'now' has millisecond resolution; padding to six digits keeps the fixed-width text
// comparable with stored YYYY-MM-DDTHH:MM:SS.ffffffZ values. The scalar subquery is evaluated
// once per statement, not once per row.
func (Driver) UpperBound(kind string, _ row.TSFlavor, col string, lag time.Duration, next func() string) driver.Bound {
	if kind != state.KindTimestampPK {
		return driver.Bound{}
	}
	return driver.Bound{Pred: col + " < (SELECT strftime('%Y-%m-%dT%H:%M:%f', 'now', " + next() + ") || '000Z')", Arg: fmt.Sprintf("-%.3f seconds", lag.Seconds())}
}

// StampCheck: a TEXT value not in the fixed-width layout. A full scan.
func (Driver) StampCheck(fl row.TSFlavor, table, col, param string) (string, any, string) {
	if fl != row.TSText {
		return "", nil, ""
	}
	return "NOT (" + col + " GLOB " + param + ")", stampPattern,
		"Stamp the column with " + StampExpr + " (DEFAULT (" + StampExpr + ")), never CURRENT_TIMESTAMP or datetime('now'), " +
			"and rewrite such rows to a fresh stamp, which delivers them: UPDATE " + table + " SET " + col + " = " + StampExpr +
			" WHERE " + col + " NOT GLOB '" + stampPattern + "'"
}

// Classify applies SQLite's type affinity rules to the declared type.
func (Driver) Classify(base string) (row.Class, row.TSFlavor) {
	switch {
	case strings.Contains(base, "INT"):
		return row.ClassInt, row.TSNone
	case base == "DATETIME" || base == "TIMESTAMP":
		return row.ClassText, row.TSText
	case strings.Contains(base, "CHAR") || strings.Contains(base, "CLOB") || strings.Contains(base, "TEXT"):
		return row.ClassText, row.TSText
	case base == "BLOB" || base == "":
		return row.ClassBinary, row.TSNone
	case strings.Contains(base, "DEC") || strings.Contains(base, "NUMERIC"):
		return row.ClassDecimal, row.TSNone
	case strings.Contains(base, "REAL") || strings.Contains(base, "FLOA") || strings.Contains(base, "DOUB"):
		return row.ClassFloat, row.TSNone
	case strings.Contains(base, "BOOL"):
		return row.ClassBool, row.TSNone
	}
	return row.ClassOther, row.TSNone
}

// LateCommits: none. SQLite runs one write transaction at a time, so an id or stamp taken in
// one comes after those of every transaction that committed before it.
func (Driver) LateCommits(string) (bool, string) { return false, "" }

// KeyCodec carries a TEXT timestamp cursor verbatim (textTimeCodec).
func (Driver) KeyCodec(c row.ColumnType) (row.KeyCodec, bool) {
	return textTimeCodec, c.Flavor == row.TSText
}

// textTimeCodec carries a SQLite TEXT timestamp verbatim (its text order is its time order), and
// refuses text that is not in the fixed-width layout, whose place in that order would be wrong.
var textTimeCodec = row.KeyCodec{
	Encode: func(v any) (json.RawMessage, error) {
		s, ok := v.(string)
		if !ok {
			// SQLite sorts numbers and blobs apart from text: such a row is out of time order.
			return nil, fmt.Errorf("%w: a TEXT timestamp column holds %T %v, not text in the fixed-width UTC layout YYYY-MM-DDTHH:MM:SS.ffffffZ",
				row.ErrUnreachableRow, v, v)
		}
		if !row.FixedWidth(s) {
			return nil, fmt.Errorf("%w: value %q is not in the fixed-width UTC layout YYYY-MM-DDTHH:MM:SS.ffffffZ, the only text whose order is time order",
				row.ErrUnreachableRow, s)
		}
		return json.Marshal(s)
	},
	Decode: func(raw json.RawMessage) (any, error) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if !row.FixedWidth(s) {
			return nil, fmt.Errorf("%q is not a timestamp in the fixed-width layout YYYY-MM-DDTHH:MM:SS.ffffffZ (text that compares in time order)", s)
		}
		return s, nil
	},
}

// Select reads a column declared DATE, DATETIME or TIMESTAMP as +"col": modernc's driver turns
// such a column's text into a time.Time (losing its form: "2026-04-07 01:23:45" would come back
// as 2026-04-07T01:23:45Z, and a TEXT timestamp cursor could not read it at all), but not an
// expression's; SQLite's unary + returns its operand's value as it is.
func (Driver) Select(c row.ColumnType, quoted string) string {
	switch strings.ToUpper(strings.TrimSpace(c.DBType)) {
	case "DATE", "DATETIME", "TIMESTAMP":
		return "+" + quoted
	}
	return ""
}
