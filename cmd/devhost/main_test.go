package main

import (
	"encoding/json"
	"testing"
)

// TestBacklogText: a tick's line words what waits as the status page does, labelled as the
// tick's own measure (at its end), never a made-up 0.
func TestBacklogText(t *testing.T) {
	for summary, want := range map[string]string{
		`{"rows_waiting": 0, "lag_seconds": 0, "cursor": {"kind": "timestamp+pk"}}`:      "at the tick's end: waiting 0, lag 0s (nothing waits)",
		`{"rows_waiting": 333, "lag_seconds": 5.04, "cursor": {"kind": "timestamp+pk"}}`: "at the tick's end: waiting 333, lag 5s",
		`{"rows_waiting": 10000, "lag_seconds": 61.2}`:                                   "at the tick's end: waiting at least 10000, lag 1m1s",
		`{"rows_waiting": 1365, "cursor": {"kind": "logical"}}`:                          "at the tick's end: waiting 1365, lag unknown (the logical cursor has no clock: see the rows waiting)",
		`{"rows_waiting": -1, "outcome": "lease_held"}`:                                  "at the tick's end: waiting not counted, lag -",
	} {
		var s map[string]any
		if err := json.Unmarshal([]byte(summary), &s); err != nil {
			t.Fatal(err)
		}
		if got := backlogText(s); got != want {
			t.Errorf("%s: %q, want %q", summary, got, want)
		}
	}
}

// TestFollowText: a tick that followed says for how long, its changes and their latency; one
// that did not says nothing.
func TestFollowText(t *testing.T) {
	s := map[string]any{"follow": map[string]any{"since": "2026-11-29T12:00:01.2Z", "until": "2026-11-29T12:00:05Z", "changes": 321.0,
		"latency_p50_ms": 5120.4, "latency_p95_ms": 5301.0}}
	if got, want := followText(s), "  followed 3.8s: 321 changes, commit to delivery p50 5120 ms, p95 5301 ms"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	delete(s["follow"].(map[string]any), "latency_p50_ms")
	if got, want := followText(s), "  followed 3.8s: 321 changes"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := followText(map[string]any{"rows": 3.0}); got != "" {
		t.Errorf("a tick that did not follow: %q", got)
	}
}
