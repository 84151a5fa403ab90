// Package handler is the Azure Functions custom handler: an http.Handler that answers the host's
// start-up probe and runs one tick per timer invocation of a poller.
//
// The binary (cmd/handler) is, apart from signals, a graceful Drain and telemetry, this:
//
//	app, err := handler.New(handler.Options{Pollers: pollers.All()}) // and the declared pollers
//	if err != nil {
//		return err // a name declared twice
//	}
//	return http.ListenAndServe("127.0.0.1:"+os.Getenv("FUNCTIONS_CUSTOMHANDLER_PORT"), app.Routes())
//
// A poller author never changes it: adding a poller to pollers.All (or a poller.json folder) is
// enough. Its settings are the app settings docs/contract.md lists.
//
// The host POSTs {"Data":{...},"Metadata":{...}} to /{FunctionName} on
// 127.0.0.1:$FUNCTIONS_CUSTOMHANDLER_PORT and expects a JSON reply
// {"Outputs":{},"Logs":[...],"ReturnValue":...}. A failed tick answers 500 with {"error": ...};
// the host drops a failed reply's body, so the error is logged to stdout first (slog JSON: the
// host records stdout as information and every stderr line as an error).
package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/declared"
	"github.com/pseudotrigger/pseudotrigger/internal/faultpoint"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/liveness"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/telemetry"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/internal/version"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// MaxBodyBytes caps an invocation's body; a timer invocation is well under 4 KiB.
const MaxBodyBytes = 1 << 20

// App holds the configuration of every poller of the app (Options.Pollers and the declared ones)
// and runs their ticks.
type App struct {
	log      *slog.Logger
	getenv   func(string) string
	appName  string
	owner    string
	clock    clock.Clock
	store    lease.Store
	storeErr error
	draining chan struct{}
	drainOne sync.Once
	pollers  map[string]*pollerState
	marker   *liveness.Marker // nil while the state store is not usable
	pools    *source.Pools    // one connection pool per database, shared by the pollers on it
	noProbe  bool
	tracer   trace.Tracer       // the ticks' (nil: telemetry.ActiveTracer's)
	metrics  *telemetry.Metrics // the ticks' and the handler's (nil: telemetry.Active's)
	// traced: the host's trace context is continued (an exporter of traces is set up).
	traced bool
}

type pollerState struct {
	def      *pollerdef.Def
	settings appsettings.Settings
	err      error // bad settings or setup: every invocation fails with it

	mu     sync.Mutex
	runner *tick.Runner // opened on first use

	lettersMu sync.Mutex
	lettersAt time.Time // when this process last listed the poller's dead letters (zero: never)
	letters   int       // how many it found
}

// deadLettersEvery is how often the handler lists a poller's dead letters (and right after a tick
// that wrote one): while there are any, each listing logs a "dead letters" line, which the
// dead-letters alert rule counts (its window, 15 minutes by default, holds three of them).
const deadLettersEvery = 5 * time.Minute

