package state

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// SourceDef is the canonical form of the source a checkpoint is taken on, as the state document
// records it beside its fingerprint (Doc.Source): what decides which rows come next and what a
// saved cursor means (the driver, where the table is, the cursor and the key, the filter and a
// change stream's slot), and, recorded but not fingerprinted, the payload columns. Never a
// password or token: credentials are not part of it.
type SourceDef struct {
	Driver       string   `json:"driver"`
	Server       string   `json:"server"`   // host[:port][\instance]; empty for SQLite
	Database     string   `json:"database"` // the database name; the file path for SQLite
	Schema       string   `json:"schema"`
	Table        string   `json:"table"`
	CursorKind   string   `json:"cursor_kind"`
	CursorColumn string   `json:"cursor_column"`
	Key          []string `json:"key"`
	Filter       string   `json:"filter"`
	Slot         string   `json:"slot,omitempty"` // logical cursors: another slot is another stream
	// Columns are the columns read (the key's included): the payload. They decide neither the
	// order nor the position, so the fingerprint leaves them out and a change is accepted.
	Columns []string `json:"columns"`
	// Tables are the tables a change-stream cursor reads besides Table (one stream); none for a
	// poller of one table.
	Tables []SourceTable `json:"tables,omitempty"`
	// Messages is the prefix of the logical decoding messages a messages outbox reads instead of
	// a table (another prefix is other events); "" for a table.
	Messages string `json:"messages,omitempty"`
}

// SourceTable is one more table of a SourceDef: where it is, its key and filter, and (not
// fingerprinted) its payload columns.
type SourceTable struct {
	Schema  string   `json:"schema"`
	Table   string   `json:"table"`
	Key     []string `json:"key"`
	Filter  string   `json:"filter"`
	Columns []string `json:"columns"`
}

// String is the table, schema-qualified when it has a schema.
func (t SourceTable) String() string {
	if t.Schema == "" {
		return t.Table
	}
	return t.Schema + "." + t.Table
}

// tablesLead says whether s's more tables lead to's, in the same order (to adds tables at the
// end, if any).
func (s SourceDef) tablesLead(to SourceDef) bool {
	if len(s.Tables) > len(to.Tables) {
		return false
	}
	for i, t := range s.Tables {
		if t.String() != to.Tables[i].String() {
			return false
		}
	}
	return true
}

