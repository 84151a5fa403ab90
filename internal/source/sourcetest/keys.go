package sourcetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// testKeys: a key that does not tell the rows apart never loses a row in silence. The catalog's
// word (Driver.UniqueKey) on tables with and without keys; Open refuses a table whose catalog
// shows no unique key over the cursor and key columns, naming one repeated value and the fix,
// which works; a view (the catalog cannot tell) is checked at each fetch, and a repeated key
// blocks the reader before the first row it would lose, at batch sizes 2 to 5 and wherever the
// batches' ends fall.
func (h Harness) testKeys(t *testing.T) {
	if h.Fixture.Stamp == "" || h.Fixture.Schema == nil {
		t.Fatal("the fixture has no Stamp or Schema")
	}
	t.Run("Catalog", h.keysCatalog)
	t.Run("Refused", h.keysRefused)
	t.Run("UniqueOverCursorAndKey", h.keysCursorAndKey)
	t.Run("ViewOfKeyedTable", h.keysKeyedView)
	t.Run("ViewWithRepeats", h.keysRepeatsInView)
	t.Run("RepeatOfCheckpoint", h.keysCheckpoint)
}

// plain creates a table of orders' columns without any key, then runs more (each with %s for the
// table's name), and drops it after the test.
func (h Harness) plain(t *testing.T, prefix string, more ...string) string {
	t.Helper()
	name := testenv.Name(prefix)
	ddl := []string{"CREATE TABLE " + name + " (id BIGINT NOT NULL, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL, updated_at " + h.Fixture.Stamp + " NOT NULL)"}
	for _, m := range more {
		ddl = append(ddl, strings.ReplaceAll(m, "%s", name))
	}
	h.create(t, name, ddl...)
	return name
}

// view creates a view of table's orders columns and drops it after the test (before the table).
func (h Harness) view(t *testing.T, table string) string {
	t.Helper()
	name := testenv.Name("v_")
	h.exec(t, "CREATE VIEW "+name+" AS SELECT id, customer, amount, updated_at FROM "+table)
	t.Cleanup(func() { h.exec(t, "DROP VIEW "+name) })
	return name
}

// stamped returns orders an hour old, one a second, with the ids given.
func stamped(ids ...int64) []order {
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	out := make([]order, len(ids))
	for i, id := range ids {
		out[i] = order{ID: id, Customer: fmt.Sprint("c", i), Amount: "1.00", Updated: base.Add(time.Duration(i) * time.Second)}
	}
	return out
}

