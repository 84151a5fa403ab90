package sink

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/messaging"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/eventgrid/azeventgrid"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// eventGridMax is Event Grid's limit for one event and for one publish request: 1 MB.
const eventGridMax = 1 << 20

// eventGridOverhead is room left in a request for the CloudEvent attributes around each body.
const eventGridOverhead = 1024 + traceOverhead

// traceOverhead is room for an event's traceparent and tracestate extensions (55 and at most 512
// characters, with their names and quotes).
const traceOverhead = 600

// eventGrid publishes a CloudEvent 1.0 per message to an Event Grid topic, in requests of at
// most 1 MB, one after the other. The event's id is the message id, its source
// /pseudotrigger/{poller} (or EventSource), its type pseudotrigger.row.{op} (or EventType), its
// subject {poller}/{key}, its data the Change; an outbox event's as event says.
type eventGrid struct {
	c        *azeventgrid.Client
	conn     azconn.Conn
	source   string
	typ      string
	now      func() time.Time
	endpoint string
}

// newEventGrid resolves X__topicEndpointUri (identity based) or X, a connection string
// "Endpoint=https://TOPIC.REGION-1.eventgrid.azure.net/api/events;AccessKey=KEY".
func newEventGrid(cfg Config, getenv func(string) string, opts azcore.ClientOptions, now func() time.Time) (*eventGrid, error) {
	conn, err := azconn.Resolve(getenv, cfg.Connection, "topicEndpointUri", "https://TOPIC.REGION-1.eventgrid.azure.net/api/events", false)
	if err != nil {
		return nil, err
	}
	g := &eventGrid{conn: conn, source: cfg.EventSource, typ: cfg.EventType, now: now}
	copts := &azeventgrid.ClientOptions{ClientOptions: opts}
	if cs := conn.ConnectionString; cs != "" {
		p := azconn.ParseConnectionString(cs)
		g.endpoint = p["endpoint"]
		if err := azconn.CheckServiceURL(g.endpoint, "https://TOPIC.REGION-1.eventgrid.azure.net/api/events"); err != nil || p["accesskey"] == "" {
			return nil, fmt.Errorf("%s: not a connection string Endpoint=https://TOPIC.REGION-1.eventgrid.azure.net/api/events;AccessKey=KEY (%s)", conn.Setting, redact.ConnectionString(cs))
		}
		g.c, err = azeventgrid.NewClientWithSharedKeyCredential(g.endpoint, azcore.NewKeyCredential(p["accesskey"]), copts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", conn.Setting, err)
		}
		return g, nil
	}
	cred, err := conn.Identity.TokenCredential(conn.Setting)
	if err != nil {
		return nil, err
	}
	g.endpoint = conn.Endpoint
	if g.c, err = azeventgrid.NewClient(conn.Endpoint, cred, copts); err != nil {
		return nil, fmt.Errorf("%s: %w", conn.Setting, err)
	}
	return g, nil
}

func (g *eventGrid) String() string                { return "Event Grid topic (" + g.conn.String() + ")" }
func (g *eventGrid) maxBytes() int                 { return eventGridMax - eventGridOverhead }
func (g *eventGrid) close(_ context.Context) error { return nil }
func (g *eventGrid) target() traceTarget {
	host := g.endpoint
	if u, err := url.Parse(g.endpoint); err == nil && u.Host != "" {
		host = u.Host
	}
	return messagingTarget(semconv.MessagingSystemEventGrid, host)
}

// extensions are a CloudEvent's extension attributes: an outbox event's headers, table, and the distributed tracing
// extension's traceparent and tracestate.
func extensions(m Message) map[string]any {
	ext := map[string]any{}
	if m.ev != nil {
		for _, h := range m.ev.headers {
			ext[h.name] = h.value
		}
	}
	if m.Table != "" {
		ext["table"] = m.Table
	}
	if m.TraceParent != "" {
		ext["traceparent"] = m.TraceParent
		if m.TraceState != "" {
			ext["tracestate"] = m.TraceState
		}
	}
	return ext
}

