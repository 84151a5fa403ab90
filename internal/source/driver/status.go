package driver

import (
	"math"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Stats is what a source reports of its reads: the backlog (what source.Source.Backlog measures) and what its
// driver adds: whether a read may have been held back, the change log the database keeps for
// the reader, how reads are kept behind late commits, and the driver's own details for the
// status. The tick, the status and pollerctl use it without knowing the database.
type Stats struct {
	// Rows counts the rows waiting after the cursor, up to the cap the count was made with, and
	// Oldest is the first of them; nil when none waits. Only Backlog measures them: the rows
	// committed behind a transaction still open count (the reads wait for it: an xid or
	// rowversion cursor's bound, a MySQL timestamp's open-transaction bound), so that a
	// transaction held open shows as a growing backlog and lag, not as a poller with nothing to
	// do; the rows younger than the settle lag do not.
	Rows   int64
	Oldest *state.Cursor
	// OldestCommit is when the oldest of them committed, for the commit-ordered cursors
	// (logical, changetracking) whose database says (row.Row.Transaction); zero otherwise.
	OldestCommit time.Time
	// HoldBack: the last read may have stopped short of committed rows because of a transaction
	// still open (an xid or rowversion cursor always; a MySQL timestamp+pk read bounded by an
	// open write transaction). An idle tick measures the backlog only then.
	HoldBack bool
	// RetainedBytes is the change log the database keeps for the source's reader (a logical
	// cursor's replication slot's WAL) as its last read found it; nil when it keeps none, and
	// before any read. Every fetch and count reads it, so a tick always has it, idle or failing.
	RetainedBytes *int64
	// LateCommits says how the last read was kept behind late commits, for a log line ("" when
	// the source has nothing to say beyond its settle lag).
	LateCommits string
	// Details are what the driver shows of the source on the status (Detail).
	Details []Detail
}

// LagSeconds is the product's one definition of lag: the age of the oldest row not yet
// delivered, in seconds (milliseconds rounded), at now; 0 when nothing waits. A row's age is
// from its cursor's time (timestamp+pk) or its transaction's commit (logical, changetracking
// where the database says). It is nil when rows wait but have no time (integer, xid and
// rowversion cursors): then only the count says how far behind the poller is.
func (s Stats) LagSeconds(now time.Time) *float64 {
	if s.Rows == 0 {
		zero := 0.0
		return &zero
	}
	ts, ok := s.Oldest.Time()
	if !ok && !s.OldestCommit.IsZero() {
		ts, ok = s.OldestCommit, true
	}
	if !ok {
		return nil
	}
	lag := math.Round(now.Sub(ts).Seconds()*1000) / 1000
	return &lag
}

// A Detail is one thing a driver shows of a source on the status besides its backlog (a
// replication slot, how reads are kept behind late commits): its JSON member, its line for
// people, and what it makes of the poller's health.
type Detail struct {
	// Key names its member in the status JSON ("slot"); Value is the member's value.
	Key   string
	Value any
	// Label heads its row on the status page ("replication slot"), Class is that row's CSS
	// class, and Text its text; nothing is shown when Text is "".
	Label, Class, Text string
	// Line is what pollerctl status prints of it after "POLLER: ".
	Line string
	// Bad marks it on the page.
	Bad bool
	// Health is what it makes of the poller's health once its ticks are fine, and Reason says
	// why and what to do when that is not Fine.
	Health Health
	Reason string
}

// Health is what a Detail makes of a poller's health.
type Health int

// The healths a detail can judge, least urgent first.
const (
	Fine    Health = iota // nothing to say
	Lagging               // keeps up badly (a slot that keeps more WAL than allowed)
	Failing               // needs someone (a slot that grows while nothing reads it)
)

// StatusInput is what the status knows of a poller when its driver makes its details.
type StatusInput struct {
	Poller string
	// SettingPrefix is {P} in the names of the poller's settings ({P}_DB_DRIVER).
	SettingPrefix string
	// Probe are the details the probe found (also when it then failed); nil without a probe.
	Probe   []Detail
	History []state.Tick
	// RowsWaiting counts the rows waiting as the status row says it (-1: unknown).
	RowsWaiting int64
	// MaxRetained is the poller's {P}_CDC_MAX_RETAINED, or its default: more retained change
	// log than this is not ok.
	MaxRetained int64
}
