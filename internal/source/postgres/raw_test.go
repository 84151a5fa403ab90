package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// viaDatabaseSQL is the driver without its raw reads: a keyset fetch then reads through
// database/sql and pgx's stdlib driver, as it did before them.
type viaDatabaseSQL struct{ Driver }

func (viaDatabaseSQL) ReadRaw(context.Context, *sql.DB, string, []any, func(row.RawRows) error) (bool, error) {
	return false, nil
}

// typedRow has a field of each type Decode fills from a raw row without boxing, and others.
type typedRow struct {
	ID   int64     `db:"id"`
	I2   int16     `db:"i2"`
	I4   int32     `db:"i4"`
	Num  string    `db:"num"`
	T    string    `db:"t"`
	VC   string    `db:"vc"`
	BP   string    `db:"bp"`
	TS   time.Time `db:"ts"`
	TZ   *time.Time
	U    string `db:"u"`
	X    string `db:"x"`
	F8   float64
	IntS string `db:"i4s"` // an integer into a string: the general way
}

// TestRawReadsAsDatabaseSQL: a keyset fetch read through pgx's raw values gives, value for
// value, type for type, what the same fetch through database/sql gives (Values, JSON), and
// Decode fills a struct the same way, errors included, under the query modes that change the
// wire format (binary, or text under simple_protocol).
func TestRawReadsAsDatabaseSQL(t *testing.T) {
	dsn := testenv.Postgres(t)
	db := testenv.DB(t, "pgx", dsn)
	table := testenv.Name("raw_")
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + table) })
	testenv.ExecFlushed(t, db, `CREATE TABLE `+table+` (id bigint PRIMARY KEY, i2 smallint, i4 int, i4s int, num numeric(38,10), t text,
		vc varchar(20), bp char(5), ts timestamp(6), tz timestamptz(6), u uuid, x xid8, f8 double precision, b bool, by bytea,
		j jsonb, d date)`,
		`INSERT INTO `+table+` VALUES
		(1, -32768, 2147483647, -7, 12345678901234567890.0123456789, 'emoji 😀', 'vc', 'ab', '2026-11-23 10:00:00.123456',
		 '2026-11-23 10:00:00.654321+02', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '123456789012', 2.5, true, '\x00ff', '{"a": 1}', '2026-11-23'),
		(2, 32767, -2147483648, 0, -0.5, '', '', '', '1900-01-01 00:00:00.000001', '1999-12-31 23:59:59.999999+00', NULL, '0', -0.0, false, '\x', '[]', '1900-01-01'),
		(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
		(4, 0, 0, 0, 0, 'x', 'x', 'x', '0001-01-01 00:00:00', '294276-12-31 23:59:59.999999+00', NULL, NULL, 'NaN', NULL, NULL, NULL, NULL),
		(5, 0, 0, 0, 'NaN', 'x', 'x', 'x', 'infinity', '-infinity', NULL, NULL, 'Infinity', NULL, NULL, NULL, NULL)`)
	cols := []string{"id", "i2", "i4", "i4s", "num", "t", "vc", "bp", "ts", "tz", "u", "x", "f8", "b", "by", "j", "d"}
	def := sourcedef.Definition{Table: sourcedef.Table{Name: table}, Columns: cols, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "id"}}
	ctx := context.Background()
	for _, mode := range []string{"", "exec", "simple_protocol"} {
		t.Run("mode="+mode, func(t *testing.T) {
			d := dsn
			if mode != "" {
				d = testenv.WithParam(dsn, "default_query_exec_mode", mode)
			}
			fetch := func(dl driver.Driver) []row.Row {
				src, err := source.Open(ctx, driver.Drivers{dl}, source.Config{Poller: "raw", Driver: Name, DSN: d, Definition: def})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { src.Close() })
				b, err := src.Fetch(ctx, nil, 10)
				if err != nil || len(b.Rows) != 5 {
					t.Fatalf("fetch: %v, %v", b, err)
				}
				return b.Rows
			}
			raw, plain := fetch(Driver{}), fetch(viaDatabaseSQL{})
			for r := range raw {
				rv, pv := raw[r].Values(), plain[r].Values()
				for i, c := range cols {
					if got, want := fmt.Sprintf("%T %#v", rv[i], rv[i]), fmt.Sprintf("%T %#v", pv[i], pv[i]); got != want {
						t.Errorf("row %d, column %s: raw %s, database/sql %s", r+1, c, got, want)
					}
				}
				rj, rerr := raw[r].MarshalJSON()
				pj, perr := plain[r].MarshalJSON()
				if string(rj) != string(pj) || (rerr == nil) != (perr == nil) {
					t.Errorf("row %d JSON:\nraw          %s %v\ndatabase/sql %s %v", r+1, rj, rerr, pj, perr)
				}
				var rt, pt typedRow
				rerr, perr = raw[r].Decode(&rt), plain[r].Decode(&pt)
				if fmt.Sprint(rerr) != fmt.Sprint(perr) || !sameTyped(rt, pt) {
					t.Errorf("row %d decoded:\nraw          %+v %v\ndatabase/sql %+v %v", r+1, rt, rerr, pt, perr)
				}
				if r == 0 && (rt.ID != 1 || rt.I2 != -32768 || rt.Num != "12345678901234567890.0123456789" || rt.BP != "ab   " ||
					!rt.TS.Equal(time.Date(2026, 11, 23, 10, 0, 0, 123456000, time.UTC)) || rt.TS.Location() != time.UTC ||
					rt.TZ == nil || !rt.TZ.Equal(time.Date(2026, 11, 23, 8, 0, 0, 654321000, time.UTC)) ||
					rt.U != "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" || rt.IntS != "-7") {
					t.Errorf("row 1 decoded as %+v", rt)
				}
			}
			// The binary formats' integers and times, and text, go to their fields without a boxed
			// value: only the string's bytes are allocated.
			if mode == "" {
				var small struct {
					ID  int64     `db:"id"`
					Num string    `db:"num"`
					TS  time.Time `db:"ts"`
				}
				if n := testing.AllocsPerRun(100, func() { _ = raw[0].Decode(&small) }); n > 1 {
					t.Errorf("Decode of a raw row: %v allocations, want 1 (the string)", n)
				}
			}
			// Fields promoted from an embedded struct (at its offset) and through an embedded
			// pointer (the general way) fill alike.
			for r := range raw {
				rn, pn := nested{Ptr: &Ptr{}}, nested{Ptr: &Ptr{}}
				rerr, perr := raw[r].Decode(&rn), plain[r].Decode(&pn)
				if fmt.Sprint(rerr) != fmt.Sprint(perr) || rn.ID != pn.ID || rn.Small != pn.Small || rn.T != pn.T || rn.Num != pn.Num ||
					!rn.TS.Equal(pn.TS) || rn.Ptr.I4 != pn.Ptr.I4 || rn.Ptr.VC != pn.Ptr.VC {
					t.Errorf("row %d decoded into embedded fields:\nraw          %+v %+v %v\ndatabase/sql %+v %+v %v", r+1, rn, *rn.Ptr, rerr, pn, *pn.Ptr, perr)
				}
				if r == 0 && (rn.ID != 1 || rn.Small != -32768 || rn.T != "emoji 😀" || rn.Ptr.I4 != 2147483647 || rn.Ptr.VC != "vc") {
					t.Errorf("row 1 decoded into embedded fields as %+v %+v", rn, *rn.Ptr)
				}
			}
			// Rows are read from several goroutines at once (a sink's workers): the decoders share
			// their scan plans (go test -race checks them).
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for _, r := range raw {
						_, _ = r.MarshalJSON() // what it gives is compared above
						var d typedRow
						_ = r.Decode(&d)
					}
				})
			}
			wg.Wait()
			// A value that does not fit its field fails the same way either way.
			var narrow struct {
				I4 int16 `db:"i4"`
			}
			rerr, perr := raw[0].Decode(&narrow), plain[0].Decode(&narrow)
			if rerr == nil || fmt.Sprint(rerr) != fmt.Sprint(perr) || !strings.Contains(rerr.Error(), "overflows") {
				t.Errorf("int4 2147483647 into an int16: raw %v, database/sql %v", rerr, perr)
			}
		})
	}
}