func (g *eventGrid) send(ctx context.Context, msgs []Message) error {
	for _, m := range msgs { // before anything is sent
		if err := checkExtensions(m); err != nil {
			return err
		}
	}
	events := make([]messaging.CloudEvent, 0, len(msgs))
	size, first := 2, ""
	flush := func() error {
		if len(events) == 0 {
			return nil
		}
		if _, err := g.c.PublishCloudEvents(ctx, events, nil); err != nil {
			return fmt.Errorf("publishing %d events, from %s: %w", len(events), first, err)
		}
		events, size = events[:0], 2
		return nil
	}
	at := g.now().UTC()
	for _, m := range msgs {
		ce := cloudEvent(m, g.source, g.typ, at)
		n := len(m.Body) + eventGridOverhead
		if size+n > eventGridMax {
			if err := flush(); err != nil {
				return err
			}
		}
		if len(events) == 0 {
			first = m.About()
		}
		events = append(events, ce)
		size += n
	}
	return flush()
}

// cloudEvent is m as a CloudEvent 1.0, the one rendering of the Event Grid sink and of a
// webhook's event batches: its id the message id, its source source (default
// /pseudotrigger/{poller}), its time the change's commit time where known (else at). A Change's
// type is typ (default pseudotrigger.row.{op}), its subject {poller}/{key}, its data the Change.
// An outbox event's type is the event's (else typ, else pseudotrigger.event), its subject
// {aggregate_type}/{aggregate_id}, its data the payload: JSON as JSON, text as a string, bytes
// as data_base64; its headers are extension attributes (checkExtensions checks their names).
func cloudEvent(m Message, source, typ string, at time.Time) messaging.CloudEvent {
	when := at
	if m.Tx != nil && !m.Tx.CommitTime.IsZero() {
		when = m.Tx.CommitTime.UTC() // the time the change happened
	}
	ce := messaging.CloudEvent{
		ID: m.ID, Source: cmp.Or(source, "/pseudotrigger/"+m.Poller), SpecVersion: "1.0", Time: &when,
		Data: json.RawMessage(m.Body), DataContentType: ptr(contentJSON),
	}
	if m.ev == nil {
		ce.Type = cmp.Or(typ, "pseudotrigger.row."+m.Op)
		subject := m.Poller
		if m.Key != "" {
			subject += "/" + m.Key
		}
		ce.Subject = &subject
	} else {
		ce.Type = cmp.Or(m.ev.typ, typ, "pseudotrigger.event")
		subject := m.ev.aggregateType + "/" + m.ev.aggregateID
		ce.Subject, ce.DataContentType = &subject, ptr(m.ev.contentType)
		switch {
		case IsJSONContent(m.ev.contentType):
		case strings.HasPrefix(m.ev.contentType, "text/") && utf8.Valid(m.Body):
			ce.Data = string(m.Body)
		default:
			ce.Data = m.Body // the SDK writes data_base64
		}
	}
	if m.Table != "" || m.TraceParent != "" || m.ev != nil && len(m.ev.headers) > 0 {
		ce.Extensions = extensions(m)
	}
	return ce
}

// ceAttributes are the CloudEvents attribute names an extension cannot take.
var ceAttributes = []string{"id", "source", "specversion", "type", "datacontenttype", "dataschema", "subject", "time", "data", "traceparent", "tracestate", "table"}

// checkExtensions refuses an outbox event whose headers cannot be CloudEvents extension
// attributes: a name not of lower-case letters and digits (at most 20), or one of the spec's own.
func checkExtensions(m Message) error {
	if m.ev == nil {
		return nil
	}
	for _, h := range m.ev.headers {
		ok := len(h.name) > 0 && len(h.name) <= 20 && !slices.Contains(ceAttributes, h.name)
		for _, c := range []byte(h.name) {
			ok = ok && ('a' <= c && c <= 'z' || '0' <= c && c <= '9')
		}
		if !ok {
			return fmt.Errorf("%w: %s: header %q cannot be a CloudEvents extension attribute, whose names are 1 to 20 lower-case letters and digits, "+
				"other than the spec's own (id, source, type, subject, time, data...): rename it in the headers column; nothing of the batch was sent",
				ErrBadPayload, m.About(), h.name)
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
