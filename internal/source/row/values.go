package row

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/jsonenc"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// A Class is what a column's database type is, as far as encoding its values goes.
type Class int

// The classes.
const (
	ClassOther      Class = iota // passed through as the driver returns it
	ClassInt                     // integers
	ClassText                    // character strings
	ClassDecimal                 // exact numerics: rendered as strings
	ClassFloat                   // approximate numerics
	ClassReal                    // single-precision floats (float4, REAL, FLOAT): float32 digits in JSON
	ClassTime                    // date and time types
	ClassBinary                  // bytes: base64 in JSON
	ClassUUID                    // uniqueidentifier, uuid: canonical text
	ClassJSON                    // json, jsonb: raw JSON
	ClassXID8                    // PostgreSQL xid8: decimal digits
	ClassRowversion              // SQL Server rowversion / timestamp
	ClassBool
	// ClassArray: arrays (PostgreSQL), whose values the driver's Value turns into []any of their
	// elements' values (nested for more dimensions).
	ClassArray
)

// A TSFlavor says how a timestamp cursor column compares with the database's clock.
type TSFlavor int

// The flavors.
const (
	TSNone        TSFlavor = iota // not a timestamp cursor
	TSWithZone                    // timestamptz, datetimeoffset
	TSUTC                         // timestamp without time zone, datetime2, datetime: assumed UTC
	TSText                        // SQLite TEXT in the fixed-width UTC layout
	TSUnsupported                 // a timestamp type the driver cannot bound
)

var declaredScale = regexp.MustCompile(`\(\s*\d+\s*,\s*(\d+)\s*\)`)

// A Column is one column a source reads: its name, its type as its driver classed it, and how its
// values become what a Row holds.
type Column struct {
	Name string
	ColumnType
	types Types
	scale int  // the declared scale; -1: none
	pass  bool // the driver's value is already what a Row holds
	// reads: the driver's Value turns the Go driver's values into what a Row holds
	reads bool
	elem  *Column // an array's elements (ClassArray)
}

// Types is what a column needs of its database's driver (a driver.Driver has it; its methods
// are documented there).
type Types interface {
	Classify(base string) (Class, TSFlavor)
	Scalars() bool
	Reads(c ColumnType) bool
	Value(c ColumnType, v any) any
	Elem(c ColumnType) string
	UUID(b []byte) (string, error)
	KeyCodec(c ColumnType) (KeyCodec, bool)
}

// BaseType is a column type as Classify takes it: upper case, without its size ("DECIMAL" for
// "decimal(12,2)").
func BaseType(dbType string) string {
	base := strings.ToUpper(strings.TrimSpace(dbType))
	if i := strings.IndexByte(base, '('); i >= 0 {
		base = strings.TrimSpace(base[:i])
	}
	return base
}

// NewColumn describes column name, whose DatabaseTypeName (SQLite: the declared type) is dbType,
// in driver dl: its class, how a timestamp compares with the database's clock, its declared
// scale (-1: none), and whether the driver's values need normalizing.
func NewColumn(dl Types, name, dbType string) Column {
	c := Column{Name: name, types: dl, ColumnType: ColumnType{DBType: dbType}, scale: -1}
	if m := declaredScale.FindStringSubmatch(strings.ToUpper(dbType)); m != nil {
		c.scale, _ = strconv.Atoi(m[1])
	}
	c.Class, c.Flavor = dl.Classify(BaseType(dbType))
	switch c.Class {
	case ClassBool, ClassBinary, ClassOther:
		c.pass = true
	case ClassInt, ClassFloat, ClassReal, ClassText:
		c.pass = dl.Scalars() // else normalize widens
	}
	if dl.Reads(c.ColumnType) {
		c.reads, c.pass = true, false
	}
	if c.Class == ClassArray {
		e := NewColumn(dl, name, dl.Elem(c.ColumnType))
		c.elem, c.pass = &e, false
	}
	return c
}

// Normalize turns v, a value of column c as the Go driver returned it, into what a Row holds
// (docs/types.md).
func (c *Column) Normalize(v any) any { return normalize(c, v) }

// normalize turns what the driver returned into the value a Row shows: decimals as strings,
// UUIDs in canonical text, JSON raw, times in UTC, nil for NULL. A value that is already right
// is returned as the same interface value, without boxing it again. It never fails: a value of
// an unexpected type is returned as it is.
func normalize(c *Column, v any) any {
	if v == nil || c.pass {
		return v
	}
	if c.reads {
		v = c.types.Value(c.ColumnType, v)
	}
	n, err := normalizeErr(c, v)
	if err != nil {
		return v
	}
	return n
}

func normalizeErr(c *Column, v any) (any, error) {
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
	case uint64: // MySQL's BIGINT UNSIGNED: an int64 when it fits, else kept exact
		if x <= math.MaxInt64 {
			return int64(x), nil
		}
		return x, nil
	}
	switch c.Class {
	case ClassInt: // an integer as digits (go-sql-driver's binary protocol, BIGINT UNSIGNED)
		var s string
		switch x := v.(type) {
		case []byte:
			s = string(x)
		case string:
			s = x
		default:
			return v, nil
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
		return strconv.ParseUint(s, 10, 64)
	case ClassDecimal:
		switch x := v.(type) {
		case string:
			return v, nil
		case []byte:
			return string(x), nil
		case int64:
			return strconv.FormatInt(x, 10), nil
		case float64: // SQLite stores DECIMAL as REAL: render at the declared scale
			if math.IsInf(x, 0) { // a float, whose JSON is "Infinity", written back as one
				return x, nil
			}
			return formatScaled(x, c.scale), nil
		}
	case ClassUUID:
		switch x := v.(type) {
		case string:
			return strings.ToLower(x), nil
		case []byte:
			return c.types.UUID(x)
		}
	case ClassJSON:
		switch x := v.(type) {
		case []byte:
			return json.RawMessage(x), nil
		case string:
			return json.RawMessage(x), nil
		}
	case ClassXID8:
		switch x := v.(type) {
		case string:
			return v, nil
		case int64:
			return strconv.FormatInt(x, 10), nil
		}
	case ClassText:
		if b, ok := v.([]byte); ok {
			return string(b), nil
		}
	case ClassArray:
		if a, ok := v.([]any); ok && c.elem != nil {
			normalizeElems(c.elem, a)
		}
	}
	if t, ok := v.(time.Time); ok && t.Location() != time.UTC {
		return t.UTC(), nil
	}
	return v, nil
}

