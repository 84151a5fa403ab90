package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ceReceived is a CloudEvent of a batch as the receiver reads it.
type ceReceived struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject"`
	DataContentType string          `json:"datacontenttype"`
	Data            json.RawMessage `json:"data"`
	Tenant          string          `json:"tenant"`
}

// TestWebhookEventBatches: a webhook in mode batch POSTs an outbox's events many to a request,
// as a CloudEvents JSON batch: every event once, as its CloudEvent (id, type, subject
// {aggregate_type}/{aggregate_id}, the payload as data, its headers as extensions); one
// aggregate's events in one lane in commit order, the lanes no more than the concurrency, a lane
// cut at 1 MB; each POST named {first id}+{others} in Idempotency-Key and webhook-id, and signed
// so that the Standard Webhooks library accepts it and refuses it tampered.
func TestWebhookEventBatches(t *testing.T) {
	var rows []string
	for i := 1; i <= 120; i++ {
		agg := "a" + strconv.Itoa(i%9)
		hdrs := "NULL"
		if i == 7 {
			hdrs = `'{"tenant": "t1"}'`
		}
		rows = append(rows, fmt.Sprintf(`(%d, 'e-%d', 'order', '%s', '{"n": %d}', NULL, 'OrderPlaced', %s)`, i, i, agg, i, hdrs))
	}
	for i := 121; i <= 123; i++ { // three 400 KB events of one aggregate: its lane takes two POSTs
		rows = append(rows, fmt.Sprintf(`(%d, 'e-%d', 'order', 'big', '"' || replace(hex(zeroblob(200000)), '0', 'x') || '"', NULL, 'OrderPlaced', NULL)`, i, i))
	}
	b := outboxBatches(t, testOutbox("body", "application/json"), "INSERT INTO outbox VALUES "+strings.Join(rows, ",\n"))[0]

	hook := newRecorder(t, false, nil)
	secret := newSecret(t)
	s := MustNew(Config{Type: Webhook, URL: hook.srv.URL, Mode: ModeBatch, Concurrency: 4, SigningSecret: "%HOOK_SECRETS%"})
	if err := s.Setup(func(k string) string { return map[string]string{"HOOK_SECRETS": secret}[k] }); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	reqs := hook.read(t)
	if len(reqs) != 5 { // 10 aggregates in 4 lanes, the big one's cut in two
		t.Errorf("%d POSTs; want 5", len(reqs))
	}
	seen := map[string]int{}
	order := map[string][]int{} // aggregate -> event numbers, as they arrived
	var cases []libraryCase
	for i, r := range reqs {
		if ct := r.Header.Get("Content-Type"); ct != "application/cloudevents-batch+json; charset=utf-8" {
			t.Errorf("POST %d: Content-Type %q", i, ct)
		}
		var evs []ceReceived
		if err := json.Unmarshal(r.Body, &evs); err != nil || len(evs) == 0 {
			t.Fatalf("POST %d: not a CloudEvents batch: %v (%.200s)", i, err, r.Body)
		}
		if want := evs[0].ID + "+" + strconv.Itoa(len(evs)-1); r.ID != want || r.Header.Get("webhook-id") != want {
			t.Errorf("POST %d: Idempotency-Key %q, webhook-id %q; want %q", i, r.ID, r.Header.Get("webhook-id"), want)
		}
		if len(r.Body) > eventBatchMax {
			t.Errorf("POST %d: %d bytes, over %d", i, len(r.Body), eventBatchMax)
		}
		for _, e := range evs {
			n, _ := strconv.Atoi(strings.TrimPrefix(e.ID, "e-"))
			seen[e.ID]++
			agg := strings.TrimPrefix(e.Subject, "order/")
			order[agg] = append(order[agg], n)
			if e.SpecVersion != "1.0" || e.Source != "/pseudotrigger/obx" || e.Type != "OrderPlaced" || e.DataContentType != "application/json" ||
				!strings.HasPrefix(e.Subject, "order/") {
				t.Errorf("event %s: %+v", e.ID, e)
			}
			if n <= 120 && string(e.Data) != fmt.Sprintf(`{"n":%d}`, n) {
				t.Errorf("event %s: data %s", e.ID, e.Data)
			}
			if (e.Tenant == "t1") != (n == 7) {
				t.Errorf("event %s: extension tenant %q", e.ID, e.Tenant)
			}
		}
		c := caseOf(strconv.Itoa(i), secret, r)
		cases = append(cases, c)
		c.Name, c.Body = c.Name+" tampered", c.Body[:len(c.Body)-1]+" ]" // still JSON, one byte more
		cases = append(cases, c)
	}
	if len(seen) != 123 {
		t.Errorf("%d events arrived; want 123", len(seen))
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("event %s arrived %d times", id, k)
		}
	}
	for agg, ns := range order {
		if !slices.IsSorted(ns) {
			t.Errorf("aggregate %s's events arrived out of order: %v", agg, ns)
		}
	}
	for name, verdict := range verifyWithLibrary(t, cases) {
		if want := "ok"; strings.HasSuffix(name, "tampered") {
			if verdict != "No matching signature found" {
				t.Errorf("%s: the library says %q", name, verdict)
			}
		} else if verdict != want {
			t.Errorf("%s: the library says %q", name, verdict)
		}
	}
}

// TestWebhookEventBatchRefusals: in mode batch an event's headers are CloudEvents extensions, so a
// header name that cannot be one fails the batch before anything is sent; mode batch with an
// outbox is a webhook's only, refused for another sink naming sink.mode.
func TestWebhookEventBatchRefusals(t *testing.T) {
	b := outboxBatches(t, testOutbox("body", ""), `INSERT INTO outbox VALUES (1, 'e-1', 'order', 'o-1', 'x', NULL, NULL, NULL),
		(2, 'e-2', 'order', 'o-2', 'y', NULL, NULL, '{"X-Tenant": "t1"}')`)[0]
	hook := newRecorder(t, false, nil)
	s := MustNew(Config{Type: Webhook, URL: hook.srv.URL, Mode: ModeBatch})
	if err := s.Setup(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), b); !errors.Is(err, ErrBadPayload) || !strings.Contains(err.Error(), `header "X-Tenant"`) {
		t.Errorf("a header that cannot be an extension: %v", err)
	}
	if n := len(hook.read(t)); n != 0 {
		t.Errorf("%d POSTs before the refusal", n)
	}
	if err := (Config{Type: Webhook, Mode: ModeBatch}).CheckOutbox(); err != nil {
		t.Errorf("webhook, mode batch: %v", err)
	}
	for _, typ := range []string{StorageQueue, ServiceBus, EventHubs, EventGrid} {
		err := (Config{Type: typ, Mode: ModeBatch}).CheckOutbox()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "sink.mode") || !strings.Contains(err.Error(), typ) {
			t.Errorf("%s, mode batch: %v", typ, err)
		}
	}
}
