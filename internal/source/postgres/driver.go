// Package postgres is the source driver for PostgreSQL and Azure Database for PostgreSQL, through
// pgx: its SQL and types, the xid cursor, its sign-in with Entra ID (entra.go), and the logical
// cursor, which reads the table's changes through logical decoding (logical.go, pgoutput.go).
// What the logical cursor reads besides the table (its replication slot and its positions, its
// publication), the set-up pollerctl cdc makes and drops, and what the status shows of the slot
// are package pgcdc's; the driver's methods for them (OpenCDC, CheckProbe, StatusDetails) call it.
package postgres

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/entra"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Name is the driver's name in a poller's settings ({P}_DB_DRIVER).
const Name = "postgres"

// Driver is PostgreSQL through pgx.
type Driver struct{ driver.Defaults }

// Open is pgx's database/sql driver; a DSN with fedauth (Entra ID, see entra.go) gets a pool
// whose every new connection signs in with a fresh access token, over TLS only.
func (Driver) Open(dsn string) (*sql.DB, error) { return openPostgres(dsn, entra.Deps{}) }

// Name is "postgres".
func (Driver) Name() string { return Name }

// Caseless: PostgreSQL column names are case-sensitive once quoted.
func (Driver) Caseless() bool { return false }

// Placeholder is $i.
func (Driver) Placeholder(i int) string { return "$" + strconv.Itoa(i) }

// Supports xid and logical cursors besides the kinds every database has.
func (p Driver) Supports(kind string) bool {
	return kind == state.KindXID || kind == state.KindLogical || p.Defaults.Supports(kind)
}

// LateCommits: an xid or logical cursor never skips a late commit.
func (p Driver) LateCommits(kind string) (bool, string) {
	skips, _ := p.Defaults.LateCommits(kind)
	return skips, "xid (an xid8 column DEFAULT pg_current_xact_id()) or logical"
}

// Location is the DSN's host and port, and its database.
func (Driver) Location(dsn string) (driver.Location, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return driver.Location{}, fmt.Errorf("the postgres connection string is not valid (%s)", redact.DSN(dsn))
	}
	return driver.Location{Server: fmt.Sprintf("%s:%d", strings.ToLower(cfg.Host), cfg.Port), Database: cfg.Database}, nil
}

// Keyset compares row values; an xid cursor's argument is its decimal text.
func (p Driver) Keyset(kind string, keys, params []string, side driver.Side) (string, []int) {
	if kind == state.KindXID {
		params[0] += "::text::xid8" // the argument is the xid8's decimal text
	}
	return p.Defaults.Keyset(kind, keys, params, side)
}

// UpperBound: an xid cursor reads below the oldest transaction still open; a timestamp cursor
// rows older than the database's clock minus the settle lag.
func (Driver) UpperBound(kind string, fl row.TSFlavor, col string, lag time.Duration, next func() string) driver.Bound {
	switch {
	case kind == state.KindXID:
		return driver.Bound{Pred: col + " < pg_snapshot_xmin(pg_current_snapshot())", OpenTrx: true}
	case kind != state.KindTimestampPK:
		return driver.Bound{}
	case fl == row.TSWithZone:
		return driver.Bound{Pred: col + " < now() - make_interval(secs => " + next() + ")", Arg: lag.Seconds()}
	}
	return driver.Bound{Pred: col + " < (now() AT TIME ZONE 'UTC') - make_interval(secs => " + next() + ")", Arg: lag.Seconds()}
}

// StampCheck: a timestamp without time zone more than FutureTolerance ahead of the UTC clock.
func (Driver) StampCheck(fl row.TSFlavor, table, col, param string) (string, any, string) {
	if fl != row.TSUTC {
		return "", nil, ""
	}
	return col + " > (now() AT TIME ZONE 'UTC') + make_interval(secs => " + param + ")", source.FutureTolerance.Seconds(),
		"Make the column timestamptz, or stamp it with now() AT TIME ZONE 'UTC' (DEFAULT (now() AT TIME ZONE 'UTC')), not now() or CURRENT_TIMESTAMP in a non-UTC session; " +
			fmt.Sprintf("to deliver such rows now rather than when the clock reaches them: UPDATE %s SET %s = now() AT TIME ZONE 'UTC' WHERE %s > (now() AT TIME ZONE 'UTC') + interval '%d minutes'",
				table, col, col, int(source.FutureTolerance.Minutes()))
}

// Classify maps pgx's DatabaseTypeName ("INT8", "TIMESTAMPTZ", ...).
func (Driver) Classify(base string) (row.Class, row.TSFlavor) {
	switch base {
	case "INT2", "INT4", "INT8":
		return row.ClassInt, row.TSNone
	case "TEXT", "VARCHAR", "BPCHAR", "NAME", "CHAR", "XML":
		return row.ClassText, row.TSNone
	case "NUMERIC":
		return row.ClassDecimal, row.TSNone
	case "FLOAT4":
		return row.ClassReal, row.TSNone
	case "FLOAT8":
		return row.ClassFloat, row.TSNone
	case "TIMESTAMPTZ":
		return row.ClassTime, row.TSWithZone
	case "TIMESTAMP":
		return row.ClassTime, row.TSUTC
	case "DATE", "TIME", "TIMETZ":
		return row.ClassTime, row.TSUnsupported
	case "BYTEA":
		return row.ClassBinary, row.TSNone
	case "UUID":
		return row.ClassUUID, row.TSNone
	case "JSON", "JSONB":
		return row.ClassJSON, row.TSNone
	case "XID8":
		return row.ClassXID8, row.TSNone
	case "BOOL":
		return row.ClassBool, row.TSNone
	}
	if strings.HasPrefix(base, "_") { // pgx names an array type after its element's
		return row.ClassArray, row.TSNone
	}
	return row.ClassOther, row.TSNone
}

// KeyCodec carries an xid8 key as its decimal digits.
func (Driver) KeyCodec(c row.ColumnType) (row.KeyCodec, bool) {
	return xid8Codec, c.Class == row.ClassXID8
}

// xid8Codec carries a transaction id as decimal digits: the driver returns it as text.
var xid8Codec = row.KeyCodec{
	Encode: func(v any) (json.RawMessage, error) {
		s, ok := v.(string)
		if !ok || s == "" || strings.Trim(s, "0123456789") != "" {
			return nil, fmt.Errorf("an xid8 column returned %v", v)
		}
		return json.RawMessage(s), nil
	},
	Decode: func(raw json.RawMessage) (any, error) {
		s := string(raw)
		if _, err := strconv.ParseUint(s, 10, 64); err != nil {
			return nil, fmt.Errorf("xid8 %s: %w", s, err)
		}
		return s, nil
	},
}
