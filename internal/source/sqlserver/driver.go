// Package sqlserver is the source driver for SQL Server and Azure SQL, through go-mssqldb (with
// Entra ID through its azuread driver): its SQL and types, the rowversion cursor, and the
// changetracking cursor, which reads SQL Server Change Tracking (changetracking.go).
//
// # Change Tracking
//
// A changetracking cursor reads CHANGETABLE(CHANGES table, @base): one row per key changed after
// @base, at its latest version, with its net op (I insert, U update, D delete; a delete and a
// re-insert of a key is an update, an insert then a delete a delete). Each read takes
// CHANGE_TRACKING_CURRENT_VERSION() as its bound, then in a snapshot transaction checks the
// checkpoint against the table's CHANGE_TRACKING_MIN_VALID_VERSION and selects TOP (@n) changes
// up to the bound in (version, key) order, LEFT JOINed to the table for the current values; a
// delete carries its key only. The cursor's Value is a version: alone, every change up to it is
// done; with the key as tiebreaker, the position is inside that version (a transaction larger
// than a batch), and the next read is CHANGES(@version-1) after (version, key). Versions are
// given at commit, so nothing commits behind the cursor. A checkpoint below the minimum valid
// version (retention cleanup, a TRUNCATE TABLE) fails with ErrExpired, naming `pollerctl reset P
// --to-beginning` and the re-read the consumer then needs; it is never skipped. Open checks
// Change Tracking on the database and the table, ALLOW_SNAPSHOT_ISOLATION, the VIEW CHANGE
// TRACKING permission and that the key is the primary key, each with its fix (ErrNotTracked). A
// quiet table's checkpoint is moved up to the current version before it can expire. The reasoning
// is changetracking.go's comment.
package sqlserver

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/golang-sql/civil"
	mssql "github.com/microsoft/go-mssqldb"
	_ "github.com/microsoft/go-mssqldb/azuread" // azuresql: Entra ID and managed identity
	"github.com/microsoft/go-mssqldb/msdsn"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Name is the driver's name in a poller's settings ({P}_DB_DRIVER).
const Name = "sqlserver"

// Driver is SQL Server and Azure SQL through go-mssqldb.
type Driver struct{ driver.Defaults }

// Open picks azuresql when the DSN asks for Entra ID (fedauth=...). A DSN whose timezone setting
// is not UTC is refused (utcOnly).
func (Driver) Open(dsn string) (*sql.DB, error) {
	if cfg, err := msdsn.Parse(dsn); err == nil {
		if err := utcOnly(cfg); err != nil {
			return nil, err
		}
	}
	return sql.Open(sqlServerDriver(dsn), dsn)
}

// utcOnly refuses go-mssqldb's timezone setting other than UTC (unset, go-mssqldb takes UTC):
// go-mssqldb then labels the datetime, datetime2 and smalldatetime values it reads with that
// zone (msdsn.EncodeParameters.Timezone, types.go's decoders), so their instant, which the cursor
// carries in UTC, is off by the zone's offset from the wall clock stored, and every key argument
// sent back would compare with another value than the one read.
func utcOnly(cfg msdsn.Config) error {
	if tz := cfg.Encoding.Timezone; tz != nil && tz != time.UTC && tz.String() != "UTC" && tz.String() != "Etc/UTC" {
		return fmt.Errorf("the sqlserver connection string sets %s=%s: the poller reads datetime, datetime2 and smalldatetime columns as UTC and sends its cursor back in UTC, so another zone would shift every comparison by its offset; remove the setting (stamp the columns in UTC, or use datetimeoffset)",
			msdsn.Timezone, tz)
	}
	return nil
}

// Name is "sqlserver".
func (Driver) Name() string { return Name }

func sqlServerDriver(dsn string) string {
	if strings.Contains(strings.ToLower(dsn), "fedauth=") {
		return "azuresql"
	}
	return "sqlserver"
}

