package sink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// fakeEH is an Event Hubs producer whose batches hold at most limit bytes of bodies, refusing an
// event with the SDK's own ErrEventDataTooLarge, as an EventDataBatch does.
type fakeEH struct {
	limit   int
	failKey string // sends of this key's batches fail
	mu      sync.Mutex
	keys    []string // newBatch's partition keys, in order
	sent    []*fakeEHBatch
	flying  int
	maxFly  int
	closed  bool
	sendErr error
}

type fakeEHBatch struct {
	key    string
	limit  int
	size   int
	events []*azeventhubs.EventData
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

func (f *fakeEH) newBatch(_ context.Context, key string) (ehBatch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, key)
	return &fakeEHBatch{key: key, limit: f.limit}, nil
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
	if f.sendErr != nil && fb.key == f.failKey {
		return f.sendErr
	}
	f.mu.Lock()
	f.sent = append(f.sent, fb)
	f.mu.Unlock()
	return nil
}

func (f *fakeEH) close(context.Context) error { f.closed = true; return nil }

func newFakeEventHubs(f *fakeEH, concurrency int) *eventHubs {
	return &eventHubs{p: f, hub: "changes", concurrency: concurrency, tryTimeout: time.Minute}
}

// TestEventHubsPartitionKeys: each event carries the row's id as MessageID, the Change as body,
// application/json and the poller and op as properties; every batch has its rows' key as
// partition key, each key's events go out in row order, and at most Concurrency batches are in
// flight.
func TestEventHubsPartitionKeys(t *testing.T) {
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
			if m.Key != b.key {
				t.Fatalf("event %s (key %s) in a batch with partition key %q", m.ID, m.Key, b.key)
			}
			order[b.key] = append(order[b.key], m.ID)
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
	if err := eh.close(context.Background()); err != nil || !f.closed {
		t.Errorf("close: %v, producer closed %v", err, f.closed)
	}
}

// TestEventHubsBatchMode: a message without a key (mode batch) goes in a batch without a
// partition key, so the service picks the partition.
func TestEventHubsBatchMode(t *testing.T) {
	f := &fakeEH{limit: 1000}
	eh := newFakeEventHubs(f, 4)
	m := Message{ID: "batch-1", Poller: "orders", Op: "batch", Body: []byte(`{"changes":[]}`), about: "batch batch-1"}
	if err := eh.send(context.Background(), []Message{m}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%q", f.keys) != `[""]` || len(f.sent) != 1 || *f.sent[0].events[0].MessageID != "batch-1" {
		t.Fatalf("partition keys %q, %d batches sent", f.keys, len(f.sent))
	}
}

// TestEventHubsTooLarge: a row larger than a batch takes fails the send with ErrTooLarge naming
// the row, and nothing is sent, not even the other keys' batches.
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

// TestEventHubsSendError: a failed send is the send's error, naming the batch's first row.
func TestEventHubsSendError(t *testing.T) {
	boom := errors.New("amqp: link detached")
	f := &fakeEH{limit: 1000, failKey: "b", sendErr: boom}
	eh := newFakeEventHubs(f, 1)
	msgs := []Message{testMessage("a", 0, 100), testMessage("b", 1, 100), testMessage("c", 2, 100)}
	err := eh.send(context.Background(), msgs)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), `the row with key {"id":"b"}`) {
		t.Fatalf("%v; want the send's error naming key b's row", err)
	}
	if len(f.sent) != 1 || f.sent[0].key != "a" {
		t.Fatalf("%d batches sent; with concurrency 1, want key a's only (nothing after the failure)", len(f.sent))
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
// the hub's partitions held when it was made: one hub serves every subtest. The emulator cannot
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
				out = append(out, received{ID: *e.MessageID, Body: e.Body})
				at = e.SequenceNumber
			}
		}
		_ = pc.Close(context.Background())
		rd.last[id] = to
	}
	return out
}
