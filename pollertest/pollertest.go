// Package pollertest runs a poller's ticks in a test as the app runs them: the real tick (lease,
// keyset reads, checkpoint) over an SQLite database, an in-memory state store and a fake clock,
// so that a poller's test needs no server. A poller's first test:
//
//	func TestOrders(t *testing.T) {
//		h := pollertest.New(t, orders.New())
//		h.Insert(orders.Order{ID: 1, Customer: "ada", Amount: "9.50", UpdatedAt: time.Now().Add(-time.Hour)})
//		h.Tick()
//		if got := pollertest.Rows[orders.Order](h); len(got) != 1 || got[0].Customer != "ada" {
//			t.Fatalf("delivered %+v", got)
//		}
//	}
//
// [New] takes app settings as "NAME=value": the poller's own (a webhook's URL) and the tuning
// every poller reads ("ORDERS_BATCH_SIZE=2"). [Harness.Insert] creates the table from the first
// row's fields (or create it with your own SQL on [Harness.DB], when its types matter).
// [Harness.Tick] runs one tick and fails the test if it fails; [Harness.TickErr] returns a
// failing tick's error, for a handler that fails: its batch comes again on the next tick, as
// attempt 2. [Rows] and [Harness.Deliveries] say what the handler got; [Result] says what a
// tick did and where the checkpoint is. [Setup] tests a poller's setup alone; [Sample] makes rows
// of any row type. SQLite has TimestampPK and Integer cursors only: New skips the test of a
// poller of another kind.
//
// A declared poller (a poller.json, no Go) is tested the same way: declared.Parse and
// Spec.Poller (package internal/declared) make its poller from the file's bytes, and a webhook
// sink can post to an httptest.Server (Example_declared). The examples are runnable tests; an
// Example has no *testing.T, so they pass internal/panictb's stand-in where a test passes its t.
package pollertest

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the harness's database

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// Harness is one poller under test.
type Harness struct {
	t        testing.TB
	p        *pollerdef.Def
	settings appsettings.Settings
	store    *memstore.Store
	clock    *clock.Fake
	runner   *tick.Runner // opened by the first tick: the table must exist by then

	// DB is the poller's SQLite database: create the table yourself (before the first Insert)
	// when its types matter, or write rows with SQL of your own.
	DB *sql.DB

	mu        sync.Mutex
	delivered []Delivery
}

// Delivery is one batch handed to the poller's handler, and what the handler returned.
type Delivery struct {
	Batch *poller.Batch[poller.Row]
	Err   error
}

// Result is what one tick did.
type Result struct {
	Outcome string // committed, idle or lease_held (and failed or blocked from TickErr)
	Rows    int    // rows handed to the handler and committed
	Batches int
	Cursor  *poller.Cursor // the checkpoint after the tick
}

// New returns a harness for p. Its settings are {P}_DB_DRIVER=sqlite and {P}_DB_CONNECTION
// naming a new database in t.TempDir(), then settings ("NAME=value", e.g.
// "ORDERS_BATCH_SIZE=2" or the poller's own), as app settings; p's setup runs with them.
func New(t testing.TB, p *poller.Poller, settings ...string) *Harness {
	t.Helper()
	d := pollerdef.Of(p)
	if k := poller.CursorKind(d.Source().Cursor.Kind); k != poller.TimestampPK && k != poller.Integer {
		t.Skipf("pollertest: SQLite has no %s cursor: test poller %s against its own database", k, d.Name())
	}
	dsn := filepath.Join(t.TempDir(), d.Name()+".db")
	prefix := appsettings.Prefix(d.Name())
	getenv, err := appSettings(append([]string{prefix + "_DB_DRIVER=" + sqlite.Name, prefix + "_DB_CONNECTION=" + dsn}, settings...))
	if err != nil {
		t.Fatalf("pollertest.New: %v", err)
	}
	h := &Harness{t: t, p: d, clock: clock.NewFake(time.Now())}
	h.store = memstore.New(h.clock)
	if h.settings, err = appsettings.Load(d, getenv); err != nil {
		t.Fatalf("pollertest.New: %v", err)
	}
	if err := d.Setup(getenv); err != nil {
		t.Fatalf("pollertest.New: poller %s setup: %v", d.Name(), err)
	}
	if h.DB, err = sql.Open("sqlite", dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.DB.Close()
		if h.runner != nil {
			h.runner.Close()
		}
	})
	return h
}