// Inner and Ptr are embedded in nested, by value and by pointer.
type Inner struct {
	ID    int64     `db:"id"`
	TS    time.Time `db:"ts"`
	Small small     `db:"i2"`
}

type small int16

type Ptr struct {
	I4 int32  `db:"i4"`
	VC string `db:"vc"`
}

type nested struct {
	T string `db:"t"`
	Inner
	Num string `db:"num"`
	*Ptr
}

func sameTyped(a, b typedRow) bool {
	if !a.TS.Equal(b.TS) || a.TS.Location() != b.TS.Location() || (a.TZ == nil) != (b.TZ == nil) ||
		a.TZ != nil && (!a.TZ.Equal(*b.TZ) || a.TZ.Location() != b.TZ.Location()) {
		return false
	}
	a.TS, b.TS, a.TZ, b.TZ = time.Time{}, time.Time{}, nil, nil
	if a.F8 != a.F8 && b.F8 != b.F8 { // NaN
		a.F8, b.F8 = 0, 0
	}
	return reflect.DeepEqual(a, b)
}

// benchOrders returns a batch of 1,000 rows of the example's orders shape read through dl.
func benchOrders(b *testing.B, dl driver.Driver) []row.Row {
	_, dsn := testenv.PostgresOrdersTable(b, "bench_raw_decode", 1000)
	src, err := source.Open(context.Background(), driver.Drivers{dl}, source.Config{Poller: "rd", Driver: Name, DSN: dsn,
		Definition: sourcedef.Definition{Table: sourcedef.Table{Name: "bench_raw_decode"}, Columns: []string{"id", "customer", "amount", "updated_at"},
			PK: []string{"id"}, Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "updated_at"}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { src.Close() })
	batch, err := src.Fetch(context.Background(), nil, 1000)
	if err != nil || len(batch.Rows) != 1000 {
		b.Fatalf("fetch: %v", err)
	}
	return batch.Rows
}

// BenchmarkRawDecode: a raw row of the example's orders shape into its struct.
func BenchmarkRawDecode(b *testing.B) {
	rows := benchOrders(b, Driver{})
	var o struct {
		ID        int64     `db:"id,key"`
		Customer  string    `db:"customer"`
		Amount    string    `db:"amount"`
		UpdatedAt time.Time `db:"updated_at,cursor"`
	}
	for b.Loop() {
		for _, r := range rows {
			if err := r.Decode(&o); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}

// BenchmarkRawMarshalJSON: a row of the example's orders shape as JSON (what a sink sends), read
// through pgx's raw values and through database/sql.
func BenchmarkRawMarshalJSON(b *testing.B) {
	for _, tc := range []struct {
		name string
		dl   driver.Driver
	}{{"raw", Driver{}}, {"database-sql", viaDatabaseSQL{}}} {
		b.Run(tc.name, func(b *testing.B) {
			rows := benchOrders(b, tc.dl)
			for b.Loop() {
				for _, r := range rows {
					if _, err := r.MarshalJSON(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
		})
	}
}
