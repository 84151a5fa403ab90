package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/pollertest"
)

// fakeEH is an Event Hubs producer whose batches hold at most limit bytes of bodies, refusing an
// event with the SDK's own ErrEventDataTooLarge, as an EventDataBatch does. Its hub has the
// partitions partitions (in the order the service would list them).
type fakeEH struct {
	limit         int
	partitions    []string
	idsErr        error  // partitionIDs fails with it
	failPartition string // sends of this partition's batches fail with sendErr
	sendErr       error
	mu            sync.Mutex
	idsCalls      int
	made          []string // newBatch's partition ids, in order
	sent          []*fakeEHBatch
	flying        int
	maxFly        int
	closed        bool
}

type fakeEHBatch struct {
	partition string
	limit     int
	size      int
	events    []*azeventhubs.EventData
}

func (b *fakeEHBatch) add(e *azeventhubs.EventData) error {
	if b.size+len(e.Body) > b.limit {
		return azeventhubs.ErrEventDataTooLarge
	}
	b.size += len(e.Body)
	b.events = append(b.events, e)
	return nil
}
func (b *fakeEHBatch) len() int { return len(b.events) }

func (f *fakeEH) partitionIDs(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.idsCalls++
	if f.idsErr != nil {
		return nil, f.idsErr
	}
	return slices.Clone(f.partitions), nil
}

func (f *fakeEH) newBatch(_ context.Context, partition string) (ehBatch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.made = append(f.made, partition)
	return &fakeEHBatch{partition: partition, limit: f.limit}, nil
}

func (f *fakeEH) send(_ context.Context, b ehBatch) error {
	f.mu.Lock()
	f.flying++
	f.maxFly = max(f.maxFly, f.flying)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.flying--
		f.mu.Unlock()
	}()
	fb := b.(*fakeEHBatch)
	if f.sendErr != nil && fb.partition == f.failPartition {
		return f.sendErr
	}
	f.mu.Lock()
	f.sent = append(f.sent, fb)
	f.mu.Unlock()
	return nil
}

func (f *fakeEH) close(context.Context) error { f.closed = true; return nil }

var fourPartitions = []string{"0", "1", "2", "3"}

func newFakeEventHubs(f *fakeEH, concurrency int) *eventHubs {
	if f.partitions == nil {
		f.partitions = fourPartitions
	}
	return &eventHubs{p: f, hub: "changes", conn: azconn.Conn{Setting: "EH"}, concurrency: concurrency, tryTimeout: time.Minute}
}

// partitionFor is the partition id the sink sends key's events to, of the partitions ids.
func partitionFor(key string, ids []string) string {
	ids = sortPartitions(ids)
	return ids[partitionOf(key, len(ids))]
}

