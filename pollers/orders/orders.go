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
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Name is the poller's name: its folder, its function and its settings' prefix (ORDERS_).
const Name = "orders"

// Source is the example orders table: orders(id BIGINT PRIMARY KEY, customer, amount, updated_at),
// the same shape on every driver.
var Source = source.Definition{
	Table:     source.Table{Name: "orders"},
	Columns:   []string{"id", "customer", "amount", "updated_at"},
	Cursor:    source.Cursor{Kind: state.KindTimestampPK, Column: "updated_at"},
	PK:        []string{"id"},
	SettleLag: 5 * time.Second,
}

func init() {
	poller.Register(poller.Definition{
		Name:      Name,
		Source:    Source,
		Schedule:  "*/10 * * * * *",
		BatchSize: 500,
		Handler:   handle,
		Setup:     setup,
	})
}

var (
	webhook string
	client  = &http.Client{Timeout: 30 * time.Second}
)

func setup(getenv func(string) string) error {
	webhook = strings.TrimSpace(getenv("ORDERS_WEBHOOK_URL"))
	if webhook == "" {
		return nil
	}
	u, err := url.Parse(webhook)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("ORDERS_WEBHOOK_URL: %q is not an http(s) URL", webhook)
	}
	return nil
}

// Payload is what the webhook receives.
type Payload struct {
	BatchID      string          `json:"batch_id"`
	FencingToken int64           `json:"fencing_token"`
	Attempt      int64           `json:"attempt"`
	Rows         json.RawMessage `json:"rows"`
}

func handle(ctx context.Context, b *poller.Batch) error {
	if webhook == "" {
		first, last := b.Rows[0].Get("id"), b.Rows[len(b.Rows)-1].Get("id")
		slog.Default().Info("orders batch", "batch_id", b.ID, "rows", len(b.Rows), "first_id", first, "last_id", last,
			"attempt", b.Attempt, "fencing_token", b.FencingToken)
		return nil
	}
	rows := (&source.Batch{Rows: b.Rows})
	rowsJSON, err := rows.MarshalJSON()
	if err != nil {
		return err
	}
	body, err := json.Marshal(Payload{BatchID: b.ID, FencingToken: b.FencingToken, Attempt: b.Attempt, Rows: rowsJSON})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, webhook, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", b.ID)
	req.Header.Set("X-Fencing-Token", strconv.FormatInt(b.FencingToken, 10))
	resp, err := client.Do(req)
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
