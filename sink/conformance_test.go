package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pseudotrigger/pseudotrigger/internal/faultproxy"
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/pollertest"
)

// target is one sink under the conformance suite, against a real service (or, for the services
// that have no emulator here, against theirs in the GitHub workflow).
type target struct {
	cfg    Config
	env    []string             // the sink's app settings, "NAME=value"
	client azcore.ClientOptions // e.g. a transport that trusts a test server's certificate
	// read returns the messages the service received since the last read (duplicates
	// included), in any order.
	read func(t *testing.T) []received
	// fault makes every send request after the first skip fail with f until the returned func
	// is called; nil when the target cannot inject faults.
	fault func(t *testing.T, f faultproxy.Fault, skip int) (clear func())
	// maxBody is the size of a row's message over which the service refuses it (0: the suite
	// does not test it).
	maxBody int
	// untraced: the service's messages have no place for a trace context (a storage queue's).
	untraced bool
}

// received is one message as the service got it.
type received struct {
	ID    string // the id the service saw (header, MessageID, CloudEvent id)
	Body  []byte // the Change
	Trace string // the traceparent it carried ("" none)
	// Header is the request's headers (a webhook's; nil for the other services).
	Header http.Header
}

// changeRow is the row type of the suite's table.
type changeRow struct {
	ID   int64  `db:"id,key,cursor"`
	Note string `db:"note"`
}

// conformanceRows is how many rows the "all arrive" case sends (fewer with -short).
func conformanceRows() int {
	if testing.Short() {
		return 2000
	}
	return 10000
}