// TestEventHubsPartitions: each event carries the row's id as MessageID, the Change as body,
// application/json and the poller and op as properties; every batch has a partition id and
// holds only rows whose key maps to it, each key's events go out in row order, at most
// Concurrency batches are in flight, and the partition ids are read once for the sink's life.
func TestEventHubsPartitions(t *testing.T) {
	f := &fakeEH{limit: 250}
	eh := newFakeEventHubs(f, 2)
	var msgs []Message
	for i := range 30 {
		msgs = append(msgs, testMessage([]string{"a", "b", "a", "c", "d", "a"}[i%6], i, 100))
	}
	if err := eh.send(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	byID := map[string]Message{}
	for _, m := range msgs {
		byID[m.ID] = m
	}
	order := map[string][]string{}
	n := 0
	for _, b := range f.sent {
		if b.len() == 0 || b.len() > 2 {
			t.Fatalf("a batch of %d events (250 bytes take one or two)", b.len())
		}
		for _, e := range b.events {
			if e.MessageID == nil {
				t.Fatal("an event without MessageID")
			}
			m, ok := byID[*e.MessageID]
			if !ok || string(e.Body) != string(m.Body) || e.ContentType == nil || *e.ContentType != "application/json" ||
				e.Properties["poller"] != "orders" || e.Properties["op"] != "upsert" || len(e.Properties) != 2 {
				t.Fatalf("event %+v; want a row's id, its body, application/json and the poller and op", e)
			}
			if want := partitionFor(m.Key, fourPartitions); b.partition != want {
				t.Fatalf("event %s (key %s) in a batch for partition %q; its key maps to %q", m.ID, m.Key, b.partition, want)
			}
			order[m.Key] = append(order[m.Key], m.ID)
			n++
		}
	}
	if n != len(msgs) {
		t.Fatalf("%d events sent for %d rows", n, len(msgs))
	}
	for _, k := range []string{"a", "b", "c", "d"} {
		var want []string
		for _, m := range msgs {
			if m.Key == k {
				want = append(want, m.ID)
			}
		}
		if fmt.Sprint(order[k]) != fmt.Sprint(want) {
			t.Errorf("key %s: sent %v; want %v", k, order[k], want)
		}
	}
	if f.maxFly > 2 {
		t.Errorf("%d batches in flight at once; the sink's concurrency is 2", f.maxFly)
	}
	if err := eh.send(context.Background(), msgs[:3]); err != nil {
		t.Fatal(err)
	}
	if f.idsCalls != 1 {
		t.Errorf("the partition ids were read %d times in two sends; want once for the sink's life", f.idsCalls)
	}
	if err := eh.close(context.Background()); err != nil || !f.closed {
		t.Errorf("close: %v, producer closed %v", err, f.closed)
	}
}

// TestEventHubsSendCount: 10,000 rows with 10,000 keys over 4 partitions cost a batch per
// partition, split by the size limit (1 MB: 300-byte rows fit one batch per partition,
// 1000-byte rows three) (before partitions: a batch per key, 10,000 sends), each
// partition's rows in row order.
func TestEventHubsSendCount(t *testing.T) {
	const rows, limit = 10000, 1 << 20
	for _, size := range []int{300, 1000} {
		sendCount(t, rows, size, limit)
	}
}

func sendCount(t *testing.T, rows, size, limit int) {
	t.Helper()
	f := &fakeEH{limit: limit}
	eh := newFakeEventHubs(f, 4)
	var msgs []Message
	perPartition := map[string]int{}
	for i := range rows {
		m := testMessage(fmt.Sprint(i), i, size)
		msgs = append(msgs, m)
		perPartition[partitionFor(m.Key, fourPartitions)]++
	}
	if err := eh.send(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	want := 0
	for p, n := range perPartition {
		if n < rows/5 || n > rows*3/10 {
			t.Errorf("partition %s has %d of %d keys: the hash spreads them badly", p, n, rows)
		}
		want += (n + limit/size - 1) / (limit / size)
	}
	if len(f.sent) != want || len(f.made) != want {
		t.Fatalf("%d sends (%d batches made) for %d rows with %d keys; want %d (a batch per partition, split by size)", len(f.sent), len(f.made), rows, rows, want)
	}
	t.Logf("%d rows of %d bytes with %d keys over %d partitions: %d sends (a batch per key: %d)", rows, size, rows, len(fourPartitions), len(f.sent), rows)
	seen := map[string]int{} // per partition, the last row number sent
	for _, b := range f.sent {
		for _, e := range b.events {
			var seq int
			if _, err := fmt.Sscanf(*e.MessageID, "%d-%d", new(int), &seq); err != nil {
				t.Fatal(err)
			}
			if last, ok := seen[b.partition]; ok && seq <= last {
				t.Fatalf("partition %s: row %d sent after row %d", b.partition, seq, last)
			}
			seen[b.partition] = seq
		}
	}
}

// BenchmarkEventHubsSend sends 10,000 rows with 10,000 keys to a 4-partition fake hub and
// reports the sends per call (4: a batch per partition; a batch per key was 10,000).
func BenchmarkEventHubsSend(b *testing.B) {
	var msgs []Message
	for i := range 10000 {
		msgs = append(msgs, testMessage(fmt.Sprint(i), i, 300))
	}
	sends := 0
	for b.Loop() {
		f := &fakeEH{limit: 1 << 20}
		if err := newFakeEventHubs(f, 4).send(context.Background(), msgs); err != nil {
			b.Fatal(err)
		}
		sends += len(f.sent)
	}
	b.ReportMetric(float64(sends)/float64(b.N), "sends/op")
}

// TestEventHubsPartitionStable: a key maps to the same partition in every sink instance,
// whatever order the service lists the partition ids in, and in every version (FNV-1a 64 of the
// key modulo the count, pinned here: changing it moves keys between partitions).
func TestEventHubsPartitionStable(t *testing.T) {
	var msgs []Message
	for i := range 200 {
		msgs = append(msgs, testMessage(fmt.Sprint(i%50), i, 50))
	}
	partitionOfID := func(listed []string) map[string]string {
		f := &fakeEH{limit: 1 << 20, partitions: listed}
		if err := newFakeEventHubs(f, 4).send(context.Background(), msgs); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, b := range f.sent {
			for _, e := range b.events {
				out[*e.MessageID] = b.partition
			}
		}
		return out
	}
	one, other := partitionOfID([]string{"0", "1", "2", "3"}), partitionOfID([]string{"3", "1", "0", "2"})
	if len(one) != len(msgs) || fmt.Sprint(one) != fmt.Sprint(other) {
		t.Fatalf("two sinks put the same events in different partitions:\n%v\n%v", one, other)
	}
	for key, want := range map[string]int{"": 0xcbf29ce484222325 % 4, "a": 0xaf63dc4c8601ec8c % 4, "42": 0x07ee7e07b4b19223 % 4} {
		if got := partitionOf(key, 4); got != want {
			t.Errorf("partitionOf(%q, 4) = %d; want %d (FNV-1a 64 modulo 4)", key, got, want)
		}
	}
	for _, key := range []string{"", "a", "42", "é☃", `{"id":7,"region":"eu"}`} {
		h := fnv.New64a()
		h.Write([]byte(key))
		if got, want := partitionOf(key, 7), int(h.Sum64()%7); got != want {
			t.Errorf("partitionOf(%q, 7) = %d; hash/fnv's FNV-1a 64 modulo 7 is %d", key, got, want)
		}
	}
	if got := fmt.Sprint(sortPartitions([]string{"10", "2", "0", "11", "1"})); got != "[0 1 2 10 11]" {
		t.Errorf("partition ids sorted as %s; want numeric order", got)
	}
}

// TestEventHubsPartitionIDsFail: when the hub's partition ids cannot be read, the send fails
// with an error naming the setting and the hub, nothing is sent, and the next send reads them
// again.
func TestEventHubsPartitionIDsFail(t *testing.T) {
	boom := errors.New("amqp: link detached")
	f := &fakeEH{limit: 1000, idsErr: boom}
	eh := newFakeEventHubs(f, 4)
	msgs := []Message{testMessage("a", 0, 100), testMessage("b", 1, 100)}
	err := eh.send(context.Background(), msgs)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), `EH: reading the partition ids of event hub "changes"`) ||
		!strings.Contains(err.Error(), "nothing was sent") {
		t.Fatalf("%v; want the read's error naming the setting EH and the hub", err)
	}
	if len(f.made) != 0 || len(f.sent) != 0 {
		t.Fatalf("%d batches made, %d sent after the partition ids failed", len(f.made), len(f.sent))
	}
	f.idsErr, f.partitions = nil, []string{}
	if err := eh.send(context.Background(), msgs); err == nil || !strings.Contains(err.Error(), "no partitions") {
		t.Fatalf("a hub listing no partitions: %v", err)
	}
	f.partitions = fourPartitions
	if err := eh.send(context.Background(), msgs); err != nil || len(f.sent) == 0 || f.idsCalls != 3 {
		t.Fatalf("the send after the failures: %v, %d batches sent, partition ids read %d times", err, len(f.sent), f.idsCalls)
	}
}

