package sink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// eventHubs sends an event per row (or per batch) to an event hub. It reads the hub's partition
// ids once (on the first send with keys) and sends each row's event to the partition its key
// maps to (partitionOf: FNV-1a 64 of the key text, modulo the number of partitions), so a key's
// changes land in one partition, in order, and a send costs a batch per partition (split by the
// size limit), not one per key. The partitions' batches are sent at most Concurrency at a time,
// each partition's one after the other. Messages without a key (mode batch) go in batches
// without a partition: the service picks one.
//
// As with Service Bus, every batch is built before the first is sent: a row too large for a
// batch of its own fails the send with ErrTooLarge naming it, and nothing was sent. A failure
// while sending may leave other partitions' batches delivered; the poller sends the whole batch
// again with the same MessageIDs, on which consumers deduplicate (Event Hubs does not).
type eventHubs struct {
	pc          *azeventhubs.ProducerClient // nil in tests
	p           ehProducer
	hub         string
	conn        azconn.Conn
	concurrency int
	tryTimeout  time.Duration

	mu         sync.Mutex
	partitions []string // the hub's partition ids, read once (nil: not yet)
}

// ehProducer is what eventHubs needs of an *azeventhubs.ProducerClient; tests fake it.
type ehProducer interface {
	// partitionIDs returns the hub's partition ids.
	partitionIDs(ctx context.Context) ([]string, error)
	// newBatch makes a batch for the partition with id partition ("": the service picks one).
	newBatch(ctx context.Context, partition string) (ehBatch, error)
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

func (eh *eventHubs) String() string { return "event hub " + eh.hub + " (" + eh.conn.String() + ")" }
func (eh *eventHubs) maxBytes() int  { return 0 }
func (eh *eventHubs) target() traceTarget {
	return messagingTarget(semconv.MessagingSystemEventHubs, eh.hub)
}
func (eh *eventHubs) close(ctx context.Context) error { return eh.p.close(ctx) }

// ehEvent is m as an event.
func ehEvent(m Message) *azeventhubs.EventData {
	return &azeventhubs.EventData{
		MessageID:   ptr(m.ID),
		Body:        m.Body,
		ContentType: ptr(m.ContentType()),
		Properties:  m.Properties(),
	}
}

func (eh *eventHubs) send(ctx context.Context, msgs []Message) error {
	var partitions []string
	if slices.ContainsFunc(msgs, func(m Message) bool { return m.Key != "" }) {
		var err error
		if partitions, err = eh.partitionIDs(ctx); err != nil {
			return err
		}
	}
	groups := byPartition(msgs, len(partitions))
	return sendGrouped(ctx, groups, eh.concurrency, eh.tryTimeout,
		func(ctx context.Context, key string) (ehBatch, error) {
			if key == "" {
				return eh.p.newBatch(ctx, "")
			}
			return eh.p.newBatch(ctx, partitions[partitionOf(key, len(partitions))])
		},
		func(b ehBatch, m Message) error { return b.add(ehEvent(m)) },
		eh.p.send, azeventhubs.ErrEventDataTooLarge, "an event batch", "events")
}

// partitionIDs returns the hub's partition ids, read from the service on the first call and
// kept for the sink's life; a failed read is an error naming the hub and the setting (nothing
// was sent), and the next send reads again.
func (eh *eventHubs) partitionIDs(ctx context.Context) ([]string, error) {
	eh.mu.Lock()
	defer eh.mu.Unlock()
	if eh.partitions != nil {
		return eh.partitions, nil
	}
	ctx, cancel := context.WithTimeout(ctx, eh.tryTimeout)
	defer cancel()
	ids, err := eh.p.partitionIDs(ctx)
	if err == nil && len(ids) == 0 {
		err = errors.New("the service listed no partitions")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: reading the partition ids of event hub %q (check the hub's name and that the identity may send to it); nothing was sent: %w",
			eh.conn.Setting, eh.hub, err)
	}
	eh.partitions = sortPartitions(ids)
	return eh.partitions, nil
}

// sortPartitions orders partition ids as numbers ("2" before "10"; Event Hubs names them 0 to
// n-1), so that every sink instance maps a key to the same id whatever order the service lists
// them in.
func sortPartitions(ids []string) []string {
	ids = slices.Clone(ids)
	slices.SortFunc(ids, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b))
	})
	return ids
}

// partitionOf is the index of the partition, of n, that a message with key key goes to: FNV-1a
// 64 of the key's bytes (the text Message.Key holds, the partition key the sink once sent),
// modulo n. Stable across processes and versions: changing it would move keys between
// partitions.
func partitionOf(key string, n int) int {
	const offset64, prime64 = 14695981039346656037, 1099511628211 // hash/fnv's, inline: no allocation per row
	h := uint64(offset64)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime64
	}
	return int(h % uint64(n))
}

// byPartition groups msgs by the partition their key maps to, of n, in the order each partition
// first appears, each partition's messages in order (so each key's are); the messages without a
// key are a group of their own. Every message of a group has a key mapping to its partition.
func byPartition(msgs []Message, n int) [][]Message {
	return groupBy(msgs, func(m Message) int {
		if m.Key == "" {
			return -1
		}
		return partitionOf(m.Key, n)
	})
}

// sdkProducer is the real producer.
type sdkProducer struct{ pc *azeventhubs.ProducerClient }

type sdkEventBatch struct{ b *azeventhubs.EventDataBatch }

func (b sdkEventBatch) add(e *azeventhubs.EventData) error { return b.b.AddEventData(e, nil) }
func (b sdkEventBatch) len() int                           { return int(b.b.NumEvents()) }

func (p sdkProducer) partitionIDs(ctx context.Context) ([]string, error) {
	props, err := p.pc.GetEventHubProperties(ctx, nil)
	if err != nil {
		return nil, err
	}
	return props.PartitionIDs, nil
}

func (p sdkProducer) newBatch(ctx context.Context, partition string) (ehBatch, error) {
	var opts *azeventhubs.EventDataBatchOptions
	if partition != "" {
		opts = &azeventhubs.EventDataBatchOptions{PartitionID: &partition}
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
