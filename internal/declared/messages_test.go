package declared

import (
	"slices"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// messagesJSON is a poller.json of a messages outbox: no table, columns or key.
const messagesJSON = `{"source":{"cursor":{"kind":"logical"}},
 "outbox":{"messages":"app","id":"event_id","aggregate_type":"agg","aggregate_id":"agg_id","type":"kind"},
 "sink":{"type":"webhook","url":"%HOOK%"}}`

// TestMessagesOutbox: a messages outbox needs no table, columns or key, and its source reads the
// messages of its prefix with the fixed columns; a table, columns or key beside it are refused,
// naming the field in poller.json, and so is one without an aggregate's field.
func TestMessagesOutbox(t *testing.T) {
	root := t.TempDir()
	bad := map[string]struct{ json, want string }{
		"table":   {strings.Replace(messagesJSON, `"cursor"`, `"table":"events","cursor"`, 1), `source.table: a messages outbox reads no table (events): its events are the messages of prefix "app"; leave the table out`},
		"columns": {strings.Replace(messagesJSON, `"cursor"`, `"columns":["body"],"cursor"`, 1), `source.columns: "body": a messages outbox's rows have the columns id, aggregate_type, aggregate_id, payload, type, headers`},
		"key":     {strings.Replace(messagesJSON, `"cursor"`, `"key":["event_id"],"cursor"`, 1), `source.key: a messages outbox's key is the event's id (column "id")`},
		"agg":     {strings.Replace(messagesJSON, `"aggregate_id":"agg_id",`, ``, 1), `outbox.aggregate_id: required: the payload's field holding the event's aggregate_id`},
		"keyset":  {strings.Replace(messagesJSON, `{"kind":"logical"}`, `{"kind":"integer","column":"id"}`, 1), `outbox.messages: reads PostgreSQL's pg_logical_emit_message messages: for the logical cursor, not integer`},
		"own":     {strings.Replace(messagesJSON, `"messages":"app"`, `"messages":"pseudotrigger"`, 1), `outbox.messages: "pseudotrigger" is the prefix of the poller's own messages`},
	}
	for name, c := range bad {
		write(t, root, "bad-"+name, c.json, true)
	}
	write(t, root, "events", messagesJSON, true)
	all, err := Load(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		c, isBad := bad[strings.TrimPrefix(p.Name(), "bad-")]
		switch {
		case !isBad && p.Err() != nil:
			t.Errorf("%s: %v", p.Name(), p.Err())
		case isBad && (p.Err() == nil || !strings.Contains(p.Err().Error(), c.want)):
			t.Errorf("%s: %v; want an error containing %q", p.Name(), p.Err(), c.want)
		case !isBad:
			d := p.Source()
			if !d.ReadsMessages() || d.Label() != `messages of prefix "app"` || d.Table.Name != "" {
				t.Errorf("%s: %+v", p.Name(), d)
			}
			if r := d.Resolved(); !slices.Equal(r.Selected(), sourcedef.MessageColumns) || !slices.Equal(r.KeyColumns(), []string{"id"}) {
				t.Errorf("%s: reads %v keyed by %v", p.Name(), r.Selected(), r.KeyColumns())
			}
		}
	}
}