func (h Harness) keysCatalog(t *testing.T) {
	kc := h.Driver
	schema := h.Fixture.Schema(t, h.DB)
	keyless := h.plain(t, "keyless_")
	nonUnique := h.plain(t, "nonunique_", "CREATE INDEX ix_%s ON %s (updated_at, id)")
	uniqueID := h.plain(t, "uniqueid_", "CREATE UNIQUE INDEX ux_%s ON %s (id)")
	uniquePair := h.plain(t, "uniquepair_", "CREATE UNIQUE INDEX ux_%s ON %s (updated_at, id)")
	composite := testenv.Name("composite_")
	h.create(t, composite, "CREATE TABLE "+composite+" (a BIGINT NOT NULL, b VARCHAR(20) NOT NULL, ts "+h.Fixture.Stamp+" NOT NULL, PRIMARY KEY (a, b))")
	odd := "Mixed Keys \"q\" " + testenv.Name("")
	h.create(t, h.q(odd), "CREATE TABLE "+h.q(odd)+" ("+h.q("Row ID")+" BIGINT NOT NULL, "+h.q("Seq")+" BIGINT NOT NULL, CONSTRAINT "+h.q("pk "+odd[len(odd)-8:])+" PRIMARY KEY ("+h.q("Row ID")+"))")
	view := h.view(t, uniqueID)

	type keyCase struct {
		name  string
		table sourcedef.Table
		cols  []string
		want  setup.KeyVerdict
		by    string // in By (KeyUnique) or Why (KeyUnknown)
	}
	cases := []keyCase{
		{"no key", sourcedef.Table{Name: keyless}, []string{"updated_at", "id"}, setup.KeyNotUnique, ""},
		{"a non-unique index", sourcedef.Table{Name: nonUnique}, []string{"updated_at", "id"}, setup.KeyNotUnique, ""},
		{"a unique index on the key", sourcedef.Table{Name: uniqueID}, []string{"updated_at", "id"}, setup.KeyUnique, "ux_"},
		{"schema-qualified", sourcedef.Table{Schema: schema, Name: uniqueID}, []string{"updated_at", "id"}, setup.KeyUnique, "ux_"},
		{"schema-qualified, no key", sourcedef.Table{Schema: schema, Name: keyless}, []string{"updated_at", "id"}, setup.KeyNotUnique, ""},
		{"a unique index on cursor and key", sourcedef.Table{Name: uniquePair}, []string{"updated_at", "id"}, setup.KeyUnique, "ux_"},
		{"a unique index beyond the columns", sourcedef.Table{Name: uniquePair}, []string{"id"}, setup.KeyNotUnique, ""},
		{"a composite primary key", sourcedef.Table{Name: composite}, []string{"ts", "a", "b"}, setup.KeyUnique, "primary key"},
		{"half a composite primary key", sourcedef.Table{Name: composite}, []string{"ts", "a"}, setup.KeyNotUnique, ""},
		{"quoted, mixed-case names", sourcedef.Table{Name: odd}, []string{"Seq", "Row ID"}, setup.KeyUnique, "Row ID"},
		{"a view", sourcedef.Table{Name: view}, []string{"updated_at", "id"}, setup.KeyUnknown, "view"},
	}
	if h.Driver.Caseless() {
		cases = append(cases, keyCase{"columns in another case", sourcedef.Table{Name: uniqueID}, []string{"UPDATED_AT", "ID"}, setup.KeyUnique, "ux_"})
	}
	// A partial (filtered) unique index is unique among some rows only: where the database has them.
	partial := h.plain(t, "partial_")
	if _, err := h.DB.ExecContext(ctx, "CREATE UNIQUE INDEX ux_"+partial+" ON "+partial+" (id) WHERE amount > 0"); err == nil {
		cases = append(cases, keyCase{"a partial unique index", sourcedef.Table{Name: partial}, []string{"updated_at", "id"}, setup.KeyNotUnique, ""})
	} else {
		t.Logf("no partial index here: %v", err)
	}
	for _, c := range cases {
		u, err := kc.UniqueKey(ctx, h.DB, c.table, c.cols)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if u.Verdict != c.want || !strings.Contains(u.By+u.Why, c.by) {
			t.Errorf("%s (%s, %v): %+v (%s), want %s naming %q", c.name, c.table, c.cols, u, u.Verdict, c.want, c.by)
		}
	}
}

// keysRefused: Open refuses a table whose catalog shows no unique key, with or without a repeat
// yet, and the CREATE UNIQUE INDEX the error names fixes it.
func (h Harness) keysRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		more []string
	}{{"no key", nil}, {"a non-unique index only", []string{"CREATE INDEX ix_%s ON %s (updated_at, id)"}}} {
		t.Run(c.name, func(t *testing.T) {
			table := h.plain(t, "nokey_", c.more...)
			rows := stamped(1, 2, 3, 4)
			h.insert(t, h.DB.Exec, table, rows)
			def := h.ordersDef(table, state.KindTimestampPK)
			fix := source.UniqueIndexSQL(h.Driver, sourcedef.Table{Name: table}, []string{"id"})
			check := func(err error, mentions ...string) {
				t.Helper()
				if !errors.Is(err, source.ErrKeyNotUnique) || !errors.Is(err, source.ErrMisconfigured) {
					t.Fatalf("open: %v, want ErrKeyNotUnique (a misconfiguration)", err)
				}
				t.Log(err)
				for _, m := range append([]string{`poller "orders"`, table, "(updated_at, id)", fix}, mentions...) {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("the error does not mention %s: %v", m, err)
					}
				}
			}
			_, err := h.openErr(def)
			check(err, "does not prevent")

			twin := rows[2]
			twin.Customer = "twin"
			h.insert(t, h.DB.Exec, table, []order{twin})
			_, err = h.openErr(def)
			check(err, `"id":3`, "2 rows have", "remove the repeats first")
			// An integer cursor on the repeated column alone: the same.
			idDef := h.ordersDef(table, state.KindInteger)
			if _, err := h.openErr(idDef); !errors.Is(err, source.ErrKeyNotUnique) || !strings.Contains(err.Error(), `{"id":3}`) {
				t.Fatalf("integer cursor on a repeated id: %v", err)
			}

			// The fix: remove the repeat, create the index the error names.
			h.exec(t, "DELETE FROM "+table+" WHERE customer = 'twin'")
			h.exec(t, fix)
			r := &reader{t: t, src: h.open(t, def)}
			if got := r.drain(3); !slices.Equal(got, []int64{1, 2, 3, 4}) {
				t.Fatalf("after the fix: %v", got)
			}
		})
	}
}

