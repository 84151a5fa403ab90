package postgres

import (
	"context"
	"database/sql"
	"encoding/binary"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
)

// ReadRaw runs a keyset fetch on a pool connection through pgx itself and hands its rows over as
// PostgreSQL sent them (Driver.ReadRaw): pgx's database/sql driver would box every value into
// an any, which a batch then keeps. Values decode into exactly what that driver gives (its
// stdlib Rows.Next), so a row reads the same either way.
func (Driver) ReadRaw(ctx context.Context, db *sql.DB, query string, args []any, read func(row.RawRows) error) (bool, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return true, err
	}
	defer conn.Close()
	handled := false
	err = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return nil
		}
		handled = true
		c := sc.Conn()
		rows, err := c.Query(ctx, query, append([]any{resultFormats}, args...)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return read(&rawRows{rows: rows, cols: rawColumns(c.TypeMap(), rows.FieldDescriptions())})
	})
	return handled, err
}

// resultFormats are the result formats pgx's database/sql driver asks for (stdlib's
// databaseSQLResultFormats): binary for these types, text for the others, so that values read
// the same as through it (a numeric in binary format would lose its trailing zeros: "0.00" as
// "0").
var resultFormats = pgx.QueryResultFormatsByOID{
	pgtype.BoolOID: 1, pgtype.ByteaOID: 1, pgtype.CIDOID: 1, pgtype.DateOID: 1, pgtype.Float4OID: 1, pgtype.Float8OID: 1,
	pgtype.Int2OID: 1, pgtype.Int4OID: 1, pgtype.Int8OID: 1, pgtype.OIDOID: 1, pgtype.TimestampOID: 1,
	pgtype.TimestamptzOID: 1, pgtype.XIDOID: 1,
}

type rawRows struct {
	rows pgx.Rows
	cols []row.RawColumn
}

func (r *rawRows) Next() bool               { return r.rows.Next() }
func (r *rawRows) Values() [][]byte         { return r.rows.RawValues() }
func (r *rawRows) Columns() []row.RawColumn { return r.cols }
func (r *rawRows) Err() error               { return r.rows.Err() }

// rawColumns are the decoders of a result's columns: for each, what pgx's database/sql driver
// returns for the type (stdlib's Rows.initValueFuncs, case by case), with the scan plan made here
// and the destination made per call, so that rows decode later, from any goroutine; and for the
// types a struct field usually holds, their typed decoding.
func rawColumns(m *pgtype.Map, fds []pgconn.FieldDescription) []row.RawColumn {
	out := make([]row.RawColumn, len(fds))
	for i, fd := range fds {
		c := row.RawColumn{Value: valueFunc(m, fd.DataTypeOID, fd.Format)}
		binary := fd.Format == pgtype.BinaryFormatCode
		switch fd.DataTypeOID {
		case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID:
			if binary {
				c.Int = binaryInt
			}
		case pgtype.TimestampOID, pgtype.TimestamptzOID:
			if binary {
				c.Time = binaryTimestamp
			}
		case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID:
			c.Text = true // a text value's bytes are the same in either format
		case pgtype.NumericOID:
			c.Text = !binary
		}
		out[i] = c
	}
	return out
}

// binaryInt reads an int2, int4 or int8 in binary format.
func binaryInt(src []byte) (int64, bool) {
	switch len(src) {
	case 2:
		return int64(int16(binary.BigEndian.Uint16(src))), true
	case 4:
		return int64(int32(binary.BigEndian.Uint32(src))), true
	case 8:
		return int64(binary.BigEndian.Uint64(src)), true
	}
	return 0, false
}

// binaryTimestamp reads a timestamp or timestamptz in binary format (microseconds since
// PostgreSQL's epoch) as a time in UTC; not ok for infinity and -infinity, which Value gives as
// pgx does. Seconds and microseconds apart, as pgx does: the microseconds of 294276 AD, the
// latest timestamp, plus the epoch's would overflow an int64.
func binaryTimestamp(src []byte) (time.Time, bool) {
	if len(src) != 8 {
		return time.Time{}, false
	}
	us := int64(binary.BigEndian.Uint64(src))
	if us == math.MaxInt64 || us == math.MinInt64 {
		return time.Time{}, false
	}
	return time.Unix(pgEpochSeconds+us/1_000_000, us%1_000_000*1_000).UTC(), true
}

func valueFunc(m *pgtype.Map, oid uint32, format int16) func([]byte) (any, error) {
	switch oid {
	case pgtype.BoolOID:
		return scanned[bool](m, oid, format, nil)
	case pgtype.ByteaOID, pgtype.JSONOID, pgtype.JSONBOID, pgtype.XMLOID:
		return scanned(m, oid, format, func(d []byte) (any, error) { return slices.Clone(d), nil })
	case pgtype.CIDOID, pgtype.OIDOID, pgtype.XIDOID:
		return scanned(m, oid, format, func(d pgtype.Uint32) (any, error) { return d.Value() })
	case pgtype.DateOID:
		return scanned(m, oid, format, func(d pgtype.Date) (any, error) { return d.Value() })
	case pgtype.Float4OID:
		return scanned(m, oid, format, func(d float32) (any, error) { return float64(d), nil })
	case pgtype.Float8OID:
		return scanned[float64](m, oid, format, nil)
	case pgtype.Int2OID:
		return scanned(m, oid, format, func(d int16) (any, error) { return int64(d), nil })
	case pgtype.Int4OID:
		return scanned(m, oid, format, func(d int32) (any, error) { return int64(d), nil })
	case pgtype.Int8OID:
		return scanned[int64](m, oid, format, nil)
	case pgtype.TimestampOID:
		return scanned(m, oid, format, func(d pgtype.Timestamp) (any, error) { return d.Value() })
	case pgtype.TimestamptzOID:
		return scanned(m, oid, format, func(d pgtype.Timestamptz) (any, error) { return d.Value() })
	}
	return scanned[string](m, oid, format, nil)
}

// scanned decodes a value with the scan plan for a T and returns it through value (nil: the T
// itself).
func scanned[T any](m *pgtype.Map, oid uint32, format int16, value func(T) (any, error)) func([]byte) (any, error) {
	var zero T
	plan := m.PlanScan(oid, format, &zero)
	return func(src []byte) (any, error) {
		var d T
		if err := plan.Scan(src, &d); err != nil {
			return nil, err
		}
		if value == nil {
			return d, nil
		}
		return value(d)
	}
}
