package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Version is the only document version this code reads and writes.
const Version = 1

// MaxFencingToken is the largest fencing token: 2^53-1, the largest integer that every JSON
// reader (JavaScript, PowerShell, KQL) holds exactly.
const MaxFencingToken int64 = 1<<53 - 1

// Cursor kinds.
const (
	KindTimestampPK = "timestamp+pk"
	KindInteger     = "integer"
	KindRowversion  = "rowversion"
	KindXID         = "xid"
	// KindLogical is PostgreSQL logical decoding: Value is a position in the replication slot's
	// stream, "0/16D3290" (every transaction whose commit record starts before that LSN is done)
	// or "0/16D3290+37" (and the first 37 changes of the transaction that commits there).
	KindLogical = "logical"
	// KindChangeTracking is SQL Server Change Tracking: Value is the change version, digits.
	KindChangeTracking = "changetracking"
)

// Kinds lists the cursor kinds: the one list that the poller package's constants, poller.json's
// schema and every check of a kind are tested against.
var Kinds = []string{KindTimestampPK, KindInteger, KindRowversion, KindXID, KindLogical, KindChangeTracking}

// ChangeKind reports whether kind reads a change stream (logical, changetracking), the database's
// own record of changes, rather than the table in keyset order: it has no cursor column and
// takes no settle lag, every row carries its op, and a row's cursor is a position in the stream,
// not the row's own values. A change stream knows who wrote a change (so it can leave out a
// writer's) and can start with the table's rows as they are (an initial snapshot); a keyset
// read has neither to offer.
func ChangeKind(kind string) bool {
	return kind == KindLogical || kind == KindChangeTracking
}

// SettleLagKind reports whether a poller of kind reads only rows older than a settle lag (its
// {P}_SETTLE_LAG, poller.json's settle_lag): its cursor is a timestamp, which has an age. xid and
// rowversion are bounded by the database's open transactions instead, an integer by nothing, and
// a change stream reads committed changes in commit order.
func SettleLagKind(kind string) bool { return kind == KindTimestampPK }

// SeveralTablesKind reports whether a poller of kind may read several tables: its stream
// (a change stream) holds every table's changes in commit order, where a keyset read follows one
// table's cursor column.
func SeveralTablesKind(kind string) bool { return ChangeKind(kind) }

// AllColumnsKind reports whether a poller of kind may read every column of its table, whatever
// they are ("*"): its stream describes the table's columns as they change (logical decoding's
// relation messages), so a column added later comes when it is added. A keyset read names its
// columns in its SELECT and change tracking records keys, not columns: neither hears of a new
// column.
func AllColumnsKind(kind string) bool { return kind == KindLogical }

// Sentinel errors; Decode wraps them in an *Error that names the blob.
var (
	// ErrCorrupt: the blob is not a valid state document.
	ErrCorrupt = errors.New("not a valid state document")
	// ErrVersion: the document has a version this code does not know.
	ErrVersion = errors.New("unsupported state document version")
	// ErrPollerMismatch: the document belongs to another poller.
	ErrPollerMismatch = errors.New("state document belongs to another poller")
	// ErrFingerprintMismatch: the configured source is not the one the checkpoint was taken on.
	ErrFingerprintMismatch = errors.New("source fingerprint changed")
)

