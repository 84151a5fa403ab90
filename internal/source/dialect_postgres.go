package source

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
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// postgres is PostgreSQL through pgx.
type postgres struct{ common }

// open is pgx's database/sql driver; a DSN with fedauth (Entra ID, see pgentra.go) gets a pool
// whose every new connection signs in with a fresh access token, over TLS only.
func (postgres) open(dsn string) (*sql.DB, error) { return openPostgres(dsn, entraDeps{}) }
func (postgres) caseless() bool                   { return false }
func (postgres) placeholder(i int) string         { return "$" + strconv.Itoa(i) }
func (p postgres) supports(kind string) bool {
	return kind == state.KindXID || kind == state.KindLogical || p.common.supports(kind)
}

func (postgres) location(dsn string) (Location, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return Location{}, fmt.Errorf("the postgres connection string is not valid (%s)", redact.DSN(dsn))
	}
	return Location{Server: fmt.Sprintf("%s:%d", strings.ToLower(cfg.Host), cfg.Port), Database: cfg.Database}, nil
}

func (p postgres) keyset(kind string, keys, params []string) string {
	if kind == state.KindXID {
		params[0] += "::text::xid8" // the argument is the xid8's decimal text
	}
	return p.common.keyset(kind, keys, params)
}

func (postgres) upperBound(kind string, fl tsFlavor, col string, lag time.Duration, next func() string) (string, any) {
	switch {
	case kind == state.KindXID:
		return col + " < pg_snapshot_xmin(pg_current_snapshot())", nil
	case kind != state.KindTimestampPK:
		return "", nil
	case fl == tsWithZone:
		return col + " < now() - make_interval(secs => " + next() + ")", lag.Seconds()
	}
	return col + " < (now() AT TIME ZONE 'UTC') - make_interval(secs => " + next() + ")", lag.Seconds()
}

// stampCheck: a timestamp without time zone more than FutureTolerance ahead of the UTC clock.
func (postgres) stampCheck(fl tsFlavor, table, col, param string) (string, any, string) {
	if fl != tsUTC {
		return "", nil, ""
	}
	return col + " > (now() AT TIME ZONE 'UTC') + make_interval(secs => " + param + ")", FutureTolerance.Seconds(),
		"Make the column timestamptz, or stamp it with now() AT TIME ZONE 'UTC' (DEFAULT (now() AT TIME ZONE 'UTC')), not now() or CURRENT_TIMESTAMP in a non-UTC session; " +
			fmt.Sprintf("to deliver such rows now rather than when the clock reaches them: UPDATE %s SET %s = now() AT TIME ZONE 'UTC' WHERE %s > (now() AT TIME ZONE 'UTC') + interval '%d minutes'",
				table, col, col, int(FutureTolerance.Minutes()))
}

func (postgres) classify(base string) (class, tsFlavor) {
	switch base {
	case "INT2", "INT4", "INT8":
		return classInt, tsNone
	case "TEXT", "VARCHAR", "BPCHAR", "NAME", "CHAR":
		return classText, tsNone
	case "NUMERIC":
		return classDecimal, tsNone
	case "FLOAT4", "FLOAT8":
		return classFloat, tsNone
	case "TIMESTAMPTZ":
		return classTime, tsWithZone
	case "TIMESTAMP":
		return classTime, tsUTC
	case "DATE", "TIME", "TIMETZ":
		return classTime, tsUnsupported
	case "BYTEA":
		return classBinary, tsNone
	case "UUID":
		return classUUID, tsNone
	case "JSON", "JSONB":
		return classJSON, tsNone
	case "XID8":
		return classXID8, tsNone
	case "BOOL":
		return classBool, tsNone
	}
	return classOther, tsNone
}

func (postgres) keyCodec(c *column) (keyCodec, bool) { return xid8Codec, c.class == classXID8 }

// xid8Codec carries a transaction id as decimal digits: the driver returns it as text.
var xid8Codec = keyCodec{
	encode: func(v any) (json.RawMessage, error) {
		s, ok := v.(string)
		if !ok || s == "" || strings.Trim(s, "0123456789") != "" {
			return nil, fmt.Errorf("an xid8 column returned %v", v)
		}
		return json.RawMessage(s), nil
	},
	decode: func(raw json.RawMessage) (any, error) {
		s := string(raw)
		if _, err := strconv.ParseUint(s, 10, 64); err != nil {
			return nil, fmt.Errorf("xid8 %s: %w", s, err)
		}
		return s, nil
	},
}
