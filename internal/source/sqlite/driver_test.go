package sqlite

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
)

func TestDSN(t *testing.T) {
	if dsn := sqliteDSN("x.db"); dsn != "x.db?_pragma=busy_timeout(10000)" {
		t.Errorf("sqlite DSN %s", dsn)
	}
	if dsn := sqliteDSN("x.db?_pragma=busy_timeout(5)"); dsn != "x.db?_pragma=busy_timeout(5)" {
		t.Errorf("sqlite DSN with its own time-out changed: %s", dsn)
	}
}

// TestTextTimeCodec: a SQLite TEXT cursor value is carried only in the exact fixed-width layout;
// anything else (RFC 3339 that parses, CURRENT_TIMESTAMP's text, a number) is row.ErrUnreachableRow.
func TestTextTimeCodec(t *testing.T) {
	good := "2026-11-23T03:40:32.287000Z"
	if raw, err := textTimeCodec.Encode(good); err != nil || string(raw) != `"`+good+`"` {
		t.Fatalf("encode(%q) = %s, %v", good, raw, err)
	}
	if v, err := textTimeCodec.Decode(json.RawMessage(`"` + good + `"`)); err != nil || v != good {
		t.Fatalf("decode(%q) = %v, %v", good, v, err)
	}
	for _, bad := range []any{
		"2026-11-23 03:40:32",              // CURRENT_TIMESTAMP, datetime('now')
		"2026-11-23T03:40:32Z",             // RFC 3339 without fractional seconds
		"2026-11-23T03:40:32.287Z",         // milliseconds only
		"2026-11-23T03:40:32.287000+00:00", // an offset, not Z
		"2026-11-23T03:40:32.287000z",
		"2026-11-23t03:40:32.287000Z",
		"2026-13-23T03:40:32.287000Z", // no such month
		" 2026-11-23T03:40:32.287000Z",
		int64(1795491632), // a Unix time in a column of NUMERIC affinity
	} {
		if _, err := textTimeCodec.Encode(bad); !errors.Is(err, row.ErrUnreachableRow) {
			t.Errorf("encode(%#v) = %v, want source.ErrUnreachableRow", bad, err)
		}
		if s, ok := bad.(string); ok {
			if _, err := textTimeCodec.Decode(json.RawMessage(strconv.Quote(s))); err == nil {
				t.Errorf("decode(%q) accepted", s)
			}
		}
	}
}
