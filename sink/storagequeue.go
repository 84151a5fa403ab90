package sink

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// DevelopmentQueueConnectionString is Azurite's public account with its queue service on the
// default port: what UseDevelopmentStorage=true means, as azqueue does not map the shorthand.
const DevelopmentQueueConnectionString = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;" +
	"AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;" +
	"QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;"

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
	q, conn, err := QueueClient(getenv, cfg.Connection, cfg.Queue, &azqueue.ClientOptions{ClientOptions: opts})
	if err != nil {
		return nil, err
	}
	ttl, _ := cfg.ttl() // checked by New
	return &storageQueue{q: q, queue: cfg.Queue, conn: conn, text: cfg.Encoding == EncodingText, ttl: ttl, concurrency: cfg.concurrency()}, nil
}

// QueueClient returns a client of queue over the storage queue connection named connection (X,
// UseDevelopmentStorage=true being Azurite's queue on its default port, or X__queueServiceUri),
// as a storagequeue sink connects, and the connection, for messages. It sends nothing.
func QueueClient(getenv func(string) string, connection, queue string, opts *azqueue.ClientOptions) (*azqueue.QueueClient, azconn.Conn, error) {
	conn, err := azconn.Resolve(getenv, connection, "queueServiceUri", "https://ACCOUNT.queue.core.windows.net", false)
	if err != nil {
		return nil, conn, err
	}
	if cs := conn.ConnectionString; cs != "" {
		p := azconn.ParseConnectionString(cs)
		if strings.EqualFold(p["usedevelopmentstorage"], "true") {
			cs = DevelopmentQueueConnectionString
		} else if p["queueendpoint"] == "" && p["accountname"] == "" {
			return nil, conn, fmt.Errorf("%s: the connection string names no AccountName or QueueEndpoint (%s)", conn.Setting, redact.ConnectionString(cs))
		}
		q, err := azqueue.NewQueueClientFromConnectionString(cs, queue, opts)
		if err != nil {
			return nil, conn, fmt.Errorf("%s: the connection string is not valid (%s)", conn.Setting, redact.ConnectionString(cs))
		}
		return q, conn, nil
	}
	cred, err := conn.Identity.TokenCredential(conn.Setting)
	if err != nil {
		return nil, conn, err
	}
	q, err := azqueue.NewQueueClient(conn.Endpoint+"/"+queue, cred, opts)
	if err != nil {
		return nil, conn, fmt.Errorf("%s: %w", conn.Setting, err)
	}
	return q, conn, nil
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
