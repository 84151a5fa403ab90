package telemetry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc/credentials"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// The handler exports with the SDK's OTLP exporters (otlptracehttp and otlpmetrichttp, or their
// gRPC twins when OTEL_EXPORTER_OTLP_PROTOCOL=grpc), which also retry what the specification
// calls retryable. It reads the exporters' variables itself first (readOTLP) and hands them over
// as options, so that a value the SDK would ignore with a warning is refused at start-up, naming
// the variable.

// Protocols are the OTEL_EXPORTER_OTLP_PROTOCOL values the handler speaks.
var Protocols = []string{"http/protobuf", "grpc"}

// otlpConfig is one signal's export settings, as the standard variables give them.
type otlpConfig struct {
	signal   string // "traces" or "metrics"
	protocol string // one of Protocols
	endpoint string // the URL requests go to
	headers  map[string]string
	timeout  time.Duration
	gzip     bool
	roots    *x509.CertPool // the CA certificate's, nil for the system's
}

// readOTLP reads a signal's variables: protocol, endpoint (OTEL_EXPORTER_OTLP_{SIGNAL}_ENDPOINT as
// it is, else OTEL_EXPORTER_OTLP_ENDPOINT, with /v1/{signal} appended over HTTP), headers, timeout,
// compression and CA certificate; the signal's own variable wins over the general one.
func readOTLP(getenv func(string) string, signal string) (*otlpConfig, error) {
	upper := strings.ToUpper(signal)
	v := func(suffix string) (string, string) { return signalVar(getenv, signal, suffix) }
	c := &otlpConfig{signal: signal, protocol: "http/protobuf", headers: map[string]string{}, timeout: 10 * time.Second}
	if _, p := v("PROTOCOL"); p != "" {
		c.protocol = p // Wanted refused the others
	}
	// The SDK also parses the general variables and the signal's own from the environment, and
	// logs a bad one (its value with it) to stderr: each is checked here, the one not used too.
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_" + upper + "_ENDPOINT"} {
		if ep := strings.TrimSpace(getenv(name)); ep != "" {
			if err := checkEndpoint(name, ep); err != nil {
				return nil, err
			}
		}
	}
	headers := map[string]map[string]string{} // by variable
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_" + upper + "_HEADERS"} {
		h, err := parseHeaders(name, getenv(name))
		if err != nil {
			return nil, err
		}
		headers[name] = h
	}
	endpointVar, ep := v("ENDPOINT")
	if endpointVar == "OTEL_EXPORTER_OTLP_"+upper+"_ENDPOINT" || c.protocol == "grpc" {
		c.endpoint = ep
	} else if ep != "" {
		c.endpoint = strings.TrimSuffix(ep, "/") + "/v1/" + signal
	}
	if c.endpoint == "" {
		return nil, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_ENDPOINT (or _%s_ENDPOINT) must be an http or https URL, e.g. http://collector:4318 (http/protobuf) or http://collector:4317 (grpc)", ErrSetting, upper)
	}
	if name, _ := v("HEADERS"); name != "" { // the signal's own replace the general ones: they may be another backend's
		c.headers = headers[name]
	}
	if name, t := v("TIMEOUT"); t != "" {
		ms, err := strconv.Atoi(t)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("%w: %s=%s: milliseconds, above 0", ErrSetting, name, t)
		}
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	switch name, z := v("COMPRESSION"); z {
	case "", "none":
	case "gzip":
		c.gzip = true
	default:
		return nil, fmt.Errorf("%w: %s=%s: gzip or none", ErrSetting, name, z)
	}
	if name, file := v("CERTIFICATE"); file != "" {
		if strings.HasPrefix(c.endpoint, "http://") {
			// The SDK refuses a CA with a plain-text endpoint (HTTP), or speaks TLS to it (gRPC).
			return nil, fmt.Errorf("%w: %s is set but %s is http://: a CA certificate is for an https:// endpoint", ErrSetting, name, endpointVar)
		}
		pem, err := os.ReadFile(file)
		c.roots = x509.NewCertPool()
		if err != nil || !c.roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: %s=%s: no PEM certificate read from it (%v)", ErrSetting, name, file, err)
		}
	}
	for _, suffix := range []string{"CLIENT_CERTIFICATE", "CLIENT_KEY"} {
		if name, val := v(suffix); val != "" {
			return nil, fmt.Errorf("%w: %s: client certificates are not supported; authenticate with OTEL_EXPORTER_OTLP_HEADERS, or through a Collector", ErrSetting, name)
		}
	}
	return c, nil
}