// TestEventHubsBatchMode: a message without a key (mode batch) goes in a batch without a
// partition id, so the service picks the partition, and the partition ids are not read.
func TestEventHubsBatchMode(t *testing.T) {
	f := &fakeEH{limit: 1000}
	eh := newFakeEventHubs(f, 4)
	m := Message{ID: "batch-1", Poller: "orders", Op: "batch", Body: []byte(`{"changes":[]}`), about: "batch batch-1"}
	if err := eh.send(context.Background(), []Message{m}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%q", f.made) != `[""]` || len(f.sent) != 1 || *f.sent[0].events[0].MessageID != "batch-1" || f.idsCalls != 0 {
		t.Fatalf("partition ids %q, %d batches sent, partition ids read %d times", f.made, len(f.sent), f.idsCalls)
	}
}

// TestEventHubsTooLarge: a row larger than a batch takes fails the send with ErrTooLarge naming
// the row, and nothing is sent, not even the other partitions' batches.
func TestEventHubsTooLarge(t *testing.T) {
	for _, at := range []int{0, 4, 6} {
		f := &fakeEH{limit: 1000}
		eh := newFakeEventHubs(f, 4)
		var msgs []Message
		for i := range 8 {
			size := 300
			if i == at {
				size = 1001
			}
			msgs = append(msgs, testMessage(fmt.Sprint(i%3), i, size))
		}
		err := eh.send(context.Background(), msgs)
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf(`the row with key {"id":"%d"}`, at%3)) {
			t.Errorf("too large at %d: %v; want ErrTooLarge naming the row", at, err)
		}
		if len(f.sent) != 0 {
			t.Errorf("too large at %d: %d batches sent before the error", at, len(f.sent))
		}
	}
}

