package source

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// Location is where a source lives, without credentials: what the fingerprint covers.
type Location struct {
	Server   string // host[:port][\instance]; empty for SQLite
	Database string // database name; the file path for SQLite
}

// Fingerprint is "sha256:" and the hex SHA-256 of a canonical form of the source: driver,
// server, database, table, columns, cursor kind and column, key columns, filter and (logical
// cursors) the slot. Never a
// password or token: changing credentials keeps the fingerprint, changing what is read does not.
func Fingerprint(driver string, loc Location, d Definition) string {
	canon := struct {
		V        int      `json:"v"`
		Driver   string   `json:"driver"`
		Server   string   `json:"server"`
		Database string   `json:"database"`
		Schema   string   `json:"schema"`
		Table    string   `json:"table"`
		Columns  []string `json:"columns"`
		Kind     string   `json:"cursor_kind"`
		Cursor   string   `json:"cursor_column"`
		PK       []string `json:"pk"`
		Filter   string   `json:"filter"`
		Slot     string   `json:"slot,omitempty"` // logical only: another slot is another stream
	}{1, driver, loc.Server, loc.Database, d.Table.Schema, d.Table.Name, d.selected(), d.Cursor.Kind, d.Cursor.Column, d.PK, strings.TrimSpace(d.Filter), d.Slot}
	b, _ := json.Marshal(canon) // strings and slices only: cannot fail
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
