// Package mysql is the source driver for MySQL, MariaDB and Azure Database for MySQL, through
// go-sql-driver/mysql: its SQL and types, its sign-in with Entra ID (entra.go), and the bound
// that keeps a timestamp+pk read behind the server's open write transactions (readbound.go).
package mysql

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/entra"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Name is the driver's name in a poller's settings ({P}_DB_DRIVER).
const Name = "mysql"

// Driver is MySQL, MariaDB and Azure Database for MySQL through go-sql-driver/mysql.
//
// The connection reads DATE, DATETIME and TIMESTAMP as text, which the driver reads as times in
// UTC, or as the text when no calendar has them (values.go), runs its session in UTC (so that
// TIMESTAMP columns and UTC_TIMESTAMP() agree), and interpolates parameters on
// the client: every read is one round trip of the text protocol, not a prepare, an execute and a
// close. Values are still never spliced into SQL by this package: the driver escapes them.
type Driver struct{ driver.Defaults }

// Open: a DSN with fedauth signs in with Entra ID tokens (entra.go).
func (Driver) Open(dsn string) (*sql.DB, error) { return openMySQL(dsn, entra.Deps{}) }

// Name is "mysql".
func (Driver) Name() string { return Name }

// mysqlConfig parses a go-sql-driver DSN (user:password@tcp(host:3306)/database?param=value) and
// sets what this package relies on.
func mysqlConfig(dsn string) (*gomysql.Config, error) {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("the mysql connection string is not valid, want user:password@tcp(host:3306)/database (%s)", redact.DSN(dsn))
	}
	cfg.ParseTime = false // dates come as text, which Value reads (values.go)
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	return cfg, nil
}

// Location is the DSN's address (unix: and the socket's path for a socket) and database.
func (Driver) Location(dsn string) (driver.Location, error) {
	cfg, err := mysqlConfig(dsn)
	if err != nil {
		return driver.Location{}, err
	}
	addr := strings.ToLower(cfg.Addr)
	if cfg.Net == "unix" {
		addr = "unix:" + cfg.Addr
	}
	return driver.Location{Server: addr, Database: cfg.DBName}, nil
}

// Caseless: MySQL matches column names whatever their case.
func (Driver) Caseless() bool { return true }

// Quote quotes an identifier in backquotes.
func (Driver) Quote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// Placeholder is "?": the markers are positional.
func (Driver) Placeholder(int) string { return "?" }

// Supports the cursor kinds every database has.
func (Driver) Supports(kind string) bool { return driver.Defaults{}.Supports(kind) }

// LateCommits: a timestamp+pk cursor's reads stay behind the open transactions (ReadBound),
// given the PROCESS privilege; an integer cursor's do not.
func (Driver) LateCommits(kind string) (bool, string) {
	return kind == state.KindInteger, "timestamp+pk, whose reads stay behind the transactions still open (the role needs the PROCESS privilege)"
}

// Scalars: go-sql-driver may return integers and text as bytes.
func (Driver) Scalars() bool { return false }

// Keyset: MariaDB reads a row comparison, (a, b) > (?, ?), with a scan of the whole index from
// its start, so the expanded form with a leading range gets a range read instead (as on SQL
// Server). Its markers are positional: keysetArgs says which key value each one takes.
func (Driver) Keyset(_ string, keys, params []string, side driver.Side) (string, []int) {
	return driver.ExpandedKeyset(keys, params, side), driver.ExpandedKeysetOrder(len(keys))
}

// DeleteFirst is a single-table DELETE with ORDER BY and LIMIT, which MySQL and MariaDB allow
// (https://dev.mysql.com/doc/refman/8.4/en/delete.html), where a subquery on the table being
// deleted from is refused (error 1093).
func (Driver) DeleteFirst(table string, _, order []string, where, limit func() string) string {
	return "DELETE FROM " + table + " WHERE " + where() + " ORDER BY " + strings.Join(order, ", ") + " LIMIT " + limit()
}