// Location is the DSN's host, instance and port, and its database.
func (Driver) Location(dsn string) (driver.Location, error) {
	cfg, err := msdsn.Parse(dsn)
	if err != nil {
		return driver.Location{}, fmt.Errorf("the sqlserver connection string is not valid (%s)", redact.DSN(dsn))
	}
	if err := utcOnly(cfg); err != nil {
		return driver.Location{}, err
	}
	server := strings.ToLower(cfg.Host)
	if cfg.Instance != "" {
		server += `\` + strings.ToLower(cfg.Instance)
	}
	if cfg.Port != 0 {
		server += fmt.Sprintf(":%d", cfg.Port)
	}
	return driver.Location{Server: server, Database: cfg.Database}, nil
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
	return kind == state.KindRowversion || kind == state.KindChangeTracking || driver.Defaults{}.Supports(kind)
}

// LateCommits: a rowversion or changetracking cursor never skips a late commit.
func (Driver) LateCommits(kind string) (bool, string) {
	skips, _ := driver.Defaults{}.LateCommits(kind)
	return skips, "rowversion or changetracking"
}

// Keyset: SQL Server has no row comparison: the expanded form (ExpandedKeyset), whose named
// markers repeat.
// Its markers are named (@p1): each key value is passed once.
func (Driver) Keyset(_ string, keys, params []string, side driver.Side) (string, []int) {
	return driver.ExpandedKeyset(keys, params, side), nil
}

// DeleteFirst is DELETE TOP (n) FROM table WHERE predicate, as Microsoft documents it ("When a
// TOP (n) clause is used with DELETE, the delete operation is performed on a random selection of
// n number of rows", with the example DELETE TOP (20) FROM Purchasing.PurchaseOrderDetail WHERE
// DueDate < '20020701': "Limiting Deleted Rows by Using TOP",
// https://learn.microsoft.com/en-us/previous-versions/sql/sql-server-2008-r2/ms175486(v=sql.105);
// the grammar DELETE [ TOP ( expression ) [ PERCENT ] ] [ FROM ] ... [ WHERE ... ] in
// https://learn.microsoft.com/sql/t-sql/statements/delete-transact-sql). Every row it picks
// matches the predicate, which is all a cleanup needs: their order does not matter. Its
// limit's marker comes first: the markers are named, each taking the argument of its number.
func (Driver) DeleteFirst(table string, _, _ []string, where, limit func() string) string {
	n := limit()
	return "DELETE TOP (" + n + ") FROM " + table + " WHERE " + where()
}

// UpperBound: a rowversion cursor reads below the lowest rowversion a transaction still open
// holds (its ReadBound); a timestamp cursor rows older than the database's clock minus the
// settle lag.
func (Driver) UpperBound(kind string, fl row.TSFlavor, col string, lag time.Duration, next func() string) driver.Bound {
	switch {
	case kind == state.KindRowversion:
		return driver.Bound{OpenTrx: true}
	case kind != state.KindTimestampPK:
		return driver.Bound{}
	}
	// DATEADD takes an int: milliseconds up to 24 days, whole seconds beyond (a cleanup's
	// older_than of weeks, which UpperBound bounds too).
	unit, arg := "millisecond", int32(lag.Milliseconds())
	if lag.Milliseconds() > math.MaxInt32 {
		unit, arg = "second", int32(min(lag.Seconds(), math.MaxInt32))
	}
	now := "SYSUTCDATETIME()"
	if fl == row.TSWithZone {
		now = "SYSDATETIMEOFFSET()"
	}
	return driver.Bound{Pred: col + " < DATEADD(" + unit + ", -" + next() + ", " + now + ")", Arg: arg}
}

// ReadBound keeps a rowversion read below MIN_ACTIVE_ROWVERSION(), the lowest rowversion of the
// transactions still open, read in a statement of its own before the read, as Microsoft's Sync
// Framework read its new anchor before its data queries, and as the changetracking cursor reads
// CHANGE_TRACKING_CURRENT_VERSION() before its snapshot. In the read's own statement the bound
// would not be safe under READ_COMMITTED_SNAPSHOT (Azure SQL Database's default): the statement's
// snapshot is taken when it starts, and Microsoft documents neither when within the statement
// MIN_ACTIVE_ROWVERSION() is evaluated nor that it is fixed at the snapshot (its page says only
// that it is nondeterministic and not affected by the isolation level). A transaction that
// committed in between would be missing from the snapshot but no longer hold the bound down, and
// the read would pass over its rows for good. Read first, every transaction still open then
// holds rowversions at or above the bound, which the read leaves for later, and every one below
// it has committed before the read's snapshot, which sees its rows.
func (Driver) ReadBound(_ string, d sourcedef.Definition) (driver.ReadBound, bool) {
	if d.Cursor.Kind != state.KindRowversion {
		return nil, false
	}
	return activeRowversion{}, true
}

// activeRowversion is a rowversion read's bound, MIN_ACTIVE_ROWVERSION(), read for each read.
type activeRowversion struct{}

// activeRowversionQuery reads the bound.
const activeRowversionQuery = "SELECT MIN_ACTIVE_ROWVERSION()"

// Arg reads MIN_ACTIVE_ROWVERSION() (8 bytes, compared as binary with the rowversion column).
func (activeRowversion) Arg(ctx context.Context, db *sql.DB) (any, error) {
	var b []byte
	if err := db.QueryRowContext(ctx, activeRowversionQuery).Scan(&b); err != nil {
		return nil, fmt.Errorf("reading MIN_ACTIVE_ROWVERSION(): %w", err)
	}
	return b, nil
}

// Stats: nothing beyond the bound's hold-back, which the cursor kind says (Bound.OpenTrx).
func (activeRowversion) Stats() driver.Stats { return driver.Stats{} }

// StampCheck: a datetime2, datetime or smalldatetime more than FutureTolerance ahead of the UTC
// clock.
func (Driver) StampCheck(fl row.TSFlavor, table, col, param string) (string, any, string) {
	if fl != row.TSUTC {
		return "", nil, ""
	}
	return col + " > DATEADD(second, " + param + ", SYSUTCDATETIME())", int32(source.FutureTolerance.Seconds()),
		"Stamp the column with SYSUTCDATETIME() (DEFAULT SYSUTCDATETIME()), not GETDATE(), SYSDATETIME() or CURRENT_TIMESTAMP, or make it datetimeoffset; " +
			fmt.Sprintf("to deliver such rows now rather than when the clock reaches them: UPDATE %s SET %s = SYSUTCDATETIME() WHERE %s > DATEADD(minute, %d, SYSUTCDATETIME())",
				table, col, col, int(source.FutureTolerance.Minutes()))
}

// Classify maps go-mssqldb's DatabaseTypeName ("BIGINT", "DATETIME2", ...).
func (Driver) Classify(base string) (row.Class, row.TSFlavor) {
	switch base {
	case "TINYINT", "SMALLINT", "INT", "BIGINT":
		return row.ClassInt, row.TSNone
	case "CHAR", "VARCHAR", "NCHAR", "NVARCHAR", "TEXT", "NTEXT", "XML", "SYSNAME":
		return row.ClassText, row.TSNone
	case "DECIMAL", "NUMERIC", "MONEY", "SMALLMONEY":
		return row.ClassDecimal, row.TSNone
	case "REAL":
		return row.ClassReal, row.TSNone
	case "FLOAT":
		return row.ClassFloat, row.TSNone
	case "DATETIMEOFFSET":
		return row.ClassTime, row.TSWithZone
	case "DATETIME2", "DATETIME", "SMALLDATETIME":
		return row.ClassTime, row.TSUTC
	case "DATE", "TIME":
		return row.ClassTime, row.TSUnsupported
	case "TIMESTAMP", "ROWVERSION":
		return row.ClassRowversion, row.TSNone
	case "BINARY", "VARBINARY", "IMAGE":
		return row.ClassBinary, row.TSNone
	case "UNIQUEIDENTIFIER":
		return row.ClassUUID, row.TSNone
	case "BIT":
		return row.ClassBool, row.TSNone
	}
	return row.ClassOther, row.TSNone
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

// KeyCodec is how a key column's cursor value goes back to SQL Server as an argument of the
// column's own type, so that the comparison is the column's, as its index and ORDER BY sort:
//   - rowversion (and binary) keys as 0x and hex, sent as varbinary;
//   - datetime2 as civil.DateTime (datetime2(7)): go-mssqldb sends a time.Time as
//     datetimeoffset, which would convert the column and defeat its index;
//   - datetime as mssql.DateTime1 (datetime); smalldatetime too, its marker cast to
//     smalldatetime (exact: the value read is whole minutes), so that the column is not
//     converted to datetime for the comparison. go-mssqldb reads a datetime's
//     1/300 s ticks rounded to whole milliseconds (.003 for 3 1/3 ms: decodeDateTime), and since
//     compatibility level 130 SQL Server converts a datetime to datetime2 exactly (.0033333), so
//     sent as datetime2 the value read would not equal the one stored: about a third of the
//     rows would compare after their own cursor (read again every tick, or a batch of ties
//     stuck) and a third before it (ties after a batch boundary skipped). Sent as datetime,
//     go-mssqldb rounds the milliseconds back to the same tick (encodeDateTime), and the
//     comparison is the column's. Microsoft's datetime2 page: "use explicit casting" when
//     comparing the two (docs/sqlserver.md cites it);
//   - char, varchar and text as a string whose marker is cast to varchar: go-mssqldb sends a
//     string as nvarchar, which ranks above varchar, so the column would be converted to
//     nvarchar for the comparison and compared by Unicode rules, while ORDER BY sorts it by the
//     column's own, which under a SQL_* collation (Azure SQL Database's default,
//     SQL_Latin1_General_CP1_CI_AS) differ: 'a-c' < 'ab' but N'a-c' > N'ab'. A keyset predicate
//     would then skip or repeat keys at a batch boundary, and the conversion can turn an index
//     seek into a scan. CAST(@p AS varchar(8000)) converts the argument instead, in the code
//     page of the database's default collation, and the comparison takes the column's collation
//     (the column's label outranks the cast's). Check refuses a key column whose collation has
//     another code page, where the conversion could change a value.
func (Driver) KeyCodec(c row.ColumnType) (row.KeyCodec, bool) {
	base := strings.ToUpper(c.DBType)
	if i := strings.IndexByte(base, '('); i >= 0 {
		base = strings.TrimSpace(base[:i])
	}
	switch {
	case c.Class == row.ClassRowversion || c.Class == row.ClassBinary:
		return rowversionCodec, true
	case c.Class == row.ClassTime && c.Flavor == row.TSUTC && base == "DATETIME":
		return timeCodec(func(t time.Time) any { return mssql.DateTime1(t) }), true
	case c.Class == row.ClassTime && c.Flavor == row.TSUTC && base == "SMALLDATETIME":
		// Truncated to the minute: a value read is one already; one an operator typed
		// (pollerctl reset --to-cursor) is then taken as the minute it falls in, whose rows come
		// again rather than be passed over (CAST rounds 30 seconds and more up).
		k := timeCodec(func(t time.Time) any { return mssql.DateTime1(t.Truncate(time.Minute)) })
		k.Marker = func(m string) string { return "CAST(" + m + " AS smalldatetime)" }
		return k, true
	case c.Class == row.ClassTime && c.Flavor == row.TSUTC:
		return timeCodec(func(t time.Time) any { return civil.DateTimeOf(t) }), true
	case nonUnicode(base):
		return varcharCodec, true
	}
	return row.KeyCodec{}, false
}

// nonUnicode says whether a type (DatabaseTypeName) holds text in a collation's code page.
func nonUnicode(base string) bool { return base == "CHAR" || base == "VARCHAR" || base == "TEXT" }

// timeCodec encodes a timestamp as the generic codec does and gives it back as arg makes it.
func timeCodec(arg func(time.Time) any) row.KeyCodec {
	return row.KeyCodec{Encode: row.TimeCodec.Encode, Decode: func(raw json.RawMessage) (any, error) {
		t, err := row.TimeCodec.Decode(raw)
		if err != nil {
			return nil, err
		}
		return arg(t.(time.Time)), nil
	}}
}

// varcharCodec keeps a char or varchar key as a JSON string and casts its argument to varchar.
var varcharCodec = func() row.KeyCodec {
	k := row.TextCodec
	k.Marker = func(m string) string { return "CAST(" + m + " AS varchar(8000))" }
	return k
}()

var rowversionCodec = row.KeyCodec{
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
