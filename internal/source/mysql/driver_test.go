package mysql

import (
	"math"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// TestMySQLUnsignedValues: a BIGINT UNSIGNED value stays exact whichever way go-sql-driver hands it
// over (uint64 in the text protocol the source uses, decimal digits in the binary protocol), and
// its key codec carries it through the cursor's digits and back as an exact argument.
func TestMySQLUnsignedValues(t *testing.T) {
	def := sourcedef.Definition{Table: sourcedef.Table{Name: "t"}, Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "id"}, PK: []string{"id"}}
	_, lay, err := source.Offline(Driver{}, source.Config{Poller: "p", Driver: Name, Definition: def}, map[string]string{"id": "UNSIGNED BIGINT"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   any
		want any
	}{
		{uint64(18446744073709551610), uint64(18446744073709551610)},
		{uint64(math.MaxInt64), int64(math.MaxInt64)},
		{[]byte("18446744073709551615"), uint64(math.MaxUint64)},
		{[]byte("9223372036854775807"), int64(math.MaxInt64)},
		{[]byte("-12"), int64(-12)},
		{int64(7), int64(7)},
	} {
		if got := lay.Row([]any{tc.in}, nil).Get("id"); got != tc.want {
			t.Errorf("normalize(%T %v) = %T %v, want %T %v", tc.in, tc.in, got, got, tc.want, tc.want)
		}
	}
	for _, v := range []any{int64(0), int64(math.MaxInt64), uint64(math.MaxInt64 + 1), uint64(math.MaxUint64)} {
		raw, err := lay.EncodeKey(0, v)
		if err != nil {
			t.Fatal(err)
		}
		back, err := lay.DecodeKey(0, raw)
		if err != nil || back != v {
			t.Errorf("%T %v: cursor %s, back %T %v, %v", v, v, raw, back, back, err)
		}
	}
	if _, err := lay.EncodeKey(0, int64(-1)); err == nil {
		t.Error("a negative value in an unsigned column encoded")
	}
	if _, err := lay.DecodeKey(0, []byte("-1")); err == nil {
		t.Error("a negative cursor for an unsigned column decoded")
	}
	if _, ok := (Driver{}).KeyCodec(row.ColumnType{DBType: "BIGINT", Class: row.ClassInt}); ok {
		t.Error("a signed BIGINT took the unsigned codec")
	}
}