// TestEventHubsSendError: a failed send is the send's error, naming the batch's first row, and
// with concurrency 1 nothing is sent after it.
func TestEventHubsSendError(t *testing.T) {
	boom := errors.New("amqp: link detached")
	keys := []string{"a", "b", "c", "d", "e", "f"}
	f := &fakeEH{limit: 1000, failPartition: partitionFor("c", fourPartitions), sendErr: boom}
	eh := newFakeEventHubs(f, 1)
	var msgs []Message
	for i, k := range keys {
		msgs = append(msgs, testMessage(k, i, 100))
	}
	groups := byPartition(msgs, len(fourPartitions))
	failing := slices.IndexFunc(groups, func(g []Message) bool { return partitionFor(g[0].Key, fourPartitions) == f.failPartition })
	err := eh.send(context.Background(), msgs)
	if want := groups[failing][0].About(); !errors.Is(err, boom) || !strings.Contains(err.Error(), want) {
		t.Fatalf("%v; want the send's error naming %s", err, want)
	}
	if len(f.sent) != failing {
		t.Fatalf("%d batches sent; with concurrency 1, want the %d partitions' before the failing one", len(f.sent), failing)
	}
}

// TestEventHubsSetup: Setup accepts a namespace connection string, one whose EntityPath is the
// hub, the emulator's and an identity-based namespace, and never shows the key; another hub's
// EntityPath and a bad connection string are errors naming the setting, without the key.
func TestEventHubsSetup(t *testing.T) {
	const secret = "c2VjcmV0LWtleS12YWx1ZQ=="
	ns := "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=" + secret
	eh := Config{Type: EventHubs, Connection: "EH", Hub: "changes"}
	checkSetups(t, secret, []setupCase{
		{eh, map[string]string{"EH": ns}, "event hub changes (EH: connection string Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=REDACTED)", false},
		{eh, map[string]string{"EH": ns + ";EntityPath=changes"}, "event hub changes (EH: connection string ", false},
		{eh, map[string]string{"EH": "Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"},
			"event hub changes (EH: connection string Endpoint=sb://localhost;", false},
		{eh, map[string]string{"EH__fullyQualifiedNamespace": "ns.servicebus.windows.net", "EH__clientId": "0000-1111"},
			"event hub changes (EH__fullyQualifiedNamespace: ns.servicebus.windows.net with managed identity 0000-1111)", false},
		{eh, map[string]string{"EH": ns + ";EntityPath=other"}, `the connection string's EntityPath is "other"`, true},
		{eh, map[string]string{"EH": "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKey=" + secret}, "EH: the connection string is not valid", true},
	})
}

