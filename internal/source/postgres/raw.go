package postgres

import (
	"context"
	"database/sql"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
)

// ReadRaw runs a keyset fetch on a pool connection through pgx itself and hands its rows over as
// PostgreSQL sent them (source.RawReader): pgx's database/sql driver would box every value into
// an any, which a batch then keeps. Values decode into exactly what that driver gives (its
// stdlib Rows.Next), so a row reads the same either way.
func (Driver) ReadRaw(ctx context.Context, db *sql.DB, query string, args []any, read func(source.RawRows) error) (bool, error) {
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
		rows, err := c.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return read(&rawRows{rows: rows, dec: valueFuncs(c.TypeMap(), rows.FieldDescriptions())})
	})
	return handled, err
}

type rawRows struct {
	rows pgx.Rows
	dec  []func([]byte) (any, error)
}

func (r *rawRows) Next() bool                            { return r.rows.Next() }
func (r *rawRows) Values() [][]byte                      { return r.rows.RawValues() }
func (r *rawRows) Decoders() []func([]byte) (any, error) { return r.dec }
func (r *rawRows) Err() error                            { return r.rows.Err() }

// valueFuncs are the decoders of a result's columns: for each, what pgx's database/sql driver
// returns for the type (stdlib's Rows.initValueFuncs, case by case), with the scan plan made here
// and the destination made per call, so that rows decode later, from any goroutine.
func valueFuncs(m *pgtype.Map, fds []pgconn.FieldDescription) []func([]byte) (any, error) {
	out := make([]func([]byte) (any, error), len(fds))
	for i, fd := range fds {
		out[i] = valueFunc(m, fd.DataTypeOID, fd.Format)
	}
	return out
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

var _ source.RawReader = Driver{}
