package state_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

const blob = "state/local/orders.json"

// seedDoc is the example document of the seed spec, plus the fields the design adds.
const seedDoc = `{
  "version": 1,
  "poller_name": "orders",
  "source_fingerprint": "sha256:abc",
  "checkpoint": {
    "cursor": {
      "kind": "timestamp+pk",
      "value": "2026-04-07T01:23:45.1234567Z",
      "tiebreaker": {"id": 12093}
    },
    "last_successful_batch_id": "batch_20260407_012346_0001",
    "updated_at": "2026-04-07T01:23:46.020000Z",
    "metadata": {"row_count": 100}
  },
  "lease": {
    "owner_id": "funcapp/instance-abc123",
    "fencing_token": 42,
    "acquired_at": "2026-04-07T01:23:00Z",
    "heartbeat_at": "2026-04-07T01:23:20Z",
    "expires_at": "2026-04-07T01:25:00Z",
    "ttl_seconds": 60,
    "released_at": null
  },
  "write_id": "w1"
}`

func TestDecodeSeedDocument(t *testing.T) {
	d, err := state.Decode(blob, "orders", []byte(seedDoc))
	if err != nil {
		t.Fatal(err)
	}
	if d.Lease.FencingToken != 42 || d.Checkpoint.Cursor.Kind != state.KindTimestampPK ||
		string(d.Checkpoint.Cursor.Value) != `"2026-04-07T01:23:45.1234567Z"` ||
		string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "12093" || d.Checkpoint.Metadata.RowCount != 100 ||
		!d.Lease.AcquiredAt.Equal(time.Date(2026, 4, 7, 1, 23, 0, 0, time.UTC)) || d.Lease.Released() {
		t.Fatalf("decoded %+v", d)
	}
	// Encode and decode again: the same document, cursor bytes exact.
	out, err := state.Encode(d)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := state.Decode(blob, "orders", out)
	if err != nil {
		t.Fatalf("re-decoding our own output: %v\n%s", err, out)
	}
	out2, _ := state.Encode(d2)
	if !bytes.Equal(out, out2) {
		t.Fatalf("encode is not stable:\n%s\n%s", out, out2)
	}
	for _, want := range []string{`"updated_at": "2026-04-07T01:23:46.020000Z"`, `"acquired_at": "2026-04-07T01:23:00.000000Z"`, `"released_at": null`, `"value": "2026-04-07T01:23:45.1234567Z"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("encoded document lacks %s:\n%s", want, out)
		}
	}
}

func TestCursorKeepsFullPrecision(t *testing.T) {
	// An xid8 beyond 2^53 and a rowversion as hex survive a round trip byte for byte.
	for _, c := range []state.Cursor{
		{Kind: state.KindXID, Value: json.RawMessage(`18446744073709551000`)},
		{Kind: state.KindRowversion, Value: json.RawMessage(`"0x00000000000007D1"`)},
		{Kind: state.KindInteger, Value: json.RawMessage(`9007199254740993`), Tiebreaker: map[string]json.RawMessage{"id": json.RawMessage(`9007199254740995`)}},
	} {
		d := &state.Doc{Version: 1, PollerName: "orders", Checkpoint: state.Checkpoint{Cursor: &c}}
		out, err := state.Encode(d)
		if err != nil {
			t.Fatal(err)
		}
		back, err := state.Decode(blob, "orders", out)
		if err != nil {
			t.Fatal(err)
		}
		if string(back.Checkpoint.Cursor.Value) != string(c.Value) {
			t.Fatalf("%s: %s came back as %s", c.Kind, c.Value, back.Checkpoint.Cursor.Value)
		}
		for k, v := range c.Tiebreaker {
			if string(back.Checkpoint.Cursor.Tiebreaker[k]) != string(v) {
				t.Fatalf("tiebreaker %s: %s came back as %s", k, v, back.Checkpoint.Cursor.Tiebreaker[k])
			}
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	cases := []struct {
		name, data string
		sentinel   error
		mentions   string
	}{
		{"empty", ``, state.ErrCorrupt, blob},
		{"not json", `hello`, state.ErrCorrupt, blob},
		{"truncated", seedDoc[:len(seedDoc)/2], state.ErrCorrupt, blob},
		{"trailing data", seedDoc + `{}`, state.ErrCorrupt, "after top-level value"},
		{"array", `[1]`, state.ErrCorrupt, blob},
		{"no version", `{"poller_name": "orders"}`, state.ErrCorrupt, "version"},
		{"version 2", strings.Replace(seedDoc, `"version": 1`, `"version": 2`, 1), state.ErrVersion, "version 2"},
		{"version as string", strings.Replace(seedDoc, `"version": 1`, `"version": "1"`, 1), state.ErrVersion, `"1"`},
		{"other poller", seedDoc, state.ErrPollerMismatch, `"orders"`},
		{"unknown field", strings.Replace(seedDoc, `"write_id"`, `"surprise": 1, "write_id"`, 1), state.ErrCorrupt, "surprise"},
		{"unknown cursor kind", strings.Replace(seedDoc, `"timestamp+pk"`, `"uuid"`, 1), state.ErrCorrupt, "uuid"},
		{"cursor without value", strings.Replace(seedDoc, `"value": "2026-04-07T01:23:45.1234567Z",`, ``, 1), state.ErrCorrupt, "value"},
		{"cursor value object", strings.Replace(seedDoc, `"value": "2026-04-07T01:23:45.1234567Z"`, `"value": {}`, 1), state.ErrCorrupt, "value"},
		{"negative token", strings.Replace(seedDoc, `"fencing_token": 42`, `"fencing_token": -1`, 1), state.ErrCorrupt, "fencing_token"},
		{"token past 2^53-1", strings.Replace(seedDoc, `"fencing_token": 42`, `"fencing_token": 9007199254740992`, 1), state.ErrCorrupt, "fencing_token"},
		{"owner without ttl", strings.Replace(seedDoc, `"ttl_seconds": 60`, `"ttl_seconds": 0`, 1), state.ErrCorrupt, "ttl_seconds"},
		{"bad time", strings.Replace(seedDoc, `"2026-04-07T01:23:20Z"`, `"yesterday"`, 1), state.ErrCorrupt, "yesterday"},
		{"backfill of another kind", withBackfill(`"kind": "copy"`), state.ErrCorrupt, `backfill: kind "copy"`},
		{"backfill without id", withBackfill(`"id": ""`), state.ErrCorrupt, "backfill: id is empty"},
		{"backfill chunk 0", withBackfill(`"chunk": 0`), state.ErrCorrupt, "backfill: chunk 0"},
		{"backfill negative rows", withBackfill(`"rows": -1`), state.ErrCorrupt, "backfill: rows -1"},
		{"backfill key object", withBackfill(`"after": {"id": {}}`), state.ErrCorrupt, `backfill: after "id"`},
		{"backfill unknown field", withBackfill(`"surprise": 1`), state.ErrCorrupt, "surprise"},
	}
	for _, c := range cases {
		poller := "orders"
		if c.name == "other poller" {
			poller = "invoices"
		}
		_, err := state.Decode(blob, poller, []byte(c.data))
		var se *state.Error
		if !errors.Is(err, c.sentinel) || !errors.As(err, &se) || se.Blob != blob {
			t.Errorf("%s: got %v, want %v naming the blob", c.name, err, c.sentinel)
			continue
		}
		if !strings.Contains(err.Error(), c.mentions) || !strings.Contains(err.Error(), blob) {
			t.Errorf("%s: %q should mention %q and the blob", c.name, err, c.mentions)
		}
	}
}

// backfillDoc is seedDoc with a backfill in progress.
var backfillDoc = strings.Replace(seedDoc, `"write_id"`, `"backfill": {"id": "bf_1", "kind": "backfill", "where": "region = 'eu'", "chunk": 1000,
    "after": {"id": 12093}, "rows": 5000, "left": 3, "estimate": 100000, "started_at": "2026-04-07T01:00:00Z"},
  "write_id"`, 1)

// withBackfill is backfillDoc with one of its fields replaced by field (or added).
func withBackfill(field string) string {
	name := field[:strings.Index(field, ":")]
	for _, f := range []string{`"id": "bf_1"`, `"kind": "backfill"`, `"chunk": 1000`, `"rows": 5000`, `"after": {"id": 12093}`} {
		if strings.HasPrefix(f, name) {
			return strings.Replace(backfillDoc, f, field, 1)
		}
	}
	return strings.Replace(backfillDoc, `"id": "bf_1"`, `"id": "bf_1", `+field, 1)
}

// TestBackfillRoundTrip: a backfill in progress decodes, and encodes back to the same document.
func TestBackfillRoundTrip(t *testing.T) {
	d, err := state.Decode(blob, "orders", []byte(backfillDoc))
	if err != nil {
		t.Fatal(err)
	}
	b := d.Backfill
	if b == nil || b.ID != "bf_1" || b.Kind != state.BackfillRequested || b.Where != "region = 'eu'" || b.Chunk != 1000 ||
		string(b.After["id"]) != "12093" || b.Rows != 5000 || b.Left != 3 || b.Estimate != 100000 || b.Cancel {
		t.Fatalf("decoded %+v", b)
	}
	out, err := state.Encode(d)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := state.Decode(blob, "orders", out)
	if err != nil || d2.Backfill == nil || string(d2.Backfill.After["id"]) != "12093" || !d2.Backfill.StartedAt.Equal(b.StartedAt.Time) {
		t.Fatalf("round trip: %+v, %v\n%s", d2.Backfill, err, out)
	}
	d.Backfill = nil
	if out, _ := state.Encode(d); strings.Contains(string(out), "backfill") {
		t.Fatalf("no backfill is written as none:\n%s", out)
	}
}

func TestEncodeRefusesInvalid(t *testing.T) {
	if _, err := state.Encode(&state.Doc{Version: 2, PollerName: "orders"}); err == nil {
		t.Error("encoded version 2")
	}
	if _, err := state.Encode(&state.Doc{Version: 1, PollerName: "orders", Lease: state.Lease{FencingToken: state.MaxFencingToken + 1}}); err == nil {
		t.Error("encoded a token past 2^53-1")
	}
}

func TestTimeFormat(t *testing.T) {
	tm := state.At(time.Date(2026, 4, 7, 1, 23, 45, 123456789, time.FixedZone("CEST", 7200)))
	b, err := json.Marshal(tm)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `"2026-04-06T23:23:45.123456Z"` {
		t.Fatalf("got %s, want UTC with microseconds", b)
	}
	var zero state.Time
	if b, _ := json.Marshal(zero); string(b) != "null" {
		t.Fatalf("zero time: %s, want null", b)
	}
}

// TestHistoryIsBounded: AddHistory keeps the newest state.HistoryLen entries, and a document with more
// is refused.
func TestHistoryIsBounded(t *testing.T) {
	d := &state.Doc{Version: state.Version, PollerName: "orders"}
	for i := range state.HistoryLen + 5 {
		d.AddHistory(state.Tick{Rows: i})
	}
	if len(d.History) != state.HistoryLen || d.History[0].Rows != 5 || d.History[state.HistoryLen-1].Rows != state.HistoryLen+4 {
		t.Fatalf("history: %d entries from %d to %d", len(d.History), d.History[0].Rows, d.History[len(d.History)-1].Rows)
	}
	data, err := state.Encode(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := state.Decode("b", "orders", data); err != nil {
		t.Fatal(err)
	}
	d.History = append(d.History, state.Tick{})
	if _, err := state.Encode(d); err == nil {
		t.Fatal("a document with too long a history was encoded")
	}
}

// TestCursorText: a cursor for people (Text) and as the JSON batch IDs are made of (JSON), each
// with the tiebreaker's columns in name order whatever the map's, and nil as the beginning.
func TestCursorText(t *testing.T) {
	c := &state.Cursor{Kind: state.KindTimestampPK, Value: json.RawMessage(`"2026-01-01T00:00:00Z"`),
		Tiebreaker: map[string]json.RawMessage{"b": json.RawMessage(`2`), "a": json.RawMessage(`"x"`)}}
	var none *state.Cursor
	for _, tc := range []struct{ got, want string }{
		{c.Text(), `"2026-01-01T00:00:00Z" a="x" b=2`},
		{none.Text(), "(beginning)"},
		{c.JSON(), `{"kind":"timestamp+pk","value":"2026-01-01T00:00:00Z","tiebreaker":{"a":"x","b":2}}`},
		{none.JSON(), "<beginning>"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s, want %s", tc.got, tc.want)
		}
	}
}

// TestKindProperties: each property of a cursor kind holds for the kinds it names and no other:
// the change streams read several tables, and logical alone every column.
func TestKindProperties(t *testing.T) {
	for _, kind := range append(slices.Clone(state.Kinds), "", "timestamp") {
		change := kind == state.KindLogical || kind == state.KindChangeTracking
		if state.ChangeKind(kind) != change || state.SeveralTablesKind(kind) != change {
			t.Errorf("%q: ChangeKind %v, SeveralTablesKind %v, want %v", kind, state.ChangeKind(kind), state.SeveralTablesKind(kind), change)
		}
		if state.AllColumnsKind(kind) != (kind == state.KindLogical) {
			t.Errorf("%q: AllColumnsKind %v", kind, state.AllColumnsKind(kind))
		}
		if state.SettleLagKind(kind) != (kind == state.KindTimestampPK) {
			t.Errorf("%q: SettleLagKind %v", kind, state.SettleLagKind(kind))
		}
	}
}
