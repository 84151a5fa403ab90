package sourcedef

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// The fields of an outbox and of a cleanup, for FieldError.
const (
	FieldOutbox  = "outbox"
	FieldCleanup = "cleanup"
)

// Outbox says that a poller's table is a transactional outbox (docs/outbox.md): each row is an
// event the application wrote in the transaction of its business change, and a sink sends its
// payload as it is, not the row's envelope, under the event's own id, ordered per aggregate.
type Outbox struct {
	// ID is the event id's column: the message id consumers deduplicate on.
	ID string
	// AggregateType and AggregateID are the columns of the aggregate the event belongs to: the
	// type routes it (a route's column), the id orders it (the session id, partition key, or the
	// webhook's one-after-another group).
	AggregateType string
	AggregateID   string
	// Payload is the body's column, sent verbatim: JSON stays JSON, text stays text.
	Payload string
	// Type is the event type's column (optional).
	Type string
	// Headers is a JSON object column whose entries become message properties, HTTP headers or
	// CloudEvents extensions (optional).
	Headers string
	// ContentType is the payload's media type; "" decides by the column (JSON for a JSON
	// column). A JSON type makes a payload that is not valid JSON fail its batch.
	ContentType string
	// Messages, for a logical cursor of PostgreSQL, reads the transactional messages of
	// pg_logical_emit_message(true, Messages, payload) instead of a table's rows: ID,
	// AggregateType, AggregateID, Type and Headers then name fields of the payload's JSON
	// object ("" ID: the message's position in the WAL).
	Messages string
}

