// Package orders is the example poller: it reads the orders table in (updated_at, id) order and,
// when ORDERS_WEBHOOK_URL is set, POSTs each batch there; otherwise it logs a line per batch.
//
// The webhook receives {"batch_id","fencing_token","attempt","rows":[{"id","customer","amount",
// "updated_at"}]} with headers Idempotency-Key (the batch id) and X-Fencing-Token. A non-2xx reply
// or a transport error fails the batch: it is not committed and comes again with attempt + 1.
package orders

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/poller"
)

// Order is a row of orders(id BIGINT PRIMARY KEY, customer, amount DECIMAL(12,2), updated_at),
// the same shape on every driver.
type Order struct {
	ID        int64     `db:"id,key" json:"id"`
	Customer  string    `db:"customer" json:"customer"`
	Amount    string    `db:"amount" json:"amount"` // exact: the decimal as text
	UpdatedAt time.Time `db:"updated_at,cursor" json:"updated_at"`
}

// New returns the orders poller.
func New() *poller.Poller {
	w := &webhook{client: &http.Client{Timeout: 30 * time.Second}}
	return poller.New("orders", "orders", poller.TimestampPK, w.deliver,
		poller.WithSettleLag(5*time.Second), poller.WithSetup(w.setup))
}

// Payload is what the webhook receives.
type Payload struct {
	BatchID      string  `json:"batch_id"`
	FencingToken int64   `json:"fencing_token"`
	Attempt      int64   `json:"attempt"`
	Rows         []Order `json:"rows"`
}

type webhook struct {
	url    string // ORDERS_WEBHOOK_URL; empty: log a line per batch
	client *http.Client
}

func (w *webhook) setup(getenv func(string) string) error {
	w.url = strings.TrimSpace(getenv("ORDERS_WEBHOOK_URL"))
	if u, err := url.Parse(w.url); w.url != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		return fmt.Errorf("ORDERS_WEBHOOK_URL: %q is not an http(s) URL", w.url)
	}
	return nil
}

func (w *webhook) deliver(ctx context.Context, b *poller.Batch[Order]) error {
	if w.url == "" {
		slog.Default().Info("orders batch", "batch_id", b.ID, "rows", len(b.Rows), "first_id", b.Rows[0].ID, "last_id", b.Rows[len(b.Rows)-1].ID,
			"attempt", b.Attempt, "fencing_token", b.FencingToken)
		return nil
	}
	body, err := json.Marshal(Payload{BatchID: b.ID, FencingToken: b.FencingToken, Attempt: b.Attempt, Rows: b.Rows})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", b.ID)
	req.Header.Set("X-Fencing-Token", strconv.FormatInt(b.FencingToken, 10))
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook answered %s: %s", resp.Status, strings.TrimSpace(string(snippet)))
	}
	return nil
}
