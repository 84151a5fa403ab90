package pgcdc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SlotState is what PostgreSQL says of a replication slot (pg_replication_slots).
type SlotState struct {
	Name     string `json:"name"`
	Exists   bool   `json:"exists"`
	Type     string `json:"type,omitempty"`     // logical or physical
	Plugin   string `json:"plugin,omitempty"`   // pgoutput for the logical cursor
	Database string `json:"database,omitempty"` // the database it decodes ("" for a physical slot)
	// Here: the slot is in the database the connection is to.
	Here bool `json:"here"`
	// Active: a connection is reading it right now. The logical cursor reads it with short SQL
	// calls, so it is active only while a tick reads.
	Active bool `json:"active"`
	// ConfirmedFlush is the position the slot's stream starts at (confirmed_flush_lsn): WAL
	// before it is gone for this slot; "" when unknown.
	ConfirmedFlush string `json:"confirmed_flush_lsn,omitempty"`
	// RestartLSN is the oldest WAL the slot keeps (restart_lsn).
	RestartLSN string `json:"restart_lsn,omitempty"`
	// RetainedBytes is the WAL the slot keeps: pg_current_wal_lsn() - restart_lsn; nil when it
	// cannot be measured (no slot, no restart_lsn, a standby).
	RetainedBytes *int64 `json:"retained_bytes,omitempty"`
	// WALStatus is pg_replication_slots.wal_status: reserved, extended, unreserved or lost (lost:
	// WAL the slot needs was removed, max_slot_wal_keep_size; the slot cannot be read any more).
	WALStatus string `json:"wal_status,omitempty"`
	// WALEnd is the server's current WAL position (pg_current_wal_lsn()): no position past it
	// exists yet; "" on a standby.
	WALEnd string `json:"wal_end,omitempty"`
}

// Confirmed returns the slot's confirmed position as a Position (the zero Position when
// unknown).
func (s SlotState) Confirmed() (Position, bool) {
	if s.ConfirmedFlush == "" {
		return Position{}, false
	}
	p, err := ParsePosition(s.ConfirmedFlush)
	return p, err == nil
}

// SlotStatus reads a replication slot's state; a slot that does not exist is SlotState{Exists:
// false}, not an error. It only reads.
func SlotStatus(ctx context.Context, db *sql.DB, slot string) (SlotState, error) {
	st := SlotState{Name: slot}
	const q = `SELECT slot_type::text, COALESCE(plugin::text, ''), COALESCE(database::text, ''), COALESCE(database = current_database(), false),
  active, COALESCE(confirmed_flush_lsn::text, ''), COALESCE(restart_lsn::text, ''),
  CASE WHEN restart_lsn IS NULL OR pg_is_in_recovery() THEN NULL ELSE (pg_current_wal_lsn() - restart_lsn)::int8 END,
  COALESCE(wal_status, ''), CASE WHEN pg_is_in_recovery() THEN '' ELSE pg_current_wal_lsn()::text END
FROM pg_replication_slots WHERE slot_name = $1`
	var retained sql.NullInt64
	err := db.QueryRowContext(ctx, q, slot).Scan(&st.Type, &st.Plugin, &st.Database, &st.Here, &st.Active,
		&st.ConfirmedFlush, &st.RestartLSN, &retained, &st.WALStatus, &st.WALEnd)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return st, nil
	case err != nil:
		return st, fmt.Errorf("source: reading replication slot %q: %w", slot, err)
	}
	st.Exists = true
	if retained.Valid {
		st.RetainedBytes = &retained.Int64
	}
	return st, nil
}
