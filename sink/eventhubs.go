package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// eventHubs sends an event per row (or per batch) to an event hub. Each event's partition key is
// the row's key, so a key's changes land in one partition, in order. A batch carries one
// partition key, so the messages are grouped by key (each key's in order) and batched per key;
// the keys' batches are sent at most Concurrency at a time, each key's one after the other.
//
// As with Service Bus, every batch is built before the first is sent: a row too large for a
// batch of its own fails the send with ErrTooLarge naming it, and nothing was sent. A failure
// while sending may leave other keys' batches delivered; the poller sends the whole batch again
// with the same MessageIDs, on which consumers deduplicate (Event Hubs does not).
type eventHubs struct {
	pc          *azeventhubs.ProducerClient // nil in tests
	p           ehProducer
	hub         string
	conn        azconn.Conn
	concurrency int
	tryTimeout  time.Duration
}

// ehProducer is what eventHubs needs of an *azeventhubs.ProducerClient; tests fake it.
type ehProducer interface {
	// newBatch makes a batch for partition key key ("": the service picks the partition).
	newBatch(ctx context.Context, key string) (ehBatch, error)
	send(ctx context.Context, b ehBatch) error
	close(ctx context.Context) error
}

// ehBatch is what eventHubs needs of an *azeventhubs.EventDataBatch: add returns
// azeventhubs.ErrEventDataTooLarge when the event does not fit.
type ehBatch interface {
	add(e *azeventhubs.EventData) error
	len() int
}

// newEventHubs resolves X (a connection string; its EntityPath, if any, must be the hub) or
// X__fullyQualifiedNamespace (identity based) and creates a producer for the hub. It does not
// connect: the first send does.
func newEventHubs(cfg Config, getenv func(string) string, opts azcore.ClientOptions) (*eventHubs, error) {
	conn, err := azconn.Resolve(getenv, cfg.Connection, "fullyQualifiedNamespace", "NAMESPACE.servicebus.windows.net", true)
	if err != nil {
		return nil, err
	}
	eh := &eventHubs{hub: cfg.Hub, conn: conn, concurrency: cfg.concurrency(), tryTimeout: tryTimeout(opts.Retry)}
	popts := &azeventhubs.ProducerClientOptions{
		ApplicationID: opts.Telemetry.ApplicationID,
		RetryOptions: azeventhubs.RetryOptions{
			MaxRetries: int32(opts.Retry.MaxRetries), RetryDelay: opts.Retry.RetryDelay, MaxRetryDelay: opts.Retry.MaxRetryDelay,
		},
	}
	if cs := conn.ConnectionString; cs != "" {
		hub := cfg.Hub
		if ep := azconn.ParseConnectionString(cs)["entitypath"]; ep != "" {
			if ep != cfg.Hub {
				return nil, fmt.Errorf("%s: the connection string's EntityPath is %q, not the sink's hub %q", conn.Setting, ep, cfg.Hub)
			}
			hub = "" // the SDK takes the hub from one place only
		}
		// The SDK's parse errors name keys and the endpoint only, never a key's value.
		if eh.pc, err = azeventhubs.NewProducerClientFromConnectionString(cs, hub, popts); err != nil {
			return nil, fmt.Errorf("%s: the connection string is not valid (%s): %v", conn.Setting, redact.ConnectionString(cs), err)
		}
	} else {
		cred, err := conn.Identity.TokenCredential(conn.Setting)
		if err != nil {
			return nil, err
		}
		if eh.pc, err = azeventhubs.NewProducerClient(conn.Endpoint, cfg.Hub, cred, popts); err != nil {
			return nil, fmt.Errorf("%s: %w", conn.Setting, err)
		}
	}
	eh.p = sdkProducer{eh.pc}
	return eh, nil
}

func (eh *eventHubs) String() string                  { return "event hub " + eh.hub + " (" + eh.conn.String() + ")" }
func (eh *eventHubs) maxBytes() int                   { return 0 }
func (eh *eventHubs) close(ctx context.Context) error { return eh.p.close(ctx) }

// ehEvent is m as an event.
func ehEvent(m Message) *azeventhubs.EventData {
	return &azeventhubs.EventData{
		MessageID:   ptr(m.ID),
		Body:        m.Body,
		ContentType: ptr("application/json"),
		Properties:  map[string]any{"poller": m.Poller, "op": m.Op},
	}
}

func (eh *eventHubs) send(ctx context.Context, msgs []Message) error {
	return sendGrouped(ctx, byKey(msgs), eh.concurrency, eh.tryTimeout, eh.p.newBatch,
		func(b ehBatch, m Message) error { return b.add(ehEvent(m)) },
		eh.p.send, azeventhubs.ErrEventDataTooLarge, "an event batch", "events")
}

// sdkProducer is the real producer.
type sdkProducer struct{ pc *azeventhubs.ProducerClient }

type sdkEventBatch struct{ b *azeventhubs.EventDataBatch }

func (b sdkEventBatch) add(e *azeventhubs.EventData) error { return b.b.AddEventData(e, nil) }
func (b sdkEventBatch) len() int                           { return int(b.b.NumEvents()) }

func (p sdkProducer) newBatch(ctx context.Context, key string) (ehBatch, error) {
	var opts *azeventhubs.EventDataBatchOptions
	if key != "" {
		opts = &azeventhubs.EventDataBatchOptions{PartitionKey: &key}
	}
	b, err := p.pc.NewEventDataBatch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return sdkEventBatch{b}, nil
}

func (p sdkProducer) send(ctx context.Context, b ehBatch) error {
	return p.pc.SendEventDataBatch(ctx, b.(sdkEventBatch).b, nil)
}

func (p sdkProducer) close(ctx context.Context) error {
	if p.pc == nil {
		return nil
	}
	return p.pc.Close(ctx)
}
