package sqlserver

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// TestRecipesAreTheFix renders, without a server, what pollerctl check --fix prints for the
// docs' dbo.orders lacking its cursor column, and finds it in docs/sqlserver.md as the recipe of
// each kind (the docs' T-SQL test proves the same against SQL Server in the GitHub workflow).
func TestRecipesAreTheFix(t *testing.T) {
	page, err := os.ReadFile("../../../docs/sqlserver.md")
	if err != nil {
		t.Fatal(err)
	}
	dr := Driver{}
	for kind, col := range map[string]string{state.KindTimestampPK: "updated_at", state.KindInteger: "version", state.KindRowversion: "rv"} {
		d := sourcedef.Definition{Table: sourcedef.Table{Schema: "dbo", Name: "orders"}, Columns: []string{"id", "customer", "amount"},
			Cursor: sourcedef.Cursor{Kind: kind, Column: col}, PK: []string{"id"}}
		st, err := dr.stamping(context.Background(), nil, d, "[dbo].[orders]", nil) // a missing column reads nothing
		if err != nil {
			t.Fatal(err)
		}
		fix := append(dr.addCursor(d), dr.createIndex(d))
		if st.Insert != setup.VerdictOK || st.Update != setup.VerdictOK {
			fix = append(fix, dr.stampFixFor(d, nil, st)...)
		}
		want := "```sql sqlserver recipe=" + kind + "\n" + dr.Script(fix) + "```\n"
		if !strings.Contains(string(page), want) {
			t.Errorf("docs/sqlserver.md has no recipe for %s that is the fix:\n%s", kind, want)
		}
	}
}
