package source

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

var update = flag.Bool("update", false, "rewrite the golden SQL files")

// TestGoldenSQL pins the exact SQL each driver and cursor kind generates
// (go test ./source -run Golden -update rewrites testdata/golden).
func TestGoldenSQL(t *testing.T) {
	orders := func(schema, kind, cursor string, pk ...string) Definition {
		return Definition{
			Table:   Table{Schema: schema, Name: "orders"},
			Columns: []string{"id", "customer", "amount", "updated_at"},
			Cursor:  Cursor{Kind: kind, Column: cursor},
			PK:      pk,
		}
	}
	withFilter := orders("", state.KindTimestampPK, "updated_at", "id")
	withFilter.Filter = "customer <> 'test'"
	odd := Definition{Table: Table{Schema: "my schema", Name: `Order "Details" [x]`}, Columns: []string{"Row ID", "it's"},
		Cursor: Cursor{Kind: state.KindInteger, Column: "Row ID"}, PK: []string{"Row ID"}}
	cases := []struct {
		name   string
		driver string
		def    Definition
		flavor TSFlavor
	}{
		{"postgres_timestamp_pk_timestamptz", Postgres, orders("public", state.KindTimestampPK, "updated_at", "id"), TSWithZone},
		{"postgres_timestamp_pk_timestamp", Postgres, orders("public", state.KindTimestampPK, "updated_at", "id"), TSUTC},
		{"postgres_timestamp_pk_filter", Postgres, withFilter, TSWithZone},
		{"postgres_integer", Postgres, orders("", state.KindInteger, "id", "id"), TSNone},
		{"postgres_xid", Postgres, orders("public", state.KindXID, "txid", "id"), TSNone},
		{"postgres_odd_identifiers", Postgres, odd, TSNone},
	}
	for _, c := range cases {
		if _, err := c.def.validate("orders", Builtin(), c.driver); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		dl, bounded := byName(c.driver), false
		if rb, ok := dl.(ReadBounder); ok {
			_, bounded = rb.ReadBound("", c.def)
		}
		q := buildQueries(dl, c.def, c.flavor, bounded)
		got := "-- fetch first\n" + q.FetchFirst + "\n-- fetch after\n" + q.FetchAfter + "\n"
		if q.BacklogFirst != q.FetchFirst || q.BacklogAfter != q.FetchAfter {
			got += "-- backlog first (no bound on open transactions)\n" + q.BacklogFirst + "\n-- backlog after\n" + q.BacklogAfter + "\n"
		}
		if q.StampCheck != "" {
			got += fmt.Sprintf("-- stamp check (argument %v)\n%s\n", q.stampArg, q.StampCheck)
		}
		path := filepath.Join("testdata", "golden", c.name+".sql")
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if got != string(want) {
			t.Errorf("%s: the generated SQL changed:\n%s\nwant:\n%s", c.name, got, want)
		}
	}
}

func TestIdentifiers(t *testing.T) {
	ok := []string{"orders", "Order Details", `Customer "Name"`, "[weird]", "it's", "MixedCase", "dbo$x#1", "ünïcode"}
	bad := []string{"", " lead", "trail ", "orders; DROP TABLE x", "a--b", "a/*b", "tab\tname", "nul\x00", "semi;", "new\nline", strings.Repeat("x", 129)}
	for _, s := range ok {
		if err := checkIdent(s); err != nil {
			t.Errorf("%q refused: %v", s, err)
		}
	}
	for _, s := range bad {
		if err := checkIdent(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
	if got := byName(Postgres).Quote(`a"b`); got != `"a""b"` {
		t.Errorf("postgres quoting: %s", got)
	}
}

func TestSettleLag(t *testing.T) {
	if (Definition{}).settleLag() != DefaultSettleLag || (Definition{SettleLag: NoSettleLag}).settleLag() != 0 ||
		(Definition{SettleLag: 3 * time.Second}).settleLag() != 3*time.Second {
		t.Fatal("settle lag defaults")
	}
	if DefaultSettleLag <= 0 {
		t.Fatal("the default settle lag must not be zero")
	}
}
