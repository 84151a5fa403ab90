package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// TestDefinitionRules, without a database: PostgreSQL's rules of a definition are a logical
// cursor's slot and publication names, each broken one naming its field; every column ("*") is
// the logical cursor's to read, and the source's open says which name is wrong.
func TestDefinitionRules(t *testing.T) {
	d := sourcedef.Definition{Table: sourcedef.Table{Name: "orders"}, Columns: []string{sourcedef.AllColumns}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindLogical}, Slot: "s1", Publication: "p1"}
	if err := d.Check(); err != nil {
		t.Fatalf("every column of a logical cursor: %v", err)
	}
	if err := (postgres.Driver{}).CheckDefinition(d); err != nil {
		t.Fatalf("good names: %v", err)
	}
	bad := d
	bad.Slot, bad.Publication = "", "Pub"
	fes := sourcedef.FieldErrors(postgres.Driver{}.CheckDefinition(bad))
	if len(fes) != 2 || fes[0].Field != "slot" || fes[1].Field != "publication" || !errors.Is(fes[1], sourcedef.ErrDefinition) ||
		!strings.Contains(fes[1].Err.Error(), "lower-case letters") {
		t.Fatalf("an empty slot and a publication in capitals: %v", fes)
	}
	_, _, err := source.Offline(postgres.Driver{}, source.Config{Poller: "p", Driver: postgres.Name, Definition: bad}, map[string]string{"id": "INT8"})
	if want := `source: poller "p": invalid source definition: table orders: no slot name`; err == nil || err.Error() != want {
		t.Fatalf("open: %v, want %q", err, want)
	}
	keyset := d
	keyset.Cursor, keyset.Slot, keyset.Publication = sourcedef.Cursor{Kind: state.KindXID, Column: "x"}, "", ""
	if err := (postgres.Driver{}).CheckDefinition(keyset); err != nil {
		t.Fatalf("an xid cursor has no slot: %v", err)
	}
}
