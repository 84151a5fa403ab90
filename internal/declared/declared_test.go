package declared

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/pollers"
	"github.com/pseudotrigger/pseudotrigger/pollertest"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// TestExample: the repository's orders-queue/poller.json is a poller over orders sending to a
// storage queue, listed after the Go pollers (whatever others the app has).
func TestExample(t *testing.T) {
	all, err := Load("../..", pollers.All())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var example *pollerdef.Def
	for i, p := range all {
		names = append(names, p.Name())
		if p.Err() != nil {
			t.Errorf("%s: %v", p.Name(), p.Err())
		}
		if i < len(pollers.All()) && p.Name() != pollers.All()[i].Name() {
			t.Errorf("poller %d is %s, not the Go poller %s", i, p.Name(), pollers.All()[i].Name())
		}
		if p.Name() == "orders-queue" {
			example = p
		}
	}
	if example == nil {
		t.Fatalf("no orders-queue among %v", names)
	}
	d := example.Source()
	if d.Table.Name != "orders" || !slices.Equal(d.Columns, []string{"id", "customer", "amount", "updated_at"}) ||
		!slices.Equal(d.PK, []string{"id"}) || d.Cursor.Kind != string(poller.TimestampPK) || d.Cursor.Column != "updated_at" ||
		d.SettleLag != 5*time.Second || example.BatchSize() != 500 {
		t.Fatalf("orders-queue's definition: %+v, batch size %d", d, example.BatchSize())
	}
}

