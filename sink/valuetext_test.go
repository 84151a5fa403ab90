package sink

import (
	"encoding/json"
	"testing"
	"time"
)

// TestValueText: a value as the text that names it (a key, an event id, a route's value).
func TestValueText(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
		ok   bool
	}{
		{"order", "order", true}, {int64(-7), "-7", true}, {uint64(18446744073709551615), "18446744073709551615", true},
		{2.5, "2.5", true}, {1e21, "1000000000000000000000", true}, {true, "true", true}, {false, "false", true},
		{[]byte("raw"), "cmF3", true}, {json.RawMessage(`"order"`), "order", true}, {json.RawMessage(`12`), "12", true},
		{time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), "2025-01-02T03:04:05Z", true},
		{time.Date(2025, 1, 2, 4, 4, 5, 0, time.FixedZone("", 3600)), "2025-01-02T03:04:05Z", true},
		{nil, "", false}, {json.RawMessage(`null`), "", false},
	} {
		if got, ok := ValueText(c.v); got != c.want || ok != c.ok {
			t.Errorf("ValueText(%#v) = %q, %v; want %q, %v", c.v, got, ok, c.want, c.ok)
		}
	}
}
