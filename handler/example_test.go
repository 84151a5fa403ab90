package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// The binary (cmd/handler) serves the app's pollers on the port the Functions host names: its Go
// pollers (pollers.All()) and the declared ones New finds, each a folder with a poller.json under
// AzureWebJobsScriptRoot. The settings are the app settings (os.Getenv); the logs go to stdout.
func ExampleNew() {
	type Event struct {
		Seq  int64  `db:"seq,key,cursor"`
		What string `db:"what"`
	}
	events := poller.New("events", "events", poller.Integer,
		func(ctx context.Context, b *poller.Batch[Event]) error { return nil })
	app, err := handler.New(handler.Options{Pollers: []*poller.Poller{events}})
	if err != nil {
		log.Fatal(err) // a poller declared both in Go and as a folder
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:"+os.Getenv("FUNCTIONS_CUSTOMHANDLER_PORT"), app.Routes()))
}

// The Functions host runs a poller's tick by POSTing the timer invocation to /{poller}; the
// reply's ReturnValue is the tick's summary. The settings name the poller's database (an SQLite
// file, with the rows 1 created and 2 paid) and the state store (Azurite's, here).
// TestExampleRoutes runs the same exchange with the state in memory.
func ExampleApp_Routes() {
	type Event struct {
		Seq  int64  `db:"seq,key,cursor"`
		What string `db:"what"`
	}
	events := poller.New("events", "events", poller.Integer,
		func(ctx context.Context, b *poller.Batch[Event]) error { return nil })
	settings := map[string]string{
		"EVENTS_DB_DRIVER": "sqlite", "EVENTS_DB_CONNECTION": "events.db",
		"StateStorage": "UseDevelopmentStorage=true",
	}
	app, err := handler.New(handler.Options{
		Getenv:  func(name string) string { return settings[name] }, // default: os.Getenv
		Logger:  slog.New(slog.DiscardHandler),                      // default: JSON lines on stdout
		Pollers: []*poller.Poller{events},
	})
	if err != nil {
		panic(err)
	}
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
	// It prints, on a new state container:
	// 200 {"attempt":1,"batches":1,"cursor":{"kind":"integer","value":2},"fencing_token":1,"lag_seconds":0,"ops":{"upsert":2},"outcome":"committed","poller":"events","rows":2,"rows_waiting":0}
	// 200 {"batches":0,"cursor":{"kind":"integer","value":2},"fencing_token":1,"lag_seconds":0,"outcome":"idle","poller":"events","rows":0,"rows_waiting":0}
}
