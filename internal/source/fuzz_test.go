package source_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/golang-sql/civil"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// FuzzCursorValues: a stored cursor value of any shape either decodes into a query argument
// that encodes back to the canonical value, or is refused with an error. Never a panic. Every
// driver's key codecs take part: each case's cursor column and key column, laid out as Open
// lays them out.
func FuzzCursorValues(f *testing.F) {
	for _, seed := range []string{`12`, `-5`, `9223372036854775807`, `"2026-04-07T01:23:45.1234567Z"`, `"0x00000000000007D1"`,
		`"2026-04-07T01:23:45.123456Z"`, `18446744073709551615`, `"abc"`, `null`, `{}`, `1e3`, `"0x"`} {
		f.Add([]byte(seed))
	}
	type kase struct {
		name string
		lay  driver.Layout
	}
	var cases []kase
	for _, k := range []struct {
		driver, kind, cursorType, keyType string
	}{
		{"postgres", state.KindInteger, "INT8", "TEXT"}, {"postgres", state.KindTimestampPK, "TIMESTAMPTZ", "UUID"},
		{"postgres", state.KindXID, "XID8", "INT8"},
		{"sqlserver", state.KindTimestampPK, "DATETIME2", "BIGINT"}, {"sqlserver", state.KindRowversion, "TIMESTAMP", "BIGINT"},
		{"sqlite", state.KindTimestampPK, "TEXT", "INTEGER"},
	} {
		drv, ok := drivers.All().Lookup(k.driver)
		if !ok {
			f.Fatalf("no driver %s", k.driver)
		}
		def := sourcedef.Definition{Table: sourcedef.Table{Name: "t"}, Cursor: sourcedef.Cursor{Kind: k.kind, Column: "c"}, PK: []string{"k"}}
		_, lay, err := source.Offline(drv, source.Config{Poller: "fuzz", Driver: k.driver, Definition: def}, map[string]string{"c": k.cursorType, "k": k.keyType})
		if err != nil {
			f.Fatalf("%s %s: %v", k.driver, k.kind, err)
		}
		cases = append(cases, kase{k.driver + " " + k.cursorType + "/" + k.keyType, lay})
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, k := range cases {
			for j := range k.lay.KeyColumns() {
				v, err := k.lay.DecodeKey(j, json.RawMessage(raw))
				if err != nil {
					continue // refused: fine
				}
				if _, ok := v.(civil.DateTime); ok {
					continue // a datetime2 argument: the database returns a time.Time
				}
				// What the database would give back for that argument, encoded again.
				out, err := k.lay.EncodeKey(j, v)
				if err != nil {
					t.Fatalf("%s key %d: decoded %s to %T but cannot encode it back: %v", k.name, j, raw, v, err)
				}
				again, err := k.lay.DecodeKey(j, out)
				if err != nil {
					t.Fatalf("%s key %d: our own encoding %s does not decode: %v", k.name, j, out, err)
				}
				out2, _ := k.lay.EncodeKey(j, again)
				if !bytes.Equal(out, out2) {
					t.Fatalf("%s key %d: not stable: %s then %s", k.name, j, out, out2)
				}
			}
		}
	})
}
