package sqlserver_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/declared"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlserver"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// TestChangeTrackingTakesNoFilter, without a server: SQL Server's rule that a changetracking
// cursor's tables take no filter (CHANGETABLE has none) names the filtered table's field, every
// one of a poller of several; the source's open refuses it, naming the table; a filter of the
// other kinds, or a changetracking poller without one, is SQL Server's to accept.
func TestChangeTrackingTakesNoFilter(t *testing.T) {
	ct := sourcedef.Definition{Table: sourcedef.Table{Name: "orders"}, Columns: []string{"id"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindChangeTracking}}
	dr := sqlserver.Driver{}
	if err := dr.CheckDefinition(ct); err != nil {
		t.Fatalf("no filter: %v", err)
	}
	rv := ct
	rv.Cursor, rv.Filter = sourcedef.Cursor{Kind: state.KindRowversion, Column: "rv"}, "id > 0"
	if err := dr.CheckDefinition(rv); err != nil {
		t.Fatalf("a rowversion cursor's filter: %v", err)
	}

	one := ct
	one.Filter = "id > 0"
	fes := sourcedef.FieldErrors(dr.CheckDefinition(one))
	if len(fes) != 1 || fes[0].Field != "filter" || !errors.Is(fes[0], sourcedef.ErrDefinition) || !strings.Contains(fes[0].Err.Error(), "takes no filter (CHANGETABLE has none)") {
		t.Fatalf("a filter of one table: %v", fes)
	}
	_, _, err := source.Offline(dr, source.Config{Poller: "p", Driver: sqlserver.Name, Definition: one}, map[string]string{"id": "BIGINT"})
	if want := `source: poller "p": invalid source definition: table orders: filter: a changetracking cursor delivers every change of the table and takes no filter`; !errors.Is(err, sourcedef.ErrDefinition) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("open: %v, want %q", err, want)
	}

	two := ct
	two.More = []sourcedef.TableDef{{Table: sourcedef.Table{Name: "lines"}, Columns: []string{"id"}, PK: []string{"id"}, Filter: "id > 0"}}
	if fes := sourcedef.FieldErrors(dr.CheckDefinition(two)); len(fes) != 1 || fes[0].Field != "tables[1].filter" {
		t.Fatalf("a filter of a second table: %v", fes)
	}
	two.Filter = " id > 0 "
	if fes := sourcedef.FieldErrors(dr.CheckDefinition(two)); len(fes) != 2 || fes[0].Field != "tables[0].filter" || fes[1].Field != "tables[1].filter" {
		t.Fatalf("filters of both tables: %v", fes)
	}
	_, _, err = source.Offline(dr, source.Config{Poller: "p", Driver: sqlserver.Name, Definition: two}, map[string]string{"id": "BIGINT"})
	if want := "invalid source definition: table orders: filter:"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("open of two tables: %v, want %q", err, want)
	}
}

// TestChangeTrackingRefusesAnOutbox, without a server: Change Tracking gives a row's net
// operation, so an event inserted and deleted between two reads is a delete whose values are
// gone; an outbox on the changetracking cursor is refused (naming the field and the cursor to
// use), in code and in poller.json, and the rowversion outbox is accepted.
func TestChangeTrackingRefusesAnOutbox(t *testing.T) {
	o := &sourcedef.Outbox{ID: "id", AggregateType: "at", AggregateID: "ai", Payload: "p"}
	ct := sourcedef.Definition{Table: sourcedef.Table{Name: "outbox"}, Columns: []string{"id", "at", "ai", "p"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindChangeTracking}, Outbox: o}
	dr := sqlserver.Driver{}
	fes := sourcedef.FieldErrors(dr.CheckDefinition(ct))
	if len(fes) != 1 || fes[0].Field != sourcedef.FieldOutbox || !strings.Contains(fes[0].Err.Error(), "use the rowversion cursor with cleanup") {
		t.Fatalf("a changetracking outbox: %v", fes)
	}
	rv := ct
	rv.Cursor = sourcedef.Cursor{Kind: state.KindRowversion, Column: "rv"}
	if err := dr.CheckDefinition(rv); err != nil {
		t.Fatalf("a rowversion outbox: %v", err)
	}
	_, err := declared.Parse([]byte(`{"source": {"table": "outbox", "columns": ["id"], "key": ["id"], "cursor": {"kind": "changetracking"}},
		"outbox": {"id": "id", "aggregate_type": "at", "aggregate_id": "ai", "payload": "p"}, "sink": {"type": "webhook", "url": "https://example.com/"}}`))
	if want := "outbox: a changetracking cursor cannot read an outbox"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("poller.json: %v, want %q", err, want)
	}
}
