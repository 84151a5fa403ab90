package declared

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// Outbox is poller.json's "outbox": the columns of an outbox table's events (poller.Outbox).
type Outbox struct {
	ID            string `json:"id,omitempty"`
	AggregateType string `json:"aggregate_type,omitempty"`
	AggregateID   string `json:"aggregate_id,omitempty"`
	Payload       string `json:"payload,omitempty"`
	Type          string `json:"type,omitempty"`
	Headers       string `json:"headers,omitempty"`
	ContentType   string `json:"content_type,omitempty"`
	// Messages reads pg_logical_emit_message messages of this prefix (logical, PostgreSQL).
	Messages string `json:"messages,omitempty"`
}

// Cleanup is poller.json's "cleanup": "delete", or {"older_than": "7d", "column": "..."}.
type Cleanup struct {
	Delete    bool   `json:"-"`
	OlderThan string `json:"older_than,omitempty"`
	Column    string `json:"column,omitempty"`
}

// UnmarshalJSON reads "delete" or the object.
func (c *Cleanup) UnmarshalJSON(data []byte) error {
	if s := bytes.TrimSpace(data); len(s) > 0 && s[0] == '"' {
		v, err := strconv.Unquote(string(s))
		if err != nil {
			return err
		}
		if v != "delete" {
			return fmt.Errorf("cleanup: %q is not \"delete\" or an object like {\"older_than\": \"7d\"}", v)
		}
		*c = Cleanup{Delete: true}
		return nil
	}
	type plain Cleanup
	var p plain
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("cleanup: %w (it is \"delete\" or {\"older_than\": \"7d\", \"column\": \"created_at\"})", err)
	}
	*c = Cleanup(p)
	c.Delete = true
	return nil
}

// ParseAge reads an age: a Go duration (36h, 90m) or a number of days (7d).
func ParseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err == nil && n > 0 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not an age like 7d or 36h", s)
	}
	return d, nil
}

// definition is the outbox as a source definition's (nil when poller.json has none).
func (o *Outbox) definition() *sourcedef.Outbox {
	if o == nil {
		return nil
	}
	return &sourcedef.Outbox{ID: o.ID, AggregateType: o.AggregateType, AggregateID: o.AggregateID, Payload: o.Payload,
		Type: o.Type, Headers: o.Headers, ContentType: o.ContentType, Messages: o.Messages}
}

// definition is the cleanup as a source definition's (nil when poller.json has none, or its
// older_than cannot be read: check says so).
func (c *Cleanup) definition() *sourcedef.Cleanup {
	if c == nil {
		return nil
	}
	d := &sourcedef.Cleanup{Delete: c.Delete, Column: c.Column}
	if c.OlderThan != "" {
		d.OlderThan, _ = ParseAge(c.OlderThan)
	}
	return d
}
