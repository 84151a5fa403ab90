package pollertest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/declared"
	"github.com/pseudotrigger/pseudotrigger/internal/panictb"
	"github.com/pseudotrigger/pseudotrigger/pollers/orders"
	"github.com/pseudotrigger/pseudotrigger/pollertest"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// A declared poller is a folder <name>/ with function.json and poller.json: no Go code. Its test
// reads the poller.json as the handler does (declared.Read reads <name>/poller.json;
// declared.Parse and Spec.Poller take the bytes) and runs a tick like any poller's. This one
// sends each change of orders to a webhook, whose URL is an app setting; the webhook gets one
// POST per row, the change as JSON, with the message id as Idempotency-Key.
func Example_declared() {
	pollerJSON := []byte(`{
	  "source": {
	    "table": "orders",
	    "columns": ["id", "customer", "amount", "updated_at"],
	    "key": ["id"],
	    "cursor": { "kind": "timestamp+pk", "column": "updated_at" },
	    "settle_lag": "5s"
	  },
	  "sink": { "type": "webhook", "url": "%ORDERS_HOOK_URL%" }
	}`)
	spec, err := declared.Parse(pollerJSON)
	if err != nil {
		panic(err) // names the field, e.g. "source.cursor.kind: ..."
	}
	p, err := spec.Poller("orders-hook") // the folder's name
	if err != nil {
		panic(err)
	}

	var (
		mu       sync.Mutex
		received []string
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var c sink.Change
		if err := json.Unmarshal(body, &c); err != nil || r.Header.Get("Idempotency-Key") != c.ID {
			http.Error(w, "bad request", http.StatusBadRequest) // fails the batch: it comes again
			return
		}
		key, _ := json.Marshal(c.Key)
		mu.Lock()
		defer mu.Unlock()
		received = append(received, fmt.Sprintf("%s %s key %s row %s", c.Poller, c.Op, key, c.Row))
	}))
	defer hook.Close()

	t := panictb.New()
	defer t.Close()
	h := pollertest.New(t, p, "ORDERS_HOOK_URL="+hook.URL)
	h.Insert(
		orders.Order{ID: 1, Customer: "ada", Amount: "9.50", UpdatedAt: time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)},
		orders.Order{ID: 2, Customer: "grace", Amount: "1.00", UpdatedAt: time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)},
	)
	fmt.Println(h.Tick().Rows, "rows")
	slices.Sort(received) // the sink POSTs a batch's rows concurrently
	for _, r := range received {
		fmt.Println(r)
	}
	// Output:
	// 2 rows
	// orders-hook upsert key {"id":1} row {"id":1,"customer":"ada","amount":"9.50","updated_at":"2025-01-01T09:00:00.000000Z"}
	// orders-hook upsert key {"id":2} row {"id":2,"customer":"grace","amount":"1.00","updated_at":"2025-01-01T10:00:00.000000Z"}
}
