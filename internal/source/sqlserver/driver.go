// Package sqlserver is the source driver for SQL Server and Azure SQL, through go-mssqldb (with
// Entra ID through its azuread driver): its SQL and types, the rowversion cursor, and the
// changetracking cursor, which reads SQL Server Change Tracking (changetracking.go).
package sqlserver

import (
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/golang-sql/civil"
	mssql "github.com/microsoft/go-mssqldb"
	_ "github.com/microsoft/go-mssqldb/azuread" // azuresql: Entra ID and managed identity
	"github.com/microsoft/go-mssqldb/msdsn"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Name is the driver's name in a poller's settings ({P}_DB_DRIVER).
const Name = "sqlserver"

// Driver is SQL Server and Azure SQL through go-mssqldb.
type Driver struct{}

// Open picks azuresql when the DSN asks for Entra ID (fedauth=...).
func (Driver) Open(dsn string) (*sql.DB, error) { return sql.Open(sqlServerDriver(dsn), dsn) }

// Name is "sqlserver".
func (Driver) Name() string { return Name }

func sqlServerDriver(dsn string) string {
	if strings.Contains(strings.ToLower(dsn), "fedauth=") {
		return "azuresql"
	}
	return "sqlserver"
}

// Location is the DSN's host, instance and port, and its database.
func (Driver) Location(dsn string) (source.Location, error) {
	cfg, err := msdsn.Parse(dsn)
	if err != nil {
		return source.Location{}, fmt.Errorf("the sqlserver connection string is not valid (%s)", redact.DSN(dsn))
	}
	server := strings.ToLower(cfg.Host)
	if cfg.Instance != "" {
		server += `\` + strings.ToLower(cfg.Instance)
	}
	if cfg.Port != 0 {
		server += fmt.Sprintf(":%d", cfg.Port)
	}
	return source.Location{Server: server, Database: cfg.Database}, nil
}

// Caseless: SQL Server's usual collations match column names whatever their case.
func (Driver) Caseless() bool { return true }

// Quote quotes an identifier in brackets.
func (Driver) Quote(s string) string { return "[" + strings.ReplaceAll(s, "]", "]]") + "]" }

// Placeholder is @pi.
func (Driver) Placeholder(i int) string { return "@p" + strconv.Itoa(i) }

// Limit is SELECT TOP (n).
func (Driver) Limit(sel, rest, n string) string { return "SELECT TOP (" + n + ") " + sel + rest }

// Supports rowversion and changetracking cursors besides the kinds every database has.
func (Driver) Supports(kind string) bool {
	return kind == state.KindRowversion || kind == state.KindChangeTracking || source.Defaults{}.Supports(kind)
}

// Keyset: SQL Server has no row comparison: the expanded form (ExpandedKeyset), whose named
// markers repeat.
// Its markers are named (@p1): each key value is passed once.
func (Driver) Keyset(_ string, keys, params []string) (string, []int) {
	return source.ExpandedKeyset(keys, params), nil
}

// UpperBound: a rowversion cursor reads below MIN_ACTIVE_ROWVERSION(); a timestamp cursor rows
// older than the database's clock minus the settle lag.
func (Driver) UpperBound(kind string, fl source.TSFlavor, col string, lag time.Duration, next func() string) source.Bound {
	switch {
	case kind == state.KindRowversion:
		return source.Bound{Pred: col + " < MIN_ACTIVE_ROWVERSION()", OpenTrx: true}
	case kind != state.KindTimestampPK:
		return source.Bound{}
	case fl == source.TSWithZone:
		return source.Bound{Pred: col + " < DATEADD(millisecond, -" + next() + ", SYSDATETIMEOFFSET())", Arg: int32(lag.Milliseconds())}
	}
	return source.Bound{Pred: col + " < DATEADD(millisecond, -" + next() + ", SYSUTCDATETIME())", Arg: int32(lag.Milliseconds())}
}

// StampCheck: a datetime2, datetime or smalldatetime more than FutureTolerance ahead of the UTC
// clock.
func (Driver) StampCheck(fl source.TSFlavor, table, col, param string) (string, any, string) {
	if fl != source.TSUTC {
		return "", nil, ""
	}
	return col + " > DATEADD(second, " + param + ", SYSUTCDATETIME())", int32(source.FutureTolerance.Seconds()),
		"Stamp the column with SYSUTCDATETIME() (DEFAULT SYSUTCDATETIME()), not GETDATE(), SYSDATETIME() or CURRENT_TIMESTAMP, or make it datetimeoffset; " +
			fmt.Sprintf("to deliver such rows now rather than when the clock reaches them: UPDATE %s SET %s = SYSUTCDATETIME() WHERE %s > DATEADD(minute, %d, SYSUTCDATETIME())",
				table, col, col, int(source.FutureTolerance.Minutes()))
}

// Classify maps go-mssqldb's DatabaseTypeName ("BIGINT", "DATETIME2", ...).
func (Driver) Classify(base string) (source.Class, source.TSFlavor) {
	switch base {
	case "TINYINT", "SMALLINT", "INT", "BIGINT":
		return source.ClassInt, source.TSNone
	case "CHAR", "VARCHAR", "NCHAR", "NVARCHAR", "TEXT", "NTEXT", "XML", "SYSNAME":
		return source.ClassText, source.TSNone
	case "DECIMAL", "NUMERIC", "MONEY", "SMALLMONEY":
		return source.ClassDecimal, source.TSNone
	case "REAL", "FLOAT":
		return source.ClassFloat, source.TSNone
	case "DATETIMEOFFSET":
		return source.ClassTime, source.TSWithZone
	case "DATETIME2", "DATETIME", "SMALLDATETIME":
		return source.ClassTime, source.TSUTC
	case "DATE", "TIME":
		return source.ClassTime, source.TSUnsupported
	case "TIMESTAMP", "ROWVERSION":
		return source.ClassRowversion, source.TSNone
	case "BINARY", "VARBINARY", "IMAGE":
		return source.ClassBinary, source.TSNone
	case "UNIQUEIDENTIFIER":
		return source.ClassUUID, source.TSNone
	case "BIT":
		return source.ClassBool, source.TSNone
	}
	return source.ClassOther, source.TSNone
}

// Scalars: go-mssqldb may return narrower integers and text as bytes.
func (Driver) Scalars() bool { return false }

// UUID reorders a uniqueidentifier, which go-mssqldb returns in SQL Server's mixed-endian order.
func (Driver) UUID(b []byte) (string, error) {
	if len(b) != 16 {
		return string(b), nil
	}
	var u mssql.UniqueIdentifier
	if err := u.Scan(b); err != nil {
		return "", err
	}
	return strings.ToLower(u.String()), nil
}

// KeyCodec: rowversion (and binary) keys as 0x and hex; datetime2 arguments as civil.DateTime,
// because go-mssqldb sends time.Time as datetimeoffset, which would convert the datetime2 column
// and defeat its index.
func (Driver) KeyCodec(c source.ColumnType) (source.KeyCodec, bool) {
	switch {
	case c.Class == source.ClassRowversion || c.Class == source.ClassBinary:
		return rowversionCodec, true
	case c.Class == source.ClassTime && c.Flavor == source.TSUTC:
		return source.KeyCodec{Encode: source.TimeCodec.Encode, Decode: func(raw json.RawMessage) (any, error) {
			t, err := source.TimeCodec.Decode(raw)
			if err != nil {
				return nil, err
			}
			return civil.DateTimeOf(t.(time.Time)), nil
		}}, true
	}
	return source.KeyCodec{}, false
}

var rowversionCodec = source.KeyCodec{
	Encode: func(v any) (json.RawMessage, error) {
		b, ok := v.([]byte)
		if !ok {
			return nil, fmt.Errorf("a rowversion column returned %T", v)
		}
		return json.Marshal("0x" + strings.ToUpper(hex.EncodeToString(b)))
	},
	Decode: func(raw json.RawMessage) (any, error) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(s, "0x") {
			return nil, fmt.Errorf("rowversion %q does not start with 0x", s)
		}
		return hex.DecodeString(s[2:])
	},
}
