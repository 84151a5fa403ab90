package source

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/golang-sql/civil"
	mssql "github.com/microsoft/go-mssqldb"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// class is what a column's database type is, as far as encoding its values goes.
type class int

const (
	classOther      class = iota // passed through as the driver returns it
	classInt                     // integers
	classText                    // character strings
	classDecimal                 // exact numerics: rendered as strings
	classFloat                   // approximate numerics
	classTime                    // date and time types
	classBinary                  // bytes: base64 in JSON
	classUUID                    // uniqueidentifier, uuid: canonical text
	classJSON                    // json, jsonb: raw JSON
	classXID8                    // PostgreSQL xid8: decimal digits
	classRowversion              // SQL Server rowversion / timestamp
	classBool
)

var declaredScale = regexp.MustCompile(`\(\s*\d+\s*,\s*(\d+)\s*\)`)

// classify maps a driver's DatabaseTypeName (SQLite: the declared type) to a class, and for
// timestamps the way they compare with the database's clock.
func classify(driver, dbType string) (class, tsFlavor, int) {
	t := strings.ToUpper(strings.TrimSpace(dbType))
	base := t
	if i := strings.IndexByte(base, '('); i >= 0 {
		base = strings.TrimSpace(base[:i])
	}
	scale := -1
	if m := declaredScale.FindStringSubmatch(t); m != nil {
		scale, _ = strconv.Atoi(m[1])
	}
	switch driver {
	case Postgres:
		switch base {
		case "INT2", "INT4", "INT8":
			return classInt, tsNone, scale
		case "TEXT", "VARCHAR", "BPCHAR", "NAME", "CHAR":
			return classText, tsNone, scale
		case "NUMERIC":
			return classDecimal, tsNone, scale
		case "FLOAT4", "FLOAT8":
			return classFloat, tsNone, scale
		case "TIMESTAMPTZ":
			return classTime, tsWithZone, scale
		case "TIMESTAMP":
			return classTime, tsUTC, scale
		case "DATE", "TIME", "TIMETZ":
			return classTime, tsUnsupported, scale
		case "BYTEA":
			return classBinary, tsNone, scale
		case "UUID":
			return classUUID, tsNone, scale
		case "JSON", "JSONB":
			return classJSON, tsNone, scale
		case "XID8":
			return classXID8, tsNone, scale
		case "BOOL":
			return classBool, tsNone, scale
		}
	case SQLServer:
		switch base {
		case "TINYINT", "SMALLINT", "INT", "BIGINT":
			return classInt, tsNone, scale
		case "CHAR", "VARCHAR", "NCHAR", "NVARCHAR", "TEXT", "NTEXT", "XML", "SYSNAME":
			return classText, tsNone, scale
		case "DECIMAL", "NUMERIC", "MONEY", "SMALLMONEY":
			return classDecimal, tsNone, scale
		case "REAL", "FLOAT":
			return classFloat, tsNone, scale
		case "DATETIMEOFFSET":
			return classTime, tsWithZone, scale
		case "DATETIME2", "DATETIME", "SMALLDATETIME":
			return classTime, tsUTC, scale
		case "DATE", "TIME":
			return classTime, tsUnsupported, scale
		case "TIMESTAMP", "ROWVERSION":
			return classRowversion, tsNone, scale
		case "BINARY", "VARBINARY", "IMAGE":
			return classBinary, tsNone, scale
		case "UNIQUEIDENTIFIER":
			return classUUID, tsNone, scale
		case "BIT":
			return classBool, tsNone, scale
		}
	case SQLite:
		// SQLite's type affinity rules, applied to the declared type.
		switch {
		case strings.Contains(base, "INT"):
			return classInt, tsNone, scale
		case base == "DATETIME" || base == "TIMESTAMP":
			return classText, tsText, scale
		case strings.Contains(base, "CHAR") || strings.Contains(base, "CLOB") || strings.Contains(base, "TEXT"):
			return classText, tsText, scale
		case base == "BLOB" || base == "":
			return classBinary, tsNone, scale
		case strings.Contains(base, "DEC") || strings.Contains(base, "NUMERIC"):
			return classDecimal, tsNone, scale
		case strings.Contains(base, "REAL") || strings.Contains(base, "FLOA") || strings.Contains(base, "DOUB"):
			return classFloat, tsNone, scale
		case strings.Contains(base, "BOOL"):
			return classBool, tsNone, scale
		}
	}
	return classOther, tsNone, scale
}