func write(t *testing.T, root, name, pollerJSON string, function bool) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if function {
		if err := os.WriteFile(filepath.Join(root, name, "function.json"), []byte(`{"bindings":[]}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, name, File), []byte(pollerJSON), 0o644); err != nil {
		t.Fatal(err)
	}
}

const good = `{"source":{"table":"t","columns":["id","v"],"key":["id"],"cursor":{"kind":"integer","column":"id"}},
 "sink":{"type":"webhook","url":"%HOOK%"}}`

// TestBadFilesFailAlone: each bad poller.json makes a failed poller whose error names the file
// and the field; the good one next to it loads, and its settings read.
func TestBadFilesFailAlone(t *testing.T) {
	root := t.TempDir()
	cases := map[string]struct{ json, want string }{
		"unknown":       {strings.Replace(good, `"table"`, `"tabel":"x","table"`, 1), `bad-unknown/poller.json: source.tabel is not a field of poller.json (did you mean source.table?)`},
		"type":          {strings.Replace(good, `"sink"`, `"batch_size":"500","sink"`, 1), `bad-type/poller.json: batch_size: a JSON string where a whole number is expected`},
		"kind":          {strings.Replace(good, `"integer"`, `"timestamp"`, 1), `bad-kind/poller.json: source.cursor.kind: "timestamp" is not one of timestamp+pk, integer, rowversion, xid, logical, changetracking`},
		"nokey":         {strings.Replace(good, `"key":["id"],`, ``, 1), `bad-nokey/poller.json: source.key: required`},
		"sinktype":      {strings.Replace(good, `"webhook"`, `"kafka"`, 1), `bad-sinktype/poller.json: sink.type: "kafka" is not one of webhook, storagequeue`},
		"sinkfield":     {strings.Replace(good, `"url":"%HOOK%"`, `"url":"%HOOK%","queue":"q1x"`, 1), `bad-sinkfield/poller.json: sink.queue: is not an option of a webhook sink`},
		"queue":         {strings.Replace(good, `{"type":"webhook","url":"%HOOK%"}`, `{"type":"storagequeue","connection":"Q"}`, 1), `bad-queue/poller.json: sink.queue: "" is not a storage queue name`},
		"syntax":        {good[:40], `bad-syntax/poller.json: `},
		"sinkknown":     {strings.Replace(good, `"url"`, `"urll":"x","url"`, 1), `bad-sinkknown/poller.json: sink.urll is not a field of poller.json (did you mean sink.url?)`},
		"lag":           {strings.Replace(good, `"columns"`, `"settle_lag":"5 s","columns"`, 1), `bad-lag/poller.json: source.settle_lag: "5 s" is not a Go duration`},
		"logicalcolumn": {strings.Replace(good, `"integer"`, `"logical"`, 1), `bad-logicalcolumn/poller.json: source.cursor.column: a logical cursor reads the database's record of changes and takes no column ("id")`},
		"ctcolumn":      {strings.Replace(good, `"integer"`, `"changetracking"`, 1), `bad-ctcolumn/poller.json: source.cursor.column: a changetracking cursor`},
		"ctfilter":      {strings.Replace(good, `{"kind":"integer","column":"id"}`, `{"kind":"changetracking"},"filter":"v <> ''"`, 1), `bad-ctfilter/poller.json: source.filter: a changetracking cursor delivers every change`},
		"logicallag":    {strings.Replace(good, `{"kind":"integer","column":"id"}`, `{"kind":"logical"},"settle_lag":"5s"`, 1), `bad-logicallag/poller.json: source.settle_lag: applies to timestamp+pk cursors only; this poller's cursor is logical, which reads committed changes`},
		"integerlag":    {strings.Replace(good, `"columns"`, `"settle_lag":"5s","columns"`, 1), `bad-integerlag/poller.json: source.settle_lag: applies to timestamp+pk cursors only; this poller's cursor is integer`},
		"nocolumn":      {strings.Replace(good, `,"column":"id"`, ``, 1), `bad-nocolumn/poller.json: source.cursor.column: required`},
		"initial":       {strings.Replace(good, `{"kind":"integer","column":"id"}`, `{"kind":"logical"},"initial":"all"`, 1), `bad-initial/poller.json: source.initial: "all" is not "now"`},
		"allkeyset":     {strings.Replace(good, `"columns":["id","v"]`, `"columns":["*"]`, 1), `bad-allkeyset/poller.json: source.columns: ["*"] alone reads every column, for the logical cursor only`},
		"skipkeyset":    {strings.Replace(good, `"columns"`, `"skip_writer":"app","columns"`, 1), `bad-skipkeyset/poller.json: source.skip_writer: is for the logical and changetracking cursors`},
		"skipname":      {strings.Replace(good, `{"kind":"integer","column":"id"}`, `{"kind":"logical"},"skip_writer":"my app"`, 1), `bad-skipname/poller.json: source.skip_writer: "my app": a writer's name has letters, digits and . _ - : only, not ' '`},
		"outboxbatch": {strings.Replace(good, `"sink":{"type":"webhook","url":"%HOOK%"}`, `"outbox":{"id":"id","aggregate_type":"v","aggregate_id":"id","payload":"v"},`+
			`"route":{"column":"v","sinks":{"a":{"type":"webhook","url":"%HOOK%","mode":"batch"},"b":{"mode":"batch","type":"storagequeue","connection":"Q","queue":"events"}}}`, 1),
			`bad-outboxbatch/poller.json: route.sinks.b.mode: "batch" with an outbox is a webhook's (many events to a POST, as CloudEvents); a storagequeue sink sends each event as a message of its own`},
		"initialkeyset": {strings.Replace(good, `"columns"`, `"initial":"snapshot","columns"`, 1), `bad-initialkeyset/poller.json: source.initial: "snapshot" is for the logical and changetracking cursors: the integer cursor`},
	}
	for name, c := range cases {
		write(t, root, "bad-"+name, c.json, true)
	}
	write(t, root, "nofunction", good, false)
	write(t, root, "good", good, true)
	all, err := Load(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*pollerdef.Def{}
	for _, p := range all {
		got[p.Name()] = p
	}
	for name, c := range cases {
		p := got["bad-"+name]
		if p == nil || p.Err() == nil || !strings.Contains(p.Err().Error(), c.want) {
			t.Errorf("bad-%s: %v; want an error containing %q", name, p.Err(), c.want)
			continue
		}
		// Every use goes through the settings, which fail with the same error.
		if _, err := appsettings.Load(p, func(string) string { return "" }); !errors.Is(err, p.Err()) {
			t.Errorf("bad-%s: appsettings.Load: %v", name, err)
		}
	}
	if err := got["nofunction"].Err(); err == nil || !strings.Contains(err.Error(), "nofunction/function.json is missing") {
		t.Errorf("a poller.json without function.json: %v", err)
	}
	if p := got["good"]; p.Err() != nil {
		t.Fatalf("the good poller failed: %v", p.Err())
	}
}

// TestChangeStreamKinds: "logical" and "changetracking" take no column; the poller reads the
// declared columns and key, with no cursor column, and a logical one gets its slot settings.
func TestChangeStreamKinds(t *testing.T) {
	root := t.TempDir()
	for _, kind := range []string{"logical", "changetracking"} {
		write(t, root, kind, strings.Replace(good, `{"kind":"integer","column":"id"}`, `{"kind":"`+kind+`"},"skip_writer":"orders-app"`, 1), true)
	}
	all, err := Load(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		if p.Err() != nil {
			t.Fatalf("%s: %v", p.Name(), p.Err())
		}
		d := p.Source()
		if d.SkipWriter != "orders-app" {
			t.Errorf("%s: skip_writer %q", p.Name(), d.SkipWriter)
		}
		if d.Cursor.Kind != p.Name() || d.Cursor.Column != "" || !slices.Equal(d.Columns, []string{"id", "v"}) || !slices.Equal(d.PK, []string{"id"}) {
			t.Errorf("%s: %+v", p.Name(), d)
		}
		env := map[string]string{"POLLER_APP_NAME": "app1"}
		s, _ := appsettings.Load(p, func(k string) string { return env[k] })
		if want := map[string]string{"logical": "pseudotrigger_app1_logical"}[p.Name()]; s.Slot != want || s.Publication != want {
			t.Errorf("%s: slot %q publication %q, want %q", p.Name(), s.Slot, s.Publication, want)
		}
	}
}

// TestConflict: a name declared in Go and as a folder stops the app.
func TestConflict(t *testing.T) {
	root := t.TempDir()
	write(t, root, "Orders", good, true)
	if _, err := Load(root, pollers.All()); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "Orders/poller.json") {
		t.Fatalf("Load: %v; want ErrConflict naming Orders/poller.json", err)
	}
}

// TestDeclaredPollerDelivers: a declared poller with a webhook sink runs the real tick over
// SQLite and the webhook receives each row as a Change, its URL and a header from app settings.
func TestDeclaredPollerDelivers(t *testing.T) {
	var (
		mu  sync.Mutex
		got []sink.Change
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c sink.Change
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil || r.Header.Get("X-Key") != "k1" || r.Header.Get("Idempotency-Key") != c.ID {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, c)
		mu.Unlock()
	}))
	defer srv.Close()
	spec, err := Parse([]byte(strings.Replace(good, `"url":"%HOOK%"`, `"url":"%HOOK%","headers":{"X-Key":"%HOOK_KEY%"}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Poller("widgets") // what Read makes of widgets/poller.json
	if err != nil {
		t.Fatal(err)
	}
	h := pollertest.New(t, p, "HOOK="+srv.URL, "HOOK_KEY=k1")
	if _, err := h.DB.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)`); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int{3, 1, 2} {
		if _, err := h.DB.Exec(`INSERT INTO t VALUES (?, ?)`, id, "v"+string(rune('0'+id))); err != nil {
			t.Fatal(err)
		}
	}
	if r := h.Tick(); r.Rows != 3 {
		t.Fatalf("tick: %+v", r)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Key["id"].(float64) < got[j].Key["id"].(float64) })
	if len(got) != 3 || got[0].Poller != "widgets" || string(got[0].Row) != `{"id":1,"v":"v1"}` || got[2].Op != "upsert" {
		t.Fatalf("received %+v", got)
	}
}

