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