// normalize turns what the driver returned into the value a Row shows: decimals as strings,
// UUIDs in canonical text, JSON raw, times in UTC, nil for NULL. A value that is already right
// is returned as the same interface value, without boxing it again. It never fails: a value of
// an unexpected type is returned as it is.
func normalize(c *column, v any) any {
	if v == nil || c.pass {
		return v
	}
	n, err := normalizeErr(c, v)
	if err != nil {
		return v
	}
	return n
}

func normalizeErr(c *column, v any) (any, error) {
	// pgx gives integers and floats at their column's width; widen them to int64 and float64.
	switch x := v.(type) {
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case float32:
		return float64(x), nil
	}
	switch c.class {
	case classDecimal:
		switch x := v.(type) {
		case string:
			return v, nil
		case []byte:
			return string(x), nil
		case int64:
			return strconv.FormatInt(x, 10), nil
		case float64: // SQLite stores DECIMAL as REAL: render at the declared scale
			return formatScaled(x, c.scale), nil
		}
	case classUUID:
		switch x := v.(type) {
		case string:
			return strings.ToLower(x), nil
		case []byte:
			if len(x) == 16 && c.driver == SQLServer {
				// go-mssqldb returns uniqueidentifier bytes in SQL Server's mixed-endian order.
				var u mssql.UniqueIdentifier
				if err := u.Scan(x); err != nil {
					return nil, err
				}
				return strings.ToLower(u.String()), nil
			}
			return string(x), nil
		}
	case classJSON:
		switch x := v.(type) {
		case []byte:
			return json.RawMessage(x), nil
		case string:
			return json.RawMessage(x), nil
		}
	case classXID8:
		switch x := v.(type) {
		case string:
			return v, nil
		case int64:
			return strconv.FormatInt(x, 10), nil
		}
	case classText:
		if b, ok := v.([]byte); ok {
			return string(b), nil
		}
	}
	if t, ok := v.(time.Time); ok && t.Location() != time.UTC {
		return t.UTC(), nil
	}
	return v, nil
}

// keyCodec encodes a key column's value into the state document's cursor and back into a query
// argument, exactly.
type keyCodec struct {
	encode func(v any) (json.RawMessage, error)
	decode func(raw json.RawMessage) (any, error)
}

var errKeyType = errors.New("cannot be a cursor or key column")

// codecFor picks the codec for a key column; flavor matters for timestamp arguments.
func codecFor(driver string, c *column, flavor tsFlavor) (keyCodec, error) {
	switch c.class {
	case classInt:
		return keyCodec{
			encode: func(v any) (json.RawMessage, error) {
				n, ok := v.(int64)
				if !ok {
					return nil, fmt.Errorf("an integer column returned %T", v)
				}
				return strconv.AppendInt(nil, n, 10), nil
			},
			decode: func(raw json.RawMessage) (any, error) {
				return strconv.ParseInt(string(raw), 10, 64)
			},
		}, nil
	case classXID8:
		return keyCodec{
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
		}, nil
	case classText, classUUID:
		if flavor == tsText {
			return textTimeCodec, nil
		}
		return keyCodec{
			encode: func(v any) (json.RawMessage, error) {
				s, ok := v.(string)
				if !ok {
					return nil, fmt.Errorf("a text column returned %T", v)
				}
				return json.Marshal(s)
			},
			decode: func(raw json.RawMessage) (any, error) {
				var s string
				err := json.Unmarshal(raw, &s)
				return s, err
			},
		}, nil
	case classRowversion, classBinary:
		if c.class == classBinary && driver != SQLServer {
			break
		}
		return keyCodec{
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
		}, nil
	case classTime:
		if flavor == tsUnsupported {
			break
		}
		return keyCodec{
			encode: func(v any) (json.RawMessage, error) {
				t, ok := v.(time.Time)
				if !ok {
					return nil, fmt.Errorf("a timestamp column returned %T", v)
				}
				return json.Marshal(t.UTC().Format(time.RFC3339Nano))
			},
			decode: func(raw json.RawMessage) (any, error) {
				var s string
				if err := json.Unmarshal(raw, &s); err != nil {
					return nil, err
				}
				t, err := time.Parse(time.RFC3339Nano, s)
				if err != nil {
					return nil, err
				}
				if driver == SQLServer && flavor == tsUTC {
					// go-mssqldb sends time.Time as datetimeoffset, which would convert the
					// datetime2 column and defeat its index; civil.DateTime goes as datetime2.
					return civil.DateTimeOf(t.UTC()), nil
				}
				return t.UTC(), nil
			},
		}, nil
	}
	return keyCodec{}, fmt.Errorf("type %s %w", c.dbType, errKeyType)
}

