// Package sink sends a poller's batches to a service before the tick commits: a webhook, an
// Azure Storage Queue, a Service Bus queue or topic, an Event Hub or an Event Grid topic. Output
// bindings cannot do this safely (the host writes a custom handler's outputs after the
// invocation returned, after the commit), so a sink is an in-process SDK call that completes, for
// every message of the batch, before the batch counts as delivered.
//
// Each row becomes one message, a Change (or, with Mode "batch", the batch becomes one Batch
// message). A message's id is derived from the poller, the row's key and its cursor value only,
// so a batch that failed midway and comes again repeats the messages already sent with the same
// ids: consumers deduplicate on that id (Service Bus duplicate detection does it for them). A
// message larger than the service takes fails the batch with ErrTooLarge and the row's key; no
// row is dropped. The rows of an outbox (poller.WithOutbox) are sent as the events they hold
// instead: each one's payload as the body, under the event's id, keyed by its aggregate
// (outbox.go, docs/sinks.md's "Outbox events").
//
// A Go poller uses a sink as its handler:
//
//	s := sink.MustNew(sink.Config{Type: sink.StorageQueue, Connection: "ChangesQueue", Queue: "orders-changes"})
//	poller.New("orders-queue", "orders", poller.TimestampPK, sink.Handler[Order](s),
//		poller.WithSetup(s.Setup), poller.WithTarget(s.String))
//
// and a declared poller (a <name>/poller.json) names it in its "sink" object, which is a Config.
//
// [New] checks a definition without connecting; [Sink.Setup], which poller.WithSetup runs before
// the poller's first tick, resolves its connection from the app settings as a Functions binding
// does (Config.Connection) and creates the client, still sending nothing; [Messages] renders a
// batch as the service receives it. A poller with a webhook sink runs in a test with package
// pollertest against an httptest.Server (the example of [Handler]); for the other services the
// examples build the messages ([Messages], [ChangeID]) and set the sinks up without sending
// ([Sink.Setup]). docs/sinks.md compares the services, their ids, ordering and limits.
package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// The sink types (Config.Type).
const (
	Webhook      = "webhook"
	StorageQueue = "storagequeue"
	ServiceBus   = "servicebus"
	EventHubs    = "eventhubs"
	EventGrid    = "eventgrid"
)

// Types lists the sink types, in the order the documentation gives them.
var Types = []string{Webhook, StorageQueue, ServiceBus, EventHubs, EventGrid}

// The message modes (Config.Mode).
const (
	ModeRow   = "row"   // a message per row (the default)
	ModeBatch = "batch" // a message per batch
)

// ErrTooLarge is wrapped by the error of a batch holding a message the service cannot take; the
// error names the row's key (or the batch).
var ErrTooLarge = errors.New("message too large")

// ErrConfig is wrapped by the errors of New: a sink definition that can never work.
var ErrConfig = errors.New("bad sink definition")

// Sink sends batches to one target. New checks its definition; Setup reads its connection from
// the app settings and creates the client; Send (or Handler) sends. A Sink is safe for concurrent
// use once set up.
type Sink struct {
	cfg    Config
	t      transport
	client azcore.ClientOptions // tests point the SDK at their servers
	// now stamps CloudEvents; tests fix it.
	now func() time.Time
	// target is what the send spans say of the destination (trace.go), made by Setup.
	target traceTarget
	// cred makes a webhook auth's credential (nil: azconn's rule); tests give a fake.
	cred func(id azconn.Identity, setting string) (azcore.TokenCredential, error)
}

// transport is one service's sending: every message or an error.
type transport interface {
	send(ctx context.Context, msgs []Message) error
	// maxBytes is the largest message body the transport can send (0: the service decides, per
	// batch).
	maxBytes() int
	String() string
	close(ctx context.Context) error
	// target describes the destination to the send's span (trace.go).
	target() traceTarget
}

// New checks cfg and returns a sink that Setup connects. Its errors wrap ErrConfig and name the
// field at fault, as poller.json names it ("sink.queue").
func New(cfg Config) (*Sink, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return &Sink{cfg: cfg, now: time.Now}, nil
}

