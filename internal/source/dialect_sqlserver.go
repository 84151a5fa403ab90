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
func (sqlServer) open(dsn string) (*sql.DB, error) { return sql.Open(sqlServerDriver(dsn), dsn) }

func sqlServerDriver(dsn string) string {
	if strings.Contains(strings.ToLower(dsn), "fedauth=") {
		return "azuresql"
	}
	return "sqlserver"
}

func (sqlServer) location(dsn string) (Location, error) {
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

func (sqlServer) caseless() bool                   { return true }
func (sqlServer) quote(s string) string            { return "[" + strings.ReplaceAll(s, "]", "]]") + "]" }
func (sqlServer) placeholder(i int) string         { return "@p" + strconv.Itoa(i) }
func (sqlServer) limit(sel, rest, n string) string { return "SELECT TOP (" + n + ") " + sel + rest }

func (sqlServer) supports(kind string) bool {
	return kind == state.KindRowversion || kind == state.KindChangeTracking || common{}.supports(kind)
}

// keyset: SQL Server has no row comparison: the expanded form (expandedKeyset), whose named
// markers repeat.
func (sqlServer) keyset(_ string, keys, params []string) string { return expandedKeyset(keys, params) }

func (sqlServer) upperBound(kind string, fl tsFlavor, col string, lag time.Duration, next func() string) (string, any) {
	switch {
	case kind == state.KindRowversion:
		return col + " < MIN_ACTIVE_ROWVERSION()", nil
	case kind != state.KindTimestampPK:
		return "", nil
	case fl == tsWithZone:
		return col + " < DATEADD(millisecond, -" + next() + ", SYSDATETIMEOFFSET())", int32(lag.Milliseconds())
	}
	return col + " < DATEADD(millisecond, -" + next() + ", SYSUTCDATETIME())", int32(lag.Milliseconds())
}

// stampCheck: a datetime2, datetime or smalldatetime more than FutureTolerance ahead of the UTC
// clock.
func (sqlServer) stampCheck(fl tsFlavor, table, col, param string) (string, any, string) {
	if fl != tsUTC {
		return "", nil, ""
	}
	return col + " > DATEADD(second, " + param + ", SYSUTCDATETIME())", int32(FutureTolerance.Seconds()),
		"Stamp the column with SYSUTCDATETIME() (DEFAULT SYSUTCDATETIME()), not GETDATE(), SYSDATETIME() or CURRENT_TIMESTAMP, or make it datetimeoffset; " +
			fmt.Sprintf("to deliver such rows now rather than when the clock reaches them: UPDATE %s SET %s = SYSUTCDATETIME() WHERE %s > DATEADD(minute, %d, SYSUTCDATETIME())",
				table, col, col, int(FutureTolerance.Minutes()))
}

func (sqlServer) classify(base string) (class, tsFlavor) {
	switch base {
	case "TINYINT", "SMALLINT", "INT", "BIGINT":
		return classInt, tsNone
	case "CHAR", "VARCHAR", "NCHAR", "NVARCHAR", "TEXT", "NTEXT", "XML", "SYSNAME":
		return classText, tsNone
	case "DECIMAL", "NUMERIC", "MONEY", "SMALLMONEY":
		return classDecimal, tsNone
	case "REAL", "FLOAT":
		return classFloat, tsNone
	case "DATETIMEOFFSET":
		return classTime, tsWithZone
	case "DATETIME2", "DATETIME", "SMALLDATETIME":
		return classTime, tsUTC
	case "DATE", "TIME":
		return classTime, tsUnsupported
	case "TIMESTAMP", "ROWVERSION":
		return classRowversion, tsNone
	case "BINARY", "VARBINARY", "IMAGE":
		return classBinary, tsNone
	case "UNIQUEIDENTIFIER":
		return classUUID, tsNone
	case "BIT":
		return classBool, tsNone
	}
	return classOther, tsNone
}

// scalars: go-mssqldb may return narrower integers and text as bytes.
func (sqlServer) scalars() bool { return false }

// uuid reorders a uniqueidentifier, which go-mssqldb returns in SQL Server's mixed-endian order.
func (sqlServer) uuid(b []byte) (string, error) {
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
func (sqlServer) keyCodec(c *column) (keyCodec, bool) {
	switch {
	case c.class == classRowversion || c.class == classBinary:
		return rowversionCodec, true
	case c.class == classTime && c.flavor == tsUTC:
		return keyCodec{encode: timeCodec.encode, decode: func(raw json.RawMessage) (any, error) {
			t, err := timeCodec.decode(raw)
			if err != nil {
				return nil, err
			}
			return civil.DateTimeOf(t.(time.Time)), nil
		}}, true
	}
	return keyCodec{}, false
}

var rowversionCodec = keyCodec{
	encode: func(v any) (json.RawMessage, error) {
		b, ok := v.([]byte)
		if !ok {
			return nil, fmt.Errorf("a rowversion column returned %T", v)
		}
		return json.Marshal("0x" + strings.ToUpper(hex.EncodeToString(b)))
	},
	decode: func(raw json.RawMessage) (any, error) {
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

func (sqlServer) keysetArgs(int) []int { return nil } // named markers (@p1): each key value once