// textTimeCodec carries a SQLite TEXT timestamp verbatim (its text order is its time order), and
// refuses text that is not in the fixed-width layout, whose place in that order would be wrong.
var textTimeCodec = keyCodec{
	encode: func(v any) (json.RawMessage, error) {
		s, ok := v.(string)
		if !ok {
			// SQLite sorts numbers and blobs apart from text: such a row is out of time order.
			return nil, fmt.Errorf("%w: a TEXT timestamp column holds %T %v, not text in the fixed-width UTC layout YYYY-MM-DDTHH:MM:SS.ffffffZ",
				ErrUnreachableRow, v, v)
		}
		if !fixedWidth(s) {
			return nil, fmt.Errorf("%w: value %q is not in the fixed-width UTC layout YYYY-MM-DDTHH:MM:SS.ffffffZ, the only text whose order is time order",
				ErrUnreachableRow, s)
		}
		return json.Marshal(s)
	},
	decode: func(raw json.RawMessage) (any, error) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if !fixedWidth(s) {
			return nil, fmt.Errorf("%q is not a timestamp in the fixed-width layout YYYY-MM-DDTHH:MM:SS.ffffffZ (text that compares in time order)", s)
		}
		return s, nil
	},
}

// fixedWidth reports whether s is a timestamp in state.TimeLayout exactly (the only text whose
// order is its time order).
func fixedWidth(s string) bool {
	if len(s) != len(state.TimeLayout) {
		return false
	}
	_, err := time.Parse(state.TimeLayout, s)
	return err == nil
}

// formatScaled renders f with scale decimals (all significant ones when scale < 0). Scales up to
// 9 on values that fit take an integer path, several times faster than strconv's.
func formatScaled(f float64, scale int) string {
	if scale < 0 || scale > 9 {
		return noNegativeZero(strconv.FormatFloat(f, 'f', scale, 64))
	}
	p := pow10[scale]
	x := f * p
	// Near a half the exact decimal expansion decides the rounding: leave those to strconv.
	if math.Abs(x) >= 1<<52 || math.Abs(math.Abs(x-math.Trunc(x))-0.5) < 1e-6 {
		return noNegativeZero(strconv.FormatFloat(f, 'f', scale, 64))
	}
	r := math.Round(x)
	n := int64(r)
	var buf [32]byte
	b := buf[:0]
	if n < 0 { // a value that rounds to zero has n == 0: no "-0"
		b = append(b, '-')
		n = -n
	}
	digits := strconv.AppendInt(nil, n, 10)
	for len(digits) <= scale {
		digits = append([]byte{'0'}, digits...)
	}
	b = append(b, digits[:len(digits)-scale]...)
	if scale > 0 {
		b = append(b, '.')
		b = append(b, digits[len(digits)-scale:]...)
	}
	return string(b)
}

var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

func noNegativeZero(s string) string {
	if strings.HasPrefix(s, "-") && strings.Trim(s, "-0.") == "" {
		return s[1:]
	}
	return s
}