// checkEndpoint refuses an endpoint (the variable name's value) that is not an http or https URL
// with a host, or that carries a query or user info: the SDK's exporters send to the scheme, host
// and path alone, so a key there would be dropped without a word (it goes in the headers).
func checkEndpoint(name, ep string) error {
	u, err := url.Parse(ep)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("%w: %s must be an http or https URL, e.g. http://collector:4318 (http/protobuf) or http://collector:4317 (grpc)", ErrSetting, name)
	case u.RawQuery != "" || u.User != nil:
		return fmt.Errorf("%w: %s has a query or user info, which the OTLP exporters do not send: give a key in OTEL_EXPORTER_OTLP_HEADERS (e.g. api-key=..., Authorization=Basic ...)", ErrSetting, name)
	}
	return nil
}

// parseHeaders reads the headers variable name's value hs: key=value pairs separated by commas,
// values percent-encoded.
func parseHeaders(name, hs string) (map[string]string, error) {
	headers := map[string]string{}
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
		headers[key] = value
	}
	return headers, nil
}

// shown is the endpoint without its query and user info, for logs.
func (c *otlpConfig) shown() string { return redact.URL(c.endpoint) }

// retry is how an export is tried again: as the SDK does (the answers and codes the
// specification calls retryable, with jittered backoff), from 100 ms up to 5 s apart, within the
// timeout rather than the SDK's minute, so that the flush at shutdown ends within it.
func (c *otlpConfig) retry() otlptracehttp.RetryConfig {
	return otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 100 * time.Millisecond, MaxInterval: 5 * time.Second, MaxElapsedTime: c.timeout}
}

// tlsConfig is the TLS configuration of a CA certificate's pool, nil without one.
func (c *otlpConfig) tlsConfig() *tls.Config {
	if c.roots == nil {
		return nil
	}
	return &tls.Config{RootCAs: c.roots, MinVersion: tls.VersionTLS12}
}

// newSpanExporter makes the SDK's span exporter of c.
func newSpanExporter(ctx context.Context, c *otlpConfig) (sdktrace.SpanExporter, error) {
	if c.protocol == "grpc" {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(c.endpoint), otlptracegrpc.WithHeaders(c.headers), otlptracegrpc.WithTimeout(c.timeout),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig(c.retry()))}
		if c.gzip {
			opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
		}
		if tc := c.tlsConfig(); tc != nil {
			opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(tc)))
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(c.endpoint), otlptracehttp.WithHeaders(c.headers), otlptracehttp.WithTimeout(c.timeout),
		otlptracehttp.WithRetry(c.retry())}
	if c.gzip {
		opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	}
	if tc := c.tlsConfig(); tc != nil {
		opts = append(opts, otlptracehttp.WithTLSClientConfig(tc))
	}
	return otlptracehttp.New(ctx, opts...)
}

// newMetricExporter makes the SDK's metric exporter of c, with the temporality and histogram
// aggregation the standard variables choose (metrics.go).
func newMetricExporter(ctx context.Context, getenv func(string) string, c *otlpConfig) (sdkmetric.Exporter, error) {
	temporality, aggregation, err := metricSelectors(getenv)
	if err != nil {
		return nil, err
	}
	if c.protocol == "grpc" {
		opts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpointURL(c.endpoint), otlpmetricgrpc.WithHeaders(c.headers), otlpmetricgrpc.WithTimeout(c.timeout),
			otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig(c.retry())),
			otlpmetricgrpc.WithTemporalitySelector(temporality), otlpmetricgrpc.WithAggregationSelector(aggregation)}
		if c.gzip {
			opts = append(opts, otlpmetricgrpc.WithCompressor("gzip"))
		}
		if tc := c.tlsConfig(); tc != nil {
			opts = append(opts, otlpmetricgrpc.WithTLSCredentials(credentials.NewTLS(tc)))
		}
		e, err := otlpmetricgrpc.New(ctx, opts...)
		return quietExporter{e}, err
	}
	opts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpointURL(c.endpoint), otlpmetrichttp.WithHeaders(c.headers), otlpmetrichttp.WithTimeout(c.timeout),
		otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig(c.retry())),
		otlpmetrichttp.WithTemporalitySelector(temporality), otlpmetrichttp.WithAggregationSelector(aggregation)}
	if c.gzip {
		opts = append(opts, otlpmetrichttp.WithCompression(otlpmetrichttp.GzipCompression))
	}
	if tc := c.tlsConfig(); tc != nil {
		opts = append(opts, otlpmetrichttp.WithTLSClientConfig(tc))
	}
	e, err := otlpmetrichttp.New(ctx, opts...)
	return quietExporter{e}, err
}
