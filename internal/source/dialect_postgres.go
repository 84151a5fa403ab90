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

	"github.com/pseudotrigger/pseudotrigger/internal/source/entra"
)

// postgres is PostgreSQL through pgx.
type postgres struct{ Defaults }

// open is pgx's database/sql driver; a DSN with fedauth (Entra ID, see pgentra.go) gets a pool
// whose every new connection signs in with a fresh access token, over TLS only.
func (postgres) Open(dsn string) (*sql.DB, error) { return openPostgres(dsn, entra.Deps{}) }
func (postgres) Name() string                     { return Postgres }
func (postgres) Caseless() bool                   { return false }
func (postgres) Placeholder(i int) string         { return "$" + strconv.Itoa(i) }
func (p postgres) Supports(kind string) bool {
	return kind == state.KindXID || kind == state.KindLogical || p.Defaults.Supports(kind)
}

func (postgres) Location(dsn string) (Location, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return Location{}, fmt.Errorf("the postgres connection string is not valid (%s)", redact.DSN(dsn))
	}
	return Location{Server: fmt.Sprintf("%s:%d", strings.ToLower(cfg.Host), cfg.Port), Database: cfg.Database}, nil
}

func (p postgres) Keyset(kind string, keys, params []string) (string, []int) {
	if kind == state.KindXID {
		params[0] += "::text::xid8" // the argument is the xid8's decimal text
	}
	return p.Defaults.Keyset(kind, keys, params)
}

func (postgres) UpperBound(kind string, fl TSFlavor, col string, lag time.Duration, next func() string) Bound {
	switch {
	case kind == state.KindXID:
		return Bound{Pred: col + " < pg_snapshot_xmin(pg_current_snapshot())", OpenTrx: true}
	case kind != state.KindTimestampPK:
		return Bound{}
	case fl == TSWithZone:
		return Bound{Pred: col + " < now() - make_interval(secs => " + next() + ")", Arg: lag.Seconds()}
	}
	return Bound{Pred: col + " < (now() AT TIME ZONE 'UTC') - make_interval(secs => " + next() + ")", Arg: lag.Seconds()}
}

// stampCheck: a timestamp without time zone more than FutureTolerance ahead of the UTC clock.
func (postgres) StampCheck(fl TSFlavor, table, col, param string) (string, any, string) {
	if fl != TSUTC {
		return "", nil, ""
	}
	return col + " > (now() AT TIME ZONE 'UTC') + make_interval(secs => " + param + ")", FutureTolerance.Seconds(),
		"Make the column timestamptz, or stamp it with now() AT TIME ZONE 'UTC' (DEFAULT (now() AT TIME ZONE 'UTC')), not now() or CURRENT_TIMESTAMP in a non-UTC session; " +
			fmt.Sprintf("to deliver such rows now rather than when the clock reaches them: UPDATE %s SET %s = now() AT TIME ZONE 'UTC' WHERE %s > (now() AT TIME ZONE 'UTC') + interval '%d minutes'",
				table, col, col, int(FutureTolerance.Minutes()))
}

func (postgres) Classify(base string) (Class, TSFlavor) {
	switch base {
	case "INT2", "INT4", "INT8":
		return ClassInt, TSNone
	case "TEXT", "VARCHAR", "BPCHAR", "NAME", "CHAR":
		return ClassText, TSNone
	case "NUMERIC":
		return ClassDecimal, TSNone
	case "FLOAT4", "FLOAT8":
		return ClassFloat, TSNone
	case "TIMESTAMPTZ":
		return ClassTime, TSWithZone
	case "TIMESTAMP":
		return ClassTime, TSUTC
	case "DATE", "TIME", "TIMETZ":
		return ClassTime, TSUnsupported
	case "BYTEA":
		return ClassBinary, TSNone
	case "UUID":
		return ClassUUID, TSNone
	case "JSON", "JSONB":
		return ClassJSON, TSNone
	case "XID8":
		return ClassXID8, TSNone
	case "BOOL":
		return ClassBool, TSNone
	}
	return ClassOther, TSNone
}

func (postgres) KeyCodec(c ColumnType) (KeyCodec, bool) { return xid8Codec, c.Class == ClassXID8 }

// xid8Codec carries a transaction id as decimal digits: the driver returns it as text.
var xid8Codec = KeyCodec{
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
