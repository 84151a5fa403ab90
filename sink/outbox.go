package sink

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/poller"
)

// ErrBadPayload is wrapped by the error of a batch holding an outbox row that cannot be sent as
// its event: a NULL id, aggregate id or payload, a payload that is not valid JSON under a JSON
// content type, headers that are not a JSON object. The error names the event and the column;
// nothing of the batch was sent, and the batch comes again until the row is fixed (or the
// poller's poison policy sets it aside).
var ErrBadPayload = errors.New("outbox row not sendable as an event")

// The content types an outbox payload takes when the outbox names none (poller.Outbox's
// ContentType), by the payload column's values.
const (
	contentJSON   = "application/json"
	contentText   = "text/plain; charset=utf-8"
	contentBinary = "application/octet-stream"
)

// event is what an outbox row's message carries besides the envelope's fields (Message.ev).
type event struct {
	contentType   string
	typ           string // the type column's value ("": none)
	aggregateType string
	aggregateID   string   // as text, whole (the message's Key is hashed past maxKey)
	headers       []header // the headers column's entries, by name
}

// header is one entry of an event's headers: its value as text (a string's, else its JSON).
type header struct{ name, value string }

// CheckOutbox checks that the sink can send an outbox's events (poller.Outbox): each event is a
// message of its own, which only a webhook can also send many to a request (mode "batch": as
// CloudEvents batches), so mode "batch" is refused for the other sinks. The error wraps
// ErrConfig and names the field.
func (c Config) CheckOutbox() error {
	if c.Mode == ModeBatch && c.Type != Webhook {
		return fmt.Errorf("%w: sink.mode: \"batch\" with an outbox is a webhook's (many events to a POST, as CloudEvents); "+
			"a %s sink sends each event as a message of its own: leave the mode out (\"row\")", ErrConfig, c.Type)
	}
	return nil
}

// outboxMessages renders each row of b as the event it holds (b.Outbox): the payload as the
// body, the event id as the message id, the aggregate id as the key. It does so in either mode
// (a webhook in mode batch puts many in a request).
func outboxMessages(b *poller.Batch[poller.Row]) ([]Message, error) {
	o := b.Outbox
	msgs := make([]Message, len(b.Raw))
	for i, r := range b.Raw {
		m, err := eventMessage(b, o, r)
		if err != nil {
			return nil, err
		}
		msgs[i] = m
	}
	return msgs, nil
}

// eventMessage is r's event as a message.
func eventMessage(b *poller.Batch[poller.Row], o *poller.Outbox, r poller.Row) (Message, error) {
	m := Message{Poller: b.Poller, Op: r.Op(), FencingToken: b.FencingToken}
	if tx, ok := r.Transaction(); ok {
		m.Tx = &tx
	}
	id, ok := ValueText(r.Get(o.ID))
	if !ok {
		key, _ := appendKey(nil, r.Key())
		return Message{}, fmt.Errorf("sink: %w: the outbox row with key %s: its id (column %s) is %s", ErrBadPayload, key, o.ID, describe(r.Get(o.ID)))
	}
	m.ID = id
	agg, ok := ValueText(r.Get(o.AggregateID))
	if !ok {
		return Message{}, fmt.Errorf("sink: %w: event %s: its aggregate id (column %s) is %s", ErrBadPayload, id, o.AggregateID, describe(r.Get(o.AggregateID)))
	}
	m.Key = fitKey(agg)
	ev := &event{aggregateID: agg}
	ev.aggregateType, _ = ValueText(r.Get(o.AggregateType))
	m.about = "event " + id + " (aggregate " + ev.aggregateType + " " + agg + ")"
	if o.Type != "" {
		ev.typ, _ = ValueText(r.Get(o.Type))
	}
	var err error
	if m.Body, ev.contentType, err = payload(r.Get(o.Payload), o.ContentType); err != nil {
		return Message{}, fmt.Errorf("sink: %w: %s: column %s: %v", ErrBadPayload, m.about, o.Payload, err)
	}
	if o.Headers != "" {
		if ev.headers, err = headers(r.Get(o.Headers)); err != nil {
			return Message{}, fmt.Errorf("sink: %w: %s: column %s: %v", ErrBadPayload, m.about, o.Headers, err)
		}
	}
	m.ev = ev
	return m, nil
}

