package sink

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/jsonenc"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// Change is the message a sink sends per row (docs/contract.md, "Sink messages"). Consumers
// deduplicate on ID, which is also the Service Bus MessageID, the Event Hubs event's MessageID
// and the CloudEvent id.
type Change struct {
	ID     string          `json:"id"`
	Poller string          `json:"poller"`
	Table  string          `json:"table"` // as the poller names it
	Op     string          `json:"op"`    // insert, update, delete, upsert (the keyset kinds) or read
	Key    map[string]any  `json:"key"`
	Row    json.RawMessage `json:"row"` // null for a delete without an old row
	// Before is the row before an update or a delete, where the database gives it (poller.Row.Before).
	Before json.RawMessage `json:"before,omitempty"`
	// Changed lists the columns an update changed, where known (poller.Row.Changed): absent when
	// not known, empty when the update changed no value.
	Changed *[]string `json:"changed,omitempty"`
	// Unchanged names the columns the change did not carry (PostgreSQL's unchanged TOAST
	// values), which Row leaves out.
	Unchanged []string      `json:"unchanged,omitempty"`
	Cursor    poller.Cursor `json:"cursor"`
	// Tx is the change's transaction, for the commit-ordered cursors (logical, changetracking).
	Tx *Tx `json:"tx,omitempty"`
	// BatchID, FencingToken and Attempt are the batch's (poller.Batch).
	BatchID      string `json:"batch_id"`
	FencingToken int64  `json:"fencing_token"`
	Attempt      int64  `json:"attempt"`
}

// Tx is a change's transaction in a message (poller.Transaction).
type Tx struct {
	ID            uint64     `json:"id"`
	CommitLSN     string     `json:"commit_lsn,omitempty"`     // PostgreSQL
	ChangeVersion int64      `json:"change_version,omitempty"` // SQL Server
	CommitTime    *time.Time `json:"commit_time,omitempty"`
	Index         int        `json:"index,omitempty"` // from 1; absent when not known
	Last          bool       `json:"last"`
}

// Batch is the message a sink in batch mode sends per batch; its id is the batch id.
type Batch struct {
	Poller       string   `json:"poller"`
	BatchID      string   `json:"batch_id"`
	FencingToken int64    `json:"fencing_token"`
	Attempt      int64    `json:"attempt"`
	Changes      []Change `json:"changes"`
}

// Message is one message as a service receives it.
type Message struct {
	ID     string
	Poller string
	// Key is the row's key as text: a session id or partition key ("" in batch mode). A key
	// longer than the services take (128) is replaced by its SHA-256.
	Key   string
	Op    string
	Table string
	// Tx is the change's transaction (nil for a keyset row or a read), for services that carry
	// it beside the body.
	Tx   *poller.Transaction
	Body []byte
	// FencingToken is the batch's, for services that carry it beside the body.
	FencingToken int64
	// TraceParent and TraceState are the W3C trace context of the send (its span's), which the
	// services that have a place for it carry beside the body ("" when tracing is off: see
	// docs/telemetry.md). Send sets them.
	TraceParent, TraceState string

	keyJSON []byte // the row's key as JSON (nil in batch mode and for an event)
	about   string // batch mode and events: what About says
	ev      *event // an outbox row's event (outbox.go); nil for a Change or a Batch
}

// ContentType is the body's media type: application/json for a Change or a Batch, an outbox
// event's own (poller.Outbox's ContentType, else its payload column's kind).
func (m Message) ContentType() string {
	if m.ev != nil {
		return m.ev.contentType
	}
	return contentJSON
}

// Properties are what a service carries beside the body, for its filters and routing
// (Service Bus application properties, Event Hubs properties): the poller, the op, the table
// ("" in batch mode: none), for a change of a commit-ordered cursor tx_id and tx_last, and the
// trace context when there is one: traceparent, tracestate and Diagnostic-Id (the traceparent
// again, under the name the Azure SDKs' older versions read).
//
// An outbox event's are instead the poller, aggregate_type, aggregate_id, type (when the outbox
// has a type column), each entry of its headers and the trace context.
func (m Message) Properties() map[string]any {
	if m.ev != nil {
		return m.eventProperties()
	}
	p := map[string]any{"poller": m.Poller, "op": m.Op}
	if m.Table != "" {
		p["table"] = m.Table
	}
	if m.Tx != nil {
		p["tx_id"], p["tx_last"] = int64(m.Tx.ID), m.Tx.Last
	}
	if m.TraceParent != "" {
		p["traceparent"], p["Diagnostic-Id"] = m.TraceParent, m.TraceParent
		if m.TraceState != "" {
			p["tracestate"] = m.TraceState
		}
	}
	return p
}

// About names the message in errors: "the row with key {...}" or "batch <id>".
func (m Message) About() string {
	if m.keyJSON == nil {
		return m.about
	}
	return "the row with key " + string(m.keyJSON)
}

// maxKey is the longest Service Bus SessionID and Event Hubs partition key.
const maxKey = 128

