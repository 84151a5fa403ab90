// Package setup is the vocabulary of a poller's table set-up check (pollerctl check, and the
// handler when it first opens a source): the checks, their findings and verdicts, and the
// judgements every database's check shares (the keyset's index, the unique key, the cursor's
// stamping, the columns), which each driver's driver.Driver.CheckSetup builds on.
package setup

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// A Verdict is what a setup check found: ok, a problem, or that it cannot tell.
type Verdict string

// The verdicts of a Finding.
const (
	VerdictOK      Verdict = "ok"
	VerdictProblem Verdict = "problem"
	// VerdictUnknown: the catalog does not say (a view, a trigger whose body cannot be read): not
	// a pass, not a fail.
	VerdictUnknown Verdict = "cannot tell"
	// VerdictOffer: not a problem, a change the check offers (Detail says what it gives and what
	// it costs; Fix is its SQL): pollerctl check --fix runs it only with --offers.
	VerdictOffer Verdict = "offer"
)

// The checks a setup check makes, in the order they are printed (a driver's findings come in
// this order, the portable ones at their place).
const (
	CheckTable   = "table"   // the table exists (a view: cannot tell the rest)
	CheckColumns = "columns" // the definition's columns exist
	// CheckUniqueKey: the key columns are unique (driver.Driver.UniqueKey); package source adds
	// it to a driver's findings right after the columns.
	CheckUniqueKey = "unique key"
	// CheckTypes: every column's values can travel as JSON (Driver.Refuse), right after the unique
	// key (or the columns).
	CheckTypes      = "column types"
	CheckIndex      = "keyset index"                 // an index leads with (cursor, key columns...)
	CheckStamped    = "stamped on insert and update" // the cursor column moves on every write
	CheckPrivileges = "privileges"                   // what the poller's login needs
	CheckBefore     = "before images"                // a change stream sends the row before an update or delete
	CheckCDC        = "change stream set-up"         // pollerctl cdc enable's plan has no problem
	// CheckOutbox: an outbox's cursor cannot skip a late-committed event, and its columns'
	// types fit their fields.
	CheckOutbox = "outbox"
	// CheckCleanup: the cursor of a poller that deletes its delivered rows cannot skip a
	// late-committed row (which the cleanup would delete unsent).
	CheckCleanup = "cleanup"
)

// A Finding is one check's verdict on a poller's source set-up.
type Finding struct {
	Check   string  `json:"check"`
	Verdict Verdict `json:"verdict"`
	// Detail says what is wrong (or what was seen, or why it cannot tell), for people.
	Detail string `json:"detail,omitempty"`
	// Fix are the statements that fix a problem, for this table in the database's dialect, in
	// the order they run; none when the fix is not SQL the check can write (Detail says what to
	// do).
	Fix []string `json:"fix,omitempty"`
}

// Problems counts the findings that are problems.
func Problems(fs []Finding) int {
	n := 0
	for _, f := range fs {
		if f.Verdict == VerdictProblem {
			n++
		}
	}
	return n
}

// Fixes are the problems' fix statements, in order (and the offers', when offers is set).
func Fixes(fs []Finding, offers bool) []string {
	var out []string
	for _, f := range fs {
		if f.Verdict == VerdictProblem || offers && f.Verdict == VerdictOffer {
			out = append(out, f.Fix...)
		}
	}
	return out
}

// KeysetColumns are the columns a keyset read orders by: the cursor column, then the key
// columns that are not it; a change stream's kinds have none (nil).
func KeysetColumns(d sourcedef.Definition) []string {
	if d.Changes() {
		return nil
	}
	return d.KeyColumns()
}

// IndexServes says whether one of the indexes (each its columns in order; "" for an
// expression) leads with the keyset's columns in that order, which a keyset read seeks on.
func IndexServes(indexes [][]string, keys []string, caseless bool) bool {
	eq := func(a, b string) bool { return a == b || caseless && strings.EqualFold(a, b) }
	return slices.ContainsFunc(indexes, func(ix []string) bool {
		if len(ix) < len(keys) {
			return false
		}
		for i, k := range keys {
			if !eq(ix[i], k) {
				return false
			}
		}
		return true
	})
}

// IndexFinding judges indexes (IndexServes) for d's keyset; create is the statement that makes
// the index (named IndexName) when none serves.
func IndexFinding(d sourcedef.Definition, indexes [][]string, caseless bool, create string) Finding {
	keys := KeysetColumns(d)
	f := Finding{Check: CheckIndex, Verdict: VerdictOK, Detail: "an index leads with (" + strings.Join(keys, ", ") + ")"}
	if !IndexServes(indexes, keys, caseless) {
		f.Verdict, f.Fix = VerdictProblem, []string{create}
		f.Detail = fmt.Sprintf("no index leads with (%s), in that order: each tick's read scans the table", strings.Join(keys, ", "))
	}
	return f
}

// IndexName is the name the fix gives the keyset's index: table_cursor_key....
func IndexName(d sourcedef.Definition) string {
	return d.Table.Name + "_" + strings.Join(KeysetColumns(d), "_")
}

