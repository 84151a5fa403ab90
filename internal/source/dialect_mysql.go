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

	"github.com/pseudotrigger/pseudotrigger/internal/source/entra"
)

// mysqlDialect is MySQL, MariaDB and Azure Database for MySQL through go-sql-driver/mysql.
//
// The connection always parses DATETIME and TIMESTAMP into time.Time in UTC, runs its session
// in UTC (so that TIMESTAMP columns and UTC_TIMESTAMP() agree), and interpolates parameters on
// the client: every read is one round trip of the text protocol, not a prepare, an execute and a
// close. Values are still never spliced into SQL by this package: the driver escapes them.
type mysqlDialect struct{ Defaults }

// open: a DSN with fedauth signs in with Entra ID tokens (mysqlentra.go).
func (mysqlDialect) Open(dsn string) (*sql.DB, error) { return openMySQL(dsn, entra.Deps{}) }

// Name is "mysql".
func (mysqlDialect) Name() string { return MySQL }

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

func (mysqlDialect) Location(dsn string) (Location, error) {
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

func (mysqlDialect) Caseless() bool            { return true }
func (mysqlDialect) Quote(s string) string     { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
func (mysqlDialect) Placeholder(int) string    { return "?" }
func (mysqlDialect) Supports(kind string) bool { return Defaults{}.Supports(kind) }
func (mysqlDialect) Scalars() bool             { return false }

// keyset: MariaDB reads a row comparison, (a, b) > (?, ?), with a scan of the whole index from
// its start, so the expanded form with a leading range gets a range read instead (as on SQL
// Server). Its markers are positional: keysetArgs says which key value each one takes.
func (mysqlDialect) Keyset(_ string, keys, params []string) (string, []int) {
	return ExpandedKeyset(keys, params), ExpandedKeysetOrder(len(keys))
}

// upperBound: a timestamp cursor reads rows older than the database's UTC clock minus the settle
// lag. (TIMESTAMP columns are read in the session's UTC; DATETIME columns are taken as UTC.)
func (mysqlDialect) UpperBound(kind string, _ TSFlavor, col string, lag time.Duration, next func() string) Bound {
	if kind != state.KindTimestampPK {
		return Bound{}
	}
	return Bound{Pred: col + " < UTC_TIMESTAMP(6) - INTERVAL " + next() + " MICROSECOND", Arg: lag.Microseconds()}
}

// stampCheck: a DATETIME more than FutureTolerance ahead of the UTC clock was written in local
// time east of UTC (NOW() in a non-UTC session).
func (mysqlDialect) StampCheck(fl TSFlavor, table, col, param string) (string, any, string) {
	if fl != TSUTC {
		return "", nil, ""
	}
	return col + " > UTC_TIMESTAMP(6) + INTERVAL " + param + " SECOND", int64(FutureTolerance.Seconds()),
		"Stamp the column in UTC (DEFAULT UTC_TIMESTAMP(6), or a TIMESTAMP(6) column, which MySQL keeps in UTC), not NOW() in a session whose time_zone is not UTC; " +
			fmt.Sprintf("to deliver such rows now rather than when the clock reaches them: UPDATE %s SET %s = UTC_TIMESTAMP(6) WHERE %s > UTC_TIMESTAMP(6) + INTERVAL %d MINUTE",
				table, col, col, int(FutureTolerance.Minutes()))
}

// classify maps go-sql-driver's DatabaseTypeName ("BIGINT", "UNSIGNED BIGINT", "DATETIME", ...).
func (mysqlDialect) Classify(base string) (Class, TSFlavor) {
	base = strings.TrimPrefix(base, "UNSIGNED ")
	switch base {
	case "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "YEAR":
		return ClassInt, TSNone
	case "CHAR", "VARCHAR", "TEXT", "TINYTEXT", "MEDIUMTEXT", "LONGTEXT", "ENUM", "SET":
		return ClassText, TSNone
	case "DECIMAL":
		return ClassDecimal, TSNone
	case "FLOAT", "DOUBLE":
		return ClassFloat, TSNone
	case "TIMESTAMP":
		return ClassTime, TSWithZone
	case "DATETIME":
		return ClassTime, TSUTC
	case "DATE", "TIME":
		return ClassTime, TSUnsupported
	case "BINARY", "VARBINARY", "BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB", "BIT", "GEOMETRY":
		return ClassBinary, TSNone
	case "JSON":
		return ClassJSON, TSNone
	}
	return ClassOther, TSNone
}

// keyCodec: a BIGINT UNSIGNED key (AUTO_INCREMENT ids often are) can pass the largest int64,
// where its values come as uint64: the cursor holds the decimal digits either way, and gives
// back an int64 when the value fits, else a uint64 (the driver binds both exactly). Other
// columns take the generic codecs.
func (mysqlDialect) KeyCodec(c ColumnType) (KeyCodec, bool) {
	if c.Class != ClassInt || !strings.HasPrefix(strings.ToUpper(c.DBType), "UNSIGNED BIGINT") {
		return KeyCodec{}, false
	}
	return unsignedCodec, true
}

var unsignedCodec = KeyCodec{
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
