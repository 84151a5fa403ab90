package sink

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"

	"github.com/pseudotrigger/pseudotrigger/internal/faultproxy"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestStorageQueueConformance runs the suite against Azurite's queue service, through a fault
// proxy.
func TestStorageQueueConformance(t *testing.T) {
	cs := testenv.AzuriteQueue(t)
	runConformance(t, func(t *testing.T) target {
		proxy, proxied, err := faultproxy.ForEndpoint(cs, "QueueEndpoint")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { proxy.Close() })
		queue := testenv.Name("suink-")
		reader := newQueueRecorder(t, proxy, cs, queue, false)
		return target{
			cfg:   Config{Type: StorageQueue, Connection: "SuinkQueue", Queue: queue, Concurrency: 32},
			env:   []string{"SuinkQueue=" + proxied},
			read:  reader.read,
			fault: proxyFault(proxy, faultproxy.Other),
			// 64 KiB after base64, less the Change around the row's note.
			maxBody:  queueMessageMax * 3 / 4,
			untraced: true, // a queue message is its body alone
		}
	})
}

// proxyFault arms f on every request of kind after skip, until cleared.
func proxyFault(p *faultproxy.Proxy, kind faultproxy.Kind) func(*testing.T, faultproxy.Fault, int) func() {
	return func(_ *testing.T, f faultproxy.Fault, skip int) func() {
		p.Add(faultproxy.Rule{Kind: kind, Fault: f, Skip: skip, Times: 1 << 30})
		return p.Clear
	}
}

// queueRecorder records, through the fault proxy, every message Azurite's queue service
// accepted (answered 201 Created), and checks on read that the queue holds as many: dequeuing
// 10,000 messages from Azurite takes over a minute, its dequeue slowing with the queue's length.
type queueRecorder struct {
	q    *azqueue.QueueClient
	text bool
	mu   sync.Mutex
	got  []received
	held int32 // messages accepted so far: what the queue holds
	err  error

	proxy *faultproxy.Proxy
}

func deref(n *int32) int32 {
	if n == nil {
		return -1
	}
	return *n
}

func newQueueRecorder(t *testing.T, p *faultproxy.Proxy, cs, queue string, text bool) *queueRecorder {
	q, err := azqueue.NewQueueClientFromConnectionString(cs, queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &queueRecorder{q: q, text: text, proxy: p}
	p.Forwarded = r.forwarded
	// The queue is left to the throwaway Azurite: deleting it would unreference its messages'
	// extents, and Azurite's in-memory garbage collector (every 60 s) deletes extents one at a
	// time, re-sorting its extent index after each (Azurite 3.35 LokiExtentMetadataStore's
	// findAndRemove), which for 10,000 messages blocks the queue service for minutes: later
	// requests then time out.
	return r
}

func (r *queueRecorder) forwarded(req *http.Request, body []byte, status int) {
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/messages") || status != http.StatusCreated {
		return
	}
	var m struct {
		Text string `xml:"MessageText"`
	}
	err := xml.Unmarshal(body, &m)
	text := []byte(m.Text)
	if err == nil && !r.text {
		text, err = base64.StdEncoding.DecodeString(m.Text)
	}
	var c Change
	if err == nil {
		err = json.Unmarshal(text, &c)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.err = fmt.Errorf("an accepted message: %w: %s", err, body)
		return
	}
	r.got = append(r.got, received{ID: c.ID, Body: text})
	r.held++
}

// read returns the messages accepted since the last read, after checking that the queue holds
// every message accepted so far and that the first one dequeued is one of them, intact.
func (r *queueRecorder) read(t *testing.T) []received {
	t.Helper()
	ctx := context.Background()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		t.Fatal(r.err)
	}
	props, err := r.q.GetProperties(ctx, nil)
	if queueerror.HasCode(err, queueerror.QueueNotFound) && r.held == 0 {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	// After a fault, the queue may hold more than was seen accepted: a request the sink gave up
	// on (its context cancelled when another failed) can still land, its answer unseen.
	n := props.ApproximateMessagesCount
	if n == nil || *n < r.held || *n != r.held && len(r.proxy.Events()) == 0 {
		t.Fatalf("the queue holds %d messages; %d were accepted", deref(n), r.held)
	}
	if r.held > 0 {
		one := int32(1)
		resp, err := r.q.PeekMessages(ctx, &azqueue.PeekMessagesOptions{NumberOfMessages: &one})
		if err != nil || len(resp.Messages) != 1 {
			t.Fatalf("peeking: %v", err)
		}
		text := []byte(*resp.Messages[0].MessageText)
		if !r.text {
			if text, err = base64.StdEncoding.DecodeString(string(text)); err != nil {
				t.Fatalf("a message is not base64: %v", err)
			}
		}
		var c Change
		if err := json.Unmarshal(text, &c); err != nil || c.ID == "" {
			t.Fatalf("a message in the queue: %v: %s", err, text)
		}
	}
	out := r.got
	r.got = nil
	return out
}
