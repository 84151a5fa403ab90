package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// serviceBus sends a message per row (or per batch) to a Service Bus queue or topic, in message
// batches as large as the sender's link allows (the batch decides: maxBytes is 0).
//
// Every batch of a send is built before the first one is sent, so a row too large for a batch of
// its own fails the send with ErrTooLarge, naming the row, and nothing of it was sent. A failure
// while sending (the service down, a lost reply) may leave the earlier batches of the send
// delivered: the poller then sends the whole batch again with the same message ids, which
// duplicate detection drops (consumers of an entity without it deduplicate on the id).
//
// With Sessions, each message's SessionID is the row's key (an outbox event's
// aggregate id), and the messages are batched per
// session (a batch to a partitioned entity must hold one session), each key's messages in order;
// different sessions' batches are sent at most Concurrency at a time.
type serviceBus struct {
	client      *azservicebus.Client // nil in tests
	s           sbSender
	entity      string // "queue NAME" or "topic NAME"
	name        string // NAME
	conn        azconn.Conn
	sessions    bool
	concurrency int
	tryTimeout  time.Duration // bounds each call to the service, its retries included
}

// sbSender is what serviceBus needs of an *azservicebus.Sender; tests fake it.
type sbSender interface {
	newBatch(ctx context.Context) (sbBatch, error)
	send(ctx context.Context, b sbBatch) error
	close(ctx context.Context) error
}

// sbBatch is what serviceBus needs of an *azservicebus.MessageBatch: add returns
// azservicebus.ErrMessageTooLarge when the message does not fit.
type sbBatch interface {
	add(m *azservicebus.Message) error
	len() int
}

// newServiceBus resolves X (a connection string, the emulator's UseDevelopmentEmulator=true ones
// included) or X__fullyQualifiedNamespace (identity based) and creates a sender for the queue or
// topic. It does not connect: the first send does.
func newServiceBus(cfg Config, getenv func(string) string, opts azcore.ClientOptions) (*serviceBus, error) {
	conn, err := azconn.Resolve(getenv, cfg.Connection, "fullyQualifiedNamespace", "NAMESPACE.servicebus.windows.net", true)
	if err != nil {
		return nil, err
	}
	sb := &serviceBus{conn: conn, sessions: cfg.Sessions, concurrency: cfg.concurrency(), tryTimeout: tryTimeout(opts.Retry)}
	name := cfg.Queue
	sb.entity = "queue " + name
	if cfg.Topic != "" {
		name = cfg.Topic
		sb.entity = "topic " + name
	}
	sb.name = name
	copts := &azservicebus.ClientOptions{
		ApplicationID: opts.Telemetry.ApplicationID,
		RetryOptions: azservicebus.RetryOptions{
			MaxRetries: int32(opts.Retry.MaxRetries), RetryDelay: opts.Retry.RetryDelay, MaxRetryDelay: opts.Retry.MaxRetryDelay,
		},
	}
	if cs := conn.ConnectionString; cs != "" {
		// The SDK's parse errors name keys and the endpoint only, never a key's value.
		if sb.client, err = azservicebus.NewClientFromConnectionString(cs, copts); err != nil {
			return nil, fmt.Errorf("%s: the connection string is not valid (%s): %v", conn.Setting, redact.ConnectionString(cs), err)
		}
	} else {
		cred, err := conn.Identity.TokenCredential(conn.Setting)
		if err != nil {
			return nil, err
		}
		if sb.client, err = azservicebus.NewClient(conn.Endpoint, cred, copts); err != nil {
			return nil, fmt.Errorf("%s: %w", conn.Setting, err)
		}
	}
	sender, err := sb.client.NewSender(name, nil)
	if err != nil {
		_ = sb.client.Close(context.Background())
		return nil, fmt.Errorf("%s: %s: %w", conn.Setting, sb.entity, err)
	}
	sb.s = sdkSender{sender}
	return sb, nil
}

// tryTimeout bounds one call to an AMQP service: the SDK's retries count attempts, not time, and
// a connection to an unreachable host can hang; the batch fails instead and comes again.
func tryTimeout(r policy.RetryOptions) time.Duration {
	if r.TryTimeout > 0 {
		return r.TryTimeout
	}
	return 30 * time.Second
}

func (sb *serviceBus) String() string {
	return "Service Bus " + sb.entity + " (" + sb.conn.String() + ")"
}
func (sb *serviceBus) maxBytes() int { return 0 }
func (sb *serviceBus) target() traceTarget {
	return messagingTarget(semconv.MessagingSystemServiceBus, sb.name)
}

func (sb *serviceBus) close(ctx context.Context) error {
	err := sb.s.close(ctx)
	if sb.client != nil {
		err = errors.Join(err, sb.client.Close(ctx))
	}
	return err
}