// TestEventHubsConformance runs the suite against the Event Hubs emulator
// (EVENTHUBS_EMULATOR_CONNECTION_STRING, set by the GitHub workflow's eventhubs job; see
// .github/emulators/). An event hub keeps its events, so each target starts reading after what
// the hub's partitions held when it was made: one hub serves every subtest. The reader reads
// each partition and fails on an event whose key maps to another partition (partitionOf over
// the hub's 4 partitions). The emulator cannot
// inject faults, so the fault cases skip.
func TestEventHubsConformance(t *testing.T) {
	const env = "EVENTHUBS_EMULATOR_CONNECTION_STRING"
	cs := os.Getenv(env)
	if cs == "" {
		t.Skipf("%s is not set: the Event Hubs conformance suite runs against the emulator (the eventhubs CI job)", env)
	}
	const hub = "suink" // .github/emulators/eventhubs-config.json
	cc, err := azeventhubs.NewConsumerClientFromConnectionString(cs, hub, azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close(context.Background()) })
	runConformance(t, func(t *testing.T) target {
		rd := &ehReader{cc: cc, last: map[string]int64{}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		props, err := cc.GetEventHubProperties(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		rd.partitions = props.PartitionIDs
		for _, id := range rd.partitions {
			p, err := cc.GetPartitionProperties(ctx, id, nil)
			if err != nil {
				t.Fatal(err)
			}
			rd.last[id] = lastSequence(p)
		}
		return target{
			cfg:  Config{Type: EventHubs, Connection: "SuinkHub", Hub: hub},
			env:  []string{"SuinkHub=" + cs},
			read: rd.read,
			// Over the 1 MB an event (a batch) takes.
			maxBody: 1 << 20,
		}
	})
}

// ehReader reads each partition from after the last event it read.
type ehReader struct {
	cc         *azeventhubs.ConsumerClient
	partitions []string
	last       map[string]int64 // per partition, the sequence number of the last event read (-1: none)
}

func lastSequence(p azeventhubs.PartitionProperties) int64 {
	if p.IsEmpty {
		return -1
	}
	return p.LastEnqueuedSequenceNumber
}

// read returns the events enqueued since the last read: up to each partition's last enqueued
// sequence number, which the sink's confirmed sends have all reached, so nothing waits for an
// event that is not coming.
func (rd *ehReader) read(t *testing.T) []received {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out []received
	for _, id := range rd.partitions {
		p, err := rd.cc.GetPartitionProperties(ctx, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		from, to := rd.last[id], lastSequence(p)
		if to <= from {
			continue
		}
		start := azeventhubs.StartPosition{SequenceNumber: &from}
		if from < 0 {
			start = azeventhubs.StartPosition{Earliest: ptr(true)}
		}
		pc, err := rd.cc.NewPartitionClient(id, &azeventhubs.PartitionClientOptions{StartPosition: start})
		if err != nil {
			t.Fatal(err)
		}
		for at := from; at < to; {
			events, err := pc.ReceiveEvents(ctx, int(min(to-at, 1000)), nil)
			if err != nil && len(events) == 0 {
				_ = pc.Close(context.Background())
				t.Fatalf("partition %s: receiving events %d to %d, at %d: %v", id, from+1, to, at, err)
			}
			for _, e := range events {
				if e.ContentType == nil || *e.ContentType != "application/json" || e.Properties["poller"] != "suink" || e.MessageID == nil {
					t.Fatalf("partition %s, event %d: content type %v, properties %v", id, e.SequenceNumber, e.ContentType, e.Properties)
				}
				if want := rd.partitionOfBody(t, e.Body); want != "" && want != id {
					t.Fatalf("partition %s, event %d (%s): its key maps to partition %s", id, e.SequenceNumber, e.Body, want)
				}
				trace, _ := e.Properties["traceparent"].(string)
				if id, _ := e.Properties["Diagnostic-Id"].(string); id != trace {
					t.Fatalf("event %s: Diagnostic-Id %q, traceparent %q", *e.MessageID, id, trace)
				}
				out = append(out, received{ID: *e.MessageID, Body: e.Body, Trace: trace})
				at = e.SequenceNumber
			}
		}
		_ = pc.Close(context.Background())
		rd.last[id] = to
	}
	return out
}

// partitionOfBody is the partition id the sink sends the Change body to: its key's, read back
// as the sink rendered it (numbers as written); "" for a body without a key.
func (rd *ehReader) partitionOfBody(t *testing.T, body []byte) string {
	t.Helper()
	var c struct {
		Key map[string]any `json:"key"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("an event's body %s: %v", body, err)
	}
	if c.Key == nil {
		return ""
	}
	keyJSON, err := appendKey(nil, c.Key)
	if err != nil {
		t.Fatal(err)
	}
	return partitionFor(keyText(c.Key, keyJSON), rd.partitions)
}

// TestEventHubsReaderPartition: the emulator test's reader derives from an event's body the
// partition the sink sent it to, for one-column (the suite's) and composite keys, so its check
// fails only on an event in the wrong partition.
func TestEventHubsReaderPartition(t *testing.T) {
	for _, key := range [][]string{{"id"}, {"id", "region"}} {
		var batches []*poller.Batch[poller.Row]
		p := poller.New("eh-reader", "things", poller.Integer, func(_ context.Context, b *poller.Batch[poller.Row]) error {
			batches = append(batches, b)
			return nil
		}, poller.WithColumns("id", "region", "note"), poller.WithKey(key...), poller.WithCursorColumn("id"))
		h := pollertest.New(t, p)
		if _, err := h.DB.Exec(`CREATE TABLE things (id INTEGER PRIMARY KEY, region TEXT, note TEXT);
			WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 100)
			INSERT INTO things SELECT i, 'r' || (i % 7), 'x' FROM n`); err != nil {
			t.Fatal(err)
		}
		h.Tick()
		msgs, err := Messages(batches[0], ModeRow)
		if err != nil {
			t.Fatal(err)
		}
		rd := &ehReader{partitions: []string{"3", "0", "2", "1"}}
		seen := map[string]bool{}
		for _, m := range msgs {
			want := partitionFor(m.Key, fourPartitions)
			if got := rd.partitionOfBody(t, m.Body); got != want {
				t.Fatalf("key %v: the reader expects partition %q; the sink sends to %q", key, got, want)
			}
			seen[want] = true
		}
		if len(msgs) != 100 || len(seen) != 4 {
			t.Fatalf("key %v: %d messages over %d partitions", key, len(msgs), len(seen))
		}
	}
}
