package source

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // no cgo

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// sqlite is SQLite through modernc.org/sqlite. A timestamp cursor column is TEXT in the
// fixed-width UTC layout state.TimeLayout, whose text order is time order.
type sqlite struct{ Defaults }

// stampPattern is the GLOB every SQLite TEXT cursor value must match (state.TimeLayout).
const stampPattern = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]Z"

// SQLiteStampExpr is the SQLite expression that stamps a TEXT cursor column in the fixed-width
// layout: strftime's %f has milliseconds, padded to six digits ("2026-11-23T03:40:32.287000Z").
const SQLiteStampExpr = "strftime('%Y-%m-%dT%H:%M:%f000Z','now')"

// open adds a busy time-out, so that a writer does not fail reads at once.
func (sqlite) Open(dsn string) (*sql.DB, error) { return sql.Open("sqlite", sqliteDSN(dsn)) }

// Name is "sqlite".
func (sqlite) Name() string { return SQLite }

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

// location: no server; the database is the file's path.
func (sqlite) Location(dsn string) (Location, error) {
	path := strings.TrimPrefix(dsn, "file:")
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if path == "" || path == ":memory:" {
		return Location{Database: path}, nil
	}
	return Location{Database: filepath.Clean(path)}, nil
}

func (sqlite) Caseless() bool         { return true }
func (sqlite) Placeholder(int) string { return "?" }

// upperBound: 'now' has millisecond resolution; padding to six digits keeps the fixed-width text
// comparable with stored YYYY-MM-DDTHH:MM:SS.ffffffZ values. The scalar subquery is evaluated
// once per statement, not once per row.
func (sqlite) UpperBound(kind string, _ TSFlavor, col string, lag time.Duration, next func() string) Bound {
	if kind != state.KindTimestampPK {
		return Bound{}
	}
	return Bound{Pred: col + " < (SELECT strftime('%Y-%m-%dT%H:%M:%f', 'now', " + next() + ") || '000Z')", Arg: fmt.Sprintf("-%.3f seconds", lag.Seconds())}
}

// stampCheck: a TEXT value not in the fixed-width layout. A full scan.
func (sqlite) StampCheck(fl TSFlavor, table, col, param string) (string, any, string) {
	if fl != TSText {
		return "", nil, ""
	}
	return "NOT (" + col + " GLOB " + param + ")", stampPattern,
		"Stamp the column with " + SQLiteStampExpr + " (DEFAULT (" + SQLiteStampExpr + ")), never CURRENT_TIMESTAMP or datetime('now'), " +
			"and rewrite such rows to a fresh stamp, which delivers them: UPDATE " + table + " SET " + col + " = " + SQLiteStampExpr +
			" WHERE " + col + " NOT GLOB '" + stampPattern + "'"
}

// classify applies SQLite's type affinity rules to the declared type.
func (sqlite) Classify(base string) (Class, TSFlavor) {
	switch {
	case strings.Contains(base, "INT"):
		return ClassInt, TSNone
	case base == "DATETIME" || base == "TIMESTAMP":
		return ClassText, TSText
	case strings.Contains(base, "CHAR") || strings.Contains(base, "CLOB") || strings.Contains(base, "TEXT"):
		return ClassText, TSText
	case base == "BLOB" || base == "":
		return ClassBinary, TSNone
	case strings.Contains(base, "DEC") || strings.Contains(base, "NUMERIC"):
		return ClassDecimal, TSNone
	case strings.Contains(base, "REAL") || strings.Contains(base, "FLOA") || strings.Contains(base, "DOUB"):
		return ClassFloat, TSNone
	case strings.Contains(base, "BOOL"):
		return ClassBool, TSNone
	}
	return ClassOther, TSNone
}

func (sqlite) KeyCodec(c ColumnType) (KeyCodec, bool) { return textTimeCodec, c.Flavor == TSText }

// textTimeCodec carries a SQLite TEXT timestamp verbatim (its text order is its time order), and
// refuses text that is not in the fixed-width layout, whose place in that order would be wrong.
var textTimeCodec = KeyCodec{
	Encode: func(v any) (json.RawMessage, error) {
		s, ok := v.(string)
		if !ok {
			// SQLite sorts numbers and blobs apart from text: such a row is out of time order.
			return nil, fmt.Errorf("%w: a TEXT timestamp column holds %T %v, not text in the fixed-width UTC layout YYYY-MM-DDTHH:MM:SS.ffffffZ",
				ErrUnreachableRow, v, v)
		}
		if !FixedWidth(s) {
			return nil, fmt.Errorf("%w: value %q is not in the fixed-width UTC layout YYYY-MM-DDTHH:MM:SS.ffffffZ, the only text whose order is time order",
				ErrUnreachableRow, s)
		}
		return json.Marshal(s)
	},
	Decode: func(raw json.RawMessage) (any, error) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if !FixedWidth(s) {
			return nil, fmt.Errorf("%q is not a timestamp in the fixed-width layout YYYY-MM-DDTHH:MM:SS.ffffffZ (text that compares in time order)", s)
		}
		return s, nil
	},
}