// Error is a problem with one state blob.
type Error struct {
	Blob   string // the blob's name, e.g. state/local/orders.json
	Err    error  // one of the sentinels above
	Detail string // what exactly is wrong
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("state blob %s: %v", e.Blob, e.Err)
	}
	return fmt.Sprintf("state blob %s: %v: %s", e.Blob, e.Err, e.Detail)
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// Doc is the state document, version 1.
type Doc struct {
	Version           int    `json:"version"`
	PollerName        string `json:"poller_name"`
	SourceFingerprint string `json:"source_fingerprint"`
	// Source is the canonical form of the source the fingerprint is taken of (SourceDef), so
	// that a mismatch names what changed; nil in documents written before it was recorded.
	Source *SourceDef `json:"source,omitempty"`
	// HandlerVersion is the version of the handler that last wrote the document (a tick; a
	// pollerctl write keeps it); "" before it was recorded.
	HandlerVersion string     `json:"handler_version,omitempty"`
	Checkpoint     Checkpoint `json:"checkpoint"`
	Lease          Lease      `json:"lease"`
	// Failure records failed attempts at the batch after the checkpoint; nil once a commit
	// succeeds. The next attempt at that batch is Failure.Attempts + 1.
	Failure *Failure `json:"failure"`
	// Backfill is the backfill in progress, if any: nil when none runs.
	Backfill *Backfill `json:"backfill,omitempty"`
	// Follow says a tick follows the source (package tick, {P}_FOLLOW): set by its commits while
	// it holds the lease, cleared by its release. A lease that expired unreleased leaves it behind:
	// it means something only while the lease is live.
	Follow *Follow `json:"follow,omitempty"`
	// History is the poller's recent ticks that wrote (newest last), at most HistoryLen: what the
	// status page draws its lag sparkline from. Idle ticks write nothing, so they are not in it.
	History []Tick `json:"history,omitempty"`
	// WriteID is fresh on every write. After an ambiguous write (a lost reply, a 5xx, a
	// time-out, or a 412 from an SDK retry of a write that landed) the writer re-reads the blob:
	// its own WriteID there means the write landed.
	WriteID string `json:"write_id,omitempty"`
}

// Checkpoint is how far the poller has successfully got.
type Checkpoint struct {
	// Cursor is the position after the last committed row; nil means the beginning.
	Cursor                *Cursor  `json:"cursor"`
	LastSuccessfulBatchID string   `json:"last_successful_batch_id"`
	UpdatedAt             Time     `json:"updated_at"`
	Metadata              Metadata `json:"metadata"`
}

// Metadata describes the last committed batch.
type Metadata struct {
	RowCount int64 `json:"row_count"` // rows in the last committed batch
}

// Cursor is a keyset position. Value and the tiebreaker values are kept as raw JSON so that
// they round-trip with full precision (a datetime2(7) string, an xid8 beyond 2^53, ...).
type Cursor struct {
	Kind       string                     `json:"kind"`
	Value      json.RawMessage            `json:"value"`
	Tiebreaker map[string]json.RawMessage `json:"tiebreaker,omitempty"`
}

// Text renders c for people (pollerctl, the status page): its value, then each tiebreaker
// column=value in name order; "(beginning)" for none.
func (c *Cursor) Text() string {
	if c == nil {
		return "(beginning)"
	}
	s := string(c.Value)
	for _, k := range slices.Sorted(maps.Keys(c.Tiebreaker)) {
		s += " " + k + "=" + string(c.Tiebreaker[k])
	}
	return s
}

// JSON renders c compactly as its JSON (the tiebreaker's keys sorted), "<beginning>" for none:
// what a batch's ID is made of, so its form never changes (the same batch always gets the same
// ID), and what the tick's log lines say.
func (c *Cursor) JSON() string {
	if c == nil {
		return "<beginning>"
	}
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Sprintf("%+v", *c)
	}
	return string(b)
}

// Failure describes the failed attempts at the batch after the checkpoint.
type Failure struct {
	Attempts       int64  `json:"attempts"`
	BatchID        string `json:"batch_id"`
	FirstFailureAt Time   `json:"first_failure_at"`
	LastFailureAt  Time   `json:"last_failure_at"`
	LastError      string `json:"last_error"`
	// Keys names the failing batch's rows by key: the first and last, "{...}..{...}".
	Keys string `json:"keys,omitempty"`
	// Quarantine asks the next tick to quarantine this batch whatever {P}_ON_POISON says
	// (pollerctl quarantine sets it, to unblock a poller).
	Quarantine bool `json:"quarantine,omitempty"`
}

