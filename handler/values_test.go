package handler_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestDeclaredNonFiniteToWebhook: a declared poller on a PostgreSQL table whose float8, float4
// and array columns hold NaN and the infinities delivers every row to its webhook, with those
// values as strings (issue 42: the first such row failed its batch's JSON and blocked the
// poller).
func TestDeclaredNonFiniteToWebhook(t *testing.T) {
	dsn := testenv.Postgres(t)
	db := testenv.DB(t, "pgx", dsn)
	table := testenv.Name("nf_")
	if _, err := db.Exec(`CREATE TABLE ` + table + ` (id bigint PRIMARY KEY, reading float8, peak float4, samples float8[]);
		INSERT INTO ` + table + ` VALUES (1, 'NaN', 'Infinity', '{1.5,-Infinity}'), (2, '-Infinity', 3.4028235e+38, '{NaN}'), (3, 21.5, '-0', '{}')`); err != nil {
		t.Fatal(err)
	}
	defer db.Exec("DROP TABLE " + table)

	var (
		mu   sync.Mutex
		rows = map[float64]string{}
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m struct {
			Row json.RawMessage `json:"row"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("webhook body %s: %v", b, err)
		}
		var id struct{ ID float64 }
		_ = json.Unmarshal(m.Row, &id)
		mu.Lock()
		rows[id.ID] = string(m.Row)
		mu.Unlock()
	}))
	defer hook.Close()
	root := t.TempDir()
	declarePoller(t, root, "sensors", `{"source":{"table":"`+table+`","columns":["id","reading","peak","samples"],"key":["id"],"cursor":{"kind":"integer","column":"id"}},"sink":{"type":"webhook","url":"%HOOK%"}}`)
	env := map[string]string{"AzureWebJobsScriptRoot": root, "SENSORS_DB_DRIVER": "postgres", "SENSORS_DB_CONNECTION": dsn, "HOOK": hook.URL}
	app := handler.NewForTest(t, handler.Options{
		Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}, handler.Internals{Store: memstore.New(nil), NoProbe: true})
	srv := httptest.NewServer(app.Routes())
	defer srv.Close()
	if status, m, _ := post(t, srv.URL+"/sensors", strings.ReplaceAll(body, `"good"`, `"sensors"`)); status != 200 {
		t.Fatalf("POST /sensors: %d %v", status, m)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, want := range map[float64]string{
		1: `{"id":1,"reading":"NaN","peak":"Infinity","samples":[1.5,"-Infinity"]}`,
		2: `{"id":2,"reading":"-Infinity","peak":3.4028235e+38,"samples":["NaN"]}`,
		3: `{"id":3,"reading":21.5,"peak":-0,"samples":[]}`,
	} {
		if rows[id] != want {
			t.Errorf("row %v: the webhook got %s, want %s", id, rows[id], want)
		}
	}
}
