package sink

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
)

// TestEventGridConformance runs the suite against a real HTTPS server standing in for an Event
// Grid topic: the publisher SDK, pointed at it, sends it CloudEvents batches.
func TestEventGridConformance(t *testing.T) {
	runConformance(t, func(t *testing.T) target {
		rec := newRecorder(t, true, func(r *http.Request, body []byte) []received { return cloudEvents(t, r, body) })
		return target{
			cfg:     Config{Type: EventGrid, Connection: "SuinkTopic"},
			env:     []string{"SuinkTopic=Endpoint=" + rec.srv.URL + "/api/events;AccessKey=c2VjcmV0"},
			client:  azcore.ClientOptions{Transport: rec.srv.Client()},
			read:    rec.read,
			fault:   rec.arm,
			maxBody: eventGridMax - eventGridOverhead,
		}
	})
}

// cloudEvents checks a publish request as Event Grid would (its key, content type, CloudEvents
// 1.0 attributes) and returns its events' ids and data.
func cloudEvents(t *testing.T, r *http.Request, body []byte) []received {
	if r.Header.Get("aeg-sas-key") != "c2VjcmV0" || r.Header.Get("Content-Type") != "application/cloudevents-batch+json; charset=utf-8" ||
		r.URL.Path != "/api/events" || r.URL.Query().Get("api-version") == "" {
		t.Errorf("publish request %s %s with headers %v", r.Method, r.URL, r.Header)
	}
	if len(body) > eventGridMax {
		t.Errorf("a publish request of %d bytes, over Event Grid's 1 MB", len(body))
	}
	var events []struct {
		ID              string          `json:"id"`
		Source          string          `json:"source"`
		Type            string          `json:"type"`
		SpecVersion     string          `json:"specversion"`
		Subject         string          `json:"subject"`
		DataContentType string          `json:"datacontenttype"`
		Data            json.RawMessage `json:"data"`
		TraceParent     string          `json:"traceparent"`
	}
	if err := json.Unmarshal(body, &events); err != nil {
		t.Errorf("publish body: %v", err)
		return nil
	}
	out := make([]received, 0, len(events))
	for _, e := range events {
		var c Change
		_ = json.Unmarshal(e.Data, &c)
		if e.SpecVersion != "1.0" || e.Source != "/pseudotrigger/suink" || e.Type != "pseudotrigger.row.upsert" ||
			e.DataContentType != "application/json" || e.ID != c.ID || e.Subject != "suink/"+jsonText(c.Key["id"]) {
			t.Errorf("event %+v", e)
		}
		out = append(out, received{ID: e.ID, Body: e.Data, Trace: e.TraceParent})
	}
	return out
}

func jsonText(v any) string {
	j, _ := json.Marshal(v)
	return string(j)
}
