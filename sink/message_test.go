package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/pollertest"
)

// TestChangeEncoding: the hand-written encoder writes exactly what json.Marshal(Change) writes,
// for values that need escaping, a composite key (a cursor tiebreaker) and NULLs; ids differ
// per row and stay the same for the same row and cursor.
func TestChangeEncoding(t *testing.T) {
	var batches []*poller.Batch[poller.Row]
	p := poller.New("enc-test", "things", poller.Integer, func(_ context.Context, b *poller.Batch[poller.Row]) error {
		batches = append(batches, b)
		return nil
	}, poller.WithColumns("seq", "region", "name", "note"), poller.WithKey("seq", "region"), poller.WithCursorColumn("seq"))
	h := pollertest.New(t, p)
	if _, err := h.DB.Exec(`CREATE TABLE things (seq INTEGER, region TEXT, name TEXT, note BLOB, PRIMARY KEY (seq, region));
		INSERT INTO things VALUES (1, 'eu', '<a & b> "quoted" \ é ☃', NULL), (2, 'us', 'plain', x'00ff'), (3, 'e<u', char(10)||'tab'||char(9), 'x')`); err != nil {
		t.Fatal(err)
	}
	h.Tick()
	if len(batches) != 1 {
		t.Fatalf("%d batches", len(batches))
	}
	msgs, err := Messages(batches[0], ModeRow)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for i, m := range msgs {
		var c Change
		if err := json.Unmarshal(m.Body, &c); err != nil {
			t.Fatalf("message %d is not JSON: %v\n%s", i, err, m.Body)
		}
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.Body, want) {
			t.Errorf("message %d:\n got %s\nwant %s", i, m.Body, want)
		}
		if c.ID != m.ID || ids[m.ID] || c.Cursor.Tiebreaker["region"] == nil {
			t.Errorf("message %d: id %s (body %s), tiebreaker %v", i, m.ID, c.ID, c.Cursor.Tiebreaker)
		}
		ids[m.ID] = true
	}
	if !strings.Contains(msgs[0].About(), `{"region":"eu","seq":1}`) || msgs[0].Key != `{"region":"eu","seq":1}` {
		t.Errorf("about %q, key %q", msgs[0].About(), msgs[0].Key)
	}
	again, _ := Messages(batches[0], ModeRow)
	if again[2].ID != msgs[2].ID {
		t.Error("the same row got another id")
	}

	// Batch mode: one message, the batch's id, its body exactly json.Marshal(Batch) with the
	// same Changes.
	one, err := Messages(batches[0], ModeBatch)
	if err != nil || len(one) != 1 || one[0].ID != batches[0].ID {
		t.Fatalf("batch mode: %v, %d messages", err, len(one))
	}
	var b Batch
	if err := json.Unmarshal(one[0].Body, &b); err != nil || len(b.Changes) != len(msgs) || b.Changes[1].ID != msgs[1].ID || b.Poller != "enc-test" {
		t.Fatalf("batch body: %v\n%s", err, one[0].Body)
	}
	if want, _ := json.Marshal(b); !bytes.Equal(one[0].Body, want) {
		t.Errorf("batch body:\n got %s\nwant %s", one[0].Body, want)
	}
}

// rawBatch is rows as p's handler of poller.Row gets them, in the batch id.
func rawBatch(p *poller.Poller, id string, rows []row.Row) *poller.Batch[poller.Row] {
	return pollerdef.Of(p).Raw(&pollerdef.Batch{Poller: p.Name(), ID: id, Rows: rows}).(*poller.Batch[poller.Row])
}

// TestReadMessageID: a backfill's read of a row has another id than the change that carried the
// same version, one that names its batch: the same chunk sent again keeps it, another backfill's
// chunk does not.
func TestReadMessageID(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "r.db")
	testenv.DB(t, "sqlite", dsn, `CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL); INSERT INTO t VALUES (1, 'a'), (2, 'b')`)
	src, err := drivers.Open(context.Background(), source.Config{Poller: "p", Driver: sqlite.Name, DSN: dsn, Definition: sourcedef.Definition{
		Table: sourcedef.Table{Name: "t"}, Columns: []string{"id", "name"}, PK: []string{"id"}, Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "id"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	live, err := src.Fetch(context.Background(), nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	chunk, err := src.ReadChunk(context.Background(), nil, "", live.To, 10)
	if err != nil || len(chunk.Rows) != 2 {
		t.Fatalf("chunk: %+v, %v", chunk, err)
	}
	p := poller.New("p", "t", poller.Integer, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
		poller.WithColumns("id", "name"), poller.WithKey("id"), poller.WithCursorColumn("id"))
	messages := func(id string, rows []row.Row) []Message {
		m, err := Messages(rawBatch(p, id, rows), ModeRow)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	change, read := messages("batch_live", live.Rows), messages("batch_bf1", chunk.Rows)
	again, other := messages("batch_bf1", chunk.Rows), messages("batch_bf2", chunk.Rows)
	if read[0].Op != "read" || change[0].Op != "upsert" || !strings.Contains(string(read[0].Body), `"op":"read"`) {
		t.Fatalf("ops: %s, %s", read[0].Op, change[0].Op)
	}
	if read[0].ID == change[0].ID || read[0].ID != again[0].ID || read[0].ID == other[0].ID || read[0].ID == read[1].ID {
		t.Fatalf("ids: change %s, read %s, the same chunk again %s, another backfill's %s, the next row's %s",
			change[0].ID, read[0].ID, again[0].ID, other[0].ID, read[1].ID)
	}
}