// runConformance runs the sink conformance suite against the target newTarget returns (one per
// subtest: each gets an empty queue, hub or endpoint).
func runConformance(t *testing.T, newTarget func(t *testing.T) target) {
	t.Run("AllArrive", func(t *testing.T) {
		tg := newTarget(t)
		n := conformanceRows()
		h := harness(t, tg, "SUINK_BATCH_SIZE=500")
		insert(t, h, 1, n, 40)
		t0 := time.Now()
		for i := 0; ; i++ {
			r := h.Tick()
			if r.Outcome == "idle" || r.Rows == 0 {
				break
			}
			if i > n {
				t.Fatal("the ticks never ran out of rows")
			}
		}
		sent := time.Since(t0)
		got := tg.read(t)
		t.Logf("%d rows sent in %v, read back in %v", n, sent.Round(time.Millisecond), (time.Since(t0) - sent).Round(time.Millisecond))
		byID := checkArrived(t, got, n)
		for id, bodies := range byID {
			var c Change
			if err := json.Unmarshal(bodies[0], &c); err != nil {
				t.Fatalf("message %s: %v", id, err)
			}
			if c.Poller != "suink" || c.Op != "upsert" || c.Attempt != 1 || c.FencingToken <= 0 || c.BatchID == "" ||
				c.Cursor.Kind != "integer" || string(c.Cursor.Value) != fmt.Sprint(c.Key["id"]) {
				t.Fatalf("message %s: %s", id, bodies[0])
			}
			var row changeRow
			if err := json.Unmarshal(c.Row, &struct {
				ID   *int64  `json:"id"`
				Note *string `json:"note"`
			}{&row.ID, &row.Note}); err != nil || row.Note != note(row.ID, 40) {
				t.Fatalf("message %s: row %s", id, c.Row)
			}
		}
	})

	for _, f := range []faultproxy.Fault{faultproxy.Unavailable, faultproxy.Reset, faultproxy.DropReply} {
		t.Run("FaultMidBatch/"+string(f), func(t *testing.T) {
			tg := newTarget(t)
			if tg.fault == nil {
				t.Skip("this target cannot inject faults")
			}
			const n = 300
			h := harness(t, tg, "SUINK_BATCH_SIZE=100")
			insert(t, h, 1, n, 40)
			clear := tg.fault(t, f, 150) // in the middle of the second batch
			r, err := h.TickErr()
			clear()
			if err == nil {
				t.Fatalf("a tick whose sink failed midway succeeded: %+v", r)
			}
			if r.Rows != 100 || r.Cursor == nil || string(r.Cursor.Value) != "100" {
				t.Fatalf("after the failed tick: %d rows committed, checkpoint %v; want the first batch only (the failed one not committed)", r.Rows, r.Cursor)
			}
			for r := h.Tick(); r.Rows > 0; r = h.Tick() {
			}
			got := tg.read(t)
			byID := checkArrived(t, got, n)
			again := 0
			for id, bodies := range byID {
				want := sameChange(t, bodies[0])
				for _, b := range bodies[1:] {
					if sameChange(t, b) != want {
						t.Fatalf("message %s came again with another content:\n%s\n%s", id, bodies[0], b)
					}
				}
				var c Change
				_ = json.Unmarshal(bodies[len(bodies)-1], &c)
				if c.Attempt == 2 {
					again++
				}
			}
			if again == 0 {
				t.Fatal("no message of the failed batch came again with attempt 2")
			}
			t.Logf("%s: %d messages received for %d rows; %d redelivered with attempt 2", f, len(got), n, again)
		})
	}

	// TraceContext: each batch's send is a producer span, the child of the span the sink was
	// called in, and each message carries its trace context where the service has a place for it.
	t.Run("TraceContext", func(t *testing.T) {
		tg := newTarget(t)
		spans := tracetest.NewSpanRecorder()
		tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)).Tracer("test")
		h := harnessIn(t, tg, func(ctx context.Context) (context.Context, func()) {
			ctx, span := tracer.Start(ctx, "deliver")
			return ctx, func() { span.End() }
		}, "SUINK_BATCH_SIZE=10")
		const n = 25
		insert(t, h, 1, n, 40)
		for r := h.Tick(); r.Rows > 0; r = h.Tick() {
		}
		got := tg.read(t)
		checkArrived(t, got, n)
		delivers, sends := map[trace.SpanID]bool{}, map[string]sdktrace.ReadOnlySpan{}
		for _, s := range spans.Ended() {
			if s.Name() == "deliver" {
				delivers[s.SpanContext().SpanID()] = true
			} else {
				sends[s.SpanContext().SpanID().String()] = s
			}
		}
		if len(delivers) != 3 || len(sends) != 3 {
			t.Fatalf("%d deliver and %d send spans for %d rows in batches of 10", len(delivers), len(sends), n)
		}
		perSend := map[string]int{}
		for id, s := range sends {
			attrs := map[string]any{}
			for _, a := range s.Attributes() {
				attrs[string(a.Key)] = a.Value.AsInterface()
			}
			if s.SpanKind() != trace.SpanKindProducer || !delivers[s.Parent().SpanID()] || !strings.HasPrefix(s.Name(), "send ") ||
				(tg.cfg.Type != Webhook && (attrs["messaging.system"] == nil || attrs["messaging.operation.type"] != "send" || attrs["messaging.destination.name"] == nil)) {
				t.Fatalf("send span %s %s: kind %v, parent %s, attributes %v", id, s.Name(), s.SpanKind(), s.Parent().SpanID(), attrs)
			}
			perSend[id] = int(attrs["messaging.batch.message_count"].(int64))
		}
		for _, m := range got {
			if tg.untraced { // no place in the message: the span is all there is
				continue
			}
			parts := strings.Split(m.Trace, "-")
			if len(parts) != 4 || parts[0] != "00" || parts[3] != "01" || sends[parts[2]] == nil || parts[1] != sends[parts[2]].SpanContext().TraceID().String() {
				t.Fatalf("message %s carries traceparent %q, not a send span's", m.ID, m.Trace)
			}
			perSend[parts[2]]--
		}
		for id, left := range perSend {
			if !tg.untraced && left != 0 {
				t.Fatalf("send span %s: its message count is %d more than the messages carrying it", id, left)
			}
		}
	})

	t.Run("TooLarge", func(t *testing.T) {
		tg := newTarget(t)
		if tg.maxBody == 0 {
			t.Skip("the target has no message size limit the suite can reach")
		}
		h := harness(t, tg, "SUINK_BATCH_SIZE=10")
		insert(t, h, 1, 5, 40)
		insert(t, h, 6, 6, tg.maxBody+1)
		insert(t, h, 7, 9, 40)
		r, err := h.TickErr()
		if err == nil || !strings.Contains(err.Error(), ErrTooLarge.Error()) || !strings.Contains(err.Error(), `the row with key {"id":6}`) {
			t.Fatalf("a batch with a row too large: %v; want %v naming the key {\"id\":6}", err, ErrTooLarge)
		}
		if r.Rows != 0 {
			t.Fatalf("%d rows committed", r.Rows)
		}
		if got := tg.read(t); len(got) != 0 {
			t.Fatalf("%d messages of the refused batch were sent", len(got))
		}
	})
}

