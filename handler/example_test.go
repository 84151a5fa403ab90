package handler_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// The Functions host runs a poller's tick by POSTing the timer invocation to /{poller}; the
// reply's ReturnValue is the tick's summary. Here an in-memory state store stands in for the
// state blob (deployed: the StateStorage settings) and an SQLite table for the database.
func ExampleApp_Routes() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	dsn := filepath.Join(dir, "events.db")
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE events (seq INTEGER PRIMARY KEY, what TEXT);
		INSERT INTO events VALUES (1, 'created'), (2, 'paid')`); err != nil {
		panic(err)
	}

	type Event struct {
		Seq  int64  `db:"seq,key,cursor"`
		What string `db:"what"`
	}
	events := poller.New("events", "events", poller.Integer,
		func(ctx context.Context, b *poller.Batch[Event]) error { return nil })
	settings := map[string]string{"EVENTS_DB_DRIVER": "sqlite", "EVENTS_DB_CONNECTION": dsn}
	app := handler.New(handler.Options{
		Getenv:  func(name string) string { return settings[name] },
		Logger:  slog.New(slog.NewJSONHandler(io.Discard, nil)), // default: JSON lines on stdout
		Pollers: pollerdef.OfAll([]*poller.Poller{events}),      // the binary: declared.Load(root, pollers.All())
		Store:   memstore.New(nil),
	})
	host := httptest.NewServer(app.Routes())
	defer host.Close()

	invocation := `{"Data":{"timer":{"IsPastDue":false}},"Metadata":{"sys":{"MethodName":"events"}}}`
	for range 2 {
		resp, err := http.Post(host.URL+"/events", "application/json", strings.NewReader(invocation))
		if err != nil {
			panic(err)
		}
		var reply struct {
			ReturnValue map[string]any // the tick's summary
		}
		err = json.NewDecoder(resp.Body).Decode(&reply)
		resp.Body.Close()
		if err != nil {
			panic(err)
		}
		delete(reply.ReturnValue, "duration_ms") // how long the tick took
		summary, _ := json.Marshal(reply.ReturnValue)
		fmt.Println(resp.StatusCode, string(summary))
	}
	// Output:
	// 200 {"attempt":1,"batches":1,"cursor":{"kind":"integer","value":2},"fencing_token":1,"lag_seconds":0,"ops":{"upsert":2},"outcome":"committed","poller":"events","rows":2,"rows_waiting":0}
	// 200 {"batches":0,"cursor":{"kind":"integer","value":2},"fencing_token":1,"lag_seconds":0,"outcome":"idle","poller":"events","rows":0,"rows_waiting":0}
}
