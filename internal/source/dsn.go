package source

import (
	"slices"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Identify is the canonical form of the source that a state document records beside its
// fingerprint (state.SourceDef): driver, server, database, schema, table, cursor kind and column,
// key, filter, slot (logical cursors), the columns read, and the prefix of a messages outbox. Never a password or token.
func Identify(driverName string, loc driver.Location, d sourcedef.Definition) state.SourceDef {
	return state.SourceDef{Driver: driverName, Server: loc.Server, Database: loc.Database, Schema: d.Table.Schema, Table: d.Table.Name,
		CursorKind: d.Cursor.Kind, CursorColumn: d.Cursor.Column, Key: slices.Clone(d.PK), Filter: strings.TrimSpace(d.Filter),
		Slot: d.Slot, Columns: d.Selected(), Tables: moreTables(d), Messages: messagesOf(d)}
}

// messagesOf is the prefix of the messages d reads ("" for a table).
func messagesOf(d sourcedef.Definition) string {
	if !d.ReadsMessages() {
		return ""
	}
	return d.Outbox.Messages
}

// moreTables are d's more tables as a state document records them.
func moreTables(d sourcedef.Definition) []state.SourceTable {
	var out []state.SourceTable
	for _, t := range d.More {
		out = append(out, state.SourceTable{Schema: t.Table.Schema, Table: t.Table.Name, Key: slices.Clone(t.PK),
			Filter: strings.TrimSpace(t.Filter), Columns: d.Part(t).Selected()})
	}
	return out
}

// Fingerprint is the fingerprint of the source (state.SourceDef.Fingerprint of Identify): a
// hash of what decides which rows come next and what a saved cursor means: driver, server,
// database, schema, table, cursor kind and column, key columns, filter and (logical cursors) the
// slot. It leaves out the payload columns (adding or removing one changes neither the order nor
// the position, so it needs no reset) and the credentials (changing them changes nothing read).
func Fingerprint(driverName string, loc driver.Location, d sourcedef.Definition) string {
	return Identify(driverName, loc, d).Fingerprint()
}
