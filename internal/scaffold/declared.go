package scaffold

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/declared"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// endpointSetting is the identity-based setting each sink type's connection reads.
var endpointSetting = map[string]string{
	sink.StorageQueue: "__queueServiceUri", sink.ServiceBus: "__fullyQualifiedNamespace",
	sink.EventHubs: "__fullyQualifiedNamespace", sink.EventGrid: "__topicEndpointUri",
}

// scaffoldDeclared writes NAME/function.json and NAME/poller.json, a declared poller sending to
// a sink of type sinkType, and its entry in main.bicepparam; it prints what to edit and set.
func scaffoldDeclared(env Env, root, name, sinkType string) error {
	fnDir := filepath.Join(root, name)
	if _, err := os.Stat(fnDir); err == nil {
		return fmt.Errorf("%s already exists: not overwritten", fnDir)
	}
	prefix := appsettings.Prefix(name)
	const schedule = "*/30 * * * * *"
	entity := strings.ToLower(name) + "-changes"
	cfg := sink.Config{Type: sinkType, Connection: prefix + "_SINK"}
	switch sinkType {
	case sink.Webhook:
		// The documented default mode (docs/sinks.md): a POST per row.
		cfg = sink.Config{Type: sinkType, URL: "%" + prefix + "_WEBHOOK_URL%"}
	case sink.StorageQueue, sink.ServiceBus:
		cfg.Queue = entity
	case sink.EventHubs:
		cfg.Hub = entity
	}
	spec := declared.Spec{
		Schema: "../" + declared.SchemaFile,
		Source: declared.Source{
			Table: strings.ReplaceAll(name, "-", "_"), Columns: []string{"id", "updated_at"}, Key: []string{"id"},
			Cursor: declared.Cursor{Kind: "timestamp+pk", Column: "updated_at"},
		},
		Sink: cfg,
	}
	body, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	body = append(body, '\n')
	if _, err := declared.Parse(body); err != nil { // what it writes, the handler must read
		return fmt.Errorf("the scaffolded %s/%s: %w", name, declared.File, err)
	}
	var fn bytes.Buffer
	if err := functionTemplate.Execute(&fn, struct{ Prefix string }{prefix}); err != nil {
		return err
	}
	paramsPath, params, newParams, added, err := paramsWithEntry(root, name, schedule)
	if err != nil {
		return err
	}
	if sinkType != sink.Webhook {
		text, sinkAdded, err := addEntry(string(newParams), "sinks", "connection", cfg.Connection, func(indent, nl string) string {
			return sinkEntry(cfg, indent, nl)
		})
		if err != nil {
			return fmt.Errorf("%s: %w", paramsPath, err)
		}
		newParams, added = []byte(text), added || sinkAdded
	}
	changed := map[string][2][]byte{}
	if added {
		changed[paramsPath] = [2][]byte{params, newParams}
	}
	var extra []string
	if sinkType == sink.Webhook {
		extra = []string{prefix + "_WEBHOOK_URL"}
	}
	example, err := exampleChange(root, prefix, schedule, extra, changed)
	if err != nil {
		return err
	}
	rendered := map[string][]byte{
		filepath.Join(fnDir, "function.json"): fn.Bytes(),
		filepath.Join(fnDir, declared.File):   body,
	}
	if err := writeAll([]string{fnDir}, rendered, changed); err != nil {
		return err
	}
	entry := "added its entries to the pollers and sinks arrays of infra/bicep/main.bicepparam"
	if sinkType == sink.Webhook {
		entry = "added its entry to the pollers array of infra/bicep/main.bicepparam"
	}
	if !added {
		entry = "infra/bicep/main.bicepparam already had an entry for it: check it"
	}
	fmt.Fprintf(env.Out, `created %[1]s/function.json and %[1]s/poller.json (a declared poller: no Go, no rebuild); %[2]s.
Next:
  1. Edit %[1]s/poller.json: the table, its columns, key and cursor ("source"), and the sink's
     target ("sink"); poller.schema.json describes every field, and editors validate against it.
  2. Set the source's app settings: for local runs, %[5]s
     Its settings (docs/contract.md: App settings; %[3]s_SCHEDULE is read by the host, e.g. %[4]q):
`, name, entry, prefix, schedule, example)
	printSettings(env, prefix, spec.Source.Cursor.Kind)
	if sinkType == sink.Webhook {
		fmt.Fprintf(env.Out, "  3. Set %s_WEBHOOK_URL, the URL each changed row is POSTed to, one POST per row (the sink reads it as %%%s_WEBHOOK_URL%%; \"mode\": \"batch\" in the sink sends one POST per batch instead).\n", prefix, prefix)
		return nil
	}
	fmt.Fprintf(env.Out, `  3. Set the sink's connection %[1]s: either %[1]s (a connection string; locally) or, in Azure,
     %[1]s%[2]s with %[1]s__credential=managedidentity and %[1]s__clientId (the
     sinks parameter of infra/bicep/main.bicep sets these and grants the sender role).
`, cfg.Connection, endpointSetting[sinkType])
	return nil
}

// sinkEntry is the element of main.bicep's sinks array for cfg: the target's names, EDIT-ME
// where the scaffold cannot know them (a deploy refuses EDIT-ME).
func sinkEntry(cfg sink.Config, indent, nl string) string {
	in := indent + "  "
	lines := []string{in + "{",
		in + "  // EDIT-ME (added by pollerctl new): the sink's target, an existing resource; the app's",
		in + "  // identity gets the sender role on it and the " + cfg.Connection + "__* settings.",
		in + "  connection: '" + cfg.Connection + "'", in + "  type: '" + cfg.Type + "'"}
	switch cfg.Type {
	case sink.StorageQueue:
		lines = append(lines, in+"  storageAccountName: 'EDIT-ME'", in+"  queueName: '"+cfg.Queue+"'")
	case sink.ServiceBus:
		lines = append(lines, in+"  namespaceName: 'EDIT-ME'", in+"  queueName: '"+cfg.Queue+"'")
	case sink.EventHubs:
		lines = append(lines, in+"  namespaceName: 'EDIT-ME'", in+"  hubName: '"+cfg.Hub+"'")
	case sink.EventGrid:
		lines = append(lines, in+"  topicName: 'EDIT-ME'")
	}
	return strings.Join(append(lines, in+"}"), nl) + nl
}
