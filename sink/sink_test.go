package sink

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/faultproxy"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestSecretsNeverShown: what a sink says of itself (logs, status) and its setup errors show the
// endpoint, never a key, a SAS or a webhook's secret query or header.
func TestSecretsNeverShown(t *testing.T) {
	const secret = "c2VjcmV0LWtleS12YWx1ZQ=="
	cases := []struct {
		cfg  Config
		env  map[string]string
		want string // in String() or the error
	}{
		{Config{Type: StorageQueue, Connection: "Q", Queue: "q1x"},
			map[string]string{"Q": "DefaultEndpointsProtocol=https;AccountName=acct1;AccountKey=" + secret + ";EndpointSuffix=core.windows.net"}, "AccountName=acct1"},
		{Config{Type: StorageQueue, Connection: "Q", Queue: "q1x"},
			map[string]string{"Q": "QueueEndpoint=https://acct1.queue.core.windows.net;SharedAccessSignature=sv=2022&sig=" + secret}, "QueueEndpoint=https://acct1.queue.core.windows.net"},
		{Config{Type: StorageQueue, Connection: "Q", Queue: "q1x"}, map[string]string{"Q": "AccountKey=" + secret}, "names no AccountName"},
		{Config{Type: EventGrid, Connection: "G"}, map[string]string{"G": "Endpoint=https://t.westeurope-1.eventgrid.azure.net/api/events;AccessKey=" + secret}, "Endpoint=https://t.westeurope-1"},
		{Config{Type: EventGrid, Connection: "G"}, map[string]string{"G": "Endpoint=nope;AccessKey=" + secret}, "not a connection string"},
		{Config{Type: Webhook, URL: "%H%", Headers: map[string]string{"Authorization": "Bearer %T%"}},
			map[string]string{"H": "https://hooks.example.com/in?code=" + secret, "T": secret}, "POST https://hooks.example.com/in"},
		{Config{Type: StorageQueue, Connection: "Q", Queue: "q1x"}, map[string]string{"Q__queueServiceUri": "http://acct1.queue.core.windows.net"}, "must use https"},
		{Config{Type: Webhook, URL: "%H%", Auth: &WebhookAuth{Audience: "api://orders-hook", Connection: "HOOKID"}},
			map[string]string{"H": "http://hooks.example.com/in?code=" + secret}, "must use https"},
	}
	for _, c := range cases {
		s := MustNew(c.cfg)
		err := s.Setup(func(k string) string { return c.env[k] })
		shown := s.String()
		if err != nil {
			shown = err.Error()
		}
		if !strings.Contains(shown, c.want) || strings.Contains(shown, secret) {
			t.Errorf("%s sink with %v: %q; want it to say %q, without the secret", c.cfg.Type, c.env, shown, c.want)
		}
	}
	// A webhook that fails: the error names the row and the status, not the URL's secret.
	s := MustNew(Config{Type: Webhook, URL: "http://127.0.0.1:1/in?code=" + secret})
	if err := s.Setup(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{ID: "x", Body: []byte(`{}`), keyJSON: []byte(`{"id":1}`)}}
	if err := s.t.send(context.Background(), msgs); err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), `the row with key {"id":1}`) {
		t.Errorf("a failed POST: %v", err)
	}
}

// TestConfigErrors: a definition that can never work is refused by New, naming the field.
func TestConfigErrors(t *testing.T) {
	for cfg, want := range map[*Config]string{
		{Type: "kafka"}:                                                                           "sink.type",
		{Type: Webhook}:                                                                           "sink.url: required",
		{Type: Webhook, URL: "ftp://x"}:                                                           "sink.url: is not an http(s) URL",
		{Type: Webhook, URL: "%U%", Timeout: "soon"}:                                              "sink.timeout",
		{Type: StorageQueue, Queue: "q1x"}:                                                        "sink.connection: required",
		{Type: StorageQueue, Connection: "a-b", Queue: "q1x"}:                                     "sink.connection",
		{Type: StorageQueue, Connection: "Q", Queue: "Q"}:                                         "sink.queue",
		{Type: StorageQueue, Connection: "Q", Queue: "q1x", MessageTTL: "1d"}:                     "sink.message_ttl",
		{Type: ServiceBus, Connection: "B"}:                                                       "sink.queue: a servicebus sink names a queue or a topic",
		{Type: ServiceBus, Connection: "B", Queue: "a", Topic: "b"}:                               "sink.queue: a servicebus sink names a queue or a topic",
		{Type: EventHubs, Connection: "E"}:                                                        "sink.hub: required",
		{Type: EventGrid, Connection: "G", Queue: "q1x"}:                                          "sink.queue: is not an option of a eventgrid sink",
		{Type: Webhook, URL: "http://x", Mode: "rows"}:                                            "sink.mode",
		{Type: Webhook, URL: "http://x", Concurrency: 1000}:                                       "sink.concurrency",
		{Type: Webhook, URL: "http://x", SigningSecret: "whsec_abc"}:                              "sink.signing_secret: give %SETTING%",
		{Type: Webhook, URL: "http://x", Auth: &WebhookAuth{Audience: "orders", Connection: "H"}}: "sink.auth.audience",
		{Type: Webhook, URL: "http://x", Auth: &WebhookAuth{Audience: "api://orders/.default", Connection: "H"}}:                                          "sink.auth.audience: \"api://orders/.default\": drop /.default",
		{Type: Webhook, URL: "http://x", Auth: &WebhookAuth{Audience: "api://orders"}}:                                                                    "sink.auth.connection: required",
		{Type: Webhook, URL: "http://x", Auth: &WebhookAuth{Audience: "api://orders", Connection: "H"}, Headers: map[string]string{"authorization": "x"}}: "sink.headers: \"authorization\" is what auth sets",
		{Type: Webhook, URL: "http://x", SigningSecret: "%S%", Headers: map[string]string{"Webhook-Id": "x"}}:                                             "sink.headers: \"Webhook-Id\" is what signing_secret sets",
		{Type: ServiceBus, Connection: "B", Queue: "q", SigningSecret: "%S%"}:                                                                             "sink.signing_secret: is not an option of a servicebus sink",
	} {
		if _, err := New(*cfg); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("New(%+v): %v; want %q", *cfg, err, want)
		}
	}
}