// Options configure an App. Zero values take the defaults.
type Options struct {
	Getenv func(string) string // the app settings; default os.Getenv
	Logger *slog.Logger        // default: JSON to stdout
	// Pollers are the app's Go pollers (pollers.All()). New adds the declared ones: each folder
	// with a poller.json under the app's root (the setting AzureWebJobsScriptRoot, else the
	// working directory; docs/pollers.md, "A declared poller"), and fails on a name declared both
	// ways.
	Pollers []*poller.Poller
	// Environ lists the settings' names, to warn of a misspelt one (default: the environment's).
	Environ func() []string
	// TracerProvider and MeterProvider receive the ticks' spans and metrics (package telemetry);
	// nil: OpenTelemetry's global ones, which telemetry.Setup sets when the OTEL_ variables ask
	// for an exporter. The host's trace context (a traceparent header) is continued when a
	// TracerProvider is given or Setup exports traces.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

// internals are what the package's own tests set besides Options (export_test.go).
type internals struct {
	Clock clock.Clock // default clock.System, shifted by a test build's PSEUDOTRIGGER_CLOCK_OFFSET
	// StoreOptions go to the blob store (tests count or cut requests through them).
	StoreOptions *blobstore.Options
	// Store replaces the blob store the settings name (an in-memory store).
	Store lease.Store
	// NoProbe leaves the status function's rows without a live probe of the sources (tests of
	// the page that open no source).
	NoProbe bool
}

// New reads the app's pollers (Options.Pollers and the declared ones), the settings of the
// state store and of every poller, and logs what is wrong. A bad state store setting fails every
// invocation; a poller's bad setting or poller.json fails that poller's. New fails only on what
// no invocation could get past: a poller declared both in Go and as a folder, and, in a test
// build with fault points, a bad clock offset.
func New(o Options) (*App, error) { return newApp(o, internals{}) }

// newApp is New with the tests' knobs.
func newApp(o Options, in internals) (*App, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewJSONHandler(os.Stdout, nil))
	}
	for i, p := range o.Pollers {
		if p == nil {
			return nil, fmt.Errorf("handler: Options.Pollers[%d] is nil: list the pollers poller.New made (pollers.All())", i)
		}
	}
	root := declared.Root(o.Getenv)
	defs, err := declared.Load(root, o.Pollers)
	if err != nil {
		return nil, fmt.Errorf("the pollers of %s: %w", root, err)
	}
	if in.Clock == nil {
		in.Clock = clock.System{}
		if faultpoint.Enabled { // a test build: never deploy one
			off, err := faultpoint.ClockOffset()
			if err != nil {
				return nil, fmt.Errorf("the test build's clock: %w", err)
			}
			o.Logger.Warn("this is a test build with fault points compiled in", "clock_offset", off.String())
			if off != 0 {
				in.Clock = clock.Offset(in.Clock, off)
			}
		}
	}
	a := &App{log: o.Logger, getenv: o.Getenv, clock: in.Clock, draining: make(chan struct{}), pollers: map[string]*pollerState{}, noProbe: in.NoProbe,
		traced: o.TracerProvider != nil || telemetry.Enabled()}
	if o.TracerProvider != nil {
		a.tracer = telemetry.Tracer(o.TracerProvider)
	}
	if o.MeterProvider != nil {
		a.metrics = telemetry.NewMetrics(o.MeterProvider)
	}
	a.appName = appsettings.AppName(o.Getenv)
	instance := strings.TrimSpace(o.Getenv("WEBSITE_INSTANCE_ID"))
	if instance == "" {
		instance = hostname()
	}
	if len(instance) > 12 {
		instance = instance[:12]
	}
	owner, err := lease.NewOwnerID(a.appName+"/"+instance, nil)
	if err != nil {
		a.storeErr = err
	}
	a.owner = owner

	if in.Store != nil {
		a.store = in.Store
	} else if settings, err := blobstore.SettingsFromEnv(o.Getenv); err != nil {
		a.storeErr = err
	} else if st, err := blobstore.New(settings, in.StoreOptions); err != nil {
		a.storeErr = err
	} else {
		a.store = st
		a.log.Info("state store", "store", st.String(), "app", a.appName, "owner", a.owner)
	}
	if a.storeErr != nil {
		a.log.Error("state store not usable: every invocation will fail", "error", a.storeErr.Error())
	} else if st, ok := a.store.(store.Store); ok {
		a.marker = &liveness.Marker{Store: st, App: a.appName, Owner: a.owner, Clock: a.clock, Logger: a.log}
	}

	poolSize, poolErr := appsettings.PoolSize(o.Getenv)
	if poolErr != nil {
		a.log.Error("every poller's invocations will fail", "error", poolErr.Error(), "setting", appsettings.PoolSizeSetting)
	}
	a.pools = source.NewPools(poolSize)
	for _, d := range defs {
		ps := &pollerState{def: d}
		ps.settings, ps.err = appsettings.Load(d, o.Getenv)
		if ps.err == nil {
			ps.err = poolErr
		}
		if ps.err == nil {
			if err := d.Setup(o.Getenv); err != nil {
				ps.err = fmt.Errorf("setup: %w", err)
			}
		}
		if ps.err != nil {
			a.log.Error("poller not usable: its invocations will fail", "poller", d.Name(), "error", ps.err.Error())
		} else {
			if ps.settings.Schedule == "" {
				// The host leaves this function out (it cannot resolve its schedule) and runs the
				// others: an error of this poller alone, naming the setting.
				p := appsettings.Prefix(d.Name())
				a.log.Error("poller not scheduled: "+p+"_SCHEDULE is not set, so the Functions host cannot resolve %"+p+"_SCHEDULE% in "+
					d.Name()+"/function.json and runs no timer for this poller (the others run): set "+p+"_SCHEDULE to an NCRONTAB schedule, e.g. */10 * * * * *",
					"poller", d.Name(), "setting", p+"_SCHEDULE")
			}
			attrs := []any{"poller", d.Name(), "driver", ps.settings.Driver, "source", redact.DSN(ps.settings.DSN),
				"schedule", ps.settings.Schedule, "batch_size", ps.settings.BatchSize}
			if t := d.Target(); t != "" {
				attrs = append(attrs, "delivers_to", redact.Text(t))
			}
			a.log.Info("poller", attrs...)
		}
		a.pollers[d.Name()] = ps
	}
	a.warnMisspelt(o.Environ, defs)
	return a, nil
}

