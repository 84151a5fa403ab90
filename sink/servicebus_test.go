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

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// testMessage is a row's message with key {"id":key} (its text key), a body of size bytes.
func testMessage(key string, seq, size int) Message {
	body := fmt.Sprintf(`{"id":"%s-%d","note":"`, key, seq)
	if n := size - len(body) - 2; n > 0 {
		body += strings.Repeat("x", n)
	}
	body += `"}`
	return Message{
		ID: fmt.Sprintf("%s-%d", key, seq), Poller: "orders", Key: key, Op: "upsert", Body: []byte(body),
		keyJSON: []byte(`{"id":"` + key + `"}`),
	}
}

// fakeSB is a Service Bus sender whose batches hold at most limit bytes of bodies, refusing a
// message with the SDK's own ErrMessageTooLarge, as a MessageBatch does.
type fakeSB struct {
	limit   int
	failAt  int // the send (1-based) that fails; 0: none
	mu      sync.Mutex
	made    int
	sends   int
	sent    [][]*azservicebus.Message
	closed  bool
	sendErr error
}

type fakeSBBatch struct {
	limit int
	size  int
	msgs  []*azservicebus.Message
}

func (b *fakeSBBatch) add(m *azservicebus.Message) error {
	if b.size+len(m.Body) > b.limit {
		return azservicebus.ErrMessageTooLarge
	}
	b.size += len(m.Body)
	b.msgs = append(b.msgs, m)
	return nil
}
func (b *fakeSBBatch) len() int { return len(b.msgs) }

func (f *fakeSB) newBatch(context.Context) (sbBatch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.made++
	return &fakeSBBatch{limit: f.limit}, nil
}

func (f *fakeSB) send(_ context.Context, b sbBatch) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sends++
	if f.sends == f.failAt {
		return f.sendErr
	}
	f.sent = append(f.sent, b.(*fakeSBBatch).msgs)
	return nil
}

func (f *fakeSB) close(context.Context) error { f.closed = true; return nil }

func newFakeServiceBus(f *fakeSB, sessions bool) *serviceBus {
	return &serviceBus{s: f, entity: "queue orders", sessions: sessions, concurrency: 4, tryTimeout: time.Minute}
}

