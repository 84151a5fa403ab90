package source

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// mysqlDialect is MySQL, MariaDB and Azure Database for MySQL through go-sql-driver/mysql.
//
// The connection always parses DATETIME and TIMESTAMP into time.Time in UTC, runs its session
// in UTC (so that TIMESTAMP columns and UTC_TIMESTAMP() agree), and interpolates parameters on
// the client: every read is one round trip of the text protocol, not a prepare, an execute and a
// close. Values are still never spliced into SQL by this package: the driver escapes them.
type mysqlDialect struct{ common }

// open: a DSN with fedauth signs in with Entra ID tokens (mysqlentra.go).
func (mysqlDialect) open(dsn string) (*sql.DB, error) { return openMySQL(dsn, entraDeps{}) }

// mysqlConfig parses a go-sql-driver DSN (user:password@tcp(host:3306)/database?param=value) and
// sets what this package relies on.
func mysqlConfig(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("the mysql connection string is not valid, want user:password@tcp(host:3306)/database (%s)", redact.DSN(dsn))
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	return cfg, nil
}

func (mysqlDialect) location(dsn string) (Location, error) {
	cfg, err := mysqlConfig(dsn)
	if err != nil {
		return Location{}, err
	}
	addr := strings.ToLower(cfg.Addr)
	if cfg.Net == "unix" {
		addr = "unix:" + cfg.Addr
	}
	return Location{Server: addr, Database: cfg.DBName}, nil
}

func (mysqlDialect) caseless() bool            { return true }
func (mysqlDialect) quote(s string) string     { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
func (mysqlDialect) placeholder(int) string    { return "?" }
func (mysqlDialect) supports(kind string) bool { return common{}.supports(kind) }
func (mysqlDialect) scalars() bool             { return false }

// keyset: MariaDB reads a row comparison, (a, b) > (?, ?), with a scan of the whole index from
// its start, so the expanded form with a leading range gets a range read instead (as on SQL
// Server). Its markers are positional: keysetArgs says which key value each one takes.
func (mysqlDialect) keyset(_ string, keys, params []string) string {
	return expandedKeyset(keys, params)
}

func (mysqlDialect) keysetArgs(n int) []int { return expandedKeysetArgs(n) }

// upperBound: a timestamp cursor reads rows older than the database's UTC clock minus the settle
// lag. (TIMESTAMP columns are read in the session's UTC; DATETIME columns are taken as UTC.)
func (mysqlDialect) upperBound(kind string, _ tsFlavor, col string, lag time.Duration, next func() string) (string, any) {
	if kind != state.KindTimestampPK {
		return "", nil
	}
	return col + " < UTC_TIMESTAMP(6) - INTERVAL " + next() + " MICROSECOND", lag.Microseconds()
}

// stampCheck: a DATETIME more than FutureTolerance ahead of the UTC clock was written in local
// time east of UTC (NOW() in a non-UTC session).
func (mysqlDialect) stampCheck(fl tsFlavor, table, col, param string) (string, any, string) {
	if fl != tsUTC {
		return "", nil, ""
	}
	return col + " > UTC_TIMESTAMP(6) + INTERVAL " + param + " SECOND", int64(FutureTolerance.Seconds()),
		"Stamp the column in UTC (DEFAULT UTC_TIMESTAMP(6), or a TIMESTAMP(6) column, which MySQL keeps in UTC), not NOW() in a session whose time_zone is not UTC; " +
			fmt.Sprintf("to deliver such rows now rather than when the clock reaches them: UPDATE %s SET %s = UTC_TIMESTAMP(6) WHERE %s > UTC_TIMESTAMP(6) + INTERVAL %d MINUTE",
				table, col, col, int(FutureTolerance.Minutes()))
}

// classify maps go-sql-driver's DatabaseTypeName ("BIGINT", "UNSIGNED BIGINT", "DATETIME", ...).
func (mysqlDialect) classify(base string) (class, tsFlavor) {
	base = strings.TrimPrefix(base, "UNSIGNED ")
	switch base {
	case "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "YEAR":
		return classInt, tsNone
	case "CHAR", "VARCHAR", "TEXT", "TINYTEXT", "MEDIUMTEXT", "LONGTEXT", "ENUM", "SET":
		return classText, tsNone
	case "DECIMAL":
		return classDecimal, tsNone
	case "FLOAT", "DOUBLE":
		return classFloat, tsNone
	case "TIMESTAMP":
		return classTime, tsWithZone
	case "DATETIME":
		return classTime, tsUTC
	case "DATE", "TIME":
		return classTime, tsUnsupported
	case "BINARY", "VARBINARY", "BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB", "BIT", "GEOMETRY":
		return classBinary, tsNone
	case "JSON":
		return classJSON, tsNone
	}
	return classOther, tsNone
}

func (mysqlDialect) uuid(b []byte) (string, error) { return string(b), nil }

// keyCodec: a BIGINT UNSIGNED key (AUTO_INCREMENT ids often are) can pass the largest int64,
// where its values come as uint64: the cursor holds the decimal digits either way, and gives
// back an int64 when the value fits, else a uint64 (the driver binds both exactly). Other
// columns take the generic codecs.
func (mysqlDialect) keyCodec(c *column) (keyCodec, bool) {
	if c.class != classInt || !strings.HasPrefix(strings.ToUpper(c.dbType), "UNSIGNED BIGINT") {
		return keyCodec{}, false
	}
	return unsignedCodec, true
}

var unsignedCodec = keyCodec{
	encode: func(v any) (json.RawMessage, error) {
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
	decode: func(raw json.RawMessage) (any, error) {
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