// Setup runs p's setup (poller.WithSetup) with settings ("NAME=value") as the app settings, as
// the app does before p's first tick, and returns its error: a test of the poller's own
// settings. A poller without setup returns nil.
func Setup(p *poller.Poller, settings ...string) error {
	getenv, err := appSettings(settings)
	if err != nil {
		return fmt.Errorf("pollertest.Setup: %w", err)
	}
	return pollerdef.Of(p).Setup(getenv)
}

// appSettings reads settings ("NAME=value") as app settings; a later one wins.
func appSettings(settings []string) (getenv func(string) string, err error) {
	env := map[string]string{}
	for _, s := range settings {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("setting %q is not NAME=value", s)
		}
		env[k] = v
	}
	return func(k string) string { return env[k] }, nil
}

// Insert writes rows (structs with `db` tags, such as the poller's row type) into the poller's
// table, creating it on first use from the first row's fields: integers and booleans INTEGER,
// floats REAL, []byte BLOB, others TEXT; time.Time is written as TEXT in the fixed-width UTC
// layout SQLite cursors read (YYYY-MM-DDTHH:MM:SS.ffffffZ). The poller's key columns are its
// primary key (a poller refuses a key that is not unique), so a row whose key is already
// there fails the test: write an update with SQL on DB.
func (h *Harness) Insert(rows ...any) {
	h.t.Helper()
	table := h.p.Source().Table.Name
	for _, row := range rows {
		cols, decls, args := columnsOf(reflect.Indirect(reflect.ValueOf(row)))
		if len(cols) == 0 {
			h.t.Fatalf("pollertest: Insert(%T): not a struct with db-tagged fields", row)
		}
		// The poller's key columns are the table's primary key: a poller refuses a key that does
		// not tell the rows apart.
		var pk []string
		for _, k := range h.p.Source().PK {
			if slices.Contains(cols, quote(k)) {
				pk = append(pk, quote(k))
			}
		}
		if len(pk) == len(h.p.Source().PK) {
			decls = append(decls, "PRIMARY KEY ("+strings.Join(pk, ", ")+")")
		}
		create := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s)", quote(table), strings.Join(decls, ", "))
		if _, err := h.DB.Exec(create); err != nil {
			h.t.Fatalf("pollertest: %s: %v", create, err)
		}
		insert := fmt.Sprintf("INSERT INTO %s (%s) VALUES (?%s)", quote(table), strings.Join(cols, ", "), strings.Repeat(", ?", len(cols)-1))
		if _, err := h.DB.Exec(insert, args...); err != nil {
			h.t.Fatalf("pollertest: %s: %v", insert, err)
		}
	}
}