// TestServiceBusMessages: each row becomes a message with its id as MessageID, the Change as
// body, application/json, the poller and op as properties and subject, and no session id unless
// the sink has sessions, in order, batched by what the batch takes.
func TestServiceBusMessages(t *testing.T) {
	f := &fakeSB{limit: 350}
	sb := newFakeServiceBus(f, false)
	var msgs []Message
	for i := range 10 {
		msgs = append(msgs, testMessage(fmt.Sprint(i%3), i, 100))
	}
	if err := sb.send(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	var got []*azservicebus.Message
	for _, b := range f.sent {
		sizes = append(sizes, len(b))
		got = append(got, b...)
	}
	if fmt.Sprint(sizes) != "[3 3 3 1]" {
		t.Errorf("batches of %v messages; want [3 3 3 1] (350 bytes take three 100-byte bodies)", sizes)
	}
	if len(got) != len(msgs) {
		t.Fatalf("%d messages sent for %d rows", len(got), len(msgs))
	}
	for i, m := range got {
		want := msgs[i]
		if m.MessageID == nil || *m.MessageID != want.ID || string(m.Body) != string(want.Body) ||
			m.ContentType == nil || *m.ContentType != "application/json" || m.Subject == nil || *m.Subject != "upsert" ||
			m.ApplicationProperties["poller"] != "orders" || m.ApplicationProperties["op"] != "upsert" || len(m.ApplicationProperties) != 2 {
			t.Errorf("message %d: %+v; want the id %s, its body, application/json and the poller and op", i, m, want.ID)
		}
		if m.SessionID != nil {
			t.Errorf("message %d has session id %q on a sink without sessions", i, *m.SessionID)
		}
	}
	if err := sb.close(context.Background()); err != nil || !f.closed {
		t.Errorf("close: %v, sender closed %v", err, f.closed)
	}
}

// TestServiceBusSessions: with sessions, each message's SessionID is the row's key, every batch
// holds one session, and each key's messages are sent in the order of the rows.
func TestServiceBusSessions(t *testing.T) {
	f := &fakeSB{limit: 250}
	sb := newFakeServiceBus(f, true)
	var msgs []Message
	for i := range 12 {
		msgs = append(msgs, testMessage([]string{"a", "b", "a", "c"}[i%4], i, 100))
	}
	if err := sb.send(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	order := map[string][]string{}
	n := 0
	for _, b := range f.sent {
		if len(b) == 0 || len(b) > 2 {
			t.Fatalf("a batch of %d messages (250 bytes take one or two)", len(b))
		}
		for _, m := range b {
			if m.SessionID == nil || *m.SessionID != *b[0].SessionID {
				t.Fatalf("a batch mixes sessions: %v and %v", m.SessionID, b[0].SessionID)
			}
			if !strings.HasPrefix(*m.MessageID, *m.SessionID+"-") {
				t.Fatalf("message %s has session id %s, not its row's key", *m.MessageID, *m.SessionID)
			}
			order[*m.SessionID] = append(order[*m.SessionID], *m.MessageID)
			n++
		}
	}
	if n != len(msgs) {
		t.Fatalf("%d messages sent for %d rows", n, len(msgs))
	}
	want := map[string]string{"a": "[a-0 a-2 a-4 a-6 a-8 a-10]", "b": "[b-1 b-5 b-9]", "c": "[c-3 c-7 c-11]"}
	for k, w := range want {
		if got := fmt.Sprint(order[k]); got != w {
			t.Errorf("session %s: sent %s; want %s", k, got, w)
		}
	}
}

// TestServiceBusTooLarge: a row larger than a batch takes fails the send with ErrTooLarge naming
// the row, and nothing is sent, whether it comes first or after batches already built.
func TestServiceBusTooLarge(t *testing.T) {
	for _, sessions := range []bool{false, true} {
		for _, at := range []int{0, 5} {
			f := &fakeSB{limit: 1000}
			sb := newFakeServiceBus(f, sessions)
			var msgs []Message
			for i := range 8 {
				size := 300
				if i == at {
					size = 1001
				}
				msgs = append(msgs, testMessage(fmt.Sprint(i), i, size))
			}
			err := sb.send(context.Background(), msgs)
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf(`the row with key {"id":"%d"}`, at)) {
				t.Errorf("sessions %v, too large at %d: %v; want ErrTooLarge naming the row", sessions, at, err)
			}
			if f.sends != 0 {
				t.Errorf("sessions %v, too large at %d: %d batches sent before the error", sessions, at, f.sends)
			}
		}
	}
}

// TestServiceBusSendError: a failed send is the send's error, naming the batch's first row.
func TestServiceBusSendError(t *testing.T) {
	boom := errors.New("amqp: link detached")
	f := &fakeSB{limit: 250, failAt: 2, sendErr: boom}
	sb := newFakeServiceBus(f, false)
	var msgs []Message
	for i := range 6 {
		msgs = append(msgs, testMessage(fmt.Sprint(i), i, 100))
	}
	err := sb.send(context.Background(), msgs)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), `the row with key {"id":"2"}`) {
		t.Fatalf("%v; want the send's error naming the second batch's first row (key 2)", err)
	}
	if len(f.sent) != 1 {
		t.Fatalf("%d batches sent; want the first only", len(f.sent))
	}
}

// TestServiceBusSetup: Setup accepts a namespace connection string, the emulator's and an
// identity-based namespace, names the entity and never shows the key; a bad connection string
// is an error naming its setting without the key.
func TestServiceBusSetup(t *testing.T) {
	const secret = "c2VjcmV0LWtleS12YWx1ZQ=="
	checkSetups(t, secret, []setupCase{
		{Config{Type: ServiceBus, Connection: "SB", Queue: "orders"},
			map[string]string{"SB": "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=" + secret},
			"Service Bus queue orders (SB: connection string Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=REDACTED)", false},
		{Config{Type: ServiceBus, Connection: "SB", Topic: "changes", Sessions: true},
			map[string]string{"SB": "Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"},
			"Service Bus topic changes (SB: connection string Endpoint=sb://localhost;", false},
		{Config{Type: ServiceBus, Connection: "SB", Queue: "orders"},
			map[string]string{"SB__fullyQualifiedNamespace": "ns.servicebus.windows.net", "SB__credential": "managedidentity"},
			"Service Bus queue orders (SB__fullyQualifiedNamespace: ns.servicebus.windows.net with system-assigned managed identity)", false},
		{Config{Type: ServiceBus, Connection: "SB", Queue: "orders"},
			map[string]string{"SB": "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKey=" + secret},
			"SB: the connection string is not valid", true},
		{Config{Type: ServiceBus, Connection: "SB", Queue: "orders"}, nil, "SB__fullyQualifiedNamespace", true},
	})
}