// StampName is the name the fixes give what stamps the cursor column (a trigger, its function):
// table_stamp_column.
func StampName(d sourcedef.Definition) string { return d.Table.Name + "_stamp_" + d.Cursor.Column }

// CounterName is the one-row counter table of an integer cursor's fix: table_column_counter.
func CounterName(d sourcedef.Definition) string {
	return d.Table.Name + "_" + d.Cursor.Column + "_counter"
}

// Stamping is what a driver read of how the cursor column is written.
type Stamping struct {
	Insert, Update Verdict // each: ok, problem, or cannot tell
	// Why says, for each side not ok, what was seen ("only a default", "a trigger whose body
	// cannot be read").
	Why []string
}

// StampFinding turns a driver's reading into the finding, with fix (what stamps the sides not
// ok) for a problem.
func StampFinding(col string, st Stamping, fix []string) Finding {
	f := Finding{Check: CheckStamped, Verdict: VerdictOK, Detail: "column " + col + " is stamped on every INSERT and UPDATE"}
	switch {
	case st.Insert == VerdictProblem || st.Update == VerdictProblem:
		f.Verdict, f.Fix = VerdictProblem, fix
	case st.Insert == VerdictUnknown || st.Update == VerdictUnknown:
		f.Verdict = VerdictUnknown
	default:
		return f
	}
	f.Detail = "column " + col + ": " + strings.Join(st.Why, "; ")
	return f
}

// ColumnsFinding is the columns' finding: missing lists the definition's columns the table
// lacks, have the table's; addCursor is the fix that adds the cursor column when it is the one
// missing (nil: none is safe, say what to do).
func ColumnsFinding(d sourcedef.Definition, missing, have []string, addCursor []string) Finding {
	if len(missing) == 0 && d.ReadsAllColumns() {
		return Finding{Check: CheckColumns, Verdict: VerdictOK, Detail: "every column (" + sourcedef.AllColumns + "): " + strings.Join(have, ", ")}
	}
	if len(missing) == 0 {
		return Finding{Check: CheckColumns, Verdict: VerdictOK, Detail: strings.Join(d.Selected(), ", ")}
	}
	f := Finding{Check: CheckColumns, Verdict: VerdictProblem}
	var other []string
	for _, m := range missing {
		if m == d.Cursor.Column && !d.Changes() {
			f.Fix = addCursor
			continue
		}
		other = append(other, m)
	}
	var parts []string
	if len(f.Fix) > 0 {
		parts = append(parts, "no cursor column "+d.Cursor.Column+" (the fix adds it, NOT NULL with a default)")
	} else if slices.Contains(missing, d.Cursor.Column) && !d.Changes() {
		parts = append(parts, "no cursor column "+d.Cursor.Column+": add it as docs/sources.md's recipe for a "+d.Cursor.Kind+" cursor says")
	}
	if len(other) > 0 {
		parts = append(parts, fmt.Sprintf("no column %s (the table has %s): add it, or take it out of the poller's definition", strings.Join(other, ", "), strings.Join(have, ", ")))
	}
	f.Detail = strings.Join(parts, "; ")
	return f
}

// TableAndColumns are the first findings every Driver.CheckSetup makes: the table's (view, when not
// "", says what kind of view it is: its stamping and indexes are its underlying tables', which the
// check does not follow, so it cannot tell), then the columns' among have (caseless: whatever
// their case), with addCursor the fix that adds a missing cursor column (never offered for a
// view). more says whether the rest can be judged: a table, read by a keyset kind, whose only
// missing column, if any, is the cursor column.
func TableAndColumns(d sourcedef.Definition, view string, have []string, caseless bool, addCursor []string) (fs []Finding, more bool) {
	table := Finding{Check: CheckTable, Verdict: VerdictOK, Detail: d.Table.String()}
	if view != "" {
		table = Finding{Check: CheckTable, Verdict: VerdictUnknown,
			Detail: fmt.Sprintf("%s is %s: its stamping and indexes are its underlying tables', which the check does not follow", d.Table, view)}
		addCursor = nil
	}
	missing := Missing(d, have, caseless)
	fs = []Finding{table, ColumnsFinding(d, missing, have, addCursor)}
	other := slices.ContainsFunc(missing, func(m string) bool {
		return m != d.Cursor.Column && !(caseless && strings.EqualFold(m, d.Cursor.Column))
	})
	return fs, view == "" && !d.Changes() && !other
}

// Missing lists the definition's columns (with the key's) that have lacks.
func Missing(d sourcedef.Definition, have []string, caseless bool) []string {
	var out []string
	for _, c := range d.Selected() {
		if !slices.ContainsFunc(have, func(h string) bool { return h == c || caseless && strings.EqualFold(h, c) }) {
			out = append(out, c)
		}
	}
	return out
}

// JoinStatements renders statements as a client that ends each with a semicolon runs them.
func JoinStatements(stmts []string) string {
	var b strings.Builder
	for _, s := range stmts {
		b.WriteString(s)
		b.WriteString(";\n")
	}
	return b.String()
}