// TestPostgresToQueue: a PostgreSQL source through the real tick to Azurite's queue: every row
// arrives once, under its id, and the blob writes stay within the batches + 1.
func TestPostgresToQueue(t *testing.T) {
	cs := testenv.AzuriteQueue(t)
	const rows = 1200
	table := testenv.Name("sink_pg_")
	db, dsn := testenv.PostgresOrdersTable(t, table, rows)
	defer db.Exec(`DROP TABLE ` + table)
	proxy, proxied, err := faultproxy.ForEndpoint(cs, "QueueEndpoint")
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	queue := testenv.Name("pg-")
	rec := newQueueRecorder(t, proxy, cs, queue, false)
	s := MustNew(Config{Type: StorageQueue, Connection: "Q", Queue: queue})
	if err := s.Setup(func(k string) string { return map[string]string{"Q": proxied}[k] }); err != nil {
		t.Fatal(err)
	}
	p := poller.New("orders", table, poller.TimestampPK, Handler[poller.Row](s),
		poller.WithColumns("id", "customer", "amount", "updated_at"), poller.WithKey("id"), poller.WithCursorColumn("updated_at"))
	st := &lease.Counting{Store: memstore.New(nil)}
	r, err := tick.Open(context.Background(), tick.Config{Poller: pollerdef.Of(p), Store: st, App: "test", Owner: "test/1",
		Settings: appsettings.Settings{Driver: postgres.Name, DSN: dsn, BatchSize: 100, LeaseTTL: lease.DefaultTTL,
			HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: time.Hour, CheckpointInterval: 0, SettleLag: sourcedef.NoSettleLag}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sum, err := r.Tick(context.Background(), "")
	if err != nil || sum.Rows != rows {
		t.Fatalf("tick: %+v %v", sum, err)
	}
	got := rec.read(t)
	ids := map[string]bool{}
	for _, m := range got {
		ids[m.ID] = true
	}
	if len(got) != rows || len(ids) != rows {
		t.Fatalf("%d messages, %d distinct ids, for %d rows", len(got), len(ids), rows)
	}
	if w := st.Puts.Load(); w > int64(sum.Batches)+1 {
		t.Fatalf("%d blob writes for %d batches: more than batches + 1", w, sum.Batches)
	}
}

// TestSchemaFields: poller.schema.json's sink object has a property for each field of Config
// (and its auth object one for each of WebhookAuth's), no more, so that editors offer what New
// takes; the fields only a webhook takes are refused there on other types, as New refuses them.
func TestSchemaFields(t *testing.T) {
	data, err := os.ReadFile("../poller.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	type object struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	var schema struct {
		Properties struct {
			Sink struct {
				object
				AllOf []struct {
					Else struct {
						Properties map[string]json.RawMessage `json:"properties"`
					} `json:"else"`
				} `json:"allOf"`
			} `json:"sink"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	sinkSchema := schema.Properties.Sink
	var auth object
	if sinkSchema.Properties["auth"] == nil {
		t.Fatal("poller.schema.json's sink has no auth property (sink.Config.Auth)")
	}
	if err := json.Unmarshal(sinkSchema.Properties["auth"], &auth); err != nil {
		t.Fatal(err)
	}
	for what, c := range map[string]struct {
		schema map[string]json.RawMessage
		typ    reflect.Type
	}{"sink": {sinkSchema.Properties, reflect.TypeFor[Config]()}, "sink.auth": {auth.Properties, reflect.TypeFor[WebhookAuth]()}} {
		var fieldNames, props []string
		for f := range c.typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			fieldNames = append(fieldNames, name)
		}
		for p := range c.schema {
			props = append(props, p)
		}
		slices.Sort(fieldNames)
		slices.Sort(props)
		if !slices.Equal(fieldNames, props) {
			t.Errorf("poller.schema.json's %s properties %v; %s's fields %v", what, props, c.typ, fieldNames)
		}
	}
	var refused []string
	for _, a := range sinkSchema.AllOf {
		for p, s := range a.Else.Properties {
			if string(s) == "false" {
				refused = append(refused, p)
			}
		}
	}
	slices.Sort(refused)
	if want := []string{"auth", "signing_secret"}; !slices.Equal(refused, want) {
		t.Errorf("poller.schema.json refuses %v on sinks other than webhook; want %v", refused, want)
	}
	for _, f := range []string{"signing_secret", "auth"} {
		for typ, allowed := range fields {
			if slices.Contains(allowed, f) != (typ == Webhook) {
				t.Errorf("fields[%s] and %s: only a webhook takes %s", typ, f, f)
			}
		}
	}
}