// The kinds of Backfill.
const (
	// BackfillRequested is a backfill an operator asked for (pollerctl backfill).
	BackfillRequested = "backfill"
	// BackfillSnapshot is a change-stream poller's initial snapshot ("initial": "snapshot").
	BackfillSnapshot = "snapshot"
)

// Backfill is a backfill in progress: the table's current rows, or those Where selects, sent
// again as read messages, a chunk at a time in primary-key order beside the live changes. Its
// progress is written with the checkpoint, in the same compare-and-swap: a crash or a takeover
// resumes it after the last committed chunk.
type Backfill struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // BackfillRequested or BackfillSnapshot
	// Where selects the rows (SQL, with the definition's own filter); "" all of them.
	Where string `json:"where,omitempty"`
	Chunk int    `json:"chunk"` // rows a chunk reads
	// After is the primary key after which the next chunk starts (column to value, as a cursor's
	// tiebreaker holds them); nil: the first.
	After map[string]json.RawMessage `json:"after"`
	Rows  int64                      `json:"rows"` // rows sent as reads, committed
	// Left counts the rows a chunk read but left to the live changes, which deliver a newer
	// version of them.
	Left int64 `json:"left"`
	// Estimate is how many rows it reads, counted when it started (pollerctl backfill: up to
	// 10,000,000); 0: none, or unknown.
	Estimate  int64 `json:"estimate"`
	StartedAt Time  `json:"started_at"`
	// Cancel asks the next tick to end it (pollerctl backfill --cancel).
	Cancel bool `json:"cancel,omitempty"`
	// Failures counts the ticks in a row whose chunk failed (its rows could not be read or
	// handed over), LastError the last one's error; 0 and "" once a chunk succeeds. A failing
	// chunk never holds the live batches up: it is tried again once a tick.
	Failures  int64  `json:"failures,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

func (b *Backfill) validate() error {
	switch {
	case b.ID == "":
		return errors.New("id is empty")
	case b.Kind != BackfillRequested && b.Kind != BackfillSnapshot:
		return fmt.Errorf("kind %q is not %q or %q", b.Kind, BackfillRequested, BackfillSnapshot)
	case b.Chunk < 1:
		return fmt.Errorf("chunk %d must be at least 1", b.Chunk)
	case b.Rows < 0 || b.Left < 0 || b.Estimate < 0 || b.Failures < 0:
		return fmt.Errorf("rows %d, left %d, estimate %d and failures %d must not be negative", b.Rows, b.Left, b.Estimate, b.Failures)
	}
	return columnValues("after", b.After)
}

// Follow is a following tick's progress, as of its last commit.
type Follow struct {
	Since Time `json:"since"` // when the tick began following (it had caught up)
	Until Time `json:"until"` // when it will commit, release and end
	// Changes counts the rows it delivered since it began following.
	Changes int64 `json:"changes"`
	// LatencyP50MS and LatencyP95MS are commit-to-delivery times of its batches over the last
	// minute (each batch's oldest change), in milliseconds; absent when the cursor kind carries no
	// commit time (integer, xid, rowversion, changetracking) or no batch came.
	LatencyP50MS *float64 `json:"latency_p50_ms,omitempty"`
	LatencyP95MS *float64 `json:"latency_p95_ms,omitempty"`
}

// HistoryLen bounds Doc.History.
const HistoryLen = 48

// Tick is one entry of Doc.History.
type Tick struct {
	At      Time   `json:"at"`
	Outcome string `json:"outcome"` // committed, failed, blocked; reset and clone by pollerctl
	Rows    int    `json:"rows"`
	// LagSeconds is the age of the oldest row still waiting when the tick ended: 0 when none
	// waits, absent when not measured or when the cursor kind has no time.
	LagSeconds *float64 `json:"lag_seconds,omitempty"`
	// RowsWaiting counts the rows after the cursor when the tick ended, up to a cap (-1: not
	// counted).
	RowsWaiting int64 `json:"rows_waiting"`
	// Ops counts the delivered rows by op (insert, update, delete, upsert); absent when none.
	Ops map[string]int `json:"ops,omitempty"`
	// RetainedBytes is the change log the source's database keeps for the poller (a replication
	// slot's WAL) when the tick ended; absent when it keeps none or it was not measured.
	RetainedBytes *int64 `json:"slot_retained_bytes,omitempty"`
	// DurationMS is how long the tick had run when it recorded this entry (its last write
	// follows); absent in entries written before it was recorded, and in pollerctl's.
	DurationMS *int64 `json:"duration_ms,omitempty"`
}

// AddHistory appends t to the document's history, dropping the oldest entries beyond HistoryLen.
func (d *Doc) AddHistory(t Tick) {
	d.History = append(d.History, t)
	if n := len(d.History) - HistoryLen; n > 0 {
		d.History = append([]Tick(nil), d.History[n:]...)
	}
}

// Lease says who may process the poller. The times in it are the holder's wall clock and are
// for people and tools: contenders judge expiry on the storage service's clock (see package
// lease).
type Lease struct {
	OwnerID      string `json:"owner_id"`
	FencingToken int64  `json:"fencing_token"`
	AcquiredAt   Time   `json:"acquired_at"`
	HeartbeatAt  Time   `json:"heartbeat_at"`
	ExpiresAt    Time   `json:"expires_at"`
	// TTLSeconds is the lease's time to live, rounded up to whole seconds. A contender adds it to
	// the blob's Last-Modified to judge expiry.
	TTLSeconds int64 `json:"ttl_seconds"`
	// ReleasedAt is set when the holder gave the lease up; a released lease is free at once.
	ReleasedAt Time `json:"released_at"`
}

// Released reports whether the holder gave the lease up.
func (l Lease) Released() bool { return !l.ReleasedAt.IsZero() }

// Decode parses and validates the state document stored in blob for poller. Any problem is an
// *Error naming the blob and wrapping ErrCorrupt, ErrVersion or ErrPollerMismatch.
func Decode(blob, poller string, data []byte) (*Doc, error) {
	fail := func(sentinel error, format string, args ...any) (*Doc, error) {
		return nil, &Error{Blob: blob, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
	}
	// The version decides how to read the rest, so look at it first: a newer document must be
	// reported as such, not as "unknown field".
	var head struct {
		Version json.RawMessage `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fail(ErrCorrupt, "%v", err)
	}
	if len(head.Version) == 0 {
		return fail(ErrCorrupt, "no \"version\" field")
	}
	if v := string(head.Version); v != "1" {
		return fail(ErrVersion, "version %s, this build reads version %d only", v, Version)
	}

	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var d Doc
	if err := dec.Decode(&d); err != nil {
		return fail(ErrCorrupt, "%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fail(ErrCorrupt, "data after the document")
	}
	if d.PollerName != poller {
		return fail(ErrPollerMismatch, "poller_name is %q, expected %q", d.PollerName, poller)
	}
	if err := d.validate(); err != nil {
		return fail(ErrCorrupt, "%v", err)
	}
	return &d, nil
}

