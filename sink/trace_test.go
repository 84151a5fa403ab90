package sink

import (
	"testing"
)

// TestTraceProperties: a message with a trace context carries it in its Service Bus application
// properties and Event Hubs properties under the names the Azure SDKs read (the emulators'
// conformance runs check what the services deliver, in the GitHub workflow); one without carries
// none.
func TestTraceProperties(t *testing.T) {
	const parent, state = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "congo=t61rcWkgMzE"
	m := testMessage("k", 1, 10)
	if props := sbMessage(m, false).ApplicationProperties; len(props) != 2 {
		t.Fatalf("without a trace context: %v", props)
	}
	m.TraceParent, m.TraceState = parent, state
	for name, props := range map[string]map[string]any{
		"service bus": sbMessage(m, false).ApplicationProperties, "event hubs": ehEvent(m).Properties,
	} {
		if props["traceparent"] != parent || props["Diagnostic-Id"] != parent || props["tracestate"] != state || props["poller"] != "orders" {
			t.Errorf("%s: properties %v", name, props)
		}
	}
	if ext := extensions(m); ext["traceparent"] != parent || ext["tracestate"] != state || len(ext) != 2 {
		t.Errorf("CloudEvent extensions %v", ext)
	}
}