// TestSchemaMatchesSpec: poller.schema.json names exactly the fields Spec, Source, Cursor, Route
// and sink.Config decode (route's sinks being sinks), and the same enums: the sink types, state.Kinds, and as the kinds that take
// no cursor column those of state.ChangeKind.
func TestSchemaMatchesSpec(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("../..", SchemaFile))
	if err != nil {
		t.Fatal(err)
	}
	type node struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Enum       []string                   `json:"enum"`
	}
	props := func(raw json.RawMessage, path string) map[string]json.RawMessage {
		var n node
		if err := json.Unmarshal(raw, &n); err != nil || n.Properties == nil {
			t.Fatalf("%s: no properties in the schema (%v)", path, err)
		}
		return n.Properties
	}
	keys := func(m map[string]json.RawMessage) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	fields := func(v any) []string {
		var out []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			out = append(out, name)
		}
		sort.Strings(out)
		return out
	}
	enum := func(raw json.RawMessage) []string {
		var n node
		_ = json.Unmarshal(raw, &n)
		sort.Strings(n.Enum)
		return n.Enum
	}
	items := func(raw json.RawMessage) json.RawMessage {
		var n struct {
			Items json.RawMessage `json:"items"`
		}
		_ = json.Unmarshal(raw, &n)
		return n.Items
	}
	ifKind := func(raw json.RawMessage) json.RawMessage { // the "if" of cursor: the kinds that take no column
		var n struct {
			If json.RawMessage `json:"if"`
		}
		_ = json.Unmarshal(raw, &n)
		return n.If
	}
	top := props(data, "poller.json")
	src := props(top["source"], "source")
	snk := props(top["sink"], "sink")
	for _, c := range []struct {
		path         string
		schema, code []string
	}{
		{"poller.json", keys(top), fields(Spec{})},
		{"source", keys(src), fields(Source{})},
		{"source.cursor", keys(props(src["cursor"], "source.cursor")), fields(Cursor{})},
		{"source.tables[]", keys(props(items(src["tables"]), "source.tables[]")), fields(Table{})},
		{"sink", keys(snk), fields(sink.Config{})},
		{"route", keys(props(top["route"], "route")), fields(Route{})},
		{"sink.type", enum(snk["type"]), sorted(sink.Types)},
		{"source.cursor.kind", enum(props(src["cursor"], "")["kind"]), sorted(state.Kinds)},
		{"source.cursor's change kinds (if)", enum(props(ifKind(src["cursor"]), "source.cursor.if")["kind"]), sorted(slices.DeleteFunc(slices.Clone(state.Kinds), func(k string) bool { return !state.ChangeKind(k) }))},
	} {
		if !slices.Equal(c.schema, c.code) {
			t.Errorf("%s: the schema has %v, the code %v", c.path, c.schema, c.code)
		}
	}
	// route's sinks and default are sinks as the poller's is.
	var route struct {
		Properties struct {
			Sinks struct {
				Values struct {
					Ref string `json:"$ref"`
				} `json:"additionalProperties"`
			} `json:"sinks"`
			Default struct {
				Ref string `json:"$ref"`
			} `json:"default"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(top["route"], &route); err != nil || route.Properties.Sinks.Values.Ref != "#/properties/sink" || route.Properties.Default.Ref != "#/properties/sink" {
		t.Errorf("route.sinks' values and route.default are not the sink's schema: %+v (%v)", route, err)
	}
	// The example names the schema, so that editors validate it.
	ex, err := os.ReadFile("../../orders-queue/poller.json")
	if err != nil {
		t.Fatal(err)
	}
	if spec, err := Parse(ex); err != nil || spec.Schema != "../"+SchemaFile {
		t.Fatalf("orders-queue/poller.json: %v, $schema %q", err, spec.Schema)
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// TestFolders: the poller folders are the function folders with a timer trigger and the Go
// pollers' packages; an HTTP function, a folder without function.json and a function.json that
// does not parse are not.
func TestFolders(t *testing.T) {
	root := t.TempDir()
	write := func(path, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("orders/function.json", `{"bindings": [{"type": "timerTrigger", "schedule": "%ORDERS_SCHEDULE%"}]}`)
	write("invoices/function.json", `{"bindings": [{"type": "timerTrigger"}]}`)
	write("invoices/poller.json", `{}`)
	write("status/function.json", `{"bindings": [{"type": "httpTrigger"}]}`)
	write("broken/function.json", `{`)
	write("notes/readme.txt", `x`)
	write("pollers/shipments/shipments.go", `package shipments`)
	if got := Folders(root); strings.Join(got, " ") != "invoices orders shipments" {
		t.Fatalf("Folders: %v", got)
	}
}