// tablesText names the more tables with their keys and filters, as Diff shows them.
func (s SourceDef) tablesText() string {
	var parts []string
	for _, t := range s.Tables {
		p := t.String() + " key " + strings.Join(t.Key, ",")
		if t.Filter != "" {
			p += " filter " + t.Filter
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// Fingerprint is "sha256:" and the hex SHA-256 of the canonical JSON of what decides the order
// and the position (version 2 of the form): every field but Columns. A payload column added or
// removed keeps it; another table, cursor, key, filter or slot changes it.
func (s SourceDef) Fingerprint() string {
	return hash(struct {
		V        int       `json:"v"`
		Driver   string    `json:"driver"`
		Server   string    `json:"server"`
		Database string    `json:"database"`
		Schema   string    `json:"schema"`
		Table    string    `json:"table"`
		Kind     string    `json:"cursor_kind"`
		Cursor   string    `json:"cursor_column"`
		Key      []string  `json:"key"`
		Filter   string    `json:"filter"`
		Slot     string    `json:"slot,omitempty"`
		Tables   []tableFP `json:"tables,omitempty"`   // absent for one table: its fingerprint is as before
		Messages string    `json:"messages,omitempty"` // absent for a table: its fingerprint is as before
	}{2, s.Driver, s.Server, s.Database, s.Schema, s.Table, s.CursorKind, s.CursorColumn, s.Key, s.Filter, s.Slot, s.tablesFP(), s.Messages})
}

// tableFP is what the fingerprint covers of a more table: all but its payload columns.
type tableFP struct {
	Schema string   `json:"schema"`
	Table  string   `json:"table"`
	Key    []string `json:"key"`
	Filter string   `json:"filter"`
}

func (s SourceDef) tablesFP() []tableFP {
	var out []tableFP
	for _, t := range s.Tables {
		out = append(out, tableFP{t.Schema, t.Table, t.Key, t.Filter})
	}
	return out
}

// FingerprintV1 is the first form of the fingerprint, which also covered the payload columns:
// documents written before version 2 carry it, and are accepted when it is this definition's.
func (s SourceDef) FingerprintV1() string {
	return hash(struct {
		V        int      `json:"v"`
		Driver   string   `json:"driver"`
		Server   string   `json:"server"`
		Database string   `json:"database"`
		Schema   string   `json:"schema"`
		Table    string   `json:"table"`
		Columns  []string `json:"columns"`
		Kind     string   `json:"cursor_kind"`
		Cursor   string   `json:"cursor_column"`
		PK       []string `json:"pk"`
		Filter   string   `json:"filter"`
		Slot     string   `json:"slot,omitempty"`
	}{1, s.Driver, s.Server, s.Database, s.Schema, s.Table, s.Columns, s.CursorKind, s.CursorColumn, s.Key, s.Filter, s.Slot})
}

func hash(canon any) string {
	b, _ := json.Marshal(canon) // strings and slices only: cannot fail
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// cursorColumns are the columns a keyset cursor's value and tiebreaker hold: the cursor column,
// then the key's other columns. A change stream's position holds none.
func (s SourceDef) cursorColumns() []string {
	if ChangeKind(s.CursorKind) {
		return nil
	}
	cols := []string{s.CursorColumn}
	for _, k := range s.Key {
		if k != s.CursorColumn {
			cols = append(cols, k)
		}
	}
	return cols
}

// Change is one difference between the source a checkpoint was taken on and the configured one.
type Change struct {
	Field    string // as Doc.Source names it: "table", "cursor_column", "key", ...
	From, To string
	// KeepsCursor: the saved cursor still means the same position after this change, so
	// `pollerctl reset --keep-cursor` may go on from it; Why says what that means or why not.
	KeepsCursor bool
	Why         string
}

func (c Change) String() string { return fmt.Sprintf("%s %s -> %s", c.Field, c.From, c.To) }

// Diff lists what changed from s (the recorded source) to to (the configured one) that the
// fingerprint covers, with what each means for the saved cursor: the one place that rules which
// changes `pollerctl reset --keep-cursor` accepts. Payload columns are not listed (PayloadDiff).
func (s SourceDef) Diff(to SourceDef) []Change {
	var out []Change
	where := "another table: the saved cursor is a position in the old one and means nothing here"
	add := func(field, from, next string, keeps bool, why string) {
		if from != next {
			out = append(out, Change{Field: field, From: quoteOrNone(from), To: quoteOrNone(next), KeepsCursor: keeps, Why: why})
		}
	}
	add("driver", s.Driver, to.Driver, false, where)
	add("server", s.Server, to.Server, false, where+"; if it is the same data under another name (a replica, a moved server), set the position yourself with --to-cursor VALUE")
	add("database", s.Database, to.Database, false, where)
	add("schema", s.Schema, to.Schema, false, where)
	add("table", s.Table, to.Table, false, where)
	add("cursor_kind", s.CursorKind, to.CursorKind, false, "the saved cursor is of the old kind: its value means nothing to the new one")
	add("cursor_column", s.CursorColumn, to.CursorColumn, false, "the saved cursor is a value of the old cursor column: it means nothing in the new one")
	add("slot", s.Slot, to.Slot, false, "another slot is another change stream: a position in one means nothing in the other")
	add("messages", s.Messages, to.Messages, true, "the saved position is in the same stream: it keeps its place, and the events from there on are the messages of the new prefix")
	if !slices.Equal(s.Key, to.Key) {
		if slices.Equal(s.cursorColumns(), to.cursorColumns()) {
			add("key", strings.Join(s.Key, ","), strings.Join(to.Key, ","), true,
				"the saved cursor does not hold the key, so it keeps its place; the rows' keys in messages are the new key's from then on (a sink that deduplicates on the key sees new keys)")
		} else {
			add("key", strings.Join(s.Key, ","), strings.Join(to.Key, ","), false,
				"the saved cursor's tiebreaker holds the old key's values: it means nothing with the new key")
		}
	}
	add("filter", s.Filter, to.Filter, true,
		"the saved cursor keeps its place; rows before it that the new filter admits are not delivered (start over for them), and rows it now excludes are not delivered from here on")
	if s.CursorKind == KindChangeTracking && !s.tablesLead(to) {
		add("tables", s.tablesText(), to.tablesText(), false,
			"changetracking orders a change version's changes by the tables' places in the list, and a saved cursor inside a version means another place in another order: keep the tables in their order and add new ones at the end, or set the position with --to-cursor VERSION")
	} else {
		add("tables", s.tablesText(), to.tablesText(), true,
			"the saved cursor is a position in the change stream the tables share, and keeps its place: a table added delivers its changes from there on (not its earlier rows), a table removed no more changes")
	}
	return out
}

// PayloadDiff says which payload columns to adds and removes relative to s: "" when none.
func (s SourceDef) PayloadDiff(to SourceDef) string {
	var added, removed []string
	for _, c := range to.Columns {
		if !slices.Contains(s.Columns, c) {
			added = append(added, c)
		}
	}
	for _, c := range s.Columns {
		if !slices.Contains(to.Columns, c) {
			removed = append(removed, c)
		}
	}
	var parts []string
	if len(added) > 0 {
		parts = append(parts, "added "+strings.Join(added, ", "))
	}
	if len(removed) > 0 {
		parts = append(parts, "removed "+strings.Join(removed, ", "))
	}
	return strings.Join(parts, "; ")
}

func quoteOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return fmt.Sprintf("%q", s)
}

// Accepted is what CheckSource accepted that is worth one log line: "" when the document was
// written for this very definition.
type Accepted string

// CheckSource checks that the document was written for the configured source want: its
// fingerprint is want's (or, for a document written before version 2 of the fingerprint, want's
// FingerprintV1). Accepted then says what differs that needs no stop (payload columns, the
// older form of the fingerprint): the next write records want. Otherwise it returns an *Error
// wrapping ErrFingerprintMismatch that names what changed, when the document recorded its source,
// and both ways out: keep the place (`pollerctl reset NAME --keep-cursor --yes`), where the
// changes allow it, and start over (`--to-beginning`).
func CheckSource(blob string, d *Doc, want SourceDef) (Accepted, error) {
	fp := want.Fingerprint()
	switch {
	case d.SourceFingerprint == fp && d.Source != nil:
		if p := d.Source.PayloadDiff(want); p != "" {
			return Accepted("payload columns changed (" + p + "): accepted, the fingerprint covers only what decides the order and the position"), nil
		}
		return "", nil
	case d.SourceFingerprint == fp:
		return "", nil
	case d.SourceFingerprint == want.FingerprintV1() && len(want.Tables) == 0: // the first form knows no more tables
		return Accepted("the document carries the first form of this source's fingerprint (it covered the payload columns too): accepted, the next write records the new form"), nil
	}
	return "", &Error{Blob: blob, Err: ErrFingerprintMismatch, Detail: MismatchDetail(d, want)}
}

// MismatchDetail says what changed between the source d was written for and want, and the ways
// out (see CheckSource).
func MismatchDetail(d *Doc, want SourceDef) string {
	name := d.PollerName
	start := fmt.Sprintf("start over, delivering every row again: pollerctl reset %s --to-beginning --yes", name)
	if d.Source == nil {
		return fmt.Sprintf("the checkpoint was taken on source %s but the poller is now configured for %s. "+
			"The document does not record what its source was (it was written before the definition was recorded), so what changed cannot be named: "+
			"a payload column added or removed changes a fingerprint of that form too. Ways out: keep the place, if the table, the cursor column and kind and the key are the same: "+
			"pollerctl reset %s --keep-cursor --yes (it checks the saved cursor against the table first); or %s",
			d.SourceFingerprint, want.Fingerprint(), name, start)
	}
	changes := d.Source.Diff(want)
	var said, refused []string
	for _, c := range changes {
		said = append(said, fmt.Sprintf("%s (%s)", c, c.Why))
		if !c.KeepsCursor {
			refused = append(refused, c.Field)
		}
	}
	what := strings.Join(said, "; ")
	if len(changes) == 0 { // the same parts under another fingerprint: a document edited by hand
		what = fmt.Sprintf("fingerprint %s, recorded source %s", d.SourceFingerprint, d.Source.Fingerprint())
	}
	if len(refused) > 0 {
		return fmt.Sprintf("the source definition changed: %s. Way out: %s (keeping the place, pollerctl reset %s --keep-cursor, is refused for a change of %s)",
			what, start, name, strings.Join(refused, ", "))
	}
	return fmt.Sprintf("the source definition changed: %s. Ways out: keep the place and accept the new definition: pollerctl reset %s --keep-cursor --yes; or %s",
		what, name, start)
}
