package source

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-sql/civil"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

func TestFingerprint(t *testing.T) {
	def := Definition{Table: Table{Schema: "dbo", Name: "orders"}, Columns: []string{"id", "customer"},
		Cursor: Cursor{Kind: state.KindTimestampPK, Column: "updated_at"}, PK: []string{"id"}}
	fp := func(driver, dsn string, d Definition) string {
		t.Helper()
		loc, err := Builtin().Location(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		return Fingerprint(driver, loc, d)
	}
	base := fp(SQLServer, "sqlserver://app:secret1@db.example.com:1433?database=shop", def)
	if !strings.HasPrefix(base, "sha256:") || len(base) != len("sha256:")+64 {
		t.Fatalf("fingerprint %q", base)
	}
	same := map[string]string{
		"password changed":      fp(SQLServer, "sqlserver://app:other-secret@db.example.com:1433?database=shop", def),
		"user changed":          fp(SQLServer, "sqlserver://reader:x@db.example.com:1433?database=shop", def),
		"host case":             fp(SQLServer, "sqlserver://app:secret1@DB.example.com:1433?database=shop", def),
		"managed identity auth": fp(SQLServer, "sqlserver://db.example.com:1433?database=shop&fedauth=ActiveDirectoryManagedIdentity&user+id=abc", def),
	}
	for name, got := range same {
		if got != base {
			t.Errorf("%s changed the fingerprint", name)
		}
	}
	changed := func(mutate func(d *Definition)) Definition {
		d := def
		d.Columns = append([]string(nil), def.Columns...)
		d.PK = append([]string(nil), def.PK...)
		mutate(&d)
		return d
	}
	differ := map[string]string{
		"table":    fp(SQLServer, "sqlserver://app:secret1@db.example.com:1433?database=shop", changed(func(d *Definition) { d.Table.Name = "orders2" })),
		"schema":   fp(SQLServer, "sqlserver://app:secret1@db.example.com:1433?database=shop", changed(func(d *Definition) { d.Table.Schema = "sales" })),
		"column":   fp(SQLServer, "sqlserver://app:secret1@db.example.com:1433?database=shop", changed(func(d *Definition) { d.Columns = append(d.Columns, "amount") })),
		"cursor":   fp(SQLServer, "sqlserver://app:secret1@db.example.com:1433?database=shop", changed(func(d *Definition) { d.Cursor.Column = "created_at" })),
		"kind":     fp(SQLServer, "sqlserver://app:secret1@db.example.com:1433?database=shop", changed(func(d *Definition) { d.Cursor = Cursor{Kind: state.KindInteger, Column: "id"} })),
		"pk":       fp(SQLServer, "sqlserver://app:secret1@db.example.com:1433?database=shop", changed(func(d *Definition) { d.PK = []string{"id", "region"} })),
		"filter":   fp(SQLServer, "sqlserver://app:secret1@db.example.com:1433?database=shop", changed(func(d *Definition) { d.Filter = "x = 1" })),
		"database": fp(SQLServer, "sqlserver://app:secret1@db.example.com:1433?database=shop2", def),
		"server":   fp(SQLServer, "sqlserver://app:secret1@db2.example.com:1433?database=shop", def),
		"driver":   fp(Postgres, "postgres://app:secret1@db.example.com:1433/shop", def),
	}
	for name, got := range differ {
		if got == base {
			t.Errorf("a %s change kept the fingerprint", name)
		}
	}
	// The settle lag is operational, not what is read.
	if fp(SQLServer, "sqlserver://app:secret1@db.example.com:1433?database=shop", changed(func(d *Definition) { d.SettleLag = time.Minute })) != base {
		t.Error("the settle lag changed the fingerprint")
	}
}

func TestParseLocation(t *testing.T) {
	cases := []struct {
		driver, dsn string
		want        Location
	}{
		{Postgres, "postgres://u:p@Host.Example:5433/shop?sslmode=require", Location{"host.example:5433", "shop"}},
		{Postgres, "host=h1 port=5432 dbname=db1 user=u password=secret", Location{"h1:5432", "db1"}},
		{SQLServer, "sqlserver://u:p@srv.database.windows.net?database=shop&fedauth=ActiveDirectoryDefault", Location{"srv.database.windows.net", "shop"}},
		{SQLServer, "server=srv;user id=u;password=p;port=1433;database=shop", Location{"srv:1433", "shop"}},
	}
	for _, c := range cases {
		got, err := Builtin().Location(c.driver, c.dsn)
		if err != nil || got != c.want {
			t.Errorf("%s %s: got %+v, %v; want %+v", c.driver, c.dsn, got, err, c.want)
		}
	}
	if _, err := Builtin().Location(Postgres, "postgres://u:hunter2@[::1"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad DSN: %v", err)
	}
}

func TestDriverName(t *testing.T) {
	for dsn, want := range map[string]string{
		"sqlserver://srv?database=shop":                                                    "sqlserver",
		"sqlserver://srv?database=shop&fedauth=ActiveDirectoryDefault":                     "azuresql",
		"sqlserver://srv?database=shop&fedauth=ActiveDirectoryManagedIdentity&user+id=cid": "azuresql",
	} {
		if got := sqlServerDriver(dsn); got != want {
			t.Errorf("%s: driver %s, want %s", dsn, got, want)
		}
	}
}

// TestSQLServerValues covers what go-mssqldb returns, without a SQL Server: uniqueidentifier
// bytes in SQL Server's mixed-endian order, decimals as bytes, rowversion cursors as hex, and
// datetime2 cursor arguments as civil.DateTime (not datetimeoffset, which would defeat the index).
func TestSQLServerValues(t *testing.T) {
	col := func(dbType string) *column {
		c := newColumn(byName(SQLServer), "c", dbType)
		return &c
	}
	// 6F9619FF-8B86-D011-B42D-00C04FC964FF as SQL Server sends it on the wire.
	wire := []byte{0xFF, 0x19, 0x96, 0x6F, 0x86, 0x8B, 0x11, 0xD0, 0xB4, 0x2D, 0x00, 0xC0, 0x4F, 0xC9, 0x64, 0xFF}
	if got := normalize(col("UNIQUEIDENTIFIER"), wire); got != "6f9619ff-8b86-d011-b42d-00c04fc964ff" {
		t.Errorf("uniqueidentifier: %v", got)
	}
	if got := normalize(col("DECIMAL"), []byte("12.50")); got != "12.50" {
		t.Errorf("decimal: %v", got)
	}
	if got := normalize(col("MONEY"), []byte("3.1400")); got != "3.1400" {
		t.Errorf("money: %v", got)
	}
	rv := col("TIMESTAMP")
	codec, err := codecFor(rv)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := codec.Encode([]byte{0, 0, 0, 0, 0, 0, 0x07, 0xD1})
	if err != nil || string(raw) != `"0x00000000000007D1"` {
		t.Fatalf("rowversion Encode: %s %v", raw, err)
	}
	back, err := codec.Decode(raw)
	if err != nil || string(back.([]byte)) != "\x00\x00\x00\x00\x00\x00\x07\xd1" {
		t.Fatalf("rowversion Decode: %v %v", back, err)
	}

	ts := time.Date(2026, 4, 7, 1, 23, 45, 123456700, time.UTC)
	for dbType, wantCivil := range map[string]bool{"DATETIME2": true, "DATETIMEOFFSET": false} {
		codec, err := codecFor(col(dbType))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := codec.Encode(ts)
		if err != nil || string(raw) != `"2026-04-07T01:23:45.1234567Z"` {
			t.Fatalf("%s Encode: %s %v", dbType, raw, err)
		}
		arg, err := codec.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := arg.(civil.DateTime); ok != wantCivil || (ok && !d.In(time.UTC).Equal(ts)) {
			t.Errorf("%s: argument %T %v", dbType, arg, arg)
		}
	}
	if _, err := codecFor(col("FLOAT")); !errors.Is(err, errKeyType) {
		t.Errorf("a float key column: %v", err)
	}
}

func TestConnectFailureNamesPollerWithoutSecret(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Open(ctx, Builtin(), Config{Poller: "orders", Driver: Postgres, DSN: "postgres://app:hunter2@127.0.0.1:1/shop?sslmode=disable&connect_timeout=5",
		Definition: Definition{Table: Table{Name: "orders"}, Cursor: Cursor{Kind: state.KindInteger, Column: "id"}, PK: []string{"id"}}})
	if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), `poller "orders"`) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("connect failure: %v", err)
	}
}

