package postgres

// A messages outbox (sourcedef.Outbox.Messages): the application writes each event with
// pg_logical_emit_message(true, prefix, payload) in the transaction of its business change, and
// the logical cursor reads those messages from the slot instead of a table's changes. pgoutput
// sends them with its option messages (PostgreSQL 14 or later, which peekQuery sets), as
// "Message" ('M': Int8 flags, 1 when transactional; Int64 the message's LSN; String the prefix;
// Int32 the content's length; Byte(n) the content), a transactional one between the Begin and
// the Commit of its transaction and only once that transaction committed (PostgreSQL 15 docs,
// "Logical Streaming Replication Parameters" and "Logical Replication Message Formats"; parsed
// by pglogrepl's LogicalDecodingMessage). So its events come in commit order with their
// transaction's positions, as a table's changes do, and a rolled-back one never.
//
// Each message of the poller's prefix is a row, an insert, of the columns
// sourcedef.MessageColumns: the payload is the content as it came; the id, the aggregate's
// type and id, the type and the headers are the fields of the payload's JSON object that the
// outbox names (the id, when it names none, the message's LSN: its place in the WAL, the same
// on every reading). A message the outbox cannot read (not a JSON object, a required field
// missing or of a kind that is no id) stops the poller there, after the events before it,
// naming its LSN, as a truncate does: never dropped.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// ErrBadEvent: a logical decoding message of a messages outbox's prefix is not an event the
// outbox can read; the poller stops before it (see the error for the way on).
var ErrBadEvent = source.Mark(errors.New("a message of the outbox's prefix is not an event it can read"), source.ErrMisconfigured)

// eventDecoders decode the columns of a messages outbox's rows: text, but the payload and the
// headers, JSON (as the source lays them out).
func eventDecoders(m *pgtype.Map, mu *sync.Mutex) []func([]byte) (any, error) {
	text, js := textDecoder(m, mu, pgtype.TextOID), textDecoder(m, mu, pgtype.JSONBOID)
	return []func([]byte) (any, error){text, text, text, js, text, js}
}

// event adds the row of an outbox's message m, or the stop that names why it cannot.
func (d *decoder) event(m *pglogrepl.LogicalDecodingMessage) error {
	content := d.keep(m.Content) // m's bytes are the reader's
	vals, err := eventValues(d.l.def.Outbox, content, m.LSN)
	if err != nil {
		l, where, lsn := d.l, d.where(), m.LSN
		return d.stop(func(at pgcdc.Position) error {
			return fmt.Errorf("source: poller %q, %s: %w: the message at LSN %s, in %s: %v; the poller stops before it. Correct what writes the events; to skip this one: pollerctl reset %s --to-cursor %s --yes",
				l.poller, l.lay.Label(), ErrBadEvent, lsn, where, err, l.poller, at)
		})
	}
	ch := d.newChange(len(vals))
	copy(ch.Text, vals)
	ch.Op, ch.Decode, ch.Commit = row.OpInsert, d.l.events, d.tx.meta
	d.tx.entries = append(d.tx.entries, entry{ch: ch})
	return nil
}

// eventValues are the values of the row of an outbox's message, by sourcedef.MessageColumns
// (nil: NULL), from its content; an error says why the content is not an event o can read.
func eventValues(o *sourcedef.Outbox, content []byte, lsn pglogrepl.LSN) ([][]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(content, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("its content is not a JSON object (%s)", excerpt(content))
	}
	vals := make([][]byte, len(sourcedef.MessageColumns))
	vals[3] = content
	id := []byte(lsn.String())
	for _, f := range []struct {
		column, field string
		required      bool
	}{{"id", o.ID, true}, {"aggregate_type", o.AggregateType, true}, {"aggregate_id", o.AggregateID, true}, {"type", o.Type, false}} {
		if f.field == "" {
			continue
		}
		v, err := scalar(fields[f.field])
		switch {
		case err != nil:
			return nil, fmt.Errorf("its field %q (outbox.%s): %v", f.field, f.column, err)
		case v == nil && f.required:
			return nil, fmt.Errorf("it has no field %q (outbox.%s)", f.field, f.column)
		}
		switch f.column {
		case "id":
			id = v
		case "aggregate_type":
			vals[1] = v
		case "aggregate_id":
			vals[2] = v
		case "type":
			vals[4] = v
		}
	}
	vals[0] = id
	if h := fields[o.Headers]; o.Headers != "" && len(h) > 0 && string(h) != "null" {
		if h[0] != '{' {
			return nil, fmt.Errorf("its field %q (outbox.headers) is %s, not a JSON object", o.Headers, excerpt(h))
		}
		vals[5] = h
	}
	return vals, nil
}

// scalar is a field's value as text: a string's, or a number's digits; nil for a missing or null
// field; an error for another kind of value.
func scalar(raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if s == "" {
			return nil, errors.New("it is empty")
		}
		return []byte(s), nil
	case raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9':
		return raw, nil
	}
	return nil, fmt.Errorf("it is %s, not a string or a number", excerpt(raw))
}

// excerpt is the start of b, for an error.
func excerpt(b []byte) string {
	const n = 60
	if len(b) > n {
		return fmt.Sprintf("%q...", b[:n])
	}
	return fmt.Sprintf("%q", b)
}
