// Command replicahandler is the handler binary of e2e's logical replica tests (replica_test.go):
// the product's handler (package handler) serving one poller, "replica", that reads the table
// REPLICA_TABLE with a logical cursor and POSTs each batch, as a replicacheck.Batch (every change
// with its op, key, row and position), to REPLICA_WEBHOOK_URL; a non-2xx reply fails the batch.
// The other settings are the product's ({P} is REPLICA): REPLICA_DB_DRIVER, REPLICA_DB_CONNECTION,
// REPLICA_CDC_SLOT, REPLICA_CDC_PUBLICATION, REPLICA_BATCH_SIZE, ...; REPLICA_FILTER and
// REPLICA_SKIP_WRITER (poller.WithFilter, poller.WithSkipWriter); REPLICA_SECOND, a second
// table of the same columns and filter (poller.WithTables); REPLICA_INITIAL=snapshot
// makes the poller start with a snapshot of the table (poller.WithInitialSnapshot). It is a test binary only
// (cmd/handler serves the app's pollers); the tests build it with -tags faultpoints.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/replicacheck"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	if err := run(log); err != nil {
		log.Error("replicahandler stopped", "error", err.Error())
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	table, hook := os.Getenv("REPLICA_TABLE"), os.Getenv("REPLICA_WEBHOOK_URL")
	if table == "" || hook == "" {
		return fmt.Errorf("set REPLICA_TABLE and REPLICA_WEBHOOK_URL")
	}
	owner := "pid " + strconv.Itoa(os.Getpid())
	opts := []poller.Option{poller.WithColumns(replicacheck.Columns...), poller.WithKey("id")}
	if os.Getenv("REPLICA_INITIAL") == "snapshot" {
		opts = append(opts, poller.WithInitialSnapshot())
	}
	if f := os.Getenv("REPLICA_FILTER"); f != "" {
		opts = append(opts, poller.WithFilter(f))
	}
	if w := os.Getenv("REPLICA_SKIP_WRITER"); w != "" {
		opts = append(opts, poller.WithSkipWriter(w))
	}
	if second := os.Getenv("REPLICA_SECOND"); second != "" {
		opts = append(opts, poller.WithTables(poller.Table{Name: second, Columns: replicacheck.Columns, Key: []string{"id"}, Filter: os.Getenv("REPLICA_FILTER")}))
	}
	client := &http.Client{Timeout: 30 * time.Second}
	p := poller.New("replica", table, poller.Logical, func(ctx context.Context, b *poller.Batch[poller.Row]) error {
		rb, err := replicacheck.FromBatch(b, owner)
		if err != nil {
			return err
		}
		body, err := json.Marshal(rb)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook, bytes.NewReader(body))
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("webhook answered %s", resp.Status)
		}
		return nil
	}, opts...)

	port := os.Getenv("FUNCTIONS_CUSTOMHANDLER_PORT")
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return err
	}
	app, err := handler.New(handler.Options{Logger: log, Pollers: []*poller.Poller{p}})
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: app.Routes(), ReadHeaderTimeout: 10 * time.Second}
	log.Info("listening", "addr", ln.Addr().String())
	return srv.Serve(ln)
}
