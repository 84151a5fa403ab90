package scaffold_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/declared"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// TestScaffoldDeclared: `pollerctl new NAME --sink TYPE` writes a function.json and a poller.json
// the handler reads as a working poller of that sink, adds the Bicep entry, writes no Go, and
// prints the sink's connection settings.
func TestScaffoldDeclared(t *testing.T) {
	want := map[string]string{
		sink.Webhook: "ZZDECL_WEBHOOK_URL", sink.StorageQueue: "ZZDECL_SINK__queueServiceUri",
		sink.ServiceBus: "ZZDECL_SINK__fullyQualifiedNamespace", sink.EventHubs: "ZZDECL_SINK__fullyQualifiedNamespace",
		sink.EventGrid: "ZZDECL_SINK__topicEndpointUri",
	}
	for _, typ := range sink.Types {
		t.Run(typ, func(t *testing.T) {
			dir := miniRepo(t, nil)
			before := tree(t, dir)
			got, out := run(dir, "zzdecl", "--sink", typ)
			if got != done {
				t.Fatalf("%s: %s", got, out)
			}
			p := declared.Read(dir, "zzdecl")
			if p.Err() != nil {
				t.Fatalf("the scaffolded poller does not load: %v", p.Err())
			}
			after := tree(t, dir)
			for path := range after {
				if _, ok := before[path]; !ok && path != "zzdecl/" && path != "zzdecl/function.json" && path != "zzdecl/poller.json" {
					t.Errorf("wrote %s", path)
				}
			}
			params := after["infra/bicep/main.bicepparam"]
			if !strings.Contains(params, "name: 'zzdecl'") {
				t.Error("no main.bicepparam pollers entry")
			}
			if hasSink := strings.Contains(params, "connection: 'ZZDECL_SINK'\n    type: '"+typ+"'"); hasSink != (typ != sink.Webhook) {
				t.Errorf("main.bicepparam has a sinks entry for ZZDECL_SINK: %v\n%s", hasSink, params)
			}
			if !strings.Contains(after["zzdecl/poller.json"], `"$schema": "../poller.schema.json"`) {
				t.Errorf("poller.json does not name the schema:\n%s", after["zzdecl/poller.json"])
			}
			if !strings.Contains(out, want[typ]) || !strings.Contains(out, "ZZDECL_DB_CONNECTION") {
				t.Errorf("the output does not name %s and ZZDECL_DB_CONNECTION:\n%s", want[typ], out)
			}
		})
	}
	t.Run("refusals", func(t *testing.T) {
		dir := miniRepo(t, nil)
		if err := os.MkdirAll(filepath.Join(dir, "taken"), 0o755); err != nil {
			t.Fatal(err)
		}
		before := tree(t, dir)
		for args, want := range map[string]outcome{"zzdecl --sink kafka": usage, "taken --sink webhook": refused, "zzdecl --sinks webhook": usage} {
			if got, out := run(dir, strings.Fields(args)...); got != want {
				t.Errorf("new %s: %s, want %s: %s", args, got, want, out)
			}
		}
		sameTree(t, "refused", before, tree(t, dir))
	})
}
