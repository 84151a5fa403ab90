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

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// webhook POSTs each message as JSON, with headers Idempotency-Key (the message id: the change
// id, or the batch id in batch mode), X-Fencing-Token and the sink's own. An outbox event is
// POSTed as its payload, with its content type, its id as the Idempotency-Key and its headers'
// entries as HTTP headers (the sink's own win). A non-2xx reply or a transport error fails the
// batch.
type webhook struct {
	url         string
	shown       string // the URL without its query and user info
	headers     map[string]string
	client      *http.Client
	concurrency int
}

func newWebhook(cfg Config, t policy.Transporter) (*webhook, error) {
	timeout := 30 * time.Second
	if cfg.Timeout != "" {
		timeout, _ = time.ParseDuration(cfg.Timeout) // checked by New
	}
	client := &http.Client{Timeout: timeout, Transport: keepAlive(cfg.concurrency())}
	if hc, ok := t.(*http.Client); ok && hc != nil {
		client = &http.Client{Timeout: timeout, Transport: hc.Transport}
	}
	if _, err := url.Parse(cfg.URL); err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	return &webhook{url: cfg.URL, shown: redact.URL(cfg.URL), headers: cfg.Headers, client: client, concurrency: cfg.concurrency()}, nil
}

func (w *webhook) String() string { return "POST " + w.shown }
func (w *webhook) maxBytes() int  { return 0 }
func (w *webhook) target() traceTarget {
	return traceTarget{name: "send " + w.shown, attrs: []attribute.KeyValue{semconv.HTTPRequestMethodPost, semconv.URLFull(w.shown)}}
}
func (w *webhook) close(_ context.Context) error { w.client.CloseIdleConnections(); return nil }

func (w *webhook) send(ctx context.Context, msgs []Message) error {
	for _, m := range msgs { // before anything is sent
		if err := checkHTTPHeaders(m); err != nil {
			return err
		}
	}
	return eachInOrder(ctx, msgs, w.concurrency, w.post)
}

// checkHTTPHeaders refuses an outbox event whose headers cannot be HTTP headers: a name that is
// not an HTTP token, or a value holding a line break or a NUL.
func checkHTTPHeaders(m Message) error {
	if m.ev == nil {
		return nil
	}
	for _, h := range m.ev.headers {
		ok := h.name != "" && !strings.ContainsAny(h.value, "\r\n\x00")
		for _, c := range []byte(h.name) {
			ok = ok && c > ' ' && c < 0x7f && !strings.ContainsRune(`"(),/:;<=>?@[\]{}`, rune(c))
		}
		if !ok {
			return fmt.Errorf("%w: %s: header %q cannot be an HTTP header (names are letters, digits and !#$%%&'*+-.^_`|~; values hold no line break): "+
				"fix it in the headers column; nothing of the batch was sent", ErrBadPayload, m.About(), h.name)
		}
	}
	return nil
}

func (w *webhook) post(ctx context.Context, m Message) error {
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
	req.Header.Set("Content-Type", m.ContentType())
	req.Header.Set("Idempotency-Key", m.ID)
	req.Header.Set("X-Fencing-Token", strconv.FormatInt(m.FencingToken, 10))
	if m.TraceParent != "" {
		req.Header.Set("traceparent", m.TraceParent)
		if m.TraceState != "" {
			req.Header.Set("tracestate", m.TraceState)
		}
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
