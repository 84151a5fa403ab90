package sqlite_test

import (
	"flag"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

var update = flag.Bool("update", false, "rewrite the golden SQL files")

// TestGoldenSQL pins the exact SQL of each cursor kind (go test -run Golden -update rewrites
// testdata/golden).
func TestGoldenSQL(t *testing.T) {
	types := map[string]string{"id": "INTEGER", "customer": "VARCHAR(100)", "amount": "DECIMAL(12,2)", "updated_at": "TEXT"}
	sourcetest.Golden(t, sqlite.Driver{}, *update, []sourcetest.GoldenCase{
		{Name: "sqlite_timestamp_pk_text", Def: sourcetest.Orders("", state.KindTimestampPK, "updated_at", "id"), Types: types},
		{Name: "sqlite_timestamp_pk_filter", Def: sourcetest.OrdersFiltered(), Types: types},
		{Name: "sqlite_integer", Def: sourcetest.Orders("", state.KindInteger, "id", "id"), Types: types},
		{Name: "sqlite_cleanup_composite_older_than", Def: sourcetest.Cleaned(sourcetest.Orders("", state.KindTimestampPK, "updated_at", "customer", "id"), 7*24*time.Hour, ""), Types: types},
	})
}

func TestLocation(t *testing.T) {
	for dsn, want := range map[string]driver.Location{
		"file:data/orders.db?_pragma=journal_mode(WAL)": {Database: "data/orders.db"},
		"./data//orders.db":                             {Database: "data/orders.db"},
	} {
		if got, err := (sqlite.Driver{}).Location(dsn); err != nil || got != want {
			t.Errorf("%s: got %+v, %v; want %+v", dsn, got, err, want)
		}
	}
}