// UpperBound: a timestamp cursor reads rows older than the database's UTC clock minus the settle
// lag. (TIMESTAMP columns are read in the session's UTC; DATETIME columns are taken as UTC.)
func (Driver) UpperBound(kind string, _ row.TSFlavor, col string, lag time.Duration, next func() string) driver.Bound {
	if kind != state.KindTimestampPK {
		return driver.Bound{}
	}
	return driver.Bound{Pred: col + " < UTC_TIMESTAMP(6) - INTERVAL " + next() + " MICROSECOND", Arg: lag.Microseconds()}
}

// StampCheck: a DATETIME more than FutureTolerance ahead of the UTC clock was written in local
// time east of UTC (NOW() in a non-UTC session). West of UTC such stamps look old, not wrong:
// the set-up check (check.go, zoneRule) reports a DATETIME cursor stamped by the local clock on
// a server whose zone is not UTC.
func (Driver) StampCheck(fl row.TSFlavor, table, col, param string) (string, any, string) {
	if fl != row.TSUTC {
		return "", nil, ""
	}
	return col + " > UTC_TIMESTAMP(6) + INTERVAL " + param + " SECOND", int64(source.FutureTolerance.Seconds()),
		"Stamp the column in UTC (DEFAULT UTC_TIMESTAMP(6), or a TIMESTAMP(6) column, which MySQL keeps in UTC), not NOW() in a session whose time_zone is not UTC; " +
			fmt.Sprintf("to deliver such rows now rather than when the clock reaches them: UPDATE %s SET %s = UTC_TIMESTAMP(6) WHERE %s > UTC_TIMESTAMP(6) + INTERVAL %d MINUTE",
				table, col, col, int(source.FutureTolerance.Minutes()))
}

// Classify maps go-sql-driver's DatabaseTypeName ("BIGINT", "UNSIGNED BIGINT", "DATETIME", ...).
func (Driver) Classify(base string) (row.Class, row.TSFlavor) {
	base = strings.TrimPrefix(base, "UNSIGNED ")
	switch base {
	case "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "YEAR":
		return row.ClassInt, row.TSNone
	case "CHAR", "VARCHAR", "TEXT", "TINYTEXT", "MEDIUMTEXT", "LONGTEXT", "ENUM", "SET":
		return row.ClassText, row.TSNone
	case "DECIMAL":
		return row.ClassDecimal, row.TSNone
	case "FLOAT":
		return row.ClassReal, row.TSNone
	case "DOUBLE":
		return row.ClassFloat, row.TSNone
	case "TIMESTAMP":
		return row.ClassTime, row.TSWithZone
	case "DATETIME":
		return row.ClassTime, row.TSUTC
	case "DATE", "TIME":
		return row.ClassTime, row.TSUnsupported
	case "BINARY", "VARBINARY", "BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB", "BIT", "GEOMETRY":
		return row.ClassBinary, row.TSNone
	case "JSON":
		return row.ClassJSON, row.TSNone
	}
	return row.ClassOther, row.TSNone
}

// KeyCodec: a BIGINT UNSIGNED key (AUTO_INCREMENT ids often are) can pass the largest int64,
// where its values come as uint64: the cursor holds the decimal digits either way, and gives
// back an int64 when the value fits, else a uint64 (the driver binds both exactly). Other
// columns take the generic codecs.
func (Driver) KeyCodec(c row.ColumnType) (row.KeyCodec, bool) {
	if c.Class == row.ClassTime && (c.Flavor == row.TSUTC || c.Flavor == row.TSWithZone) {
		return timeCodec, true
	}
	if c.Class != row.ClassInt || !strings.HasPrefix(strings.ToUpper(c.DBType), "UNSIGNED BIGINT") {
		return row.KeyCodec{}, false
	}
	return unsignedCodec, true
}

var unsignedCodec = row.KeyCodec{
	Encode: func(v any) (json.RawMessage, error) {
		switch n := v.(type) {
		case int64:
			if n >= 0 {
				return strconv.AppendInt(nil, n, 10), nil
			}
		case uint64:
			return strconv.AppendUint(nil, n, 10), nil
		}
		return nil, fmt.Errorf("an unsigned integer column returned %T %v", v, v)
	},
	Decode: func(raw json.RawMessage) (any, error) {
		n, err := strconv.ParseUint(string(raw), 10, 64)
		if err != nil {
			return nil, err
		}
		if n <= math.MaxInt64 {
			return int64(n), nil
		}
		return n, nil
	},
}
