package sink

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/pseudotrigger/pseudotrigger/poller"
)

// Change is the message a sink sends per row (../CONTRACT.md, "Rows as delivered"). Consumers
// deduplicate on ID, which is also the Service Bus MessageID, the Event Hubs event's MessageID
// and the CloudEvent id.
type Change struct {
	ID     string          `json:"id"`
	Poller string          `json:"poller"`
	Op     string          `json:"op"` // insert, update, delete, or upsert (the keyset kinds)
	Key    map[string]any  `json:"key"`
	Row    json.RawMessage `json:"row"` // null for a delete without an old row
	Cursor poller.Cursor   `json:"cursor"`
	// BatchID, FencingToken and Attempt are the batch's (poller.Batch).
	BatchID      string `json:"batch_id"`
	FencingToken int64  `json:"fencing_token"`
	Attempt      int64  `json:"attempt"`
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
	Key  string
	Op   string
	Body []byte
	// FencingToken is the batch's, for services that carry it beside the body.
	FencingToken int64
	// About names the message in errors: "the row with key {...}" or "batch <id>".
	About string
}

// maxKey is the longest Service Bus SessionID and Event Hubs partition key.
const maxKey = 128

// Messages renders b as the messages a sink sends: one per row (mode row or "") or one for the
// batch (mode batch).
func Messages(b *poller.Batch[poller.Row], mode string) ([]Message, error) {
	changes := make([]Change, len(b.Raw))
	msgs := make([]Message, 0, len(b.Raw))
	for i, r := range b.Raw {
		c, key, err := change(b, r)
		if err != nil {
			return nil, err
		}
		changes[i] = c
		if mode == ModeBatch {
			continue
		}
		body, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("sink: %s: %w", about(c.Key), err)
		}
		msgs = append(msgs, Message{ID: c.ID, Poller: b.Poller, Key: key, Op: c.Op, Body: body, FencingToken: b.FencingToken, About: about(c.Key)})
	}
	if mode != ModeBatch {
		return msgs, nil
	}
	body, err := json.Marshal(Batch{Poller: b.Poller, BatchID: b.ID, FencingToken: b.FencingToken, Attempt: b.Attempt, Changes: changes})
	if err != nil {
		return nil, fmt.Errorf("sink: batch %s: %w", b.ID, err)
	}
	return []Message{{ID: b.ID, Poller: b.Poller, Op: "batch", Body: body, FencingToken: b.FencingToken, About: "batch " + b.ID + " (mode batch: lower the batch size)"}}, nil
}

func change(b *poller.Batch[poller.Row], r poller.Row) (Change, string, error) {
	key := r.Key()
	cur, err := r.Cursor()
	if err != nil {
		return Change{}, "", err
	}
	row, err := r.MarshalJSON()
	if err != nil {
		return Change{}, "", fmt.Errorf("sink: %s: %w", about(key), err)
	}
	keyJSON, err := json.Marshal(key)
	if err != nil {
		return Change{}, "", fmt.Errorf("sink: %s: %w", about(key), err)
	}
	return Change{
		ID: ChangeID(b.Poller, keyJSON, cur.Value), Poller: b.Poller, Op: r.Op(), Key: key, Row: row, Cursor: cur,
		BatchID: b.ID, FencingToken: b.FencingToken, Attempt: b.Attempt,
	}, keyText(key, keyJSON), nil
}

// ChangeID is a change's message id: 32 hex digits of SHA-256 over the poller's name, the row's
// key (as JSON) and its cursor value (as the checkpoint records it). A change delivered again,
// by any instance, has the same id; another change of the same row has another cursor value.
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
			switch v := v.(type) {
			case string:
				s = v
			case int64:
				s = strconv.FormatInt(v, 10)
			case time.Time:
				s = v.UTC().Format(time.RFC3339Nano)
			default:
				if j, err := json.Marshal(v); err == nil {
					s = string(j)
				}
			}
		}
	}
	if len(s) > maxKey {
		sum := sha256.Sum256([]byte(s))
		s = "sha256:" + hex.EncodeToString(sum[:])
	}
	return s
}

func about(key map[string]any) string {
	j, err := json.Marshal(key)
	if err != nil {
		return fmt.Sprintf("the row with key %v", key)
	}
	return "the row with key " + string(j)
}
