package state_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// ordersDef is the source of testdata/v1-orders.json, a document written by the first form of
// the fingerprint (its value computed by that code, before version 2).
func ordersDef() state.SourceDef {
	return state.SourceDef{Driver: "postgres", Server: "db.example.com:5432", Database: "shop", Schema: "public", Table: "orders",
		CursorKind: state.KindTimestampPK, CursorColumn: "updated_at", Key: []string{"id"},
		Columns: []string{"id", "customer", "amount", "updated_at"}}
}

func v1Doc(t *testing.T) *state.Doc {
	t.Helper()
	data, err := os.ReadFile("testdata/v1-orders.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := state.Decode(blob, "orders", data)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCheckSourceAcceptsTheFirstForm(t *testing.T) {
	d := v1Doc(t)
	if got := ordersDef().FingerprintV1(); got != d.SourceFingerprint {
		t.Fatalf("FingerprintV1 %s, the v1 document has %s", got, d.SourceFingerprint)
	}
	acc, err := state.CheckSource(blob, d, ordersDef())
	if err != nil || !strings.Contains(string(acc), "first form") {
		t.Fatalf("the v1 document of the same definition: accepted %q, %v", acc, err)
	}
	// A payload column removed since the v1 document was written: the first form covered them,
	// and the document does not say what they were, so this is a mismatch that says so and
	// offers to keep the place.
	def := ordersDef()
	def.Columns = []string{"id", "customer", "updated_at"}
	_, err = state.CheckSource(blob, d, def)
	if !errors.Is(err, state.ErrFingerprintMismatch) || !strings.Contains(err.Error(), "cannot be named") ||
		!strings.Contains(err.Error(), "pollerctl reset orders --keep-cursor --yes") || !strings.Contains(err.Error(), "pollerctl reset orders --to-beginning --yes") {
		t.Fatalf("v1 document, a payload column removed: %v", err)
	}
}

func TestCheckSourceRecorded(t *testing.T) {
	d := v1Doc(t)
	rec := ordersDef()
	d.Source, d.SourceFingerprint = &rec, rec.Fingerprint()

	if acc, err := state.CheckSource(blob, d, ordersDef()); acc != "" || err != nil {
		t.Fatalf("the same definition: %q, %v", acc, err)
	}
	payload := ordersDef()
	payload.Columns = []string{"id", "customer", "note", "updated_at"}
	if payload.Fingerprint() != rec.Fingerprint() {
		t.Fatal("a payload column changed the fingerprint")
	}
	acc, err := state.CheckSource(blob, d, payload)
	if err != nil || !strings.Contains(string(acc), "added note; removed amount") {
		t.Fatalf("payload change: %q, %v", acc, err)
	}

	for _, c := range []struct {
		name   string
		change func(s *state.SourceDef)
		keeps  bool
		says   string
	}{
		{"table", func(s *state.SourceDef) { s.Table = "orders2" }, false, `table "orders" -> "orders2"`},
		{"database", func(s *state.SourceDef) { s.Database = "shop2" }, false, `database "shop" -> "shop2"`},
		{"server", func(s *state.SourceDef) { s.Server = "db2:5432" }, false, "--to-cursor VALUE"},
		{"cursor column", func(s *state.SourceDef) { s.CursorColumn = "modified_at" }, false, `cursor_column "updated_at" -> "modified_at"`},
		{"cursor kind", func(s *state.SourceDef) { s.CursorKind, s.CursorColumn = state.KindInteger, "id" }, false, "cursor_kind"},
		{"key of the tiebreaker", func(s *state.SourceDef) { s.Key = []string{"id", "region"} }, false, "tiebreaker holds the old key"},
		{"filter", func(s *state.SourceDef) { s.Filter = "region = 'eu'" }, true, "rows before it that the new filter admits are not delivered"},
	} {
		t.Run(c.name, func(t *testing.T) {
			to := ordersDef()
			c.change(&to)
			_, err := state.CheckSource(blob, d, to)
			if !errors.Is(err, state.ErrFingerprintMismatch) || !strings.Contains(err.Error(), c.says) ||
				!strings.Contains(err.Error(), "pollerctl reset orders --to-beginning --yes") {
				t.Fatalf("%v", err)
			}
			keep := strings.Contains(err.Error(), "pollerctl reset orders --keep-cursor --yes")
			refused := strings.Contains(err.Error(), "--keep-cursor, is refused for a change of")
			if keep != c.keeps || refused == c.keeps {
				t.Fatalf("keep the place offered %v, refused %v, want offered %v: %v", keep, refused, c.keeps, err)
			}
			changes := rec.Diff(to)
			if len(changes) == 0 {
				t.Fatal("Diff found no change")
			}
			for _, ch := range changes {
				if ch.KeepsCursor != c.keeps {
					t.Fatalf("Diff: %+v", changes)
				}
			}
		})
	}

	// An integer cursor on the key holds no tiebreaker: a key change keeps its place.
	intCur := state.SourceDef{Driver: "sqlite", Database: "/data/shop.db", Table: "events", CursorKind: state.KindInteger, CursorColumn: "id", Key: []string{"id"}}
	wider := intCur
	wider.Key = []string{"id", "tenant"}
	if ch := intCur.Diff(wider); len(ch) != 1 || ch[0].KeepsCursor {
		t.Fatalf("an integer cursor whose key gains a tiebreaker column: %+v", ch)
	}
	renamed := intCur
	renamed.CursorColumn, renamed.Key = "seq", []string{"seq"}
	if ch := intCur.Diff(renamed); len(ch) != 2 || ch[0].KeepsCursor {
		t.Fatalf("another cursor column: %+v", ch)
	}
	// A change stream's position holds no column: a key change keeps its place.
	logical := state.SourceDef{Driver: "postgres", Table: "orders", CursorKind: state.KindLogical, Key: []string{"id"}, Slot: "s1"}
	rekeyed := logical
	rekeyed.Key = []string{"order_no"}
	if ch := logical.Diff(rekeyed); len(ch) != 1 || !ch[0].KeepsCursor {
		t.Fatalf("a logical poller's key: %+v", ch)
	}
	reslot := logical
	reslot.Slot = "s2"
	if ch := logical.Diff(reslot); len(ch) != 1 || ch[0].KeepsCursor {
		t.Fatalf("a logical poller's slot: %+v", ch)
	}

	// More tables: the fingerprint of one table is as before; tables added keep the cursor's
	// place, but a changetracking poller's only when the tables it had keep their order.
	lines, notes := state.SourceTable{Table: "lines", Key: []string{"order_id", "line"}}, state.SourceTable{Table: "notes", Key: []string{"id"}}
	withLines := logical
	withLines.Tables = []state.SourceTable{lines}
	if withLines.Fingerprint() == logical.Fingerprint() || logical.Fingerprint() != (state.SourceDef{Driver: "postgres", Table: "orders", CursorKind: state.KindLogical, Key: []string{"id"}, Slot: "s1", Tables: []state.SourceTable{}}).Fingerprint() {
		t.Fatal("the more tables are not fingerprinted as they should be")
	}
	reordered := withLines
	reordered.Tables = []state.SourceTable{notes, lines}
	for _, c := range []struct {
		kind     string
		from, to state.SourceDef
		keeps    bool
	}{
		{state.KindLogical, logical, withLines, true},
		{state.KindLogical, withLines, reordered, true},
		{state.KindChangeTracking, logical, withLines, true},
		{state.KindChangeTracking, withLines, reordered, false},
		{state.KindChangeTracking, reordered, withLines, false},
	} {
		from, to := c.from, c.to
		from.CursorKind, to.CursorKind = c.kind, c.kind
		ch := from.Diff(to)
		if len(ch) != 1 || ch[0].Field != "tables" || ch[0].KeepsCursor != c.keeps {
			t.Errorf("%s, tables %v -> %v: %+v", c.kind, from.Tables, to.Tables, ch)
		}
	}
	// The first form of the fingerprint knew no more tables: it accepts no definition with some.
	old := &state.Doc{PollerName: "p", SourceFingerprint: logical.FingerprintV1()}
	if _, err := state.CheckSource("b", old, withLines); err == nil {
		t.Error("a document of the first form accepted a definition with more tables")
	}
}