// columnsOf lists a struct's db-tagged fields as quoted columns, their declarations and values.
func columnsOf(v reflect.Value) (cols, decls []string, args []any) {
	for _, f := range row.TaggedFields(v.Type()) {
		if f.Column == "" {
			continue
		}
		val := reflect.Indirect(v.FieldByIndex(f.Index))
		var arg any // NULL for a nil pointer
		if val.IsValid() {
			arg = val.Interface()
		}
		t, typ := f.Type, "TEXT"
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch k := t.Kind(); {
		case t == reflect.TypeFor[time.Time]():
			if tm, ok := arg.(time.Time); ok {
				arg = tm.UTC().Format(state.TimeLayout)
			}
		case k == reflect.Bool || k >= reflect.Int && k <= reflect.Uint64:
			typ = "INTEGER"
		case k == reflect.Float32 || k == reflect.Float64:
			typ = "REAL"
		case k == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
			typ = "BLOB"
		}
		cols, decls, args = append(cols, quote(f.Column)), append(decls, quote(f.Column)+" "+typ), append(args, arg)
	}
	return cols, decls, args
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Tick runs one tick as a timer invocation would, and fails the test if it fails.
func (h *Harness) Tick() Result {
	h.t.Helper()
	r, err := h.TickErr()
	if err != nil {
		h.t.Fatalf("pollertest: tick of %s: %v", h.p.Name(), err)
	}
	return r
}

// TickErr runs one tick and returns its error, for tests of a handler that fails.
func (h *Harness) TickErr() (Result, error) {
	h.t.Helper()
	ctx := context.Background()
	if h.runner == nil {
		observe := func(b *pollerdef.Batch, err error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.delivered = append(h.delivered, Delivery{Batch: h.rawBatch(b), Err: err})
		}
		r, err := tick.Open(ctx, tick.Config{Poller: h.p, Settings: h.settings, Store: h.store, App: "test", Owner: "pollertest/1", Clock: h.clock, Observe: observe})
		if err != nil {
			return Result{}, fmt.Errorf("opening the source (is the table there? Insert creates it): %w", err)
		}
		h.runner = r
	}
	sum, err := h.runner.Tick(ctx, "pollertest")
	return Result{Outcome: string(sum.Outcome), Rows: sum.Rows, Batches: sum.Batches, Cursor: cursorOf(sum.Cursor)}, err
}

// rawBatch is b as a handler of poller.Row gets it from h's poller (pollerdef.Def.Raw): its
// rows are the runtime's, shown as poller.Rows once per recorded batch.
func (h *Harness) rawBatch(b *pollerdef.Batch) *poller.Batch[poller.Row] {
	rb, _ := h.p.Raw(b).(*poller.Batch[poller.Row])
	return rb
}

// cursorOf is the runtime's cursor c as a poller.Cursor, field by field; nil for nil.
func cursorOf(c *state.Cursor) *poller.Cursor {
	if c == nil {
		return nil
	}
	return &poller.Cursor{Kind: c.Kind, Value: c.Value, Tiebreaker: c.Tiebreaker}
}

// Deliveries returns every batch handed to the handler so far, with what it returned, in order
// (a batch that failed comes again).
func (h *Harness) Deliveries() []Delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Delivery(nil), h.delivered...)
}

// Rows decodes the rows of every batch the handler accepted so far into T, in order.
func Rows[T any](h *Harness) []T {
	h.t.Helper()
	var out []T
	for _, d := range h.Deliveries() {
		if d.Err != nil {
			continue
		}
		if rows, ok := any(d.Batch.Raw).([]T); ok { // T is poller.Row
			out = append(out, rows...)
			continue
		}
		for _, r := range d.Batch.Raw {
			var v T
			if err := r.Decode(&v); err != nil {
				h.t.Fatalf("pollertest.Rows: %v", err)
			}
			out = append(out, v)
		}
	}
	return out
}

// Sample returns a T whose db-tagged fields hold values made from i, increasing with i: integers
// and floats i, strings the decimal text of i, time.Time i seconds after 2025-01-01 UTC, bools
// i%2 == 1, []byte the text of i; pointer fields point at such values. A scaffolded poller's test
// inserts Sample[Row](1..5) out of order and expects them back in order, whatever Row's columns.
func Sample[T any](i int) T {
	var v T
	rv := reflect.ValueOf(&v).Elem()
	for _, f := range row.TaggedFields(rv.Type()) {
		fv := rv.FieldByIndex(f.Index)
		if fv.Kind() == reflect.Pointer {
			fv.Set(reflect.New(fv.Type().Elem()))
			fv = fv.Elem()
		}
		switch k := fv.Kind(); {
		case fv.Type() == reflect.TypeFor[time.Time]():
			fv.Set(reflect.ValueOf(time.Date(2025, 1, 1, 0, 0, i, 0, time.UTC)))
		case k >= reflect.Int && k <= reflect.Int64:
			fv.SetInt(int64(i))
		case k >= reflect.Uint && k <= reflect.Uint64:
			fv.SetUint(uint64(i))
		case k == reflect.Float32 || k == reflect.Float64:
			fv.SetFloat(float64(i))
		case k == reflect.String:
			fv.SetString(strconv.Itoa(i))
		case k == reflect.Bool:
			fv.SetBool(i%2 == 1)
		case k == reflect.Slice && fv.Type().Elem().Kind() == reflect.Uint8:
			fv.SetBytes([]byte(strconv.Itoa(i)))
		}
	}
	return v
}
