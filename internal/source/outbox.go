package source

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// outboxField is one column an outbox names: its field as poller.json spells it, the column, and
// the column classes it may be of.
type outboxField struct {
	name, column string
	kinds        outboxKind
}

// outboxKind is what an outbox column's values must be.
type outboxKind int

const (
	outboxScalar  outboxKind = iota // an id, a type: a value usable as text
	outboxPayload                   // text, JSON or bytes, sent verbatim
	outboxHeaders                   // a JSON object, as JSON or as text
)

// outboxFields are the columns o names (none for o's Messages, or no outbox).
func outboxFields(o *sourcedef.Outbox) []outboxField {
	if o == nil || o.Messages != "" {
		return nil
	}
	fs := []outboxField{{"id", o.ID, outboxScalar}, {"aggregate_type", o.AggregateType, outboxScalar},
		{"aggregate_id", o.AggregateID, outboxScalar}, {"payload", o.Payload, outboxPayload}}
	if o.Type != "" {
		fs = append(fs, outboxField{"type", o.Type, outboxScalar})
	}
	if o.Headers != "" {
		fs = append(fs, outboxField{"headers", o.Headers, outboxHeaders})
	}
	return fs
}

// OutboxTypeFits says why a column of type c cannot be the outbox field named field ("id",
// "payload", "headers"...), "" when it can: the id, aggregate type and id and event type are
// scalars sent as text (integers, text, UUIDs, decimals), the payload text, JSON or bytes, the
// headers a JSON object as JSON or text. SQLite's JSON, a declared type of text values, is text.
func OutboxTypeFits(field string, c row.Column) string {
	class := outboxClass(c)
	switch kindOf(field) {
	case outboxPayload:
		if slices.Contains([]row.Class{row.ClassText, row.ClassJSON, row.ClassBinary}, class) {
			return ""
		}
		return "the payload is sent verbatim: make it a text, JSON or binary column"
	case outboxHeaders:
		if class == row.ClassText || class == row.ClassJSON {
			return ""
		}
		return "the headers are a JSON object of names and values: make it a JSON or text column"
	}
	if slices.Contains([]row.Class{row.ClassInt, row.ClassText, row.ClassUUID, row.ClassDecimal}, class) {
		return ""
	}
	return "its values are sent as text (a message id, a key, a property): make it an integer, text or UUID column"
}

// outboxClass is c's class as an outbox reads its values: SQLite's JSON, a declared type of text
// values, is text.
func outboxClass(c row.Column) row.Class {
	if c.Class == row.ClassOther && row.BaseType(c.DBType) == "JSON" {
		return row.ClassText
	}
	return c.Class
}

// ReplayEvent returns the row a dead-lettered event of an outbox is replayed as: the event as its
// letter holds it (data, the row as the handler was given it, in JSON), not read again from the
// source, for an event does not change once written while its row may be gone (the cleanup
// deletes what is behind the checkpoint, dead letters too, and a messages outbox has no table).
// Each column's value is read back as its class says: JSON as JSON, text as text, bytes from
// their base64, numbers and booleans as such; a column the data lacks is NULL. table and op are the
// letter row's ("": the first table, an insert).
func (s *Source) ReplayEvent(table, op string, data json.RawMessage, cursor state.Cursor) (*row.Row, error) {
	if s.def.Outbox == nil {
		return nil, fmt.Errorf("source: poller %q: ReplayEvent is for an outbox's events; this poller has no outbox", s.poller)
	}
	s, err := s.partOf(table)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("source: poller %q: the dead letter's data is not a JSON object of the event's columns (%v)", s.poller, err)
	}
	raw := make([]any, len(s.shape.Cols))
	for i, c := range s.shape.Cols {
		v, ok := fields[c.Name]
		if !ok || string(v) == "null" {
			continue
		}
		if raw[i], err = letterValue(c, v); err != nil {
			return nil, fmt.Errorf("source: poller %q: the dead letter's column %s (%s): %w", s.poller, c.Name, strings.ToLower(c.DBType), err)
		}
	}
	r := s.shape.Row(raw, &row.Change{Op: cmp.Or(op, row.OpInsert), Cursor: cursor})
	return &r, nil
}

// letterValue is the value of column c that v, its JSON in a dead letter, stands for.
func letterValue(c row.Column, v json.RawMessage) (any, error) {
	switch outboxClass(c) {
	case row.ClassJSON:
		return v, nil
	case row.ClassBinary:
		var b []byte // base64, as a row renders bytes
		err := json.Unmarshal(v, &b)
		return b, err
	case row.ClassInt:
		var n int64
		if err := json.Unmarshal(v, &n); err == nil {
			return n, nil
		}
	case row.ClassFloat, row.ClassReal:
		var f float64
		if err := json.Unmarshal(v, &f); err == nil {
			return f, nil
		}
	case row.ClassBool:
		var b bool
		if err := json.Unmarshal(v, &b); err == nil {
			return b, nil
		}
	}
	var text string
	if json.Unmarshal(v, &text) == nil {
		return text, nil
	}
	return v, nil // anything else: its JSON
}

