package poller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/poller"
)

// order is a row type whose tags name the key and the cursor column.
type order struct {
	ID        int64  `db:"id,key"`
	Customer  string `db:"customer"`
	UpdatedAt string `db:"updated_at,cursor"`
}

// panicOf is what New panics with, "" when it does not.
func panicOf(f func() *poller.Poller) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// TestNewPanics: New refuses a definition that breaks a rule of every definition, naming the
// option or the struct tag that sets the part at fault (WithTables' tables by their place and
// poller.Table's field); a nil handler and a typed row of several tables are its own rules.
func TestNewPanics(t *testing.T) {
	rows := func(context.Context, *poller.Batch[poller.Row]) error { return nil }
	orders := func(context.Context, *poller.Batch[order]) error { return nil }
	row := func(kind poller.CursorKind, opts ...poller.Option) func() *poller.Poller {
		return func() *poller.Poller { return poller.New("p", "orders", kind, rows, opts...) }
	}
	for _, c := range []struct {
		name string
		new  func() *poller.Poller
		want string
	}{
		{"no handler", func() *poller.Poller { return poller.New[order]("p", "orders", poller.TimestampPK, nil) }, `poller.New("p"): no handler`},
		{"no table", func() *poller.Poller { return poller.New("p", "", poller.TimestampPK, orders) }, `poller.New("p"): no table`},
		{"no cursor column", row(poller.Integer, poller.WithKey("id")),
			"poller.New(\"p\"): no cursor column: tag a field `db:\"column,cursor\"` or use WithCursorColumn"},
		{"no key", row(poller.Integer, poller.WithCursorColumn("seq")),
			"poller.New(\"p\"): no key column: tag a field `db:\"column,key\"` or use WithKey"},
		{"a change stream's cursor column", func() *poller.Poller { return poller.New("p", "orders", poller.Logical, orders) },
			`poller.New("p"): cursor column (the db tags' cursor option, or WithCursorColumn): a logical cursor reads the database's record of changes and takes no column ("updated_at")`},
		{"every column of a keyset", row(poller.Integer, poller.WithColumns("*"), poller.WithKey("id"), poller.WithCursorColumn("seq")),
			`poller.New("p"): columns (the row type's db tags, or WithColumns): ["*"] alone reads every column, for the logical cursor only`},
		{"no tiebreaker", row(poller.TimestampPK, poller.WithKey("ts"), poller.WithCursorColumn("ts")),
			`poller.New("p"): key (the db tags' key option, or WithKey): a timestamp+pk cursor needs a key column other than its cursor column "ts"`},
		{"skip writer of a keyset", func() *poller.Poller {
			return poller.New("p", "orders", poller.TimestampPK, orders, poller.WithSkipWriter("app"))
		},
			`poller.New("p"): WithSkipWriter: is for the logical and changetracking cursors`},
		{"snapshot of a keyset", func() *poller.Poller {
			return poller.New("p", "orders", poller.TimestampPK, orders, poller.WithInitialSnapshot())
		}, `poller.New("p"): WithInitialSnapshot: "snapshot" is for the logical and changetracking cursors`},
		{"settle lag of an integer cursor", row(poller.Integer, poller.WithKey("id"), poller.WithCursorColumn("seq"), poller.WithSettleLag(0)),
			`poller.New("p"): WithSettleLag: applies to timestamp+pk cursors only; this poller's cursor is integer`},
		{"settle lag of a change stream", row(poller.Logical, poller.WithKey("id"), poller.WithSettleLag(time.Second)),
			`poller.New("p"): WithSettleLag: applies to timestamp+pk cursors only; this poller's cursor is logical, which reads committed changes`},
		{"several tables of a keyset", row(poller.Integer, poller.WithKey("id"), poller.WithCursorColumn("seq"),
			poller.WithTables(poller.Table{Name: "lines", Key: []string{"id"}})), `poller.New("p"): WithTables: several tables are for the logical and changetracking cursors`},
		{"no key of a more table", row(poller.Logical, poller.WithKey("id"), poller.WithTables(poller.Table{Name: "lines"})),
			`poller.New("p"): WithTables' table 1: no Key`},
		{"a more table's filter", row(poller.Logical, poller.WithKey("id"),
			poller.WithTables(poller.Table{Name: "lines", Key: []string{"id"}}, poller.Table{Name: "notes", Key: []string{"id"}, Filter: "1=1; DROP TABLE notes"})),
			`poller.New("p"): WithTables' table 2: Filter: holds ';'`},
		{"several tables of a typed row", func() *poller.Poller {
			return poller.New("p", "orders", poller.Logical, func(context.Context, *poller.Batch[struct {
				ID int64 `db:"id,key"`
			}]) error {
				return nil
			}, poller.WithTables(poller.Table{Name: "lines", Key: []string{"id"}}))
		}, `poller.New("p"): WithTables gives rows of several tables`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := panicOf(c.new); !strings.HasPrefix(got, c.want) {
				t.Errorf("New panics with %q, want %q", got, c.want)
			}
		})
	}
	if got := panicOf(row(poller.Logical, poller.WithColumns("*"), poller.WithKey("id"),
		poller.WithTables(poller.Table{Name: "lines", Columns: []string{"*"}, Key: []string{"id"}}))); got != "" {
		t.Errorf("a logical poller of every column of two tables: %s", got)
	}
}
