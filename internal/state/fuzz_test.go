package state_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// FuzzDecode: any bytes either decode into a document that encodes and decodes back to the
// same bytes, or fail with one of the package's sentinels naming the blob. Never a panic.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(seedDoc), "orders")
	f.Add([]byte(`{"version": 1, "poller_name": "orders", "source_fingerprint": "", "checkpoint": {"cursor": null}, "lease": {}}`), "orders")
	f.Add([]byte(`{"version": 2}`), "orders")
	f.Add([]byte(`{"version": 1, "poller_name": "orders", "failure": {"attempts": 0}}`), "orders")
	f.Add([]byte(`{"version":1,"poller_name":"x","checkpoint":{"cursor":{"kind":"xid","value":18446744073709551615}}}`), "x")
	f.Add([]byte(``), "")
	f.Fuzz(func(t *testing.T, data []byte, poller string) {
		d, err := state.Decode("state/fuzz/p.json", poller, data)
		if err != nil {
			var se *state.Error
			if !errors.As(err, &se) || se.Blob != "state/fuzz/p.json" ||
				!(errors.Is(err, state.ErrCorrupt) || errors.Is(err, state.ErrVersion) || errors.Is(err, state.ErrPollerMismatch)) {
				t.Fatalf("an error that is not the package's: %v", err)
			}
			return
		}
		out, err := state.Encode(d)
		if err != nil {
			t.Fatalf("a decoded document does not encode: %v", err)
		}
		d2, err := state.Decode("state/fuzz/p.json", poller, out)
		if err != nil {
			t.Fatalf("our own encoding does not decode: %v\n%s", err, out)
		}
		out2, _ := state.Encode(d2)
		if !bytes.Equal(out, out2) {
			t.Fatalf("encode/decode is not stable:\n%s\n%s", out, out2)
		}
	})
}
