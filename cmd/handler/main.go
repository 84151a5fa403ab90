// Command handler is the Azure Functions custom handler binary (scripts/build.sh builds it to
// bin/handler, which host.json names). It listens on 127.0.0.1:$FUNCTIONS_CUSTOMHANDLER_PORT.
//
// On SIGTERM or SIGINT it stops taking invocations, lets running ticks finish the batch in hand
// (they commit and release their leases) within a grace period, and exits 0. A SIGKILL leaves
// leases to expire; the next holder resumes from the last checkpoint.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/logbuf"
	"github.com/pseudotrigger/pseudotrigger/internal/telemetry"
	"github.com/pseudotrigger/pseudotrigger/internal/version"
	"github.com/pseudotrigger/pseudotrigger/pollers"
)

// grace is how long running ticks may take to finish after a stop signal.
const grace = 20 * time.Second

// gcPercent is the handler's GC target unless GOGC is set: a tick keeps one batch live (its
// rows are handed to the poller's handler whole), so the live heap stays small, and collecting
// less often bought 5-15% of catch-up throughput in scripts/bench.sh.
const gcPercent = 400

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println("handler", version.String())
		return
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	// Lines are written to stdout in batches (warnings and errors at once): see package logbuf.
	out := logbuf.New(os.Stdout)
	log := slog.New(logbuf.Handler(slog.NewJSONHandler(out, nil), out))
	slog.SetDefault(log) // pollers log through slog.Default()
	err := run(log)
	if err != nil {
		log.Error("handler stopped", "error", err.Error())
	}
	_ = out.Flush()
	if err != nil {
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	port := os.Getenv("FUNCTIONS_CUSTOMHANDLER_PORT")
	if port == "" {
		port = "8080"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return fmt.Errorf("FUNCTIONS_CUSTOMHANDLER_PORT=%s: %w", port, err)
	}
	// OpenTelemetry over OTLP when the OTEL_ variables ask for it; a setting it cannot honour is
	// logged as an error and the pollers run without it.
	instance := os.Getenv("WEBSITE_INSTANCE_ID")
	if instance == "" {
		instance, _ = os.Hostname()
	}
	_, shutdown, err := telemetry.Setup(context.Background(), os.Getenv, os.Getenv("WEBSITE_SITE_NAME"), instance, version.String(), log)
	if err != nil {
		log.Error("OpenTelemetry is off", "error", err.Error())
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			log.Warn("OpenTelemetry: the last spans and metrics were not exported", "error", err.Error())
		}
	}()
	// The Go pollers and the declared ones (poller.json folders under AzureWebJobsScriptRoot); a
	// name declared both ways stops the handler.
	app, err := handler.New(handler.Options{Logger: log, Pollers: pollers.All()})
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: app.Routes(), ReadHeaderTimeout: 10 * time.Second}

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "version", version.String())

	select {
	case err := <-served:
		return err
	case sig := <-stop:
		app.Drain() // running ticks take no new batch from here on
		log.Info("stopping: finishing running ticks", "signal", sig.String(), "grace", grace.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	log.Info("stopped")
	return nil
}
