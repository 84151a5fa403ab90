package source_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlserver"
)

// TestJudgeKey: the one rule on a table's unique indexes: a primary key or plain unique index
// over a subset of the cursor and key columns makes them unique; a partial one does not; an
// expression index leaves it unknown; names match whatever their case only when caseless.
func TestJudgeKey(t *testing.T) {
	pk := setup.UniqueIndex{Name: "orders_pkey", Primary: true, Columns: []string{"id"}}
	pair := setup.UniqueIndex{Name: "ux_pair", Columns: []string{"updated_at", "id"}}
	partial := setup.UniqueIndex{Name: "ux_live", Columns: []string{"id"}, Partial: true}
	expr := setup.UniqueIndex{Name: "ux_lower", Expression: true}
	other := setup.UniqueIndex{Name: "ux_email", Columns: []string{"email"}}
	cols := []string{"updated_at", "id"}
	for _, c := range []struct {
		name     string
		indexes  []setup.UniqueIndex
		cols     []string
		caseless bool
		want     setup.KeyVerdict
		by       string
	}{
		{"none", nil, cols, false, setup.KeyNotUnique, ""},
		{"primary key", []setup.UniqueIndex{other, pk}, cols, false, setup.KeyUnique, "primary key orders_pkey (id)"},
		{"cursor and key", []setup.UniqueIndex{pair}, cols, false, setup.KeyUnique, "unique index ux_pair (updated_at, id)"},
		{"more than the columns", []setup.UniqueIndex{pair}, []string{"id"}, false, setup.KeyNotUnique, ""},
		{"another column's", []setup.UniqueIndex{other}, cols, false, setup.KeyNotUnique, ""},
		{"partial", []setup.UniqueIndex{partial}, cols, false, setup.KeyNotUnique, ""},
		{"expression", []setup.UniqueIndex{partial, expr}, cols, false, setup.KeyUnknown, "ux_lower"},
		{"expression and a key", []setup.UniqueIndex{expr, pk}, cols, false, setup.KeyUnique, "orders_pkey"},
		{"case, caseless", []setup.UniqueIndex{pk}, []string{"UPDATED_AT", "ID"}, true, setup.KeyUnique, "orders_pkey"},
		{"case, not caseless", []setup.UniqueIndex{pk}, []string{"UPDATED_AT", "ID"}, false, setup.KeyNotUnique, ""},
	} {
		u := setup.JudgeKey(c.indexes, c.cols, c.caseless)
		if u.Verdict != c.want || (c.by != "" && !strings.Contains(u.By+u.Why, c.by)) {
			t.Errorf("%s: %+v (%s), want %s with %q", c.name, u, u.Verdict, c.want, c.by)
		}
	}
}

// TestUniqueIndexSQL: the fix each database's error names, schema-qualified or not.
func TestUniqueIndexSQL(t *testing.T) {
	sales := sourcedef.Table{Schema: "Sales", Name: "Order Lines"}
	for _, c := range []struct {
		d    driver.Driver
		t    sourcedef.Table
		want string
	}{
		{postgres.Driver{}, sales, `CREATE UNIQUE INDEX "ux_Order Lines_id_line" ON "Sales"."Order Lines" ("id", "line")`},
		{mysql.Driver{}, sales, "CREATE UNIQUE INDEX `ux_Order Lines_id_line` ON `Sales`.`Order Lines` (`id`, `line`)"},
		{sqlserver.Driver{}, sales, `CREATE UNIQUE INDEX [ux_Order Lines_id_line] ON [Sales].[Order Lines] ([id], [line])`},
		{sqlite.Driver{}, sales, `CREATE UNIQUE INDEX "Sales"."ux_Order Lines_id_line" ON "Order Lines" ("id", "line")`},
		{sqlite.Driver{}, sourcedef.Table{Name: "t"}, `CREATE UNIQUE INDEX "ux_t_id_line" ON "t" ("id", "line")`},
	} {
		if got := source.UniqueIndexSQL(c.d, c.t, []string{"id", "line"}); got != c.want {
			t.Errorf("%s: %s\nwant %s", c.d.Name(), got, c.want)
		}
	}
	// A long name is cut to 60 bytes, never inside a character.
	long := source.UniqueIndexSQL(postgres.Driver{}, sourcedef.Table{Name: strings.Repeat("ü", 40)}, []string{"id"})
	if name := strings.Split(long, `"`)[1]; len(name) > 60 || !utf8.ValidString(name) {
		t.Errorf("a long name: %q", name)
	}
}
