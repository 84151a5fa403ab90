package handler_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// FuzzInvocationBody: whatever the body, the handler answers JSON with 400, 413 or (for a
// body that is the host's shape, on an app without state storage) 500 naming the setting.
// Never a panic, never a 200 without a tick.
func FuzzInvocationBody(f *testing.F) {
	f.Add(body)
	f.Add(`{"Data":{"timer":{"ScheduleStatus":null,"IsPastDue":true}},"Metadata":{}}`)
	f.Add(`{"Data":null}`)
	f.Add(`{"Data":{"timer":{"Schedule":{},"ScheduleStatus":{"Last":"0001-01-01T00:00:00"}}}}`)
	f.Add(`not json`)
	f.Add(`[]`)
	f.Add(`{"Data":{}} trailing`)
	app := handler.NewForTest(f, handler.Options{
		Getenv: func(k string) string {
			return map[string]string{"GOOD_DB_DRIVER": "sqlite", "GOOD_DB_CONNECTION": "x.db"}[k]
		},
		Logger:  slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Pollers: []*poller.Poller{def("good", new(int))},
	}, handler.Internals{})
	routes := app.Routes()
	f.Fuzz(func(t *testing.T, b string) {
		rec := httptest.NewRecorder()
		routes.ServeHTTP(rec, httptest.NewRequest("POST", "/good", strings.NewReader(b)))
		var m map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("status %d, not a JSON reply: %q", rec.Code, rec.Body.String())
		}
		msg, _ := m["error"].(string)
		switch rec.Code {
		case 400, 413:
		case 500:
			if !strings.Contains(msg, "StateStorage") {
				t.Fatalf("500 without naming the missing setting: %v", m)
			}
		default:
			t.Fatalf("status %d for %q", rec.Code, b)
		}
		if msg == "" {
			t.Fatalf("an error reply without a message: %v", m)
		}
	})
}
