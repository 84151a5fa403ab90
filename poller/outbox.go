package poller

import (
	"slices"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// Outbox names the columns of a transactional outbox table (WithOutbox, docs/outbox.md): the
// application inserts an event row in the transaction of its business change, and a sink sends
// the row's payload as it is, under the event's id, in order per aggregate.
type Outbox struct {
	// ID is the event id's column: the message id consumers deduplicate on. The producer sets
	// it, so a re-delivery carries the same one.
	ID string
	// AggregateType and AggregateID are the columns of the aggregate the event belongs to. The
	// id orders delivery (the Service Bus session, the Event Hubs partition key, the webhook's
	// one-after-another group); the type is what a route by value usually reads.
	AggregateType, AggregateID string
	// Payload is the column sent verbatim as the message's body: JSON stays JSON, text stays
	// text.
	Payload string
	// Type (optional) is the event type's column.
	Type string
	// Headers (optional) is a JSON object column whose entries become message properties, HTTP
	// headers or CloudEvents extensions.
	Headers string
	// ContentType is the payload's media type ("": JSON for a JSON column, else text). A JSON
	// type makes a payload that is not valid JSON fail its batch, naming the event.
	ContentType string
	// Messages, for a Logical poller of no table (New's table ""), reads PostgreSQL's (14+)
	// transactional messages written with pg_logical_emit_message(true, Messages, payload)
	// instead of rows: ID, AggregateType, AggregateID, Type and Headers then name fields of the
	// payload's JSON object (ID "": the message's WAL position), Payload is left "". Its rows
	// have the columns id, aggregate_type, aggregate_id, payload, type and headers, keyed by id,
	// and its batches' Outbox names them.
	Messages string
}

// WithOutbox makes the poller's table an outbox: its rows are events, and a sink sends each one's
// payload (not the row) under the event's id. The outbox's columns are read besides the
// poller's own. docs/outbox.md gives each database's table and cursor.
func WithOutbox(o Outbox) Option {
	return func(p *Poller) {
		def := sourcedef.Outbox(o)
		p.spec.Source.Outbox = &def
		if !slices.Equal(p.spec.Source.Columns, []string{sourcedef.AllColumns}) {
			for _, c := range def.Columns() {
				if !slices.Contains(p.spec.Source.Columns, c) {
					p.spec.Source.Columns = append(p.spec.Source.Columns, c)
				}
			}
		}
	}
}

// Cleanup says what becomes of a keyset poller's delivered rows (WithCleanup).
type Cleanup struct {
	// Delete deletes the rows behind the committed checkpoint.
	Delete bool
	// OlderThan keeps the delivered rows of the last OlderThan (an audit window).
	OlderThan time.Duration
	// Column is the time column OlderThan measures by ("": the timestamp+pk cursor's column).
	Column string
}

// WithCleanup deletes the poller's delivered rows, by key, in bounded statements, after the
// checkpoint covering them is committed (never before): an outbox that does not grow. A crash
// between the commit and the delete leaves rows behind the checkpoint, which the next tick
// deletes and never sends again. For keyset cursors.
func WithCleanup(c Cleanup) Option {
	return func(p *Poller) {
		def := sourcedef.Cleanup(c)
		p.spec.Source.Cleanup = &def
	}
}

// eventRows are the rows of a change-stream outbox's batch that are events: all but the
// deletes. An application may delete each event in the transaction that inserts it (the table
// then stays empty): the insert is the event, the delete is not one. An update is the event
// again, under the same id. rows itself when it holds no delete.
func eventRows(rows []row.Row) []row.Row {
	i := slices.IndexFunc(rows, func(r row.Row) bool { return r.Op() == row.OpDelete })
	if i < 0 {
		return rows
	}
	out := slices.Clone(rows[:i])
	for _, r := range rows[i+1:] {
		if r.Op() != row.OpDelete {
			out = append(out, r)
		}
	}
	return out
}

// outboxOf is the poller's outbox as its batches show it (nil: not an outbox). A messages
// outbox's rows hold the event in the columns sourcedef.MessageColumns names, whatever fields of
// the payload the outbox names: its batches name those columns, so that a sink reads them as
// it reads a table's (Type and Headers only when the outbox names those fields).
func outboxOf(d *sourcedef.Outbox) *Outbox {
	if d == nil {
		return nil
	}
	o := Outbox(*d)
	if o.Messages != "" {
		c := sourcedef.MessageColumns
		o.ID, o.AggregateType, o.AggregateID, o.Payload = c[0], c[1], c[2], c[3]
		if o.Type != "" {
			o.Type = c[4]
		}
		if o.Headers != "" {
			o.Headers = c[5]
		}
	}
	return &o
}