// Messages renders b as the messages a sink sends: one per row (mode row or "") or one for the
// batch (mode batch); an outbox's batch as its events, one per row in either mode. A row's message id mixes in its table when b.Tables has several (or, for a
// batch made by hand without Tables, when its rows are of several tables).
func Messages(b *poller.Batch[poller.Row], mode string) ([]Message, error) {
	if b.Outbox != nil {
		return outboxMessages(b)
	}
	if mode == ModeBatch {
		return batchMessage(b)
	}
	msgs := make([]Message, len(b.Raw))
	buf := make([]byte, 0, 512*len(b.Raw)) // one allocation for the batch's bodies
	several := severalTables(b)
	for i, r := range b.Raw {
		start := len(buf)
		var (
			m   Message
			err error
		)
		buf, m, err = appendChange(buf, b, r, several)
		if err != nil {
			return nil, err
		}
		m.Body = buf[start:len(buf):len(buf)]
		msgs[i] = m
	}
	return msgs, nil
}

// batchMessage is b as one Batch message: the rows' Changes, as Messages writes them, in a
// list.
func batchMessage(b *poller.Batch[poller.Row]) ([]Message, error) {
	body := append(make([]byte, 0, 512*len(b.Raw)+128), `{"poller":`...)
	body = jsonenc.AppendString(body, b.Poller)
	body = append(body, `,"batch_id":`...)
	body = jsonenc.AppendString(body, b.ID)
	body = append(body, `,"fencing_token":`...)
	body = strconv.AppendInt(body, b.FencingToken, 10)
	body = append(body, `,"attempt":`...)
	body = strconv.AppendInt(body, b.Attempt, 10)
	body = append(body, `,"changes":[`...)
	several := severalTables(b)
	for i, r := range b.Raw {
		if i > 0 {
			body = append(body, ',')
		}
		var err error
		if body, _, err = appendChange(body, b, r, several); err != nil {
			return nil, err
		}
	}
	body = append(body, "]}"...)
	return []Message{{ID: b.ID, Poller: b.Poller, Op: "batch", Body: body, FencingToken: b.FencingToken, about: "batch " + b.ID + " (mode batch: lower the batch size)"}}, nil
}

// severalTables says whether b's rows are of a poller of several tables, whose message ids mix in
// each row's table: b.Tables says so; a batch made by hand without Tables, when its rows are of
// more than one table.
func severalTables(b *poller.Batch[poller.Row]) bool {
	if len(b.Tables) > 0 {
		return len(b.Tables) > 1
	}
	for _, r := range b.Raw {
		if r.Table() != b.Raw[0].Table() {
			return true
		}
	}
	return false
}

// appendChange appends r's Change as JSON, byte for byte what json.Marshal(Change) writes
// (TestChangeEncoding), without its reflection: on a fast webhook the encoding is a tenth of
// the tick's time.
func appendChange(dst []byte, b *poller.Batch[poller.Row], r poller.Row, several bool) ([]byte, Message, error) {
	key := r.Key()
	keyJSON, err := appendKey(nil, key)
	if err != nil {
		return nil, Message{}, fmt.Errorf("sink: the row with key %v: %w", key, err)
	}
	m := Message{Poller: b.Poller, Op: r.Op(), Table: r.Table(), FencingToken: b.FencingToken, keyJSON: keyJSON}
	cur, err := r.Cursor()
	if err != nil {
		return nil, Message{}, err
	}
	version := []byte(cur.Value)
	if m.Op == "read" {
		// A backfill's read of a row at the version a change already carried is another
		// message: a consumer that deduplicates on the id must not drop it. Its batch id names
		// the backfill and the chunk, so a retry of the chunk keeps the id.
		version = append(append(slices.Clip(version), 0), b.ID...)
	}
	if several {
		// Two tables' changes of the same key share a change version: the table tells them apart.
		version = append(append(slices.Clip(version), 0), m.Table...)
	}
	m.ID = ChangeID(b.Poller, keyJSON, version)
	m.Key = keyText(key, keyJSON)
	row := []byte("null") // a delete of which the database gave only the key
	if r.HasRow() {
		if row, err = r.MarshalJSON(); err != nil {
			return nil, Message{}, fmt.Errorf("sink: %s: %w", m.About(), err)
		}
	}
	dst = append(dst, `{"id":"`...)
	dst = append(dst, m.ID...)
	dst = append(dst, `","poller":`...)
	dst = jsonenc.AppendString(dst, b.Poller)
	dst = append(dst, `,"table":`...)
	dst = jsonenc.AppendString(dst, m.Table)
	dst = append(dst, `,"op":`...)
	dst = jsonenc.AppendString(dst, m.Op)
	dst = append(dst, `,"key":`...)
	dst = append(dst, keyJSON...)
	dst = append(dst, `,"row":`...)
	dst = append(dst, row...)
	if dst, err = appendImages(dst, r); err != nil {
		return nil, Message{}, fmt.Errorf("sink: %s: %w", m.About(), err)
	}
	dst = append(dst, `,"cursor":{"kind":`...)
	dst = jsonenc.AppendString(dst, cur.Kind)
	dst = append(dst, `,"value":`...)
	dst = append(dst, cur.Value...)
	if len(cur.Tiebreaker) > 0 {
		dst = append(dst, `,"tiebreaker":{`...)
		for i, k := range slices.Sorted(maps.Keys(cur.Tiebreaker)) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonenc.AppendString(dst, k)
			dst = append(dst, ':')
			dst = append(dst, cur.Tiebreaker[k]...)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, '}')
	if tx, ok := r.Transaction(); ok {
		m.Tx = &tx
		dst = appendTx(dst, &tx)
	}
	dst = append(dst, `,"batch_id":`...)
	dst = jsonenc.AppendString(dst, b.ID)
	dst = append(dst, `,"fencing_token":`...)
	dst = strconv.AppendInt(dst, b.FencingToken, 10)
	dst = append(dst, `,"attempt":`...)
	dst = strconv.AppendInt(dst, b.Attempt, 10)
	return append(dst, '}'), m, nil
}

