package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// ErrSetting is wrapped by Setup's errors: a variable asks for what the handler cannot do. The
// error names it.
var ErrSetting = errors.New("unsupported OpenTelemetry setting")

// Variables are the standard variables the handler honours (docs/telemetry.md's table): those
// Wanted and the OTLP senders read (each OTEL_EXPORTER_OTLP_X but the endpoint also as
// OTEL_EXPORTER_OTLP_TRACES_X and _METRICS_X, which win for their signal), and those the SDK
// reads itself.
var Variables = []string{
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
	"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER",
	"OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	"OTEL_METRIC_EXPORT_INTERVAL", "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
	"OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION",
}

// signalVar is the variable that sets suffix (ENDPOINT, HEADERS, PROTOCOL, ...) for signal
// ("traces", "metrics"), and its value: OTEL_EXPORTER_OTLP_{SIGNAL}_{SUFFIX} when set, else
// OTEL_EXPORTER_OTLP_{SUFFIX}; "" and "" when neither is.
func signalVar(getenv func(string) string, signal, suffix string) (name, value string) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_" + strings.ToUpper(signal) + "_" + suffix, "OTEL_EXPORTER_OTLP_" + suffix} {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return name, v
		}
	}
	return "", ""
}

// Signals says what Setup exports.
type Signals struct {
	Traces, Metrics bool
}

// Any says something is exported.
func (s Signals) Any() bool { return s.Traces || s.Metrics }

// Wanted reads the standard variables: traces are exported when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set and OTEL_TRACES_EXPORTER is not "none"; metrics
// likewise (_METRICS_ENDPOINT, OTEL_METRICS_EXPORTER); nothing when OTEL_SDK_DISABLED is true.
// An exporter other than otlp, or a protocol other than http/protobuf and grpc, is an error
// naming the variable.
func Wanted(getenv func(string) string) (Signals, error) {
	v := func(name string) string { return strings.TrimSpace(getenv(name)) }
	if strings.EqualFold(v("OTEL_SDK_DISABLED"), "true") {
		return Signals{}, nil
	}
	want := func(signal string) (bool, error) {
		upper := strings.ToUpper(signal)
		exporter := "OTEL_" + upper + "_EXPORTER"
		switch e := strings.ToLower(v(exporter)); e {
		case "none":
			return false, nil
		case "", "otlp":
		default:
			return false, fmt.Errorf("%w: %s=%s: this handler exports over OTLP only (otlp or none)", ErrSetting, exporter, e)
		}
		if _, ep := signalVar(getenv, signal, "ENDPOINT"); ep == "" {
			return false, nil
		}
		if name, p := signalVar(getenv, signal, "PROTOCOL"); p != "" && !slices.Contains(Protocols, p) {
			return false, fmt.Errorf("%w: %s=%s: this handler sends OTLP over HTTP with protobuf (http/protobuf, port 4318 by convention) "+
				"or over gRPC (grpc, port 4317)", ErrSetting, name, p)
		}
		return true, nil
	}
	var s Signals
	var err error
	if s.Traces, err = want("traces"); err != nil {
		return Signals{}, err
	}
	if s.Metrics, err = want("metrics"); err != nil {
		return Signals{}, err
	}
	return s, nil
}

var enabled, measured atomic.Bool

// Enabled says Setup installs an exporter of traces: the handler then continues the host's trace
// context and carries its own into the messages the sinks send. Without it (and without a
// tracer given to the tick) no span is started at all.
func Enabled() bool { return enabled.Load() }

// Measured says Setup installs an exporter of metrics; without it (and without instruments given
// to the tick) no measurement is made.
func Measured() bool { return measured.Load() }

