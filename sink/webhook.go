package sink

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// webhook POSTs each message as JSON, with headers Idempotency-Key (the message id: the change
// id, or the batch id in batch mode), X-Fencing-Token and the sink's own; signed as Standard
// Webhooks says when it has signing secrets (webhook_sign.go), with an Entra ID token when it
// has auth. An outbox event is POSTed as its payload, with its content type, its id as the
// Idempotency-Key and its headers' entries as HTTP headers (the sink's own win); in mode batch,
// outbox events go many to a POST as CloudEvents (sendEvents). A non-2xx reply or a transport
// error fails the batch.
type webhook struct {
	url         string
	shown       string // the URL without its query and user info
	headers     map[string]string
	client      *http.Client
	concurrency int
	signer      *signer      // nil: requests are not signed
	auth        *tokenSource // nil: no Authorization token
	// events: outbox events go as CloudEvents batches (mode batch, webhook_events.go).
	events bool
	now    func() time.Time // stamps the CloudEvents' time where the change has none
}

// webhookDeps are what a webhook takes from its Sink: the transport tests give, the clock that
// stamps webhook-timestamp, and how a credential is made for auth.
type webhookDeps struct {
	transport policy.Transporter
	now       func() time.Time
	cred      func(id azconn.Identity, setting string) (azcore.TokenCredential, error)
}

// newWebhook makes the webhook of cfg, whose settings expand resolved; raw is the definition
// before that, whose %SETTING% names the signing secrets' setting in errors.
func newWebhook(cfg, raw Config, getenv func(string) string, d webhookDeps) (*webhook, error) {
	timeout := 30 * time.Second
	if cfg.Timeout != "" {
		timeout, _ = time.ParseDuration(cfg.Timeout) // checked by New
	}
	client := &http.Client{Timeout: timeout, Transport: keepAlive(cfg.concurrency())}
	if hc, ok := d.transport.(*http.Client); ok && hc != nil {
		client = &http.Client{Timeout: timeout, Transport: hc.Transport}
	}
	if _, err := url.Parse(cfg.URL); err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	w := &webhook{url: cfg.URL, shown: redact.URL(cfg.URL), headers: cfg.Headers, client: client, concurrency: cfg.concurrency(),
		events: cfg.Mode == ModeBatch, now: d.now}
	if cfg.SigningSecret != "" {
		s, err := newSigner(raw.SigningSecret, cfg.SigningSecret, d.now)
		if err != nil {
			return nil, err
		}
		w.signer = s
	}
	if cfg.Auth != nil {
		a, err := newTokenSource(*cfg.Auth, cfg.URL, getenv, d.cred, timeout)
		if err != nil {
			return nil, err
		}
		w.auth = a
	}
	return w, nil
}

// String says where the webhook posts and, when on, that it signs (and with how many secrets)
// and whose token it sends: what the start-up log line and the status show.
func (w *webhook) String() string {
	out := "POST " + w.shown
	if w.signer != nil {
		out += fmt.Sprintf(", signed with %d secret(s)", len(w.signer.keys))
	}
	if w.auth != nil {
		out += ", Entra ID token for " + w.auth.audience + " as " + w.auth.who
	}
	return out
}

func (w *webhook) maxBytes() int { return 0 }
func (w *webhook) target() traceTarget {
	return traceTarget{name: "send " + w.shown, attrs: []attribute.KeyValue{semconv.HTTPRequestMethodPost, semconv.URLFull(w.shown)}}
}
func (w *webhook) close(_ context.Context) error { w.client.CloseIdleConnections(); return nil }

func (w *webhook) send(ctx context.Context, msgs []Message) error {
	events := w.events && len(msgs) > 0 && msgs[0].ev != nil // an outbox's batch in mode batch
	check := checkHTTPHeaders                                // an event's headers go as HTTP headers, or as extensions in a batch
	if events {
		check = checkExtensions
	}
	for _, m := range msgs { // before anything is sent
		if err := check(m); err != nil {
			return err
		}
	}
	bearer := ""
	if w.auth != nil {
		var err error
		if bearer, err = w.auth.bearer(ctx); err != nil {
			return err
		}
	}
	if events {
		return w.sendEvents(ctx, msgs, bearer)
	}
	return eachInOrder(ctx, msgs, w.concurrency, func(ctx context.Context, m Message) error { return w.post(ctx, m, m.ContentType(), bearer) })
}

// checkHTTPHeaders refuses an outbox event whose headers cannot be HTTP headers: a name that is
// not an HTTP token, or a value holding a line break or a NUL.
func checkHTTPHeaders(m Message) error {
	if m.ev == nil {
		return nil
	}
	for _, h := range m.ev.headers {
		if !validHeader(h.name) || strings.ContainsAny(h.value, "\r\n\x00") {
			return fmt.Errorf("%w: %s: header %q cannot be an HTTP header (names are letters, digits and !#$%%&'*+-.^_`|~; values hold no line break): "+
				"fix it in the headers column; nothing of the batch was sent", ErrBadPayload, m.About(), h.name)
		}
	}
	return nil
}

// post sends m as contentType; bearer is the Authorization header's value ("": none).
func (w *webhook) post(ctx context.Context, m Message, contentType, bearer string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(m.Body))
	if err != nil {
		return fmt.Errorf("%s: %s", m.About(), redact.Text(err.Error()))
	}
	if m.ev != nil { // the sink's own headers and those below win over an event's
		for _, h := range m.ev.headers {
			req.Header.Set(h.name, h.value)
		}
	}
	for k, v := range w.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Idempotency-Key", m.ID)
	req.Header.Set("X-Fencing-Token", strconv.FormatInt(m.FencingToken, 10))
	if m.TraceParent != "" {
		req.Header.Set("traceparent", m.TraceParent)
		if m.TraceState != "" {
			req.Header.Set("tracestate", m.TraceState)
		}
	}
	if w.signer != nil {
		if err := w.signer.sign(req.Header, m.ID, m.Body); err != nil {
			return fmt.Errorf("%s: %w", m.About(), err)
		}
	}
	if bearer != "" {
		req.Header.Set("Authorization", bearer)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %s", m.About(), redact.Text(err.Error()))
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // lets the connection be reused
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s: the webhook answered %s: %s", m.About(), resp.Status, redact.Text(strings.TrimSpace(string(snippet))))
	}
	return nil
}

// keepAlive is a transport that keeps a connection per concurrent request alive between
// batches: the default keeps 2 per host, and 16 concurrent POSTs then dial afresh all the time.
func keepAlive(concurrency int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = concurrency
	return t
}