// MustNew is New for definitions written in code: it panics on an error.
func MustNew(cfg Config) *Sink {
	s, err := New(cfg)
	if err != nil {
		panic("sink.MustNew: " + err.Error())
	}
	return s
}

// Config returns the sink's definition.
func (s *Sink) Config() Config { return s.cfg }

// Setup resolves the sink's connection and settings (%NAME% references) from the app settings
// and creates its client. It sends nothing. Errors name the setting at fault and hold no secret.
func (s *Sink) Setup(getenv func(string) string) error {
	var (
		t   transport
		err error
	)
	cfg, err := s.cfg.expand(getenv)
	if err != nil {
		return err
	}
	opts := s.client
	if opts.Telemetry.ApplicationID == "" {
		opts.Telemetry.ApplicationID = "pseudotrigger"
	}
	opts.Retry = azconn.Retry(opts.Retry, 30*time.Second)
	switch cfg.Type {
	case Webhook:
		t, err = newWebhook(cfg, s.cfg, getenv, webhookDeps{transport: opts.Transport, now: s.now, cred: s.cred})
	case StorageQueue:
		t, err = newStorageQueue(cfg, getenv, opts)
	case ServiceBus:
		t, err = newServiceBus(cfg, getenv, opts)
	case EventHubs:
		t, err = newEventHubs(cfg, getenv, opts)
	case EventGrid:
		t, err = newEventGrid(cfg, getenv, opts, s.now)
	}
	if err != nil {
		return fmt.Errorf("sink %s: %w", cfg.Type, err)
	}
	s.t, s.target = t, t.target()
	return nil
}

// String describes the sink's target without secrets ("" before Setup).
func (s *Sink) String() string {
	if s.t == nil {
		return ""
	}
	return s.t.String()
}

// Close releases the sink's connections.
func (s *Sink) Close(ctx context.Context) error {
	if s.t == nil {
		return nil
	}
	return s.t.close(ctx)
}

// Send sends every row of b (or b as one message, in batch mode) and returns when the service
// confirmed all of them, or with the first error. Nothing is sent when a message is too large.
// A b made by hand carries the fields of the poller's batch, Tables too (the message ids of a
// poller of several tables mix in each row's table).
func (s *Sink) Send(ctx context.Context, b *poller.Batch[poller.Row]) error {
	if s.t == nil {
		return fmt.Errorf("sink %s: not set up (call Setup, or poller.WithSetup(s.Setup))", s.cfg.Type)
	}
	if b.Outbox != nil {
		if err := s.cfg.CheckOutbox(); err != nil {
			return err
		}
	}
	msgs, err := Messages(b, s.cfg.Mode)
	if err != nil {
		return err
	}
	if limit := s.t.maxBytes(); limit > 0 {
		for _, m := range msgs {
			if n := len(m.Body); n > limit {
				return fmt.Errorf("sink %s: %w: %s is %d bytes as a message, over the %d the service takes; nothing of the batch was sent",
					s.cfg.Type, ErrTooLarge, m.About(), n, limit)
			}
		}
	}
	ctx, span := startSend(ctx, s.target, msgs)
	err = s.t.send(ctx, msgs)
	endSend(span, err)
	if err != nil {
		return fmt.Errorf("sink %s (%s): %w", s.cfg.Type, s.t, err)
	}
	return nil
}

// Handler returns a poller handler that sends each batch's rows through s, for any row type.
func Handler[T any](s *Sink) func(ctx context.Context, b *poller.Batch[T]) error {
	return func(ctx context.Context, b *poller.Batch[T]) error {
		return s.Send(ctx, &poller.Batch[poller.Row]{
			Poller: b.Poller, ID: b.ID, FencingToken: b.FencingToken, Attempt: b.Attempt,
			From: b.From, To: b.To, Tables: b.Tables, Rows: b.Raw, Raw: b.Raw, Outbox: b.Outbox,
		})
	}
}
