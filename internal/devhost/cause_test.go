package devhost

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/pseudotrigger/pseudotrigger/internal/declared"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/pollers/orders"
	"github.com/pseudotrigger/pseudotrigger/pollertest"
)

// closedPort is a 127.0.0.1 address nothing listens on: a listener's, closed.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// failedLine is FailedLine of err as the handler answers a failed tick (500, its text).
func failedLine(name string, err error) string {
	return FailedLine("12:00:00", name, Result{Status: 500, Error: err.Error()}, ".dev/handler.log")
}

// TestFailedLineLeadsWithTheCause: a tick that failed because a service it reaches was gone
// (Azurite killed under dev.sh) is one line that begins with what could not be reached, how and
// where, then says what the tick was doing, without the request's long URL; the errors are the
// real ones, from the packages that reach each service, against a closed port.
func TestFailedLineLeadsWithTheCause(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The state store: the lease's read of the state blob, as a tick's first step makes it.
	blob := closedPort(t)
	st, err := blobstore.New(blobstore.Settings{Setting: "StateStorage", Container: "db-state",
		ConnectionString: "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" + devKey + ";BlobEndpoint=http://" + blob + "/devstoreaccount1;"},
		&blobstore.Options{Retry: policy.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := lease.New(st, lease.Config{Poller: "orders", Blob: "state/local/orders.json", Owner: "devhost/1", Fingerprint: "f"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Read(ctx)
	if err == nil {
		t.Fatal("read from a closed port")
	}
	line := failedLine("orders", err)
	want := "12:00:00 orders       FAILED (500): state store unreachable: connection refused (" + blob + `) - lease: read state/local/orders.json: blobstore: get "state/local/orders.json" (the full error: .dev/handler.log)`
	if line != want {
		t.Errorf("the state store:\n got %q\nwant %q\n(from %q)", line, want, err)
	}

	// The sink: a declared poller's storage queue, in a real tick (tick.ErrBatchFailed's chain).
	queue := closedPort(t)
	spec, err := declared.Parse([]byte(`{"source":{"table":"orders","columns":["id","customer","amount","updated_at"],"key":["id"],
		"cursor":{"kind":"timestamp+pk","column":"updated_at"}},"sink":{"type":"storagequeue","connection":"Q","queue":"orders-changes"}}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Poller("orders-queue")
	if err != nil {
		t.Fatal(err)
	}
	// tickOnce runs the poller's first tick over one row, with attempts as {P}_MAX_ATTEMPTS.
	tickOnce := func(attempts string) error {
		h := pollertest.New(t, p, "Q=DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey="+devKey+";QueueEndpoint=http://"+queue+"/devstoreaccount1;",
			"ORDERS_QUEUE_MAX_ATTEMPTS="+attempts)
		h.Insert(orders.Order{ID: 1, Customer: "ada", Amount: "9.50", UpdatedAt: time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)})
		_, err := h.TickErr()
		return err
	}
	if err = tickOnce("100"); !errors.Is(err, tick.ErrBatchFailed) {
		t.Fatalf("a send to a closed port: %v", err)
	}
	line = failedLine("orders-queue", err)
	t.Log(line)
	if want := "12:00:00 orders-queue FAILED (500): sink unreachable: connection refused (" + queue + ") - batch failed: batch "; !strings.HasPrefix(line, want) ||
		strings.Contains(line, "http://") || !strings.HasSuffix(line, "(the full error: .dev/handler.log)") {
		t.Errorf("the sink:\n got %q\nwant it to start %q, without the URL\n(from %q)", line, want, err)
	}
	// The same sink once the batch has failed {P}_MAX_ATTEMPTS times: the poller is blocked, and
	// the line says so after the cause.
	if err = tickOnce("1"); !errors.Is(err, tick.ErrBlocked) {
		t.Fatalf("a send to a closed port, one attempt allowed: %v", err)
	}
	line = failedLine("orders-queue", err)
	if want := "12:00:00 orders-queue FAILED (500): sink unreachable: connection refused (" + queue + ") - poller blocked on a poison batch: orders-queue has failed batch "; !strings.HasPrefix(line, want) {
		t.Errorf("the sink, blocked:\n got %q\nwant it to start %q\n(from %q)", line, want, err)
	}

	// The source database: PostgreSQL's driver connecting to a closed port.
	db := closedPort(t)
	_, err = source.Open(ctx, driver.Drivers{postgres.Driver{}}, source.Config{Poller: "orders", Driver: postgres.Name,
		DSN:        "postgres://postgres:hunter2@" + db + "/postgres?sslmode=disable&connect_timeout=5",
		Definition: sourcedef.Definition{Table: sourcedef.Table{Name: "orders"}, Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "id"}, PK: []string{"id"}}})
	if !errors.Is(err, source.ErrConnect) {
		t.Fatalf("a connection to a closed port: %v", err)
	}
	line = failedLine("orders", err)
	t.Log(line)
	if want := "12:00:00 orders       FAILED (500): source database unreachable: connection refused (" + db + `) - source: poller "orders"`; !strings.HasPrefix(line, want) || strings.Contains(line, "hunter2") {
		t.Errorf("the source:\n got %q\nwant it to start %q\n(from %q)", line, want, err)
	}

	// devhost's own request to the handler (status -1).
	handler := closedPort(t)
	r := Invoke(ctx, "http://"+handler, Function{Name: "orders", Binding: "timer"}, []byte("{}"))
	line = FailedLine("12:00:00", "orders", r, ".dev/handler.log")
	if want := fmt.Sprintf("12:00:00 orders       FAILED (-1): handler unreachable: connection refused (%s) (the full error: .dev/handler.log)", handler); line != want {
		t.Errorf("the handler:\n got %q\nwant %q", line, want)
	}
}

// TestNetCause: the failures a Go network error names, with their address or the name looked up;
// text without one is not a cause.
func TestNetCause(t *testing.T) {
	for _, c := range []struct{ text, cause, doing string }{
		{`lease: read x: blobstore: get "x": Get "http://127.0.0.1:1/a%2Fb": dial tcp 127.0.0.1:1: connect: connection refused`,
			"state store unreachable: connection refused (127.0.0.1:1)", `lease: read x: blobstore: get "x"`},
		{`source: poller "o": cannot connect to the source database (postgres://db.example.com/x): dial tcp: lookup db.example.com on 127.0.0.53:53: no such host`,
			"source database unreachable: no such host (db.example.com)", `source: poller "o": cannot connect to the source database (postgres://db.example.com/x)`},
		{`source: poller "o", table orders: read tcp 10.0.0.4:51000->10.0.0.5:5432: read: connection reset by peer`,
			"source database unreachable: connection reset by peer (10.0.0.5:5432)", `source: poller "o", table orders`},
		{`batch failed: batch b (attempt 1, 1 rows, keys {"id":1}): webhook: Post "https://h.example.com/x": dial tcp 10.1.1.1:443: i/o timeout`,
			"sink unreachable: i/o timeout (10.1.1.1:443)", `batch failed: batch b (attempt 1, 1 rows, keys {"id":1}): webhook`},
		{`dial tcp 127.0.0.1:9: connect: connection refused`, "unreachable: connection refused (127.0.0.1:9)", ""},
	} {
		cause, doing, ok := netCause(c.text, 500)
		if !ok || cause != c.cause || doing != c.doing {
			t.Errorf("netCause(%q) = %q, %q, %v\nwant %q, %q", c.text, cause, doing, ok, c.cause, c.doing)
		}
	}
	if _, _, ok := netCause(`source: poller "orders", table orders, column "updated_at": a row the cursor can never reach`, 500); ok {
		t.Errorf("a cause in text without a network failure")
	}
}
