package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// The handler sends OTLP over HTTP itself, as the specification's OTLP/HTTP binary protocol
// says, rather than with the SDK's otlptracehttp and otlpmetrichttp exporters: those link gRPC
// and grpc-gateway (their configuration and the collector service packages import them), which
// cost the handler's every start 5 ms and 4 MB of resident memory (scripts/bench.sh handler),
// with or without telemetry; and the generated protobuf types another 2 ms and 1.4 MB, so
// wire.go writes the messages.

// sender posts one signal's export requests to its endpoint.
type sender struct {
	signal   string // "traces" or "metrics"
	endpoint string
	headers  map[string]string
	gzip     bool
	timeout  time.Duration
	client   *http.Client
}

// newSender reads a signal's standard variables: its endpoint (OTEL_EXPORTER_OTLP_{SIGNAL}_ENDPOINT
// as it is, else OTEL_EXPORTER_OTLP_ENDPOINT with /v1/{signal}), headers, timeout, compression
// and CA certificate; the signal's own variable wins over the general one.
func newSender(getenv func(string) string, signal string) (*sender, error) {
	upper := strings.ToUpper(signal)
	v := func(suffix string) (string, string) { return signalVar(getenv, signal, suffix) }
	s := &sender{signal: signal, headers: map[string]string{}, timeout: 10 * time.Second}
	if name, ep := v("ENDPOINT"); name == "OTEL_EXPORTER_OTLP_"+upper+"_ENDPOINT" {
		s.endpoint = ep
	} else if ep != "" {
		s.endpoint = strings.TrimSuffix(ep, "/") + "/v1/" + signal
	}
	if u, err := url.Parse(s.endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_ENDPOINT (or _%s_ENDPOINT) must be an http or https URL, e.g. http://collector:4318", ErrSetting, upper)
	}
	if name, hs := v("HEADERS"); hs != "" { // the signal's own replace the general ones: they may be another backend's
		for _, kv := range strings.Split(hs, ",") {
			if strings.TrimSpace(kv) == "" {
				continue
			}
			k, val, ok := strings.Cut(kv, "=")
			key, kerr := url.PathUnescape(strings.TrimSpace(k))
			value, verr := url.PathUnescape(strings.TrimSpace(val))
			if !ok || key == "" || kerr != nil || verr != nil {
				return nil, fmt.Errorf("%w: %s: not key=value pairs separated by commas (values percent-encoded)", ErrSetting, name)
			}
			s.headers[key] = value
		}
	}
	if name, t := v("TIMEOUT"); t != "" {
		ms, err := strconv.Atoi(t)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("%w: %s=%s: milliseconds, above 0", ErrSetting, name, t)
		}
		s.timeout = time.Duration(ms) * time.Millisecond
	}
	switch name, c := v("COMPRESSION"); c {
	case "", "none":
	case "gzip":
		s.gzip = true
	default:
		return nil, fmt.Errorf("%w: %s=%s: gzip or none", ErrSetting, name, c)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if name, file := v("CERTIFICATE"); file != "" {
		pem, err := os.ReadFile(file)
		pool := x509.NewCertPool()
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: %s=%s: no PEM certificate read from it (%v)", ErrSetting, name, file, err)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	for _, suffix := range []string{"CLIENT_CERTIFICATE", "CLIENT_KEY"} {
		if name, val := v(suffix); val != "" {
			return nil, fmt.Errorf("%w: %s: client certificates are not supported; authenticate with OTEL_EXPORTER_OTLP_HEADERS, or through a Collector", ErrSetting, name)
		}
	}
	s.client = &http.Client{Transport: transport}
	return s, nil
}

// errPermanent marks an export the endpoint refused for good: it is not tried again.
var errPermanent = errors.New("refused")

// send posts an export request (protobuf, wire.go), trying again on the answers the
// specification calls retryable (429, 502, 503, 504, and no answer), with backoff, within the
// timeout.
func (s *sender) send(ctx context.Context, body []byte) error {
	if s.gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = b.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	wait := 100 * time.Millisecond
	for {
		err := s.post(ctx, body)
		if err == nil || errors.Is(err, errPermanent) {
			return err
		}
		var after time.Duration
		if ra, ok := errors.AsType[retryAfter](err); ok {
			after = ra.d
		}
		d := max(after, wait/2+rand.N(wait))
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %s)", err, context.Cause(ctx))
		case <-time.After(d):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// retryAfter is a retryable answer that said when to come again.
type retryAfter struct {
	d   time.Duration
	msg string
}

func (r retryAfter) Error() string { return r.msg }

func (s *sender) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("OTLP %s: %w: %w", s.signal, errPermanent, err)
	}
	for k, v := range s.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if s.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok { // its URL keeps the query, which may hold a key
			err = ue.Err
		}
		return fmt.Errorf("OTLP %s to %s: %w", s.signal, s.shown(), err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	msg := fmt.Sprintf("OTLP %s to %s: %s", s.signal, s.shown(), resp.Status)
	if t := strings.TrimSpace(string(snippet)); t != "" && utf8Text(t) {
		msg += ": " + t
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return retryAfter{d: time.Duration(secs) * time.Second, msg: msg}
	}
	return fmt.Errorf("%w: %s", errPermanent, msg)
}

// shown is the endpoint without its query and user info, for errors.
func (s *sender) shown() string { return redact.URL(s.endpoint) }

// close lets the sender's idle connections go.
func (s *sender) close() { s.client.CloseIdleConnections() }

// utf8Text says t is printable text (a protobuf Status body is not).
func utf8Text(t string) bool {
	for _, r := range t {
		if r == 0xFFFD || (r < 0x20 && r != '\n' && r != '\t') {
			return false
		}
	}
	return true
}
