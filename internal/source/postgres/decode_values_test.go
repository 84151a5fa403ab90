package postgres_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestDecodeArraysAndNonFinite: Row.Decode fills slice fields from arrays (of every dimension),
// and float fields with NaN and the infinities, which the row's JSON carries as strings.
func TestDecodeArraysAndNonFinite(t *testing.T) {
	dsn := testenv.Postgres(t)
	db := testenv.DB(t, "pgx", dsn)
	name := testenv.Name("dv_")
	if _, err := db.Exec(`CREATE TABLE ` + name + ` (id bigint PRIMARY KEY, m int4[], t text[], r real[], f float8, g float4);
		INSERT INTO ` + name + ` VALUES (1, '{{1,2},{3,4}}', ARRAY['a', NULL], '{1.5,-Infinity}', 'NaN', '-Infinity')`); err != nil {
		t.Fatal(err)
	}
	defer db.Exec("DROP TABLE " + name)
	src, err := drivers.Open(context.Background(), source.Config{Poller: "dv", Driver: postgres.Name, DSN: dsn, Definition: sourcedef.Definition{
		Table: sourcedef.Table{Name: name}, Columns: []string{"id", "m", "t", "r", "f", "g"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "id"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	b, err := src.Fetch(context.Background(), nil, 10)
	if err != nil || len(b.Rows) != 1 {
		t.Fatalf("fetch: %v, %v", b, err)
	}
	var dst struct {
		M [][]int64 `db:"m"`
		T []*string `db:"t"`
		R []float32 `db:"r"`
		F float64   `db:"f"`
		G float32   `db:"g"`
	}
	if err := b.Rows[0].Decode(&dst); err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(dst.M, [][]int64{{1, 2}, {3, 4}}, slices.Equal) || len(dst.T) != 2 || dst.T[0] == nil || *dst.T[0] != "a" || dst.T[1] != nil ||
		!slices.Equal(dst.R, []float32{1.5, float32(math.Inf(-1))}) || !math.IsNaN(dst.F) || !math.IsInf(float64(dst.G), -1) {
		t.Fatalf("decoded %+v", dst)
	}
	j, err := b.Rows[0].MarshalJSON()
	if want := `{"id":1,"m":[[1,2],[3,4]],"t":["a",null],"r":[1.5,"-Infinity"],"f":"NaN","g":"-Infinity"}`; err != nil || string(j) != want {
		t.Fatalf("JSON %s (%v), want %s", j, err, want)
	}
}