// sbEmulatorQueues is how many queues suink-1... .github/emulators/servicebus-config.json
// declares: the emulator creates its entities from that file when it starts, so each target of
// the suite takes the next one (a subtest never sees another's messages) and, should the
// emulator have run the suite before, drains it first.
const sbEmulatorQueues = 8

// TestServiceBusConformance runs the suite against the Service Bus emulator
// (SERVICEBUS_EMULATOR_CONNECTION_STRING, set by the GitHub workflow's servicebus job; see
// .github/emulators/). The emulator cannot inject faults, so the fault cases skip.
func TestServiceBusConformance(t *testing.T) {
	const env = "SERVICEBUS_EMULATOR_CONNECTION_STRING"
	cs := os.Getenv(env)
	if cs == "" {
		t.Skipf("%s is not set: the Service Bus conformance suite runs against the emulator (the servicebus CI job)", env)
	}
	client, err := azservicebus.NewClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	next := 0
	runConformance(t, func(t *testing.T) target {
		if next++; next > sbEmulatorQueues {
			t.Fatalf("the suite needs more than the %d queues .github/emulators/servicebus-config.json declares", sbEmulatorQueues)
		}
		queue := fmt.Sprintf("suink-%d", next)
		r, err := client.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close(context.Background()) })
		rd := &sbReader{r: r}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if left, err := r.PeekMessages(ctx, 1, nil); err != nil {
			t.Fatalf("peeking %s: %v", queue, err)
		} else if len(left) > 0 {
			t.Logf("%s: %d messages left from an earlier run drained", queue, len(rd.read(t)))
		}
		return target{
			cfg:  Config{Type: ServiceBus, Connection: "SuinkBus", Queue: queue},
			env:  []string{"SuinkBus=" + cs},
			read: rd.read,
			// Over the 256 KB of a Standard namespace's message and the 1 MB of a batch.
			maxBody: 1 << 20,
		}
	})
}

// sbReader receives and deletes what a queue holds.
type sbReader struct{ r *azservicebus.Receiver }

// sbIdle is how long read waits for a message before it takes the queue as empty: the sink
// returns only once the service accepted every message, so they are all there when read starts;
// the wait only bounds the last, empty, receive.
const sbIdle = 5 * time.Second

// read receives (and so deletes) every message the queue holds.
func (rd *sbReader) read(t *testing.T) []received {
	t.Helper()
	var out []received
	for {
		ctx, cancel := context.WithTimeout(context.Background(), sbIdle)
		msgs, err := rd.r.ReceiveMessages(ctx, 1000, nil)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("receiving: %v", err)
		}
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			if m.ContentType == nil || *m.ContentType != "application/json" || m.ApplicationProperties["poller"] != "suink" {
				t.Fatalf("message %s: content type %v, properties %v", m.MessageID, m.ContentType, m.ApplicationProperties)
			}
			trace, _ := m.ApplicationProperties["traceparent"].(string)
			if id, _ := m.ApplicationProperties["Diagnostic-Id"].(string); id != trace {
				t.Fatalf("message %s: Diagnostic-Id %q, traceparent %q", m.MessageID, id, trace)
			}
			out = append(out, received{ID: m.MessageID, Body: m.Body, Trace: trace})
		}
	}
}

// setupCase is a sink definition and settings, and what Setup gives: String() starting with want,
// or an error containing it.
type setupCase struct {
	cfg    Config
	env    map[string]string
	want   string
	errors bool
}

// checkSetups runs Setup for each case and checks the outcome, and that secret is never shown.
func checkSetups(t *testing.T, secret string, cases []setupCase) {
	t.Helper()
	for _, c := range cases {
		s := MustNew(c.cfg)
		err := s.Setup(func(k string) string { return c.env[k] })
		if c.errors {
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), secret) {
				t.Errorf("%v: %v; want an error with %q and no key", c.env, err, c.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", c.env, err)
			continue
		}
		if got := s.String(); !strings.HasPrefix(got, c.want) || strings.Contains(got, secret) {
			t.Errorf("String() = %q; want it to start %q, without the key", got, c.want)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("closing a sink that never connected: %v", err)
		}
	}
}
