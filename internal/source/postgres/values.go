package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// Reads: arrays, which pgx's database/sql driver (and pgoutput) give as their text literal, and
// xml, which it gives as bytes.
func (Driver) Reads(c row.ColumnType) bool {
	return c.Class == row.ClassArray || strings.EqualFold(c.DBType, "XML")
}

// Value turns an array's text literal into its elements ([]any, nested for more dimensions), each
// decoded as a column of the element type is, and xml's bytes into text. An array written with
// its bounds ("[0:1]={1,2}": a lower bound other than 1), which JSON's arrays cannot carry, stays
// PostgreSQL's text literal, as does one of a type pgx does not know.
func (Driver) Value(c row.ColumnType, v any) any {
	if c.Class != row.ClassArray {
		if b, ok := v.([]byte); ok {
			return string(b)
		}
		return v
	}
	s, ok := v.(string)
	if !ok {
		return v
	}
	dec, delim := elemDecoder(arrayElem(c.DBType))
	if dec == nil {
		return v
	}
	a, ok := parseArray(s, delim, dec)
	if !ok {
		return v
	}
	return a
}

// Elem is an array type's element type: pgx names an array type after its element's, with a
// leading underscore ("_INT4").
func (Driver) Elem(c row.ColumnType) string { return arrayElem(c.DBType) }

func arrayElem(dbType string) string { return strings.TrimPrefix(strings.ToUpper(dbType), "_") }

var (
	elemMu       sync.Mutex
	elemTypes    = pgtype.NewMap() // under elemMu, as textDecoder wants
	elemDecoders = map[string]func([]byte) (any, error){}
)

// elemDecoder is how an element of type name decodes from its text (textDecoder, which logical
// rows decode with too), and the delimiter between elements (box: ';', the others ','); nil when
// pgx does not know the type.
func elemDecoder(name string) (func([]byte) (any, error), byte) {
	delim := byte(',')
	if name == "BOX" {
		delim = ';'
	}
	elemMu.Lock()
	defer elemMu.Unlock()
	if d, ok := elemDecoders[name]; ok {
		return d, delim
	}
	var d func([]byte) (any, error)
	if t, ok := elemTypes.TypeForName(strings.ToLower(name)); ok {
		d = textDecoder(elemTypes, &elemMu, t.OID) // its decoders take elemMu themselves when they need the map
	}
	elemDecoders[name] = d
	return d, delim
}

// parseArray reads PostgreSQL's array literal (array_out's output: {1,2}, {{1,2},{3,4}},
// {"a b",NULL}) into its elements, nested for more dimensions, each decoded by dec; false when s
// is not one (or carries its bounds: [0:1]={1,2}).
func parseArray(s string, delim byte, dec func([]byte) (any, error)) (any, bool) {
	p := arrayParser{s: s, delim: delim, dec: dec}
	if len(s) == 0 || s[0] != '{' {
		return nil, false
	}
	a, ok := p.array()
	if !ok || p.i != len(s) {
		return nil, false
	}
	return a, true
}

type arrayParser struct {
	s     string
	i     int
	delim byte
	dec   func([]byte) (any, error)
	buf   []byte
}

// array reads {elem,elem,...} at p.i.
func (p *arrayParser) array() ([]any, bool) {
	p.i++ // '{'
	out := []any{}
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return out, true
	}
	for p.i < len(p.s) {
		var v any
		var ok bool
		switch p.s[p.i] {
		case '{':
			v, ok = p.array()
		case '"':
			v, ok = p.quoted()
		default:
			v, ok = p.bare()
		}
		if !ok {
			return nil, false
		}
		out = append(out, v)
		if p.i >= len(p.s) {
			return nil, false
		}
		switch p.s[p.i] {
		case '}':
			p.i++
			return out, true
		case p.delim:
			p.i++
		default:
			return nil, false
		}
	}
	return nil, false
}

// quoted reads a double-quoted element, whose backslashes escape the next character.
func (p *arrayParser) quoted() (any, bool) {
	p.buf = p.buf[:0]
	for p.i++; p.i < len(p.s); p.i++ {
		switch c := p.s[p.i]; c {
		case '\\':
			p.i++
			if p.i == len(p.s) {
				return nil, false
			}
			p.buf = append(p.buf, p.s[p.i])
		case '"':
			p.i++
			return p.decode(p.buf)
		default:
			p.buf = append(p.buf, c)
		}
	}
	return nil, false
}

// bare reads an unquoted element up to the delimiter or the closing brace: NULL is NULL.
func (p *arrayParser) bare() (any, bool) {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != p.delim && p.s[p.i] != '}' {
		if p.s[p.i] == '"' || p.s[p.i] == '{' || p.s[p.i] == '\\' {
			return nil, false
		}
		p.i++
	}
	t := p.s[start:p.i]
	if t == "" {
		return nil, false
	}
	if strings.EqualFold(t, "NULL") {
		return nil, true
	}
	return p.decode([]byte(t))
}

func (p *arrayParser) decode(b []byte) (any, bool) {
	v, err := p.dec(b)
	if err != nil {
		return nil, false
	}
	return v, true
}

// ColumnTypes names the types pgx does not know, which its DatabaseTypeName gives as their oid
// ("16412"): an array of an enum or of a domain is named after what its elements are read as
// (_TEXT for an enum's labels, the domain's base type for a domain's), so that it arrives as a
// JSON array as the built-in types' arrays do; an enum as TEXT. Other types keep their oid and
// arrive as PostgreSQL's text.
func (Driver) ColumnTypes(ctx context.Context, db *sql.DB, _ sourcedef.Table, _, types []string) ([]string, error) {
	var oids []int64
	for _, t := range types {
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			oids = append(oids, n)
		}
	}
	if len(oids) == 0 {
		return types, nil
	}
	// An element's name: an enum's is text; a domain's its base type's (one level, as a domain
	// over a domain is rare); any other its own.
	rows, err := db.QueryContext(ctx, `SELECT t.oid::int8, t.typtype::text, t.typcategory::text,
		  CASE e.typtype WHEN 'e' THEN 'text' WHEN 'd' THEN b.typname::text ELSE e.typname::text END
		FROM pg_type t LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A'
		  LEFT JOIN pg_type b ON b.oid = e.typbasetype
		WHERE t.oid = ANY($1)`, oids)
	if err != nil {
		return nil, fmt.Errorf("reading the column types pgx does not know (pg_type): %w", err)
	}
	defer rows.Close()
	names := map[string]string{}
	for rows.Next() {
		var (
			oid               int64
			typtype, category string
			elem              sql.NullString
		)
		if err := rows.Scan(&oid, &typtype, &category, &elem); err != nil {
			return nil, err
		}
		switch {
		case typtype == "e":
			names[strconv.FormatInt(oid, 10)] = "TEXT"
		case category == "A" && elem.Valid:
			elemMu.Lock()
			t, ok := elemTypes.TypeForName(elem.String)
			elemMu.Unlock()
			if ok && !strings.HasPrefix(t.Name, "_") {
				names[strconv.FormatInt(oid, 10)] = "_" + strings.ToUpper(t.Name)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := slices.Clone(types)
	for i, t := range types {
		if n, ok := names[t]; ok {
			out[i] = n
		}
	}
	return out, nil
}
