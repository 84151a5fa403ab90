package driver_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// minimal is a fifth database as little as it can be: the methods every database answers, and
// Defaults for the rest.
type minimal struct{ driver.Defaults }

func (minimal) Name() string                             { return "minimal" }
func (minimal) Open(string) (*sql.DB, error)             { return nil, errors.ErrUnsupported }
func (minimal) Location(string) (driver.Location, error) { return driver.Location{}, nil }
func (minimal) Caseless() bool                           { return false }
func (minimal) Placeholder(int) string                   { return "?" }
func (minimal) Classify(string) (row.Class, row.TSFlavor) {
	return row.ClassOther, row.TSNone
}
func (minimal) KeyCodec(row.ColumnType) (row.KeyCodec, bool) {
	return row.KeyCodec{}, false
}
func (minimal) Script([]string) string { return "" }
func (minimal) DDLInTransaction() bool { return false }
func (minimal) UpperBound(string, row.TSFlavor, string, time.Duration, func() string) driver.Bound {
	return driver.Bound{}
}
func (minimal) StampCheck(row.TSFlavor, string, string, string) (string, any, string) {
	return "", nil, ""
}
func (minimal) CheckSetup(context.Context, *sql.DB, sourcedef.Definition) ([]setup.Finding, error) {
	return nil, nil
}

// TestDefaultsAnswerNotSupported: a driver that says nothing of a capability answers
// ErrNotSupported where the caller must tell "cannot" from an answer, and the neutral answer
// elsewhere.
func TestDefaultsAnswerNotSupported(t *testing.T) {
	var d driver.Driver = minimal{}
	ctx := context.Background()
	if _, err := d.ChangeStream(state.KindLogical, nil); !errors.Is(err, driver.ErrNotSupported) {
		t.Errorf("ChangeStream: %v", err)
	}
	if _, err := d.OpenCDC(ctx, driver.Conn{}); !errors.Is(err, driver.ErrNotSupported) {
		t.Errorf("OpenCDC: %v", err)
	}
	if _, err := d.UniqueKey(ctx, nil, sourcedef.Table{Name: "t"}, []string{"id"}); !errors.Is(err, driver.ErrNotSupported) {
		t.Errorf("UniqueKey: %v", err)
	}
	if why, err := d.Refuse(row.ColumnType{DBType: "X"}); why != "" || !errors.Is(err, driver.ErrNotSupported) {
		t.Errorf("Refuse: %q, %v", why, err)
	}
	if k, _ := d.CDCKind(); k != "" {
		t.Errorf("CDCKind: %q", k)
	}
	if got := d.IsNull(`"c"`); got != `"c" IS NULL` {
		t.Errorf("IsNull: %q", got)
	}
	if got, err := d.UUID([]byte("0b6f6c4e-0000-4000-8000-000000000000")); err != nil || got != "0b6f6c4e-0000-4000-8000-000000000000" {
		t.Errorf("UUID: %q, %v", got, err)
	}
	if d.Supports(state.KindLogical) || !d.Supports(state.KindTimestampPK) || !d.Supports(state.KindInteger) {
		t.Error("Supports: every database reads timestamp+pk and integer, and nothing else by default")
	}
	if _, ok := (driver.Drivers{d}).CDCAdmin(""); ok {
		t.Error("a driver without a set-up to administer was found as the administrator of kind \"\"")
	}
}