// warnMisspelt logs each setting whose name looks like a poller setting's but is none (a slip
// that would leave a default in force), with the name meant. environ lists the settings' names
// (nil: the environment's).
func (a *App) warnMisspelt(environ func() []string, defs []*pollerdef.Def) {
	var keys, names []string
	if environ != nil {
		keys = environ()
	} else {
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			keys = append(keys, k)
		}
	}
	for _, d := range defs {
		names = append(names, d.Name())
	}
	for _, w := range appsettings.Misspelt(keys, names) {
		a.log.Warn("setting not used: "+w, "setting", strings.Fields(w)[0])
	}
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "host"
	}
	return h
}

// Drain makes running ticks stop taking new batches (graceful shutdown). Safe to call twice.
func (a *App) Drain() { a.drainOne.Do(func() { close(a.draining) }) }

// Routes returns the HTTP handler.
func (a *App) Routes() http.Handler {
	r := chi.NewRouter()
	r.Get("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	r.Post("/{poller}", a.invoke)
	r.Get(StatusRoute, a.status) // the status function, forwarded as is by the host (status.go)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no route " + r.Method + " " + r.URL.Path})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": r.Method + " is not allowed on " + r.URL.Path})
	})
	return r
}

// invocation is the host's request body; Data holds the timer binding, which is parsed leniently
// (ScheduleStatus may be null, Last may be year 0001): the state blob is the truth, not the timer.
type invocation struct {
	Data     map[string]json.RawMessage `json:"Data"`
	Metadata map[string]json.RawMessage `json:"Metadata"`
}

type timerInfo struct {
	IsPastDue bool `json:"IsPastDue"`
}

func (a *App) invoke(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "poller")
	invID := r.Header.Get("X-Azure-Functions-InvocationId")
	log := a.log.With("poller", name, "invocation_id", invID)
	ps, ok := a.pollers[name]
	if !ok {
		log.Warn("invocation of an unknown poller")
		writeJSON(w, http.StatusNotFound, map[string]any{"error": fmt.Sprintf("unknown poller %q: this build has no poller %s (pollers.All in pollers/pollers.go)", name, name)})
		return
	}
	var inv invocation
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err := dec.Decode(&inv); err != nil || inv.Data == nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"error": fmt.Sprintf("the request body exceeds %d bytes", MaxBodyBytes)})
			return
		}
		msg := "the body is not the Functions host's invocation JSON ({\"Data\":{...},\"Metadata\":{...}})"
		if err != nil {
			msg += ": " + err.Error()
		}
		log.Warn("bad invocation body", "error", msg)
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": msg})
		return
	}
	for binding, raw := range inv.Data {
		var ti timerInfo
		if json.Unmarshal(raw, &ti) == nil && ti.IsPastDue {
			log.Info("timer is past due", "binding", binding)
		}
	}

	ctx := r.Context()
	if a.traced { // the host's invocation, when it sends its trace context (docs/telemetry.md)
		// Continued when the host sampled it: the host's own sampling (Application Insights')
		// is no reason to drop the tick's trace, which then starts its own.
		host := propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header))
		if trace.SpanContextFromContext(host).IsSampled() {
			ctx = host
		}
	}
	sum, err := a.tick(ctx, ps, invID)
	if err != nil {
		// Logged by the tick (or here) before answering: the host drops a failed reply's body.
		if sum.Poller == "" {
			log.Error("tick failed", "error", err.Error())
		}
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": err.Error(), "poller": name, "summary": sum})
		return
	}
	if sum.Outcome == tick.Committed {
		faultpoint.Hit(faultpoint.AfterCommit)
	}
	line := fmt.Sprintf("%s: %s, %d rows in %d batches, fencing token %d, %d ms", name, sum.Outcome, sum.Rows, sum.Batches, sum.FencingToken, sum.DurationMS)
	writeJSON(w, http.StatusOK, map[string]any{"Outputs": map[string]any{}, "Logs": []string{line}, "ReturnValue": sum})
}

