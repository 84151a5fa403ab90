package pollerstatus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// fakeSource is a source with rows waiting and, when it cleans, awaiting rows behind the
// checkpoint.
type fakeSource struct {
	rows, awaiting int64
	cleans         bool
}

func (s fakeSource) Cleans() bool { return s.cleans }
func (s fakeSource) AwaitingCleanup(context.Context, *state.Cursor, int) (int64, error) {
	return s.awaiting, nil
}

func (fakeSource) Identity() state.SourceDef       { return state.SourceDef{} }
func (fakeSource) CheckCursor(*state.Cursor) error { return nil }
func (fakeSource) Inspect(context.Context, string) ([]driver.Detail, error) {
	return nil, nil
}
func (fakeSource) CheckStamps(context.Context) error { return nil }
func (fakeSource) SetupProblems(context.Context) ([]setup.Finding, bool, error) {
	return nil, false, nil
}
func (s fakeSource) Backlog(context.Context, *state.Cursor, int) (driver.Stats, error) {
	return driver.Stats{Rows: s.rows}, nil
}

// TestOpenAndProbe: a Skip skips the probe, any other error opening the source fails it (timed),
// and an opened source is probed and then closed.
func TestOpenAndProbe(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { now = now.Add(5 * time.Millisecond); return now }
	open := func(src pollerstatus.Source, done func(), err error) func(context.Context) (pollerstatus.Source, string, func(), error) {
		return func(context.Context) (pollerstatus.Source, string, func(), error) {
			return src, "state/app/p.json", done, err
		}
	}
	if p := pollerstatus.OpenAndProbe(ctx, nil, clock, open(nil, nil, pollerstatus.Skip("not here"))); p.Skipped != "not here" || p.OK || p.Error != "" || p.RowsWaiting != -1 || p.DurationMS != 0 {
		t.Errorf("skipped: %+v", p)
	}
	if p := pollerstatus.OpenAndProbe(ctx, nil, clock, open(nil, nil, errors.New("no route to host"))); p.OK || p.Error != "no route to host" || p.Misconfigured || p.RowsWaiting != -1 || p.DurationMS != 5 {
		t.Errorf("failed: %+v", p)
	}
	closed := false
	if p := pollerstatus.OpenAndProbe(ctx, nil, clock, open(fakeSource{rows: 3}, func() { closed = true }, nil)); !p.OK || p.RowsWaiting != 3 || !closed {
		t.Errorf("probed: %+v, closed %v", p, closed)
	}
}