func (d *Doc) validate() error {
	switch {
	case d.PollerName == "":
		return errors.New("poller_name is empty")
	case d.Lease.FencingToken < 0 || d.Lease.FencingToken > MaxFencingToken:
		return fmt.Errorf("lease.fencing_token %d is outside 0..%d", d.Lease.FencingToken, MaxFencingToken)
	case d.Lease.TTLSeconds < 0:
		return fmt.Errorf("lease.ttl_seconds %d is negative", d.Lease.TTLSeconds)
	case d.Lease.OwnerID != "" && d.Lease.TTLSeconds == 0:
		return errors.New("lease has an owner but no ttl_seconds")
	case d.Checkpoint.Metadata.RowCount < 0:
		return fmt.Errorf("checkpoint.metadata.row_count %d is negative", d.Checkpoint.Metadata.RowCount)
	case d.Failure != nil && d.Failure.Attempts < 1:
		return fmt.Errorf("failure.attempts %d must be at least 1", d.Failure.Attempts)
	case len(d.History) > HistoryLen:
		return fmt.Errorf("history has %d entries, at most %d", len(d.History), HistoryLen)
	}
	if c := d.Checkpoint.Cursor; c != nil {
		if err := c.Validate(); err != nil {
			return fmt.Errorf("checkpoint.cursor: %w", err)
		}
	}
	if b := d.Backfill; b != nil {
		if err := b.validate(); err != nil {
			return fmt.Errorf("backfill: %w", err)
		}
	}
	return nil
}

