package source_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

func TestConnectFailureNamesPollerWithoutSecret(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := drivers.Open(ctx, source.Config{Poller: "orders", Driver: "postgres", DSN: "postgres://app:hunter2@127.0.0.1:1/shop?sslmode=disable&connect_timeout=5",
		Definition: sourcedef.Definition{Table: sourcedef.Table{Name: "orders"}, Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "id"}, PK: []string{"id"}}})
	if !errors.Is(err, source.ErrConnect) || !strings.Contains(err.Error(), `poller "orders"`) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("connect failure: %v", err)
	}
}