// payload is a payload column's value as a body, and its content type: contentType, else the
// one its values' kind says. Under a JSON content type the body must be valid JSON.
func payload(v any, contentType string) ([]byte, string, error) {
	var (
		body []byte
		kind string
	)
	switch v := v.(type) {
	case json.RawMessage:
		body, kind = v, contentJSON
	case string:
		body, kind = []byte(v), contentText
	case []byte:
		body, kind = v, contentBinary
	case nil:
		return nil, "", errors.New("the payload is NULL")
	default:
		return nil, "", fmt.Errorf("the payload is %s, not JSON, text or bytes", describe(v))
	}
	if contentType == "" {
		contentType = kind
	}
	if IsJSONContent(contentType) && !json.Valid(body) {
		return nil, "", fmt.Errorf("the payload is not valid JSON (%v), which its content type %s says it is: fix the row, or set outbox.content_type", jsonErr(body), contentType)
	}
	return body, contentType, nil
}

// IsJSONContent says whether a media type is JSON's: application/json, or a +json suffix
// (application/cloudevents+json), with any parameters.
func IsJSONContent(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(contentType))
	}
	return mt == contentJSON || strings.HasSuffix(mt, "+json")
}

// headers reads a headers column's value: a JSON object (as JSON or as text) or NULL (none).
// Entries that are strings are their text, others their JSON; sorted by name.
func headers(v any) ([]header, error) {
	var raw []byte
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		raw = v
	case string:
		raw = []byte(v)
	case []byte:
		raw = v
	default:
		return nil, fmt.Errorf("the headers are %s, not a JSON object", describe(v))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("the headers are not a JSON object of names and values (%v)", jsonErr(raw))
	}
	out := make([]header, 0, len(obj))
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		val := string(obj[name])
		var s string
		if json.Unmarshal(obj[name], &s) == nil {
			val = s
		}
		out = append(out, header{name, val})
	}
	return out, nil
}

// ValueText is a column value as text, the one rule for a value that names something: a
// message's key (session id, partition key), an outbox event's id and aggregate, and the value a
// declared poller's route reads. A string as it is, an integer or a float in decimal, a boolean
// true or false, a time in RFC 3339 (UTC), bytes in standard base64, a JSON column's string
// without its quotes (other JSON as it is), anything else its JSON; false for NULL (JSON's
// null too).
func ValueText(v any) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "", false
	case string:
		return v, true
	case int64:
		return strconv.FormatInt(v, 10), true
	case uint64:
		return strconv.FormatUint(v, 10), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(v), true
	case []byte:
		return base64.StdEncoding.EncodeToString(v), true
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano), true
	case json.RawMessage:
		var s *string
		if err := json.Unmarshal(v, &s); err == nil && s == nil {
			return "", false // JSON's null
		} else if err == nil {
			return *s, true
		}
		return string(v), true
	default:
		j, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v), true
		}
		return string(j), true
	}
}

// describe names a value's kind for an error: NULL, or its Go type.
func describe(v any) string {
	if v == nil {
		return "NULL"
	}
	return fmt.Sprintf("a %T", v)
}

// jsonErr says what is wrong with b as a JSON object or value, without quoting it (a payload
// may hold what no log should).
func jsonErr(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return fmt.Errorf("a JSON %T, not an object", v)
}

// eventProperties are an event's Properties.
func (m Message) eventProperties() map[string]any {
	p := make(map[string]any, 5+len(m.ev.headers))
	for _, h := range m.ev.headers {
		p[h.name] = h.value
	}
	p["poller"], p["aggregate_type"], p["aggregate_id"] = m.Poller, m.ev.aggregateType, m.ev.aggregateID
	if m.ev.typ != "" {
		p["type"] = m.ev.typ
	}
	if m.TraceParent != "" {
		p["traceparent"], p["Diagnostic-Id"] = m.TraceParent, m.TraceParent
		if m.TraceState != "" {
			p["tracestate"] = m.TraceState
		}
	}
	return p
}
