package row

import (
	"encoding/json"
	"errors"
)

// A ColumnType is what a driver made of a column's database type (Driver.Classify).
type ColumnType struct {
	DBType string   // the type as the Go driver names it (SQLite: as declared)
	Class  Class    // what the type is, as far as encoding its values goes
	Flavor TSFlavor // how a timestamp compares with the database's clock
}

// A KeyCodec encodes a key column's value into the state document's cursor and back into a
// query argument, exactly.
type KeyCodec struct {
	Encode func(v any) (json.RawMessage, error)
	Decode func(raw json.RawMessage) (any, error)
	// Marker, when set, writes the argument's marker in the keyset predicate (e.g. cast to the
	// column's type, where the argument's own type would compare the column by other rules);
	// nil: the marker as it is.
	Marker func(marker string) string
}

// Mark is the argument marker m as the codec writes it in SQL.
func (k KeyCodec) Mark(m string) string {
	if k.Marker == nil {
		return m
	}
	return k.Marker(m)
}

// ErrUnreachableRow: a row sits where the cursor can never reach it, so a keyset read would skip
// it forever while reporting nothing to do.
var ErrUnreachableRow = errors.New("a row the cursor can never reach")