// normalizeElems normalizes an array's elements in place, of every dimension (a []any within).
func normalizeElems(e *Column, a []any) {
	for i, v := range a {
		if sub, ok := v.([]any); ok {
			normalizeElems(e, sub)
			continue
		}
		a[i] = normalize(e, v)
	}
}

var errKeyType = errors.New("cannot be a cursor or key column")

// CodecFor picks the codec for a key column: the driver's own, or one of the generic ones.
func CodecFor(c *Column) (KeyCodec, error) {
	if k, ok := c.types.KeyCodec(c.ColumnType); ok {
		return k, nil
	}
	switch {
	case c.Class == ClassInt:
		return intCodec, nil
	case c.Class == ClassText || c.Class == ClassUUID:
		return TextCodec, nil
	case c.Class == ClassTime && c.Flavor != TSUnsupported:
		return TimeCodec, nil
	}
	return KeyCodec{}, fmt.Errorf("type %s %w", c.DBType, errKeyType)
}

var intCodec = KeyCodec{
	Encode: func(v any) (json.RawMessage, error) {
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("an integer column returned %T", v)
		}
		return strconv.AppendInt(nil, n, 10), nil
	},
	Decode: func(raw json.RawMessage) (any, error) {
		return strconv.ParseInt(string(raw), 10, 64)
	},
}

// TextCodec keeps a text key as a JSON string.
var TextCodec = KeyCodec{
	Encode: func(v any) (json.RawMessage, error) {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("a text column returned %T", v)
		}
		return json.Marshal(s)
	},
	Decode: func(raw json.RawMessage) (any, error) {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	},
}

// TimeCodec carries a timestamp as RFC 3339 in UTC at full precision (a driver's own codec may
// build on it).
var TimeCodec = KeyCodec{
	Encode: func(v any) (json.RawMessage, error) {
		t, ok := v.(time.Time)
		if !ok {
			return nil, fmt.Errorf("a timestamp column returned %T", v)
		}
		return jsonenc.AppendTime(nil, t), nil
	},
	Decode: func(raw json.RawMessage) (any, error) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		t, err := jsonenc.ParseTime(s)
		if err != nil {
			return nil, err
		}
		return t.UTC(), nil
	},
}

// formatScaled renders f, a REAL that SQLite keeps in a DECIMAL(p, scale) column, with at least
// scale decimals, and never fewer digits than f's own shortest text: SQLite does not round a
// value to its column's scale, so 12.5 is "12.50" but 12.345 is "12.345", not a rounded "12.35"
// (scale < 0: its shortest text). Scales up to 9 on values that fit take an integer path, several
// times faster than strconv's shortest rendering.
func formatScaled(f float64, scale int) string {
	switch {
	case math.IsInf(f, 1): // SQLite keeps 9e999 as a REAL anywhere
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	if scale < 0 || scale > 9 || math.Abs(f*pow10[scale]) >= 1<<52 {
		return padScale(f, scale)
	}
	p := pow10[scale]
	r := math.Round(f * p)
	// n/10^scale, correctly rounded, is f itself only when f has no more than scale decimals
	// (n and 10^scale are exact doubles and IEEE division rounds correctly).
	if r/p != f {
		return padScale(f, scale)
	}
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

// padScale is f's shortest text, in decimal notation, padded with zeros to scale decimals.
func padScale(f float64, scale int) string {
	s := noNegativeZero(strconv.FormatFloat(f, 'f', -1, 64))
	dot := strings.IndexByte(s, '.')
	have := 0
	if dot >= 0 {
		have = len(s) - dot - 1
	}
	if have >= scale {
		return s
	}
	if dot < 0 {
		s += "."
	}
	return s + strings.Repeat("0", scale-have)
}

var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

func noNegativeZero(s string) string {
	if strings.HasPrefix(s, "-") && strings.Trim(s, "-0.") == "" {
		return s[1:]
	}
	return s
}

// FixedWidth reports whether s is a timestamp in state.TimeLayout exactly: the only text whose
// order is its time order, which a TSText cursor column must hold.
//
// It agrees with time.Parse(state.TimeLayout, s) == nil (TestFixedWidthIsParse), checked byte by
// byte: it runs on every row a TSText source reads, where time.Parse cost 13% of a SQLite fetch.
func FixedWidth(s string) bool {
	const layout = state.TimeLayout // "2006-01-02T15:04:05.000000Z"
	if len(s) != len(layout) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if isDigit(layout[i]) != isDigit(s[i]) || !isDigit(s[i]) && s[i] != layout[i] {
			return false
		}
	}
	two := func(i int) int { return int(s[i]-'0')*10 + int(s[i+1]-'0') }
	month, day := two(5), two(8)
	if month < 1 || month > 12 || day < 1 || two(11) > 23 || two(14) > 59 || two(17) > 59 {
		return false
	}
	return day <= 28 || day <= time.Date(two(0)*100+two(2), time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
