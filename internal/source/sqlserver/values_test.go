package sqlserver_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlserver"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// TestSQLVariantRefused: a poller reading an sql_variant column is refused at open (and so by
// pollerctl check), naming the column, instead of sending values whose type JSON cannot say.
func TestSQLVariantRefused(t *testing.T) {
	def := sourcedef.Definition{Table: sourcedef.Table{Schema: "dbo", Name: "t"}, Columns: []string{"id", "v"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "id"}}
	_, _, err := source.Offline(sqlserver.Driver{}, source.Config{Poller: "p", Driver: sqlserver.Name, Definition: def}, map[string]string{"id": "BIGINT", "v": "SQL_VARIANT"})
	if err == nil || !errors.Is(err, source.ErrSchema) || !strings.Contains(err.Error(), `column "v"`) || !strings.Contains(err.Error(), "CAST(col AS nvarchar(4000))") {
		t.Fatalf("open with an sql_variant column: %v", err)
	}
	if _, _, err := source.Offline(sqlserver.Driver{}, source.Config{Poller: "p", Driver: sqlserver.Name, Definition: def}, map[string]string{"id": "BIGINT", "v": "NVARCHAR"}); err != nil {
		t.Fatalf("open with an nvarchar column: %v", err)
	}
}

// TestTimeValue: a time column, which go-mssqldb gives as a time.Time on 0001-01-01, is its
// time of day as SQL Server writes it.
func TestTimeValue(t *testing.T) {
	d := sqlserver.Driver{}
	c := row.ColumnType{DBType: "TIME", Class: row.ClassTime}
	if !d.Reads(c) || d.Reads(row.ColumnType{DBType: "DATETIME2"}) {
		t.Fatal("Reads: time only")
	}
	for in, want := range map[time.Time]string{
		time.Date(1, 1, 1, 23, 59, 59, 999999900, time.UTC): "23:59:59.9999999",
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC):            "00:00:00",
		time.Date(1, 1, 1, 12, 34, 56, 500000000, time.UTC): "12:34:56.5",
	} {
		if got := d.Value(c, in); got != want {
			t.Errorf("%v: %v, want %s", in, got, want)
		}
	}
}