func TestCursorJSONStable(t *testing.T) {
	// A cursor written by one build must read the same in the next: pin the encoding.
	c := newColumn(byName(Postgres), "c", "INT8")
	codec, _ := codecFor(&c)
	raw, _ := codec.Encode(int64(9007199254740993))
	if string(raw) != "9007199254740993" {
		t.Fatalf("int64 beyond 2^53: %s", raw)
	}
	var v json.RawMessage = raw
	back, err := codec.Decode(v)
	if err != nil || back.(int64) != 9007199254740993 {
		t.Fatalf("Decode: %v %v", back, err)
	}
}

func TestFormatScaled(t *testing.T) {
	fs := []float64{0, 12.5, -12.5, 0.05, -0.05, 1e-9, 123456789.125, 99999.995, 1e15, 1e20, -3, 0.1 + 0.2, 1.005, 2.675}
	for i := range 20000 {
		fs = append(fs, float64(i)/100, float64(i)/1000+0.0005, -float64(i)*1.37/100)
	}
	for _, f := range fs {
		for scale := -1; scale <= 10; scale++ {
			want := strconv.FormatFloat(f, 'f', scale, 64)
			if strings.Trim(want, "-0.") == "" {
				want = strings.TrimPrefix(want, "-") // a decimal has no negative zero
			}
			if got := formatScaled(f, scale); got != want {
				t.Errorf("formatScaled(%v, %d) = %s, strconv says %s", f, scale, got, want)
			}
		}
	}
}

// byName is the built-in driver of that name.
func byName(name string) Driver {
	d, ok := Builtin().Lookup(name)
	if !ok {
		panic("no driver " + name)
	}
	return d
}
