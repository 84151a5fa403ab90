package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/pseudotrigger/pseudotrigger/internal/telemetry"
)

// collectorComponents are the OpenTelemetry Collector components a ```yaml collector block may
// use, with the keys each takes (a nested key as "a.b"), as their sources and Microsoft's page
// define them: the contrib distribution's otlp receiver, batch and cumulativetodelta processors,
// otlphttp exporter (its endpoints and auth), azuremonitor exporter
// (open-telemetry/opentelemetry-collector-contrib exporter/azuremonitorexporter/config.go,
// a24659b) and azureauth extension (managed_identity.client_id, use_default, scopes: "Ingest
// OTLP data into Azure Monitor with OTel Collector", MicrosoftDocs/azure-monitor-docs 01f8487).
var collectorComponents = map[string]map[string][]string{
	"receivers":  {"otlp": {"protocols", "protocols.http", "protocols.http.endpoint", "protocols.grpc", "protocols.grpc.endpoint"}},
	"processors": {"batch": nil, "cumulativetodelta": nil},
	"exporters": {
		"otlphttp": {"endpoint", "traces_endpoint", "metrics_endpoint", "logs_endpoint", "headers", "auth", "auth.authenticator"},
		"azuremonitor": {"connection_string", "instrumentation_key", "endpoint", "maxbatchsize", "maxbatchinterval", "spaneventsenabled",
			"shutdown_timeout", "custom_events_enabled", "exception_events_enabled", "sending_queue"},
	},
	"extensions": {"azureauth": {"managed_identity", "managed_identity.client_id", "use_default", "scopes"}},
}

// TestCollectorConfig: a Collector configuration in the docs parses, uses only the components
// and keys above, defines every component its pipelines and service name, and receives OTLP/HTTP
// on 4318, where the handler sends it.
func TestCollectorConfig(t *testing.T) {
	bs := blocksOf(t, "yaml", "collector")
	if len(bs) == 0 {
		t.Fatal("no ```yaml collector block: docs/telemetry.md's Azure Monitor section has one")
	}
	for _, b := range bs {
		var cfg map[string]any
		if err := yaml.Unmarshal([]byte(b.body), &cfg); err != nil {
			t.Errorf("%s: %v", b, err)
			continue
		}
		defined := map[string]bool{}
		for section, kinds := range collectorComponents {
			comps, _ := cfg[section].(map[string]any)
			for id, body := range comps {
				kind := strings.SplitN(id, "/", 2)[0]
				keys, ok := kinds[kind]
				if !ok {
					t.Errorf("%s: %s.%s: not a component the test knows", b, section, id)
					continue
				}
				defined[section+"/"+id] = true
				for _, k := range flatKeys("", body) {
					if !slices.Contains(keys, k) {
						t.Errorf("%s: %s.%s.%s: not a key of %s", b, section, id, k, kind)
					}
				}
			}
		}
		service, _ := cfg["service"].(map[string]any)
		for _, e := range list(service["extensions"]) {
			if !defined["extensions/"+e] {
				t.Errorf("%s: service.extensions names %s, which is not defined", b, e)
			}
		}
		pipelines, _ := service["pipelines"].(map[string]any)
		if pipelines["traces"] == nil || pipelines["metrics"] == nil {
			t.Errorf("%s: no traces or metrics pipeline", b)
		}
		for name, p := range pipelines {
			p, _ := p.(map[string]any)
			for _, section := range []string{"receivers", "processors", "exporters"} {
				for _, id := range list(p[section]) {
					if !defined[section+"/"+id] {
						t.Errorf("%s: pipeline %s names %s %s, which is not defined", b, name, section, id)
					}
				}
			}
		}
		if !strings.Contains(b.body, "endpoint: 0.0.0.0:4318") {
			t.Errorf("%s: the otlp receiver does not take OTLP/HTTP on 4318", b)
		}
	}
}

// flatKeys lists v's keys, nested ones as "a.b".
func flatKeys(prefix string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	var out []string
	for k, sub := range m {
		out = append(out, prefix+k)
		out = append(out, flatKeys(prefix+k+".", sub)...)
	}
	return out
}

func list(v any) []string {
	var out []string
	items, _ := v.([]any)
	for _, i := range items {
		s, _ := i.(string)
		out = append(out, s)
	}
	return out
}

// TestTelemetryPage: docs/telemetry.md's variables are those the handler honours
// (telemetry.Variables), its metrics those the handler records, and its spans those it starts.
func TestTelemetryPage(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "telemetry.md"))
	if err != nil {
		t.Fatal(err)
	}
	var vars, metrics, spans []string
	for _, line := range strings.Split(string(page), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line[1:], "|", 2)[0]
		for _, c := range inlineCode.FindAllString(first, -1) {
			name := strings.Trim(c, "`")
			switch {
			case strings.HasPrefix(name, "OTEL_"):
				vars = append(vars, name)
			case strings.HasPrefix(name, "pseudotrigger."):
				metrics = append(metrics, name)
			case !strings.Contains(name, "_") && !strings.Contains(name, "."):
				spans = append(spans, name)
			}
		}
	}
	slices.Sort(vars)
	want := slices.Sorted(slices.Values(telemetry.Variables))
	if !slices.Equal(vars, want) {
		t.Errorf("the page's variables %v; the handler honours %v", vars, want)
	}
	src, err := os.ReadFile(filepath.Join(repoRoot, "internal", "telemetry", "telemetry.go"))
	if err != nil {
		t.Fatal(err)
	}
	var recorded []string
	for _, m := range regexp.MustCompile(`\.(?:Int64|Float64)(?:Counter|Gauge|Histogram)\("([^"]+)"`).FindAllStringSubmatch(string(src), -1) {
		recorded = append(recorded, m[1])
	}
	slices.Sort(metrics)
	slices.Sort(recorded)
	if len(recorded) == 0 || !slices.Equal(metrics, recorded) {
		t.Errorf("the page's metrics %v; the handler records %v", metrics, recorded)
	}
	var code strings.Builder
	for _, f := range []string{"internal/tick/telemetry.go", "internal/tick/tick.go", "internal/tick/deliver.go", "sink/trace.go"} {
		data, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		code.Write(data)
	}
	if len(spans) < 6 {
		t.Fatalf("the page's span table names %v", spans)
	}
	for _, s := range spans {
		name := strings.SplitN(s, " {", 2)[0] // "tick {poller}": "tick " + the poller
		if !strings.Contains(code.String(), `"`+name+`"`) && !strings.Contains(code.String(), `"`+name+` "`) {
			t.Errorf("span %q: no span of that name is started", s)
		}
	}
}
