package sink

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
)

// DevelopmentQueueConnectionString is Azurite's public account with its queue service on the
// default port: what a storagequeue sink's connection UseDevelopmentStorage=true stands for.
const DevelopmentQueueConnectionString = azconn.DevelopmentQueueConnectionString

// queueMessageMax is the largest storage queue message: 64 KiB, counted after base64 encoding.
const queueMessageMax = 64 * 1024

// storageQueue enqueues a message per row (or per batch), at most Concurrency at a time. A
// queue that does not exist is created once, as the Functions queue output binding does; an
// identity with only Storage Queue Data Message Sender cannot, and the error says so.
type storageQueue struct {
	q           *azqueue.QueueClient
	queue       string
	conn        azconn.Conn
	text        bool
	ttl         int32
	concurrency int
	mu          sync.Mutex
	exists      bool // create made it, or found it made
}

func newStorageQueue(cfg Config, getenv func(string) string, opts azcore.ClientOptions) (*storageQueue, error) {
	q, conn, err := azconn.QueueClient(getenv, cfg.Connection, cfg.Queue, &azqueue.ClientOptions{ClientOptions: opts})
	if err != nil {
		return nil, err
	}
	ttl, _ := cfg.ttl() // checked by New
	return &storageQueue{q: q, queue: cfg.Queue, conn: conn, text: cfg.Encoding == EncodingText, ttl: ttl, concurrency: cfg.concurrency()}, nil
}

func (s *storageQueue) String() string {
	return "queue " + s.queue + " (" + s.conn.String() + ")"
}

// maxBytes is the body that fits the service's 64 KiB once encoded: base64 makes 3 bytes 4.
func (s *storageQueue) maxBytes() int {
	if s.text {
		return queueMessageMax
	}
	return queueMessageMax / 4 * 3
}
func (s *storageQueue) close(_ context.Context) error { return nil }

// target: a storage queue message has no place for a trace context; the span is the send's alone.
func (s *storageQueue) target() traceTarget {
	return messagingTarget(semconv.MessagingSystemKey.String("azure_storage_queue"), s.queue)
}

func (s *storageQueue) send(ctx context.Context, msgs []Message) error {
	opts := &azqueue.EnqueueMessageOptions{TimeToLive: &s.ttl}
	return eachInOrder(ctx, msgs, s.concurrency, func(ctx context.Context, m Message) error {
		content := string(m.Body)
		if !s.text {
			content = base64.StdEncoding.EncodeToString(m.Body)
		}
		_, err := s.q.EnqueueMessage(ctx, content, opts)
		if queueerror.HasCode(err, queueerror.QueueNotFound) {
			err = s.create(ctx)
			if err == nil {
				_, err = s.q.EnqueueMessage(ctx, content, opts)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", m.About(), err)
		}
		return nil
	})
}

// create makes the queue; once it exists (made here or by someone else) it is not tried again.
func (s *storageQueue) create(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exists {
		return nil
	}
	_, err := s.q.Create(ctx, nil)
	if queueerror.HasCode(err, queueerror.QueueAlreadyExists) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("queue %s does not exist and could not be created (create it, or give the app's identity a role that may: "+
			"Storage Queue Data Message Sender can only add messages): %w", s.queue, err)
	}
	s.exists = true
	return nil
}
