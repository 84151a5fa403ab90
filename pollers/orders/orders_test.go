package orders_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/pollers/orders"
	"github.com/pseudotrigger/pseudotrigger/pollertest"
)

func TestOrdersDelivered(t *testing.T) {
	h := pollertest.New(t, orders.New())
	hour := time.Now().Add(-time.Hour)
	h.Insert(orders.Order{ID: 2, Customer: "bob", Amount: "1.00", UpdatedAt: hour.Add(time.Second)}, orders.Order{ID: 1, Customer: "ada", Amount: "9.50", UpdatedAt: hour})
	h.Tick()
	if got := pollertest.Rows[orders.Order](h); len(got) != 2 || got[0].Customer != "ada" || got[1].Amount != "1.00" {
		t.Fatalf("delivered %+v", got)
	}
}

// TestOrdersWebhook: with ORDERS_WEBHOOK_URL set, each batch is POSTed as the contract's body
// with its headers; a non-2xx reply fails the batch, which comes again with attempt 2.
func TestOrdersWebhook(t *testing.T) {
	var bodies []orders.Payload
	var keys, tokens []string
	status := http.StatusInternalServerError
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p orders.Payload
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			t.Errorf("body: %v", err)
		}
		bodies, keys, tokens = append(bodies, p), append(keys, r.Header.Get("Idempotency-Key")), append(tokens, r.Header.Get("X-Fencing-Token"))
		w.WriteHeader(status)
	}))
	defer srv.Close()
	h := pollertest.New(t, orders.New(), "ORDERS_WEBHOOK_URL="+srv.URL)
	h.Insert(orders.Order{ID: 7, Customer: "ada", Amount: "12.50", UpdatedAt: time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)})
	if _, err := h.TickErr(); err == nil || !strings.Contains(err.Error(), "webhook answered 500") {
		t.Fatalf("a 500 from the webhook: %v", err)
	}
	status = http.StatusOK
	h.Tick()
	if len(bodies) != 2 || bodies[1].Attempt != 2 || bodies[0].Attempt != 1 || bodies[1].BatchID != bodies[0].BatchID || keys[1] != bodies[1].BatchID ||
		tokens[1] != strconv.FormatInt(bodies[1].FencingToken, 10) || len(bodies[1].Rows) != 1 {
		t.Fatalf("bodies %+v, keys %v, tokens %v", bodies, keys, tokens)
	}
	if o := bodies[1].Rows[0]; o.ID != 7 || o.Customer != "ada" || o.Amount != "12.50" || !o.UpdatedAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)) {
		t.Fatalf("row %+v", o)
	}
}

// TestOrdersWebhookSetting: a URL that is not http(s) fails the poller's setup, naming the setting.
func TestOrdersWebhookSetting(t *testing.T) {
	err := pollertest.Setup(orders.New(), "ORDERS_WEBHOOK_URL=ftp://example.com")
	if err == nil || !strings.Contains(err.Error(), "ORDERS_WEBHOOK_URL") {
		t.Fatalf("got %v", err)
	}
}