// tick runs one tick, opening the poller's source on first use, and records how it ended: in
// this process (for the status it serves) and, when due, in the poller's liveness mark, so that
// ticks which write nothing else (idle ones, and those failing before they take the lease) are
// seen too.
func (a *App) tick(ctx context.Context, ps *pollerState, invID string) (tick.Summary, error) {
	sum, err := a.runTick(ctx, ps, invID)
	outcome := string(sum.Outcome)
	switch {
	case ps.err != nil, err != nil && pollerstatus.Misconfigured(err): // as the status's probe judges an error
		outcome = pollerstatus.OutcomeMisconfigured
	case err != nil && sum.Outcome != tick.Blocked:
		outcome = string(tick.Failed)
	}
	ran := sum.Poller != "" // the tick ran (and counted its own error, if any)
	if m := telemetry.Active(a.metrics); m != nil && err != nil && !ran {
		class := tick.ErrorClass(err)
		if ps.err != nil {
			class = "misconfigured"
		}
		m.Errors.Add(ctx, 1, metric.WithAttributes(telemetry.Poller.String(ps.def.Name()), semconv.ErrorTypeKey.String(class)))
	}
	rowsWaiting := sum.RowsWaiting
	if !ran {
		rowsWaiting = -1
	}
	if a.marker != nil {
		a.marker.Record(ctx, liveness.Tick{Poller: ps.def.Name(), Outcome: outcome, Err: err, RowsWaiting: rowsWaiting, LagSeconds: sum.LagSeconds,
			WroteState: err == nil && sum.Outcome == tick.Committed, Interval: ps.settings.LivenessInterval, CleanupErr: sum.CleanupError})
	}
	a.checkDeadLetters(ctx, ps, sum.DeadLettered > 0)
	return sum, err
}

// checkDeadLetters lists the poller's dead letters (one listing, no letter read) when
// deadLettersEvery has passed since this process last did, or wrote is set (the tick just wrote
// one), and logs a "dead letters" line while there are any: their count, the oldest one's age and
// the command that lists them. The line after the last of them were resolved says count 0.
func (a *App) checkDeadLetters(ctx context.Context, ps *pollerState, wrote bool) {
	lister, ok := a.store.(deadletter.Lister)
	if !ok || a.storeErr != nil || ps.err != nil {
		return
	}
	now := a.clock.Now()
	ps.lettersMu.Lock()
	defer ps.lettersMu.Unlock()
	if !wrote && !ps.lettersAt.IsZero() && now.Sub(ps.lettersAt) < deadLettersEvery {
		return
	}
	name := ps.def.Name()
	sum, err := deadletter.Summarize(context.WithoutCancel(ctx), lister, a.appName, name)
	if err != nil {
		a.log.Warn("dead letters not listed", "poller", name, "error", redact.Text(err.Error()))
		return
	}
	prev := ps.letters
	ps.lettersAt, ps.letters = now, len(sum.BatchIDs)
	if m := telemetry.Active(a.metrics); m != nil {
		m.DeadLetters.Record(ctx, int64(ps.letters), metric.WithAttributes(telemetry.Poller.String(name)))
	}
	switch {
	case ps.letters > 0:
		attrs := []any{"poller", name, "count", ps.letters, "list", deadletter.ListCommand(name)}
		if sum.OldestAge != nil {
			attrs = append(attrs, "oldest_age_seconds", sum.OldestAge.Seconds())
		}
		a.log.Warn("dead letters", attrs...)
	case prev > 0:
		a.log.Info("dead letters", "poller", name, "count", 0)
	}
}

func (a *App) runTick(ctx context.Context, ps *pollerState, invID string) (tick.Summary, error) {
	if ps.err != nil {
		return tick.Summary{}, fmt.Errorf("poller %s is misconfigured: %w", ps.def.Name(), ps.err)
	}
	if a.storeErr != nil {
		return tick.Summary{}, fmt.Errorf("state store: %w", a.storeErr)
	}
	r, err := a.runner(ctx, ps)
	if err != nil {
		return tick.Summary{}, err
	}
	return r.Tick(ctx, invID)
}

func (a *App) runner(ctx context.Context, ps *pollerState) (*tick.Runner, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.runner != nil {
		return ps.runner, nil
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	counted := &lease.Counting{Store: a.store}
	r, err := tick.Open(octx, tick.Config{Poller: ps.def, Settings: ps.settings, Store: counted, App: a.appName, Owner: a.owner, Clock: a.clock, Logger: a.log,
		Version: version.String(), Pools: a.pools, Tracer: a.tracer, Metrics: a.metrics, Draining: a.draining, Requests: counted.Counts,
		DeadLetters: func(ctx context.Context, l *deadletter.Letter) (string, error) {
			return deadletter.Write(ctx, counted, a.appName, l)
		}})
	if err != nil {
		return nil, err
	}
	ps.runner = r
	return ps.runner, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