// Setup installs the global tracer and meter providers that export over OTLP (HTTP with
// protobuf, or gRPC), as the standard variables say (Wanted; then the endpoint, headers, timeout, compression, CA
// certificate, temporality and histogram variables, and the SDK's own: sampler, intervals), with
// the resource the service.* variables and the app describe: service.name is OTEL_SERVICE_NAME,
// else the function app's name (appName), else "pseudotrigger". It returns what it set up and a shutdown
// that flushes and stops the exporters. Export failures are logged as warnings, with no header or
// key.
func Setup(ctx context.Context, getenv func(string) string, appName, instance, version string, log *slog.Logger) (Signals, func(context.Context) error, error) {
	noop := func(context.Context) error { return nil }
	s, err := Wanted(getenv)
	if err != nil || !s.Any() {
		return Signals{}, noop, err
	}
	res, err := newResource(ctx, getenv, appName, instance, version)
	if err != nil {
		return Signals{}, noop, err
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("telemetry not exported", "error", exportError(err))
	}))
	// The SDK's own log (its errors: a variable it could not parse, with its value) goes to the
	// handler's log, redacted, not to stderr, which the host logs as errors line by line.
	otel.SetLogger(logr.FromSlogHandler(redacting{log.Handler()}))
	var stops []func(context.Context) error
	shutdown := func(ctx context.Context) error {
		var errs []error
		for _, stop := range stops {
			errs = append(errs, stop(ctx))
		}
		return errors.Join(errs...)
	}
	// Every setting is read and every exporter made before any is installed: a bad setting
	// leaves OpenTelemetry's no-op globals as they were, not half of it on.
	var (
		traces, metrics *otlpConfig
		spans           sdktrace.SpanExporter
		points          sdkmetric.Exporter
	)
	if s.Traces {
		if traces, err = readOTLP(getenv, "traces"); err != nil {
			return Signals{}, noop, err
		}
	}
	if s.Metrics {
		if metrics, err = readOTLP(getenv, "metrics"); err != nil {
			return Signals{}, noop, err
		}
		if points, err = newMetricExporter(ctx, getenv, metrics); err != nil {
			return Signals{}, noop, err
		}
	}
	if traces != nil {
		if spans, err = newSpanExporter(ctx, traces); err != nil {
			if points != nil {
				_ = points.Shutdown(ctx)
			}
			return Signals{}, noop, fmt.Errorf("OpenTelemetry span exporter: %w", err)
		}
	}
	var endpoints []string
	if spans != nil {
		// The export timeout bounds an export, its retries included (the HTTP exporters' timeout
		// is each attempt's).
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans, sdktrace.WithExportTimeout(traces.timeout)), sdktrace.WithResource(res))
		otel.SetTracerProvider(tp)
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
		stops = append(stops, tp.Shutdown)
		enabled.Store(true)
		endpoints = append(endpoints, traces.shown()+" ("+traces.protocol+")")
	}
	if points != nil {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(points, sdkmetric.WithTimeout(metrics.timeout))), sdkmetric.WithResource(res))
		otel.SetMeterProvider(mp)
		stops = append(stops, mp.Shutdown)
		measured.Store(true)
		endpoints = append(endpoints, metrics.shown()+" ("+metrics.protocol+")")
	}
	var set []string // names only: the headers hold keys
	for _, name := range Variables {
		names := []string{name}
		if rest, ok := strings.CutPrefix(name, "OTEL_EXPORTER_OTLP_"); ok && !strings.Contains(rest, "_") && rest != "ENDPOINT" {
			names = append(names, "OTEL_EXPORTER_OTLP_TRACES_"+rest, "OTEL_EXPORTER_OTLP_METRICS_"+rest)
		}
		for _, n := range names {
			if strings.TrimSpace(getenv(n)) != "" {
				set = append(set, n)
			}
		}
	}
	log.Info("OpenTelemetry exports over OTLP", "traces", s.Traces, "metrics", s.Metrics,
		"endpoints", endpoints, "service_name", serviceName(res), "settings", set)
	return s, shutdown, nil
}

// newResource describes the process: the service.* and OTEL_RESOURCE_ATTRIBUTES variables first,
// then the function app.
func newResource(ctx context.Context, getenv func(string) string, appName, instance, version string) (*resource.Resource, error) {
	name := strings.TrimSpace(getenv("OTEL_SERVICE_NAME"))
	if name == "" {
		name = appName
	}
	if name == "" {
		name = "pseudotrigger"
	}
	attrs := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(name), semconv.ServiceVersion(version),
		semconv.ServiceInstanceID(instance))
	if getenv("WEBSITE_SITE_NAME") != "" {
		attrs, _ = resource.Merge(attrs, resource.NewWithAttributes(semconv.SchemaURL,
			semconv.CloudProviderAzure, semconv.CloudPlatformAzureFunctions, semconv.FaaSName(appName)))
	}
	// Detected attributes of the variables win over the app's (resource.Merge keeps the second's).
	env, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	res, err := resource.Merge(attrs, env)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	return res, nil
}

// serviceName is res's service.name.
func serviceName(res *resource.Resource) string {
	v, _ := res.Set().Value(semconv.ServiceNameKey)
	return v.AsString()
}

// exportError is how an export's failure is logged: without the keys a URL's query or a header
// may hold (redact.Text), and at most 300 bytes of printable text (the SDK puts up to 4 MiB of
// the answer's body in its error, an HTML page or a protobuf Status).
func exportError(err error) string {
	s := strings.Map(func(r rune) rune {
		if r == utf8.RuneError || (r < 0x20 && r != '\t') || r == 0x7f {
			return -1
		}
		return r
	}, redact.Text(err.Error()))
	if len(s) > 300 {
		s = strings.ToValidUTF8(s[:300], "") + "..."
	}
	return s
}

// redacting is a slog.Handler that passes the message and each string attribute through
// redact.Text: what the SDK logs may hold a header's value or an endpoint's query.
type redacting struct{ slog.Handler }

func (h redacting) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, redact.Text(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h redacting) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = redactAttr(a)
	}
	return redacting{h.Handler.WithAttrs(out)}
}

// redactAttr is a with its string or error value redacted.
func redactAttr(a slog.Attr) slog.Attr {
	switch v := a.Value.Resolve(); {
	case v.Kind() == slog.KindString:
		a.Value = slog.StringValue(redact.Text(v.String()))
	case v.Kind() == slog.KindAny:
		if err, ok := v.Any().(error); ok {
			a.Value = slog.StringValue(redact.Text(err.Error()))
		}
	}
	return a
}

func (h redacting) WithGroup(name string) slog.Handler { return redacting{h.Handler.WithGroup(name)} }
