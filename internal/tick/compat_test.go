package tick_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// statsSource is a source whose reads report what a driver adds to the backlog: the change
// log its database keeps and how reads are kept behind late commits. Its first read is a move
// with nothing to deliver (as a logical cursor's keep-up), the next ones find nothing.
type statsSource struct {
	noBackfill
	retained int64
}

// noBackfill answers what a test's fake source does not play of tick.Source: it runs no
// backfill and replays no dead letter.
type noBackfill struct{}

func (noBackfill) Backfills() error { return driver.ErrNoWatermark }
func (noBackfill) ReadChunk(context.Context, map[string]json.RawMessage, string, *state.Cursor, int) (*source.Chunk, error) {
	return nil, driver.ErrNoWatermark
}
func (noBackfill) CountChunkRows(context.Context, string, int64) (int64, error) { return 0, nil }
func (noBackfill) Identity() state.SourceDef                                    { return state.SourceDef{} }
func (noBackfill) ReplayChange(context.Context, string, string, map[string]json.RawMessage, state.Cursor) (*row.Row, string, error) {
	return nil, "", errors.ErrUnsupported
}
func (noBackfill) ReplayEvent(string, string, json.RawMessage, state.Cursor) (*row.Row, error) {
	return nil, errors.ErrUnsupported
}
func (noBackfill) FetchKeyOf(context.Context, *state.Cursor) (*row.Batch, error) {
	return nil, errors.ErrUnsupported
}

func (s *statsSource) Fetch(_ context.Context, after *state.Cursor, _ int) (*row.Batch, error) {
	if after == nil {
		return &row.Batch{To: &state.Cursor{Kind: state.KindInteger, Value: json.RawMessage("7")}}, nil
	}
	return &row.Batch{From: after}, nil
}
func (s *statsSource) Fingerprint() string { return "sha256:stats" }
func (s *statsSource) Backlog(context.Context, *state.Cursor, int) (driver.Stats, error) {
	return s.Stats(), nil
}
func (s *statsSource) CheckStamps(context.Context) error              { return nil }
func (s *statsSource) Committed(context.Context, *state.Cursor) error { return nil }
func (s *statsSource) CommitWanted() bool                             { return false }
func (s *statsSource) Stats() driver.Stats {
	return driver.Stats{RetainedBytes: &s.retained, LateCommits: "open transactions (the oldest, connection 12, open 3 s)"}
}

// TestTickStatsCompat pins what the tick's summary (the host's ReturnValue), its log line and
// the state document's history say of a source's own measures, byte for byte: the retained
// change log as slot_retained_bytes and the late-commit bound's text as late_commit_bound.
func TestTickStatsCompat(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 4, 7, 2, 0, 0, 0, time.UTC))
	st := memstore.New(clk)
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	p := ordersPoller(func(context.Context, *poller.Batch[poller.Row]) error { return nil })
	m, err := lease.New(st, lease.Config{Poller: "orders", Blob: blobpath.State("test", "orders"), Owner: "A", Fingerprint: "sha256:stats", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	r := &tick.Runner{Poller: pollerdef.Of(p), Lease: m, Source: &statsSource{retained: 4096}, Clock: clk, Logger: log,
		Settings: appsettings.Settings{BatchSize: 10, LeaseTTL: lease.DefaultTTL, HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: time.Minute}}

	sum, err := r.Tick(ctx, "inv-move")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(sum)
	want := `{"poller":"orders","outcome":"committed","rows":0,"batches":1,"fencing_token":1,"cursor":{"kind":"integer","value":7},"duration_ms":0,"attempt":1,"lag_seconds":0,"rows_waiting":0,"slot_retained_bytes":4096,"late_commit_bound":"open transactions (the oldest, connection 12, open 3 s)"}`
	if string(got) != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
	sum, err = r.Tick(ctx, "inv-idle")
	if err != nil {
		t.Fatal(err)
	}
	got, _ = json.Marshal(sum)
	want = `{"poller":"orders","outcome":"idle","rows":0,"batches":0,"fencing_token":1,"cursor":{"kind":"integer","value":7},"duration_ms":0,"lag_seconds":0,"rows_waiting":0,"slot_retained_bytes":4096,"late_commit_bound":"open transactions (the oldest, connection 12, open 3 s)"}`
	if string(got) != want {
		t.Errorf("idle summary:\n%s\nwant:\n%s", got, want)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, `"msg":"tick"`) {
			lines = append(lines, l)
		}
	}
	wantLines := []string{
		`{"level":"INFO","msg":"tick","poller":"orders","invocation_id":"inv-move","outcome":"committed","rows":0,"batches":1,"attempt":1,"fencing_token":1,"cursor":"{\"kind\":\"integer\",\"value\":7}","rows_waiting":0,"duration_ms":0,"lag_seconds":0,"slot_retained_bytes":4096,"late_commit_bound":"open transactions (the oldest, connection 12, open 3 s)"}`,
		`{"level":"INFO","msg":"tick","poller":"orders","invocation_id":"inv-idle","outcome":"idle","rows":0,"batches":0,"attempt":0,"fencing_token":1,"cursor":"{\"kind\":\"integer\",\"value\":7}","rows_waiting":0,"duration_ms":0,"lag_seconds":0,"slot_retained_bytes":4096,"late_commit_bound":"open transactions (the oldest, connection 12, open 3 s)"}`,
	}
	if strings.Join(lines, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("tick lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(wantLines, "\n"))
	}
	b, err := st.Get(ctx, blobpath.State("test", "orders"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		History []json.RawMessage `json:"history"`
	}
	if err := json.Unmarshal(b.Data, &doc); err != nil || len(doc.History) != 1 {
		t.Fatalf("history: %v %s", err, b.Data)
	}
	var entry bytes.Buffer
	if err := json.Compact(&entry, doc.History[0]); err != nil {
		t.Fatal(err)
	}
	if want := `{"at":"2026-04-07T02:00:00.000000Z","outcome":"committed","rows":0,"lag_seconds":0,"rows_waiting":0,"slot_retained_bytes":4096,"duration_ms":0}`; entry.String() != want {
		t.Errorf("history entry:\n%s\nwant:\n%s", entry.String(), want)
	}
}
