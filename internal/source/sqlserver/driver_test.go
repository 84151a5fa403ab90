package sqlserver

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-sql/civil"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

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

// offline lays out table t, read by a cursor of kind on column c, keyed by k, with the columns of
// the given types, as Open does, without a server.
func offline(t *testing.T, kind string, types map[string]string, columns ...string) (driver.Layout, error) {
	t.Helper()
	def := sourcedef.Definition{Table: sourcedef.Table{Name: "t"}, Columns: columns, Cursor: sourcedef.Cursor{Kind: kind, Column: "c"}, PK: []string{"k"}}
	_, lay, err := source.Offline(Driver{}, source.Config{Poller: "p", Driver: Name, Definition: def}, types)
	return lay, err
}

// TestSQLServerValues covers what go-mssqldb returns, without a SQL Server: uniqueidentifier
// bytes in SQL Server's mixed-endian order, decimals as bytes, rowversion cursors as hex, and
// datetime2 cursor arguments as civil.DateTime (not datetimeoffset, which would defeat the index).
func TestSQLServerValues(t *testing.T) {
	lay, err := offline(t, state.KindInteger, map[string]string{"u": "UNIQUEIDENTIFIER", "d": "DECIMAL", "m": "MONEY", "c": "BIGINT", "k": "BIGINT"}, "u", "d", "m")
	if err != nil {
		t.Fatal(err)
	}
	// 6F9619FF-8B86-D011-B42D-00C04FC964FF as SQL Server sends it on the wire.
	wire := []byte{0xFF, 0x19, 0x96, 0x6F, 0x86, 0x8B, 0x11, 0xD0, 0xB4, 0x2D, 0x00, 0xC0, 0x4F, 0xC9, 0x64, 0xFF}
	row := lay.Row([]any{wire, []byte("12.50"), []byte("3.1400"), int64(1), int64(2)}, nil)
	if got := row.Get("u"); got != "6f9619ff-8b86-d011-b42d-00c04fc964ff" {
		t.Errorf("uniqueidentifier: %v", got)
	}
	if got := row.Get("d"); got != "12.50" {
		t.Errorf("decimal: %v", got)
	}
	if got := row.Get("m"); got != "3.1400" {
		t.Errorf("money: %v", got)
	}

	rv, err := offline(t, state.KindRowversion, map[string]string{"c": "TIMESTAMP", "k": "BIGINT"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rv.EncodeKey(0, []byte{0, 0, 0, 0, 0, 0, 0x07, 0xD1})
	if err != nil || string(raw) != `"0x00000000000007D1"` {
		t.Fatalf("rowversion Encode: %s %v", raw, err)
	}
	back, err := rv.DecodeKey(0, raw)
	if err != nil || string(back.([]byte)) != "\x00\x00\x00\x00\x00\x00\x07\xd1" {
		t.Fatalf("rowversion Decode: %v %v", back, err)
	}

	ts := time.Date(2026, 4, 7, 1, 23, 45, 123456700, time.UTC)
	for dbType, wantCivil := range map[string]bool{"DATETIME2": true, "DATETIMEOFFSET": false} {
		lay, err := offline(t, state.KindTimestampPK, map[string]string{"c": dbType, "k": "BIGINT"})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := lay.EncodeKey(0, ts)
		if err != nil || string(raw) != `"2026-04-07T01:23:45.1234567Z"` {
			t.Fatalf("%s Encode: %s %v", dbType, raw, err)
		}
		arg, err := lay.DecodeKey(0, raw)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := arg.(civil.DateTime); ok != wantCivil || (ok && !d.In(time.UTC).Equal(ts)) {
			t.Errorf("%s: argument %T %v", dbType, arg, arg)
		}
	}
	if _, err := offline(t, state.KindInteger, map[string]string{"c": "BIGINT", "k": "FLOAT"}); !errors.Is(err, source.ErrSchema) || !strings.Contains(err.Error(), "cannot be a cursor or key column") {
		t.Errorf("a float key column: %v", err)
	}
}