// Time returns a timestamp+pk cursor's timestamp; false for the other kinds, which have none.
func (c *Cursor) Time() (time.Time, bool) {
	if c == nil || c.Kind != KindTimestampPK {
		return time.Time{}, false
	}
	var s string
	if json.Unmarshal(c.Value, &s) != nil {
		return time.Time{}, false
	}
	ts, err := time.Parse(time.RFC3339Nano, s)
	return ts, err == nil
}

// Validate checks that the cursor has a known kind and a scalar value.
func (c *Cursor) Validate() error {
	if !slices.Contains(Kinds, c.Kind) {
		return fmt.Errorf("unknown kind %q (want one of %s)", c.Kind, strings.Join(Kinds, ", "))
	}
	if err := scalar(c.Value); err != nil {
		return fmt.Errorf("value: %w", err)
	}
	return columnValues("tiebreaker", c.Tiebreaker)
}

// columnValues checks a map of column names to values (a cursor's tiebreaker, a backfill's key,
// named what): no empty name, each value a string or a number.
func columnValues(what string, m map[string]json.RawMessage) error {
	for k, v := range m {
		if k == "" {
			return fmt.Errorf("%s has an empty column name", what)
		}
		if err := scalar(v); err != nil {
			return fmt.Errorf("%s %q: %w", what, k, err)
		}
	}
	return nil
}

// scalar accepts a JSON string or number.
func scalar(v json.RawMessage) error {
	t := strings.TrimSpace(string(v))
	if t == "" || t == "null" {
		return errors.New("missing")
	}
	switch t[0] {
	case '"':
		var s string
		return json.Unmarshal(v, &s)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		var n json.Number
		return json.Unmarshal(v, &n)
	}
	return fmt.Errorf("%s is not a string or a number", t)
}

// Encode renders the document as stored: indented JSON, so that people reading the blob in
// the portal see its structure.
func Encode(d *Doc) ([]byte, error) {
	if d.Version != Version {
		return nil, fmt.Errorf("state: refusing to encode version %d", d.Version)
	}
	if err := d.validate(); err != nil {
		return nil, fmt.Errorf("state: refusing to encode an invalid document: %w", err)
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("state: encode: %w", err)
	}
	return append(b, '\n'), nil
}

// Time is a timestamp rendered as RFC 3339 UTC with microseconds
// ("2026-04-07T01:23:45.123456Z"); the zero Time is JSON null.
type Time struct{ time.Time }

// TimeLayout is the fixed-width layout of Time.
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// At returns t as a Time, in UTC, without its monotonic reading.
func At(t time.Time) Time {
	if t.IsZero() {
		return Time{}
	}
	return Time{t.UTC().Round(0)}
}

// MarshalJSON renders null or a fixed-width UTC timestamp.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + t.UTC().Format(TimeLayout) + `"`), nil
}

// UnmarshalJSON accepts null or any RFC 3339 timestamp.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("timestamp: %w", err)
	}
	p, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("timestamp %q is not RFC 3339", s)
	}
	*t = Time{p.UTC()}
	return nil
}