// keysCursorAndKey: a unique index over (updated_at, id) serves, although id alone repeats.
func (h Harness) keysCursorAndKey(t *testing.T) {
	table := h.plain(t, "pair_", "CREATE UNIQUE INDEX ux_%s ON %s (updated_at, id)")
	rows := stamped(1, 2, 1, 2, 1, 3, 4)
	h.insert(t, h.DB.Exec, table, rows)
	for n := 2; n <= 5; n++ {
		r := &reader{t: t, src: h.open(t, h.ordersDef(table, state.KindTimestampPK))}
		if got := r.drain(n); !slices.Equal(got, []int64{1, 2, 1, 2, 1, 3, 4}) {
			t.Fatalf("batches of %d: %v", n, got)
		}
	}
}

// keysKeyedView: a view of a keyed table is checked at each fetch, and delivers every row.
func (h Harness) keysKeyedView(t *testing.T) {
	table := h.orders(t)
	view := h.view(t, table)
	h.insert(t, h.DB.Exec, table, stamped(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11))
	want := h.expected(t, table, "updated_at", "id")
	for n := 2; n <= 5; n++ {
		r := &reader{t: t, src: h.open(t, h.ordersDef(view, state.KindTimestampPK))}
		if got := r.drain(n); !slices.Equal(got, want) {
			t.Fatalf("batches of %d: %v, want %v", n, got, want)
		}
	}
}

// keysRepeatsInView: a view whose (updated_at, id) repeats, read at batch sizes 2 to 5 from each
// place before the repeat, so that a batch's end falls before, inside, between and after the
// twins: the reader is stopped with ErrKeyNotUnique naming the repeat, and has delivered rows
// before the twins only, none of them or after them.
func (h Harness) keysRepeatsInView(t *testing.T) {
	table := h.plain(t, "twins_")
	view := h.view(t, table)
	rows := stamped(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	twin := rows[5] // the 6th row in key order, id 6
	twin.Customer = "twin"
	h.insert(t, h.DB.Exec, table, append(rows, twin))
	def := h.ordersDef(view, state.KindTimestampPK)
	for n := 2; n <= 5; n++ {
		for start := range n {
			r := &reader{t: t, src: h.open(t, def)}
			var got []int64
			if start > 0 {
				got = r.next(start)
			}
			var err error
			for {
				var b *row.Batch
				if b, err = r.src.Fetch(ctx, r.cursor, n); err != nil || len(b.Rows) == 0 {
					break
				}
				for _, row := range b.Rows {
					got = append(got, row.Get("id").(int64))
				}
				r.cursor = b.To
			}
			if !errors.Is(err, source.ErrKeyNotUnique) || !strings.Contains(err.Error(), `"id":6`) || !strings.Contains(err.Error(), view) ||
				!strings.Contains(err.Error(), "(updated_at, id)") || !strings.Contains(err.Error(), "view") {
				t.Fatalf("batches of %d after %d rows: %v, want ErrKeyNotUnique naming the view, the key and id 6", n, start, err)
			}
			if len(got) > 5 || !slices.Equal(got, []int64{1, 2, 3, 4, 5}[:len(got)]) {
				t.Fatalf("batches of %d after %d rows: delivered %v, past the twins", n, start, got)
			}
			if len(got) < 6-n { // the fetch that fails reads n+1 rows from the first it would deliver
				t.Fatalf("batches of %d after %d rows: delivered %v, stopped more than a batch early", n, start, got)
			}
		}
	}
	if testing.Verbose() {
		_, err := h.open(t, def).Fetch(ctx, nil, 100)
		t.Log(err)
	}
}

// keysCheckpoint: a row that repeats the values of the checkpoint's row, which no keyset read
// reaches, stops the next fetch that has rows to deliver past it.
func (h Harness) keysCheckpoint(t *testing.T) {
	table := h.plain(t, "again_")
	view := h.view(t, table)
	rows := stamped(1, 2, 3, 4, 5)
	h.insert(t, h.DB.Exec, table, rows[:3])
	r := &reader{t: t, src: h.open(t, h.ordersDef(view, state.KindTimestampPK))}
	if got := r.drain(2); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("first: %v", got)
	}
	twin := rows[2]
	twin.Customer = "twin"
	h.insert(t, h.DB.Exec, table, []order{twin, rows[3], rows[4]})
	_, err := r.src.Fetch(ctx, r.cursor, 2)
	if !errors.Is(err, source.ErrKeyNotUnique) || !strings.Contains(err.Error(), `"id":3`) || !strings.Contains(err.Error(), "checkpoint") {
		t.Fatalf("a repeat of the checkpoint: %v", err)
	}
	t.Log(err)
}