// Columns are the table columns the outbox names, in the order of its fields, the optional ones
// when set (none for Messages).
func (o Outbox) Columns() []string {
	if o.Messages != "" {
		return nil
	}
	var out []string
	for _, c := range []string{o.ID, o.AggregateType, o.AggregateID, o.Payload, o.Type, o.Headers} {
		if c != "" && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// Cleanup says what becomes of a keyset poller's rows once delivered: deleted, by key, in
// bounded statements, once the checkpoint that covers them is committed (never before).
type Cleanup struct {
	// Delete deletes the rows behind the committed checkpoint.
	Delete bool
	// OlderThan keeps the rows of the last OlderThan behind the checkpoint (an audit window):
	// only delivered rows older than it are deleted. 0: every delivered row.
	OlderThan time.Duration
	// Column is the time column OlderThan compares; "" is the cursor column, which must then be
	// a timestamp+pk cursor's.
	Column string
}

// The columns of the rows a messages outbox (Outbox.Messages) makes of its messages, in order,
// whatever fields of the payload they come from: the event's id (MessageKey, the rows' key), its
// aggregate's type and id, the payload itself (JSON), its type and its headers (a JSON object;
// NULL, like the type, when the outbox names no such field or the payload lacks it).
var MessageColumns = []string{MessageKey, "aggregate_type", "aggregate_id", "payload", "type", "headers"}

// MessageKey is the key of a messages outbox's rows: the event's id.
const MessageKey = "id"

// ReadsMessages says whether d reads a messages outbox (Outbox.Messages) rather than a table.
func (d Definition) ReadsMessages() bool { return d.Outbox != nil && d.Outbox.Messages != "" }

// Resolved is d as a source lays it out: a messages outbox's fixed columns (MessageColumns) and
// key (MessageKey) filled in; any other definition as it is.
func (d Definition) Resolved() Definition {
	if d.ReadsMessages() {
		d.Columns, d.PK = slices.Clone(MessageColumns), []string{MessageKey}
	}
	return d
}

// ReservedMessagePrefix is the prefix of the logical decoding messages the logical cursor writes
// itself (keep-up marks, backfill watermarks): no messages outbox may read it.
const ReservedMessagePrefix = "pseudotrigger"

// checkMessages checks a messages outbox: a logical cursor, a prefix, the payload's fields of the
// aggregate, and nothing of a table (there is none to read: a table, its columns, key or filter
// given beside it would say one is read, so they are refused rather than ignored).
func (d Definition) checkMessages() error {
	o, f := d.Outbox, FieldOutbox+".messages"
	switch {
	case d.Cursor.Kind != state.KindLogical:
		return fieldErr(f, "reads PostgreSQL's pg_logical_emit_message messages: for the logical cursor, not %s", d.Cursor.Kind)
	case o.Messages == ReservedMessagePrefix:
		return fieldErr(f, "%q is the prefix of the poller's own messages (keep-up marks, backfill watermarks): give your events another prefix", o.Messages)
	case strings.ContainsRune(o.Messages, 0):
		return fieldErr(f, "a prefix holds no NUL character")
	case o.Payload != "":
		return fieldErr(FieldOutbox+".payload", "a message's payload is the message's content: leave payload out with messages")
	case d.Table.Name != "" || d.Table.Schema != "":
		return fieldErr(FieldTable, "a messages outbox reads no table (%s): its events are the messages of prefix %q; leave the table out", d.Table, o.Messages)
	case d.Filter != "":
		return fieldErr(FieldFilter, "a messages outbox reads no table to filter: leave the filter out")
	case len(d.PK) > 0 && !slices.Equal(d.PK, []string{MessageKey}):
		return fieldErr(FieldKey, "a messages outbox's key is the event's id (column %q): leave the key out", MessageKey)
	case d.Initial == InitialSnapshot:
		return fieldErr(FieldInitial, "%q reads a table's rows; a messages outbox has none: leave initial out", InitialSnapshot)
	}
	for _, c := range d.Columns {
		if !slices.Contains(MessageColumns, c) {
			return fieldErr(FieldColumns, "%q: a messages outbox's rows have the columns %s (fields of the payload that outbox names): leave the columns out", c, strings.Join(MessageColumns, ", "))
		}
	}
	for _, f := range []struct{ name, field string }{{"aggregate_type", o.AggregateType}, {"aggregate_id", o.AggregateID}} {
		if f.field == "" {
			return fieldErr(FieldOutbox+"."+f.name, "required: the payload's field holding the event's %s", f.name)
		}
	}
	return nil
}

// checkOutbox checks d's outbox and cleanup: the rules that need no database.
func (d Definition) checkOutbox() error {
	kind := d.Cursor.Kind
	if o := d.Outbox; o != nil {
		if o.Messages != "" {
			if err := d.checkMessages(); err != nil {
				return err
			}
		} else {
			for _, f := range []struct{ name, col string }{{"id", o.ID}, {"aggregate_type", o.AggregateType}, {"aggregate_id", o.AggregateID}, {"payload", o.Payload}} {
				if f.col == "" {
					return fieldErr(FieldOutbox+"."+f.name, "required: the column of the event's %s", f.name)
				}
			}
			for _, c := range o.Columns() {
				if err := checkIdent(c); err != nil {
					return fieldErr(FieldOutbox, "%q: %v", c, err)
				}
			}
		}
		if len(d.More) > 0 {
			return fieldErr(FieldOutbox, "reads one outbox table: give each outbox a poller of its own")
		}
	}
	if c := d.Cleanup; c != nil {
		switch {
		case state.ChangeKind(kind):
			return fieldErr(FieldCleanup, "is for keyset cursors; a %s outbox stays empty when the application deletes each event in the transaction that inserts it (docs/outbox.md)", kind)
		case !c.Delete && c.OlderThan == 0:
			return fieldErr(FieldCleanup, "says nothing to do: \"delete\", or older_than")
		case c.OlderThan < 0:
			return fieldErr(FieldCleanup+".older_than", "%v is negative", c.OlderThan)
		case c.OlderThan > 0 && c.Column == "" && kind != state.KindTimestampPK:
			return fieldErr(FieldCleanup+".column", "required with older_than on a %s cursor: the time column the age is measured by", kind)
		case c.Column != "":
			if err := checkIdent(c.Column); err != nil {
				return fieldErr(FieldCleanup+".column", "%q: %v", c.Column, err)
			}
		}
	}
	return nil
}

// String says what the cleanup does, for status and logs.
func (c Cleanup) String() string {
	if c.OlderThan > 0 {
		return fmt.Sprintf("delete delivered rows older than %v", c.OlderThan)
	}
	return "delete delivered rows"
}