// harness is a pollertest harness for a poller "suink" over table changes, sending to tg.
func harness(t *testing.T, tg target, settings ...string) *pollertest.Harness {
	return harnessIn(t, tg, nil, settings...)
}

// harnessIn is harness whose sink sends in a context that in makes of the handler's (nil: the
// handler's).
func harnessIn(t *testing.T, tg target, in func(context.Context) (context.Context, func()), settings ...string) *pollertest.Harness {
	t.Helper()
	s, err := New(tg.cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.client = tg.client
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	send := Handler[changeRow](s)
	if in != nil {
		send = func(ctx context.Context, b *poller.Batch[changeRow]) error {
			ctx, done := in(ctx)
			defer done()
			return Handler[changeRow](s)(ctx, b)
		}
	}
	p := poller.New("suink", "changes", poller.Integer, send, poller.WithSetup(s.Setup))
	return pollertest.New(t, p, append(settings, tg.env...)...)
}

func note(id int64, size int) string {
	s := fmt.Sprintf("row %d ", id)
	if len(s) < size {
		s += strings.Repeat("x", size-len(s))
	}
	return s
}

// insert writes rows from..to with notes of size bytes, in one transaction.
func insert(t *testing.T, h *pollertest.Harness, from, to, size int) {
	t.Helper()
	h.Insert(changeRow{ID: int64(from), Note: note(int64(from), size)})
	tx, err := h.DB.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := from + 1; i <= to; i++ {
		if _, err := tx.Exec(`INSERT INTO changes (id, note) VALUES (?, ?)`, i, note(int64(i), size)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// checkArrived checks that every row 1..n arrived under the id the suite derives for it, and
// nothing else did; it returns the bodies received per id.
func checkArrived(t *testing.T, got []received, n int) map[string][][]byte {
	t.Helper()
	byID := map[string][][]byte{}
	for _, m := range got {
		byID[m.ID] = append(byID[m.ID], m.Body)
	}
	missing := 0
	for i := 1; i <= n; i++ {
		id := ChangeID("suink", []byte(fmt.Sprintf(`{"id":%d}`, i)), []byte(fmt.Sprint(i)))
		if _, ok := byID[id]; !ok {
			if missing++; missing <= 3 {
				t.Errorf("row %d (message id %s) never arrived", i, id)
			}
		}
	}
	if missing > 0 || len(byID) != n {
		t.Fatalf("%d of %d rows missing; %d distinct ids received", missing, n, len(byID))
	}
	return byID
}

// sameChange is a Change's content without what differs between deliveries of it.
func sameChange(t *testing.T, body []byte) string {
	t.Helper()
	var c Change
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	c.BatchID, c.FencingToken, c.Attempt = "", 0, 0
	j, _ := json.Marshal(c)
	return string(j)
}
