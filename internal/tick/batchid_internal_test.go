package tick

import (
	"encoding/json"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// TestBatchIDStable: a batch's ID is a contract (consumers deduplicate on it, a retry must carry
// the ID it had): the same poller, fingerprint and cursor range give this ID, whichever order
// the tiebreaker's map holds its columns in, in every build.
func TestBatchIDStable(t *testing.T) {
	from := &state.Cursor{Kind: state.KindTimestampPK, Value: json.RawMessage(`"2026-01-01T00:00:00Z"`),
		Tiebreaker: map[string]json.RawMessage{"region": json.RawMessage(`"eu"`), "id": json.RawMessage(`41`)}}
	to := &state.Cursor{Kind: state.KindTimestampPK, Value: json.RawMessage(`"2026-01-01T00:00:05Z"`),
		Tiebreaker: map[string]json.RawMessage{"id": json.RawMessage(`42`), "region": json.RawMessage(`"eu"`)}}
	const want = "batch_6090b385268beaf377ced368"
	if got := batchID("orders", "sha256:0123", from.JSON(), to.JSON()); got != want {
		t.Errorf("batch ID %s, want %s", got, want)
	}
	if got := batchID("orders", "sha256:0123", (*state.Cursor)(nil).JSON(), to.JSON()); got == want {
		t.Error("a batch from the beginning has the ID of one from a cursor")
	}
}