// appendImages appends what a change says besides its row: before, changed and unchanged,
// each where known (Change).
func appendImages(dst []byte, r poller.Row) ([]byte, error) {
	if before, ok := r.Before(); ok {
		j, err := before.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("the row before the change: %w", err)
		}
		dst = append(append(dst, `,"before":`...), j...)
	}
	if changed, ok := r.Changed(); ok {
		dst = appendNames(append(dst, `,"changed":`...), changed)
	}
	if unchanged := r.Unchanged(); len(unchanged) > 0 {
		dst = appendNames(append(dst, `,"unchanged":`...), unchanged)
	}
	return dst, nil
}

// appendNames appends a list of column names as a JSON array.
func appendNames(dst []byte, names []string) []byte {
	dst = append(dst, '[')
	for i, n := range names {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonenc.AppendString(dst, n)
	}
	return append(dst, ']')
}

// appendTx appends a change's transaction as Tx.
func appendTx(dst []byte, tx *poller.Transaction) []byte {
	dst = append(dst, `,"tx":{"id":`...)
	dst = strconv.AppendUint(dst, tx.ID, 10)
	if tx.CommitLSN != "" {
		dst = jsonenc.AppendString(append(dst, `,"commit_lsn":`...), tx.CommitLSN)
	}
	if tx.ChangeVersion != 0 {
		dst = strconv.AppendInt(append(dst, `,"change_version":`...), tx.ChangeVersion, 10)
	}
	if !tx.CommitTime.IsZero() {
		dst = jsonenc.AppendTime(append(dst, `,"commit_time":`...), tx.CommitTime)
	}
	if tx.Index != 0 {
		dst = strconv.AppendInt(append(dst, `,"index":`...), int64(tx.Index), 10)
	}
	dst = strconv.AppendBool(append(dst, `,"last":`...), tx.Last)
	return append(dst, '}')
}

// appendKey appends the key as json.Marshal writes a map: names sorted.
func appendKey(dst []byte, key map[string]any) ([]byte, error) {
	dst = append(dst, '{')
	for i, k := range slices.Sorted(maps.Keys(key)) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonenc.AppendString(dst, k)
		dst = append(dst, ':')
		switch v := key[k].(type) {
		case nil:
			dst = append(dst, "null"...)
		case int64:
			dst = strconv.AppendInt(dst, v, 10)
		case string:
			dst = jsonenc.AppendString(dst, v)
		case time.Time: // years outside 0-9999 too, which json.Marshal refuses
			dst = jsonenc.AppendTime(dst, v)
		default:
			j, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			dst = append(dst, j...)
		}
	}
	return append(dst, '}'), nil
}

// ChangeID is a change's message id: 32 hex digits of SHA-256 over the poller's name, the row's
// key (as JSON) and its cursor value (as the checkpoint records it). A change delivered again,
// by any instance, has the same id; another change of the same row has another cursor value. (A
// backfill's read also mixes its batch id into the cursor value, and a poller of several tables
// the row's table: see appendChange.)
func ChangeID(pollerName string, keyJSON, cursorValue []byte) string {
	h := sha256.New()
	h.Write([]byte(pollerName))
	h.Write([]byte{0})
	h.Write(keyJSON)
	h.Write([]byte{0})
	h.Write(cursorValue)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// keyText is the key as a session id or partition key: a one-column key's value as text, a
// composite key as its JSON.
func keyText(key map[string]any, keyJSON []byte) string {
	s := string(keyJSON)
	if len(key) == 1 {
		for _, v := range key {
			if t, ok := ValueText(v); ok {
				s = t
			} else {
				s = "null"
			}
		}
	}
	return fitKey(s)
}

// fitKey is s as a session id or partition key: s, or past maxKey its SHA-256.
func fitKey(s string) string {
	if len(s) > maxKey {
		sum := sha256.Sum256([]byte(s))
		s = "sha256:" + hex.EncodeToString(sum[:])
	}
	return s
}