// sbMessage is m as a Service Bus message.
func sbMessage(m Message, sessions bool) *azservicebus.Message {
	out := &azservicebus.Message{
		MessageID:             ptr(m.ID),
		Body:                  m.Body,
		ContentType:           ptr(m.ContentType()),
		Subject:               ptr(m.Op),
		ApplicationProperties: m.Properties(),
	}
	if m.ev != nil { // an event's subject is its type
		out.Subject = nil
		if m.ev.typ != "" {
			out.Subject = ptr(m.ev.typ)
		}
	}
	if sessions {
		out.SessionID = ptr(m.Key)
	}
	return out
}

func (sb *serviceBus) send(ctx context.Context, msgs []Message) error {
	groups := [][]Message{msgs}
	if sb.sessions {
		groups = byKey(msgs)
	}
	return sendGrouped(ctx, groups, sb.concurrency, sb.tryTimeout,
		func(ctx context.Context, _ string) (sbBatch, error) { return sb.s.newBatch(ctx) },
		func(b sbBatch, m Message) error { return b.add(sbMessage(m, sb.sessions)) },
		sb.s.send, azservicebus.ErrMessageTooLarge, "a Service Bus message batch", "messages")
}

// sendGrouped builds every batch of every group before it sends any (so that a message too
// large for a batch of its own fails the send with nothing sent), then sends each group's
// batches in order, at most concurrency groups at a time. Each call to the service is bounded by
// tryTimeout. newBatch gets the group's key; items names the batch's contents in errors.
func sendGrouped[B interface{ len() int }](ctx context.Context, groups [][]Message, concurrency int, tryTimeout time.Duration,
	newBatch func(ctx context.Context, key string) (B, error), add func(B, Message) error, send func(context.Context, B) error,
	tooLarge error, what, items string) error {
	bounded := func(ctx context.Context, f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, tryTimeout)
		defer cancel()
		return f(ctx)
	}
	batches := make([][]B, len(groups))
	for i, g := range groups {
		var err error
		batches[i], err = buildBatches(g, func() (B, error) {
			var b B
			err := bounded(ctx, func(ctx context.Context) (err error) { b, err = newBatch(ctx, g[0].Key); return err })
			return b, err
		}, add, tooLarge, what)
		if err != nil {
			return err
		}
	}
	return each(ctx, len(batches), concurrency, func(ctx context.Context, i int) error {
		for j, b := range batches[i] {
			if err := bounded(ctx, func(ctx context.Context) error { return send(ctx, b) }); err != nil {
				return fmt.Errorf("sending a batch of %d %s, from %s: %w", b.len(), items, groups[i][firstOf(batches[i], j)].About(), err)
			}
		}
		return nil
	})
}

// firstOf is the index in its group of the first message of batches[j].
func firstOf[B interface{ len() int }](batches []B, j int) int {
	n := 0
	for _, b := range batches[:j] {
		n += b.len()
	}
	return n
}

// buildBatches adds msgs, in order, to batches from newBatch: when add refuses a message with
// tooLarge, the batch is full and the message starts the next; a message an empty batch refuses
// is too large for the service, an error wrapping ErrTooLarge that names its row.
func buildBatches[B interface{ len() int }](msgs []Message, newBatch func() (B, error), add func(B, Message) error, tooLarge error, what string) ([]B, error) {
	var out []B
	for _, m := range msgs {
		if len(out) == 0 {
			b, err := newBatch()
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
		err := add(out[len(out)-1], m)
		if errors.Is(err, tooLarge) && out[len(out)-1].len() > 0 {
			b, nerr := newBatch()
			if nerr != nil {
				return nil, nerr
			}
			out = append(out, b)
			err = add(b, m)
		}
		if errors.Is(err, tooLarge) {
			return nil, fmt.Errorf("%w: %s does not fit in %s on its own (its body is %d bytes); nothing of the batch was sent",
				ErrTooLarge, m.About(), what, len(m.Body))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.About(), err)
		}
	}
	return out, nil
}

// sdkSender is the real sender.
type sdkSender struct{ s *azservicebus.Sender }

type sdkBatch struct{ b *azservicebus.MessageBatch }

func (b sdkBatch) add(m *azservicebus.Message) error { return b.b.AddMessage(m, nil) }
func (b sdkBatch) len() int                          { return int(b.b.NumMessages()) }

func (s sdkSender) newBatch(ctx context.Context) (sbBatch, error) {
	b, err := s.s.NewMessageBatch(ctx, nil)
	if err != nil {
		return nil, err
	}
	return sdkBatch{b}, nil
}

func (s sdkSender) send(ctx context.Context, b sbBatch) error {
	return s.s.SendMessageBatch(ctx, b.(sdkBatch).b, nil)
}

func (s sdkSender) close(ctx context.Context) error { return s.s.Close(ctx) }
