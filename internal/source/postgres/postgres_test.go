package postgres_test

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

var update = flag.Bool("update", false, "rewrite the golden SQL files")

// TestGoldenSQL pins the exact SQL of each cursor kind (go test -run Golden -update rewrites
// testdata/golden).
func TestGoldenSQL(t *testing.T) {
	zoned := map[string]string{"id": "INT8", "customer": "VARCHAR", "amount": "NUMERIC", "updated_at": "TIMESTAMPTZ", "txid": "XID8"}
	utc := map[string]string{"id": "INT8", "customer": "VARCHAR", "amount": "NUMERIC", "updated_at": "TIMESTAMP"}
	odd := sourcetest.OddIdentifiers("INT8")
	odd.Name = "postgres_odd_identifiers"
	sourcetest.Golden(t, postgres.Driver{}, *update, []sourcetest.GoldenCase{
		{Name: "postgres_timestamp_pk_timestamptz", Def: sourcetest.Orders("public", state.KindTimestampPK, "updated_at", "id"), Types: zoned},
		{Name: "postgres_timestamp_pk_timestamp", Def: sourcetest.Orders("public", state.KindTimestampPK, "updated_at", "id"), Types: utc},
		{Name: "postgres_timestamp_pk_filter", Def: sourcetest.OrdersFiltered(), Types: zoned},
		{Name: "postgres_integer", Def: sourcetest.Orders("", state.KindInteger, "id", "id"), Types: zoned},
		{Name: "postgres_xid", Def: sourcetest.Orders("public", state.KindXID, "txid", "id"), Types: zoned},
		{Name: "postgres_cleanup_timestamp_filter", Def: sourcetest.Cleaned(sourcetest.OrdersFiltered(), 0, ""), Types: zoned},
		{Name: "postgres_cleanup_xid_older_than", Def: sourcetest.Cleaned(sourcetest.Orders("public", state.KindXID, "txid", "id"), 7*24*time.Hour, "updated_at"), Types: zoned},
		{Name: "postgres_cleanup_composite_older_than", Def: sourcetest.Cleaned(sourcetest.Orders("public", state.KindTimestampPK, "updated_at", "customer", "id"), 36*time.Hour, ""), Types: utc},
		odd,
	})
	if got := (postgres.Driver{}).Quote(`a"b`); got != `"a""b"` {
		t.Errorf("quoting: %s", got)
	}
}

func TestLocation(t *testing.T) {
	for dsn, want := range map[string]driver.Location{
		"postgres://u:p@Host.Example:5433/shop?sslmode=require": {Server: "host.example:5433", Database: "shop"},
		"host=h1 port=5432 dbname=db1 user=u password=secret":   {Server: "h1:5432", Database: "db1"},
	} {
		if got, err := (postgres.Driver{}).Location(dsn); err != nil || got != want {
			t.Errorf("%s: got %+v, %v; want %+v", dsn, got, err, want)
		}
	}
	if _, err := (postgres.Driver{}).Location("postgres://u:hunter2@[::1"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad DSN: %v", err)
	}
}

// TestCursorJSONStable: a cursor written by one build must read the same in the next: pin the
// encoding.
func TestCursorJSONStable(t *testing.T) {
	def := sourcedef.Definition{Table: sourcedef.Table{Name: "t"}, Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "c"}, PK: []string{"c"}}
	_, lay, err := source.Offline(postgres.Driver{}, source.Config{Poller: "p", Driver: postgres.Name, Definition: def}, map[string]string{"c": "INT8"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := lay.EncodeKey(0, int64(9007199254740993))
	if string(raw) != "9007199254740993" {
		t.Fatalf("int64 beyond 2^53: %s", raw)
	}
	back, err := lay.DecodeKey(0, raw)
	if err != nil || back.(int64) != 9007199254740993 {
		t.Fatalf("Decode: %v %v", back, err)
	}
}