// kindOf is the kind of the outbox field named field.
func kindOf(field string) outboxKind {
	switch field {
	case "payload":
		return outboxPayload
	case "headers":
		return outboxHeaders
	}
	return outboxScalar
}

// checkOutboxColumns names the first outbox column the table lacks (have: its columns).
func (s *Source) checkOutboxColumns(have []string) error {
	for _, f := range outboxFields(s.def.Outbox) {
		if !s.hasColumn(have, f.column) {
			return s.outboxErr(f, "column %s is missing from table %s (it has %s)", f.column, s.def.Table, strings.Join(have, ", "))
		}
	}
	return nil
}

// checkOutboxTypes refuses an outbox column of a type its field cannot use (OutboxTypeFits),
// once the source is laid out.
func (s *Source) checkOutboxTypes() error {
	for _, f := range outboxFields(s.def.Outbox) {
		i := slices.IndexFunc(s.shape.Names, func(n string) bool { return n == f.column || s.dl.Caseless() && strings.EqualFold(n, f.column) })
		if i < 0 {
			continue // checkOutboxColumns named it
		}
		c := s.shape.Cols[i]
		if why := OutboxTypeFits(f.name, c); why != "" {
			return s.outboxErr(f, "column %s is %s; %s", f.column, strings.ToLower(c.DBType), why)
		}
	}
	return nil
}

// outboxErr is an ErrSchema error about the outbox field f, named as poller.json spells it.
func (s *Source) outboxErr(f outboxField, format string, args ...any) error {
	return fmt.Errorf("source: poller %q: %w: %s.%s: %s", s.poller, ErrSchema, sourcedef.FieldOutbox, f.name, fmt.Sprintf(format, args...))
}

// hasColumn says whether have holds column c (in any case, where the database ignores it).
func (s *Source) hasColumn(have []string, c string) bool {
	return slices.Contains(have, c) || s.dl.Caseless() && slices.ContainsFunc(have, func(h string) bool { return strings.EqualFold(h, c) })
}

// outboxFinding is pollerctl check's finding on an outbox, or on a poller that deletes its
// delivered rows (false when d is neither): a problem when its cursor can skip a row whose
// transaction commits late (Driver.LateCommits), never sent and, with cleanup, deleted; or when
// the reads' bound behind open transactions (bound, nil when none) cannot be read; and when an
// outbox column's type does not fit its field (once the columns are found: columns).
func outboxFinding(ctx context.Context, drv driver.Driver, db *sql.DB, d sourcedef.Definition, bound driver.ReadBound, columns bool) (setup.Finding, bool, error) {
	if d.Outbox == nil && d.Cleanup == nil {
		return setup.Finding{}, false, nil
	}
	f := setup.Finding{Check: setup.CheckOutbox, Verdict: setup.VerdictOK}
	what, lost, of := "an event", "never sent", "an outbox"
	if d.Outbox == nil {
		f.Check, what, lost, of = setup.CheckCleanup, "a row", "never sent, then deleted by the cleanup", "a cleanup"
	}
	var problems, seen []string
	kind := d.Cursor.Kind
	if skips, instead := drv.LateCommits(kind); skips {
		use := "a cursor that reads in commit order"
		if instead != "" {
			use = instead
		}
		problems = append(problems, fmt.Sprintf("the %s cursor can skip %s: its value is taken before the transaction commits, "+
			"so %s committed after a later one was read stays behind the cursor, %s; use %s (docs/outbox.md)", kind, what, what, lost, use))
	} else if bound != nil {
		if _, err := bound.Arg(ctx, db); err != nil {
			return setup.Finding{}, false, err
		}
		for _, det := range bound.Stats().Details {
			if det.Bad {
				problems = append(problems, fmt.Sprintf("the %s cursor is safe for %s only while its reads stay behind the open transactions, "+
					"and they cannot: %s", kind, of, det.Text))
			} else {
				seen = append(seen, "reads behind the open transactions: "+det.Text)
			}
		}
	} else {
		seen = append(seen, fmt.Sprintf("the %s cursor cannot skip a late commit", kind))
	}
	if fields := outboxFields(d.Outbox); len(fields) > 0 && columns {
		cols := make([]string, len(fields))
		for i, fl := range fields {
			cols[i] = fl.column
		}
		_, types, err := columnTypes(ctx, db, drv, d.Table, cols)
		if err != nil {
			return setup.Finding{}, false, err
		}
		for i, fl := range fields {
			c := row.NewColumn(drv, fl.column, types[i])
			if why := OutboxTypeFits(fl.name, c); why != "" {
				problems = append(problems, fmt.Sprintf("%s.%s: column %s is %s; %s", sourcedef.FieldOutbox, fl.name, fl.column, strings.ToLower(c.DBType), why))
			}
		}
	}
	if len(problems) > 0 {
		f.Verdict, f.Detail = setup.VerdictProblem, strings.Join(problems, "; ")
	} else {
		f.Detail = strings.Join(seen, "; ")
	}
	return f, true, nil
}
