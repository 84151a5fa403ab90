package source

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
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// sqlServer is SQL Server and Azure SQL through go-mssqldb.
type sqlServer struct{}

// open picks azuresql when the DSN asks for Entra ID (fedauth=...).
func (sqlServer) Open(dsn string) (*sql.DB, error) { return sql.Open(sqlServerDriver(dsn), dsn) }

// Name is "sqlserver".
func (sqlServer) Name() string { return SQLServer }

func sqlServerDriver(dsn string) string {
	if strings.Contains(strings.ToLower(dsn), "fedauth=") {
		return "azuresql"
	}
	return "sqlserver"
}

func (sqlServer) Location(dsn string) (Location, error) {
	cfg, err := msdsn.Parse(dsn)
	if err != nil {
		return Location{}, fmt.Errorf("the sqlserver connection string is not valid (%s)", redact.DSN(dsn))
	}
	server := strings.ToLower(cfg.Host)
	if cfg.Instance != "" {
		server += `\` + strings.ToLower(cfg.Instance)
	}
	if cfg.Port != 0 {
		server += fmt.Sprintf(":%d", cfg.Port)
	}
	return Location{Server: server, Database: cfg.Database}, nil
}

func (sqlServer) Caseless() bool                   { return true }
func (sqlServer) Quote(s string) string            { return "[" + strings.ReplaceAll(s, "]", "]]") + "]" }
func (sqlServer) Placeholder(i int) string         { return "@p" + strconv.Itoa(i) }
func (sqlServer) Limit(sel, rest, n string) string { return "SELECT TOP (" + n + ") " + sel + rest }

func (sqlServer) Supports(kind string) bool {
	return kind == state.KindRowversion || kind == state.KindChangeTracking || Defaults{}.Supports(kind)
}

// keyset: SQL Server has no row comparison: the expanded form (ExpandedKeyset), whose named
// markers repeat.
// Its markers are named (@p1): each key value is passed once.
func (sqlServer) Keyset(_ string, keys, params []string) (string, []int) {
	return ExpandedKeyset(keys, params), nil
}

func (sqlServer) UpperBound(kind string, fl TSFlavor, col string, lag time.Duration, next func() string) Bound {
	switch {
	case kind == state.KindRowversion:
		return Bound{Pred: col + " < MIN_ACTIVE_ROWVERSION()", OpenTrx: true}
	case kind != state.KindTimestampPK:
		return Bound{}
	case fl == TSWithZone:
		return Bound{Pred: col + " < DATEADD(millisecond, -" + next() + ", SYSDATETIMEOFFSET())", Arg: int32(lag.Milliseconds())}
	}
	return Bound{Pred: col + " < DATEADD(millisecond, -" + next() + ", SYSUTCDATETIME())", Arg: int32(lag.Milliseconds())}
}

// stampCheck: a datetime2, datetime or smalldatetime more than FutureTolerance ahead of the UTC
// clock.
func (sqlServer) StampCheck(fl TSFlavor, table, col, param string) (string, any, string) {
	if fl != TSUTC {
		return "", nil, ""
	}
	return col + " > DATEADD(second, " + param + ", SYSUTCDATETIME())", int32(FutureTolerance.Seconds()),
		"Stamp the column with SYSUTCDATETIME() (DEFAULT SYSUTCDATETIME()), not GETDATE(), SYSDATETIME() or CURRENT_TIMESTAMP, or make it datetimeoffset; " +
			fmt.Sprintf("to deliver such rows now rather than when the clock reaches them: UPDATE %s SET %s = SYSUTCDATETIME() WHERE %s > DATEADD(minute, %d, SYSUTCDATETIME())",
				table, col, col, int(FutureTolerance.Minutes()))
}

func (sqlServer) Classify(base string) (Class, TSFlavor) {
	switch base {
	case "TINYINT", "SMALLINT", "INT", "BIGINT":
		return ClassInt, TSNone
	case "CHAR", "VARCHAR", "NCHAR", "NVARCHAR", "TEXT", "NTEXT", "XML", "SYSNAME":
		return ClassText, TSNone
	case "DECIMAL", "NUMERIC", "MONEY", "SMALLMONEY":
		return ClassDecimal, TSNone
	case "REAL", "FLOAT":
		return ClassFloat, TSNone
	case "DATETIMEOFFSET":
		return ClassTime, TSWithZone
	case "DATETIME2", "DATETIME", "SMALLDATETIME":
		return ClassTime, TSUTC
	case "DATE", "TIME":
		return ClassTime, TSUnsupported
	case "TIMESTAMP", "ROWVERSION":
		return ClassRowversion, TSNone
	case "BINARY", "VARBINARY", "IMAGE":
		return ClassBinary, TSNone
	case "UNIQUEIDENTIFIER":
		return ClassUUID, TSNone
	case "BIT":
		return ClassBool, TSNone
	}
	return ClassOther, TSNone
}

// scalars: go-mssqldb may return narrower integers and text as bytes.
func (sqlServer) Scalars() bool { return false }

// uuid reorders a uniqueidentifier, which go-mssqldb returns in SQL Server's mixed-endian order.
func (sqlServer) UUID(b []byte) (string, error) {
	if len(b) != 16 {
		return string(b), nil
	}
	var u mssql.UniqueIdentifier
	if err := u.Scan(b); err != nil {
		return "", err
	}
	return strings.ToLower(u.String()), nil
}

// keyCodec: rowversion (and binary) keys as 0x and hex; datetime2 arguments as civil.DateTime,
// because go-mssqldb sends time.Time as datetimeoffset, which would convert the datetime2 column
// and defeat its index.
func (sqlServer) KeyCodec(c ColumnType) (KeyCodec, bool) {
	switch {
	case c.Class == ClassRowversion || c.Class == ClassBinary:
		return rowversionCodec, true
	case c.Class == ClassTime && c.Flavor == TSUTC:
		return KeyCodec{Encode: TimeCodec.Encode, Decode: func(raw json.RawMessage) (any, error) {
			t, err := TimeCodec.Decode(raw)
			if err != nil {
				return nil, err
			}
			return civil.DateTimeOf(t.(time.Time)), nil
		}}, true
	}
	return KeyCodec{}, false
}

var rowversionCodec = KeyCodec{
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
