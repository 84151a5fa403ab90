package state

import (
	"encoding/json"
	"fmt"
)

// Tombstone is what a deleted state document leaves: its last fencing token, so that a document
// created again under the poller's name starts above it and a sink comparing tokens never sees
// them go backwards.
type Tombstone struct {
	PollerName   string `json:"poller_name"`
	FencingToken int64  `json:"fencing_token"`
	DeletedAt    Time   `json:"deleted_at"`
}

// DecodeTombstone parses the tombstone stored in blob.
func DecodeTombstone(blob string, data []byte) (Tombstone, error) {
	var t Tombstone
	if err := json.Unmarshal(data, &t); err != nil {
		return t, &Error{Blob: blob, Err: ErrCorrupt, Detail: err.Error()}
	}
	if t.FencingToken < 0 || t.FencingToken > MaxFencingToken {
		return t, &Error{Blob: blob, Err: ErrCorrupt, Detail: fmt.Sprintf("fencing_token %d is outside 0..%d", t.FencingToken, MaxFencingToken)}
	}
	return t, nil
}
