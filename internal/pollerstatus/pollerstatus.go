// Package pollerstatus computes what operators see of each poller: one Row per poller, read from
// its state document (cursor, lease, last batch, failed attempts, the history of its recent
// ticks), its liveness mark (package liveness), its dead letters and a read-only live probe of
// its source, and one health verdict from all of them (Health, computed by verdict, the only
// place that decides it). It also makes the status function's Report of them and renders that
// as the HTML page (NewPage, RenderPage). `pollerctl status` prints the rows as a table; the
// handler's `status` function serves the Report as JSON or as the page: what is left there and
// in package ctl is HTTP and command-line plumbing.
//
// It only reads: the store it is given is wrapped so that a write through it is an error, and
// nothing in a Row comes from settings, so no connection string or key can reach one. Free-text
// errors (a handler's error may quote a URL, a driver's a DSN) are redacted.
package pollerstatus

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/liveness"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// The values of Row.State.
const (
	StateOK         = "ok"         // the document decodes
	StateNone       = "none"       // no document yet: the first tick creates it
	StateCorrupt    = "corrupt"    // the document does not decode (Problem says why)
	StateUnreadable = "unreadable" // the store failed to read it (Problem says why)
)

// The values of Row.Health, most urgent first.
const (
	// HealthBlocked: a batch failed {P}_MAX_ATTEMPTS times and {P}_ON_POISON is block.
	HealthBlocked = "blocked"
	// HealthMisconfigured: it cannot work until someone changes something: its settings, a
	// state document that does not decode, a source whose table or columns do not fit, a stored
	// cursor the source cannot hold, another source's checkpoint (fingerprint). The probe or the
	// last tick's error says so (Misconfigured judges both), so the verdict is the same with the
	// probe and without it.
	HealthMisconfigured = "misconfigured"
	// HealthFailing: its last tick failed, or the live probe of its source failed (the database
	// cannot be reached, a row the cursor can never reach), or its state cannot be read.
	HealthFailing = "failing"
	// HealthStopped: no tick for longer than its liveness interval plus three schedule periods,
	// none ever, or it is not in this build (only its state is left).
	HealthStopped = "stopped"
	// HealthUnknown: seen by a build that is not the app's own (pollerctl: Config.Elsewhere),
	// which does not have this poller: the deployed app may have it, so it is not judged.
	HealthUnknown = "unknown"
	// HealthDegraded: its ticks succeed, but something needs someone before rows are left behind
	// or missed: unresolved dead letters (rows it gave up on, until they are replayed or
	// discarded), or a problem in its source's set-up (setup_warnings: a cursor column an UPDATE
	// does not stamp, a missing index).
	HealthDegraded = "degraded"
	// HealthLagging: its ticks succeed, but the oldest row waiting is older than {P}_MAX_LAG.
	HealthLagging = "lagging"
	// HealthOK: its ticks succeed and it keeps up.
	HealthOK = "ok"
)

// Healths lists the health values, most urgent first.
var Healths = []string{HealthBlocked, HealthMisconfigured, HealthFailing, HealthStopped, HealthUnknown, HealthDegraded, HealthLagging, HealthOK}

// Row is one poller's status.
type Row struct {
	Poller  string `json:"poller"`
	Blob    string `json:"blob"`
	State   string `json:"state"` // ok, none (no state yet), corrupt, unreadable
	Problem string `json:"problem,omitempty"`

	// Health is the one verdict (HealthOK, ...); HealthReason says why, redacted, and what to do:
	// its headline, then the error it quotes, if any, after ": ".
	Health       string `json:"health"`
	HealthReason string `json:"health_reason,omitempty"`
	// reason is HealthReason in its two parts, for the page (which shows a long error once).
	reason reason
	// LastTick is the newest sign of the poller's timer running a tick; nil when there is none.
	LastTick *LastTick `json:"last_tick"`
	// Probe is the live, read-only look at the source; nil when no probe was asked for.
	Probe *Probe `json:"probe,omitempty"`

	Cursor *state.Cursor `json:"cursor,omitempty"`
	// LagSeconds is the age of the oldest row not yet delivered (driver.Stats.LagSeconds): 0
	// when nothing waits; nil when unknown (cursor kinds without time while rows wait, or nothing
	// measured it). LagFrom says where it comes from: "probe" (measured now) or "last tick".
	LagSeconds *float64 `json:"lag_seconds,omitempty"`
	// RowsWaiting counts the rows after the cursor, up to a cap; -1 when unknown.
	RowsWaiting  int64  `json:"rows_waiting"`
	LagFrom      string `json:"lag_from,omitempty"`
	FencingToken int64  `json:"fencing_token"`
	LeaseOwner   string `json:"lease_owner,omitempty"` // "" when the lease was released or never taken
	LeaseLive    bool   `json:"lease_live"`            // judged on the service's clock, as a contender would
	LastBatchID  string `json:"last_batch_id,omitempty"`
	LastCommitAt string `json:"last_commit_at,omitempty"` // RFC 3339 UTC

	// The failed attempts at the batch after the checkpoint (none once a commit succeeds).
	FailedAttempts      int64  `json:"failed_attempts,omitempty"`
	FailedBatchID       string `json:"failed_batch_id,omitempty"`
	LastError           string `json:"last_error,omitempty"`
	FailureKeys         string `json:"failure_keys,omitempty"` // the failing batch's first and last row keys
	QuarantineRequested bool   `json:"quarantine_requested,omitempty"`

	// The poison settings of a registered poller, and what they make of the failures: Blocked
	// when FailedAttempts >= MaxAttempts while OnPoison is block (and no quarantine is
	// requested); Unblock then says how to go on.
	MaxAttempts int    `json:"max_attempts,omitempty"`
	OnPoison    string `json:"on_poison,omitempty"`
	Blocked     bool   `json:"blocked"`
	Unblock     string `json:"unblock,omitempty"`

	DeadLetters DeadLetters `json:"dead_letters"`
	// Following is the progress of a tick in follow mode ({P}_FOLLOW) as of its last commit,
	// while its lease is live; nil otherwise.
	Following *state.Follow `json:"following,omitempty"`
	// Backfill is the backfill in progress, as the state document holds it (pollerctl backfill);
	// nil when none runs.
	Backfill *state.Backfill `json:"backfill,omitempty"`
	// BackfillProgress is the backfill's progress when the report was made: rows done, of
	// the estimate, rate and time left.
	BackfillProgress *BackfillProgress `json:"backfill_progress,omitempty"`
	// History is the state document's ring of recent ticks that wrote, oldest first.
	History []state.Tick `json:"history"`
	// HistoryOps sums the rows the history's ticks delivered, by op (insert, update, delete,
	// upsert); absent when none was counted.
	HistoryOps map[string]int `json:"history_ops,omitempty"`
	// Details are what the source's driver shows of the poller beyond its backlog (a logical
	// poller's replication slot: as the probe found it now, or the WAL it kept at the last tick
	// that measured it), each a member of the JSON here, under its key.
	Details []driver.Detail `json:"-"`
	// Registered: this build has the poller (otherwise only its state blob, or its folder, was found).
	Registered bool `json:"registered"`
	// DeliversTo says where a registered poller's handler delivers, when it says (a declared
	// poller's sink or routes: "route aggregate_type: order to POST https://...; ..."), redacted.
	DeliversTo string `json:"delivers_to,omitempty"`
	// HandlerVersion is the version of the handler that last wrote the state document, when it
	// recorded one.
	HandlerVersion string `json:"handler_version,omitempty"`
	// SettingsProblem is what is wrong with a registered poller's settings, if anything.
	SettingsProblem string `json:"settings_problem,omitempty"`
	// SetupWarnings are the problems the probe's setup check found in the source's set-up (a
	// cursor column an UPDATE does not stamp, no index for the keyset read, a missing
	// privilege), each with the SQL that fixes it (pollerctl check NAME --fix): the poller is
	// degraded while there are any.
	SetupWarnings []setup.Finding `json:"setup_warnings,omitempty"`
	// Cleanup is the poller's cleanup of its delivered rows; nil when it has none.
	Cleanup *Cleanup `json:"cleanup,omitempty"`
}

// MarshalJSON writes the row with its details as members of its own, after history_ops, under
// their keys.
func (r Row) MarshalJSON() ([]byte, error) {
	type plain Row
	b, err := json.Marshal(plain(r))
	if err != nil || len(r.Details) == 0 {
		return b, err
	}
	// "registered" is the first member after them. The key occurs once: a quote inside a JSON
	// string is always escaped, and nothing before it has a member of that name.
	i := bytes.LastIndex(b, []byte(`,"registered":`))
	if i < 0 {
		return nil, errors.New("pollerstatus: a row's JSON has no registered member")
	}
	out, err := appendDetails(append([]byte(nil), b[:i]...), r.Details)
	if err != nil {
		return nil, err
	}
	return append(out, b[i:]...), nil
}

// Shown are the details a row shows on the page and in pollerctl status: its own, then the
// probe's that it does not replace (a row's detail replaces the probe's of the same key).
func (r Row) Shown() []driver.Detail {
	out := slices.Clone(r.Details)
	if r.Probe != nil {
		for _, d := range r.Probe.Details {
			if !slices.ContainsFunc(r.Details, func(o driver.Detail) bool { return o.Key == d.Key }) {
				out = append(out, d)
			}
		}
	}
	return out
}

// appendDetails appends each detail to b as a JSON member: a comma, its key and its value.
func appendDetails(b []byte, details []driver.Detail) ([]byte, error) {
	for _, d := range details {
		v, err := json.Marshal(d.Value)
		if err != nil {
			return nil, fmt.Errorf("pollerstatus: detail %s: %w", d.Key, err)
		}
		b = append(strconv.AppendQuote(append(b, ','), d.Key), ':')
		b = append(b, v...)
	}
	return b, nil
}

// LastTick is the newest sign of a tick in the state container: its last attempt. Every failed
// tick and every tick that took the lease leaves one (its liveness mark, or the state document);
// a tick that found nothing to do leaves one at most once per {P}_LIVENESS_INTERVAL, so an idle
// poller's last tick may be that old. It is one rule for every reader (the status function of
// any instance, pollerctl status): no reader's own memory of the ticks it ran takes part, so
// they all show the same last tick.
type LastTick struct {
	// AgoSeconds is how long ago, on the storage service's clock (its blob's Last-Modified
	// against the read's Date).
	AgoSeconds float64 `json:"ago_seconds"`
	Outcome    string  `json:"outcome"` // idle, lease_held, committed, failed, blocked, misconfigured
	Error      string  `json:"error,omitempty"`
	// From: "state" (the state document's last write by a tick) or "liveness" (the poller's
	// liveness mark).
	From string `json:"from"`
	// ExpectedWithinSeconds is how recent a running poller's last tick always is: its liveness
	// interval plus three schedule periods. An older one makes the poller stopped.
	ExpectedWithinSeconds float64 `json:"expected_within_seconds,omitempty"`
	// FailingSince is, for a failed tick, when the ticks began to fail (the first failed attempt
	// since the last one that did not fail, on the handler's clock), and FailingSeconds how long
	// they have failed, up to this reading; absent when not recorded (a mark written before it
	// was).
	FailingSince   *state.Time `json:"failing_since,omitempty"`
	FailingSeconds float64     `json:"failing_seconds,omitempty"`

	rowsWaiting int64
	lag         *float64
}

// Text renders the last tick for people, the same on the page and in pollerctl status: how long
// ago, its outcome and where it was read; for failing ticks since when they fail and the last
// attempt; "none recorded" for nil.
func (t *LastTick) Text() string {
	if t == nil {
		return "none recorded"
	}
	s := DurationText(t.AgoSeconds) + " ago · " + t.Outcome
	if t.Failed() && t.FailingSince != nil {
		s = "failing since " + t.since() + ", last attempt " + DurationText(t.AgoSeconds) + " ago · " + t.Outcome
	}
	switch t.From {
	case "liveness":
		s += " (liveness mark)"
	case "state":
		s += " (state document)"
	}
	return s
}

// Failed reports whether the tick failed.
func (t *LastTick) Failed() bool { return t != nil && t.Error != "" }

// since renders FailingSince and how long: "2026-11-22T11:58:39Z (1m21s)".
func (t *LastTick) since() string {
	return t.FailingSince.UTC().Format(time.RFC3339) + " (" + DurationText(t.FailingSeconds) + ")"
}

// failedText says that the ticks fail, since when and when the last attempt was, for the
// health reason.
func (t *LastTick) failedText() string {
	if t.FailingSince == nil {
		return "its last tick (" + DurationText(t.AgoSeconds) + " ago) failed"
	}
	return "its ticks have failed since " + t.since() + "; the last attempt was " + DurationText(t.AgoSeconds) + " ago"
}

// failing sets FailingSince and FailingSeconds from the first and the last failed attempt's
// times (one clock: the handler's, so that its offset from the service's cancels out).
func (t *LastTick) failing(first, last time.Time) {
	if first.IsZero() || last.IsZero() {
		return
	}
	since := state.At(first)
	t.FailingSince, t.FailingSeconds = &since, max(last.Sub(first).Seconds(), 0)+t.AgoSeconds
}

// Probe is a live, read-only look at a poller's source with the app's own settings: can it be
// opened, does the stored checkpoint fit it, does a row sit where the cursor can never reach it,
// and what waits.
type Probe struct {
	OK bool `json:"ok"`
	// Skipped says why no probe ran (the settings are not at hand, ...): not a verdict.
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"` // redacted
	// Misconfigured: the error needs a change of settings, schema or checkpoint (not a retry).
	Misconfigured bool     `json:"misconfigured,omitempty"`
	RowsWaiting   int64    `json:"rows_waiting"`
	LagSeconds    *float64 `json:"lag_seconds,omitempty"`
	DurationMS    int64    `json:"duration_ms"`
	// Busy says that the source's change stream is being read by another reader right now (a
	// following tick streaming a replication slot), so the probe could not count what waits:
	// not a failure; the rows waiting and the lag stay the last tick's.
	Busy string `json:"busy,omitempty"`
	// SetupWarnings are the problems of the source's set-up (source.Source.SetupProblems), each
	// with its fix; the row shows them.
	SetupWarnings []setup.Finding `json:"-"`
	// RowsAwaitingCleanup counts, up to ProbeCap, the delivered rows behind the checkpoint that
	// the poller's cleanup deletes; nil when it has none.
	RowsAwaitingCleanup *int64 `json:"rows_awaiting_cleanup,omitempty"`
	// Details are what the source's driver showed of it as the probe read it (a logical
	// poller's replication slot, also when the probe then failed; how a MySQL timestamp+pk
	// poller's reads are kept behind late commits), each a member of the JSON here, under its
	// key, after the others.
	Details []driver.Detail `json:"-"`
}

// MarshalJSON writes the probe with its details as members of its own, last.
func (p Probe) MarshalJSON() ([]byte, error) {
	type plain Probe
	b, err := json.Marshal(plain(p))
	if err != nil || len(p.Details) == 0 {
		return b, err
	}
	out, err := appendDetails(b[:len(b)-1], p.Details)
	if err != nil {
		return nil, err
	}
	return append(out, '}'), nil
}

// DeadLetters are a poller's dead letters: deadletter/{app}/{poller}/{batch_id}.json. While
// there are any, the poller is degraded.
type DeadLetters struct {
	Count    int      `json:"count"`
	BatchIDs []string `json:"batch_ids"` // sorted
	// OldestAgeSeconds is how long ago the oldest was written (the store's listing, on its
	// clock); nil when there are none or the store's listing has no times.
	OldestAgeSeconds *float64 `json:"oldest_age_seconds,omitempty"`
	// List is the command that lists them, when there are any.
	List    string `json:"list,omitempty"`
	Problem string `json:"problem,omitempty"` // listing them failed
}

// Reader is what the rows need of the state store: reads and listings. store.Store satisfies it.
type Reader interface {
	Get(ctx context.Context, name string) (store.Blob, error)
	List(ctx context.Context, prefix string) ([]string, error)
}

// Registered is a poller this build has, with the settings that decide Row.Blocked.
type Registered struct {
	Name string
	// Kind is its cursor kind: a driver that alone reads it may show details of its own
	// (driver.Driver.StatusDetails).
	Kind string
	// Poison is the poller's {P}_MAX_ATTEMPTS and {P}_ON_POISON; zero values mean the defaults.
	Poison appsettings.Poison
	// Problem is what is wrong with its settings ("" when nothing); redacted before it is shown.
	// Only the app's own settings belong here (the handler's): pollerctl, which runs elsewhere,
	// leaves it empty and says what its own environment lacks in the probe's Skipped.
	Problem string
	// Schedule, LivenessInterval and MaxLag decide stopped and lagging (defaults when zero).
	Schedule         string
	LivenessInterval time.Duration
	MaxLag           time.Duration
	// MaxRetained is the poller's {P}_CDC_MAX_RETAINED (appsettings.DefaultMaxRetained when 0):
	// more change log kept for it (a logical poller's slot's WAL) is not ok.
	MaxRetained int64
	// Cleanup says what its cleanup of delivered rows deletes (sourcedef.Cleanup.String); ""
	// when it has none.
	Cleanup string
	// Target says where its handler delivers (pollerdef.Def.Target); "" when it does not say.
	Target string
}

// RegisteredFrom describes a registered poller from its definition, its settings and their
// error. Only the poison and status settings are kept: nothing else of the settings (a DSN, a
// key) reaches a Row.
func RegisteredFrom(p *pollerdef.Def, s appsettings.Settings, err error) Registered {
	r := Registered{Name: p.Name(), Kind: p.Source().Cursor.Kind, Poison: s.Poison(), Schedule: s.Schedule,
		LivenessInterval: s.LivenessInterval, MaxLag: s.MaxLag, MaxRetained: s.MaxRetained}
	if c := p.Source().Cleanup; c != nil {
		r.Cleanup = c.String()
	}
	r.Target = p.Target()
	if err != nil {
		r.Problem = err.Error()
	}
	return r
}

// Config says whose pollers to read and what this build knows about them.
type Config struct {
	App string // {app} in state/{app}/{poller}.json
	// Margin is the lease expiry margin (lease.DefaultMargin when 0).
	Margin     time.Duration
	Registered []Registered
	// Probe, if set, looks at a registered poller's source live (ProbeSource does the looking);
	// doc is its state document (nil when none). Without it the rows carry no probe.
	Probe func(ctx context.Context, pollerName string, doc *state.Doc) Probe
	// Now is the clock for the schedule's periods (default time.Now).
	Now func() time.Time
	// Elsewhere is the version of the build reading when it is not the app itself (pollerctl,
	// which may be older or newer than the deployed handler): a poller it does not have is then
	// shown as HealthUnknown, never as stopped. "" for the handler's own status.
	Elsewhere string
	// Seen are more pollers' names to list: the poller folders the reader can see
	// (<name>/function.json, pollers/<name>/), which it may not have.
	Seen []string
}

func (c Config) registered(name string) (Registered, bool) {
	for _, r := range c.Registered {
		if r.Name == name {
			return r, true
		}
	}
	return Registered{}, false
}

// Pollers returns the names of the pollers that have a state blob under state/{app}/ or are
// registered, sorted.
func Pollers(ctx context.Context, st Reader, cfg Config) ([]string, error) {
	prefix := blobpath.StatePrefix(cfg.App)
	names, err := st.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", prefix, err)
	}
	var pollers []string
	for _, n := range names {
		if p, ok := strings.CutSuffix(strings.TrimPrefix(n, prefix), ".json"); ok && p != "" && !strings.Contains(p, "/") {
			pollers = append(pollers, p)
		}
	}
	for _, r := range cfg.Registered {
		if !slices.Contains(pollers, r.Name) {
			pollers = append(pollers, r.Name)
		}
	}
	for _, n := range cfg.Seen {
		if !slices.Contains(pollers, n) {
			pollers = append(pollers, n)
		}
	}
	slices.Sort(pollers)
	return pollers, nil
}

// parallel bounds the rows read at once by All.
const parallel = 8

// All returns the rows of every poller Pollers finds, in its order.
func All(ctx context.Context, st Reader, cfg Config) ([]Row, error) {
	names, err := Pollers(ctx, st, cfg)
	if err != nil {
		return nil, err
	}
	return ReadAll(ctx, st, cfg, names), nil
}

// ReadAll returns the rows of the named pollers (Read), in their order, reading up to parallel
// of them at once.
func ReadAll(ctx context.Context, st Reader, cfg Config, names []string) []Row {
	rows := make([]Row, len(names))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, p := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			rows[i] = Read(ctx, st, cfg, p)
		})
	}
	wg.Wait()
	return rows
}

// Read returns one poller's row. A missing, corrupt or unreadable document is a row that says
// so (State, Problem, Health), not an error.
func Read(ctx context.Context, st Reader, cfg Config, pollerName string) (r Row) {
	reg, registered := cfg.registered(pollerName)
	r = Row{Poller: pollerName, Blob: blobpath.State(cfg.App, pollerName), Registered: registered, History: []state.Tick{}, RowsWaiting: -1}
	if registered {
		r.MaxAttempts, r.OnPoison = reg.Poison.Limit(), cmp.Or(reg.Poison.OnPoison, appsettings.DefaultOnPoison)
		r.SettingsProblem = redact.Text(reg.Problem)
		r.DeliversTo = redact.Text(reg.Target)
	}
	r.DeadLetters = deadLetters(ctx, st, cfg.App, pollerName)
	var (
		doc *state.Doc
		rep driver.Driver // the driver's part, once the document is read
	)
	defer func() {
		if rep != nil { // with the row's last word on the rows waiting
			r.Details = rep.StatusDetails(driver.StatusInput{Poller: pollerName, SettingPrefix: appsettings.Prefix(pollerName), Probe: probeDetails(r.Probe),
				History: r.History, RowsWaiting: r.RowsWaiting, MaxRetained: cmp.Or(reg.MaxRetained, appsettings.DefaultMaxRetained)})
		}
		r.Health, r.reason = verdict(&r, reg, cfg)
		r.HealthReason = r.reason.String()
	}()

	var (
		ticks     []LastTick
		mark      *liveness.Mark
		markBlob  store.Blob
		stateBlob store.Blob
	)
	defer func() { r.Cleanup = cleanupOf(reg, r.Probe, mark, markBlob, stateBlob) }() // before the verdict's
	if m, b, err := liveness.Read(ctx, st, cfg.App, pollerName); err == nil && m != nil {
		mark, markBlob = m, b
		t := LastTick{AgoSeconds: ago(b), Outcome: m.Outcome, Error: redact.Text(m.Error), From: "liveness",
			rowsWaiting: m.RowsWaiting, lag: m.LagSeconds}
		if t.Failed() && m.FailingSince != nil {
			t.failing(m.FailingSince.Time, m.At.Time)
		}
		ticks = append(ticks, t)
	}
	defer func() {
		r.LastTick = newest(ticks)
		if r.LastTick != nil && registered {
			r.LastTick.ExpectedWithinSeconds = expectedWithin(reg, cfg.now()).Seconds()
		}
		if r.LagFrom == "" && r.LastTick != nil && r.LastTick.rowsWaiting >= 0 {
			r.RowsWaiting, r.LagSeconds, r.LagFrom = r.LastTick.rowsWaiting, r.LastTick.lag, "last tick"
		}
	}()

	b, err := st.Get(ctx, r.Blob)
	switch {
	case errors.Is(err, store.ErrNotFound):
		r.State, r.Problem = StateNone, "no state yet (the first tick that finds rows creates it)"
	case err != nil:
		r.State, r.Problem = StateUnreadable, redact.Text(err.Error())
		return r
	default:
		d, err := state.Decode(r.Blob, pollerName, b.Data)
		if err != nil {
			r.State, r.Problem = StateCorrupt, redact.Text(err.Error())
			return r
		}
		doc, stateBlob = d, b
		r.fromDoc(d, b, cfg)
		if t, ok := stateTick(d, b); ok {
			ticks = append(ticks, t)
		}
	}
	rep = reporter(reg.Kind, doc)
	if registered && cfg.Probe != nil && reg.Problem == "" {
		p := cfg.Probe(ctx, pollerName, doc)
		p.Error, p.Skipped = redact.Text(p.Error), redact.Text(p.Skipped)
		r.Probe = &p
		if p.OK && p.Busy == "" {
			r.RowsWaiting, r.LagSeconds, r.LagFrom = p.RowsWaiting, p.LagSeconds, "probe"
		}
		if p.OK {
			r.SetupWarnings = p.SetupWarnings
		}
		if p.OK && rep != nil && checkProbe(rep, p, doc) != nil {
			// The document was read before the probe: a tick may have committed and moved what
			// the probe read since (a slot). Judge with the document as it is after the probe.
			if b, err := st.Get(ctx, r.Blob); err == nil {
				if d, err := state.Decode(r.Blob, pollerName, b.Data); err == nil {
					doc = d
				}
			}
			if err := checkProbe(rep, p, doc); err != nil {
				failed := ProbeFailed(err)
				failed.DurationMS, failed.Details = p.DurationMS, p.Details
				r.Probe = &failed
				r.RowsWaiting, r.LagSeconds, r.LagFrom = -1, nil, ""
			}
		}
	}
	return r
}

// reporter is the driver that alone reads the poller's cursor kind (kind, else its
// checkpoint's), whose CheckProbe and StatusDetails judge and show what only it reads; nil when
// no driver alone reads it.
func reporter(kind string, doc *state.Doc) driver.Driver {
	if kind == "" && doc != nil && doc.Checkpoint.Cursor != nil {
		kind = doc.Checkpoint.Cursor.Kind
	}
	d, ok := drivers.ForKind(kind)
	if !ok {
		return nil
	}
	return d
}

// checkProbe is the driver's judgement of what the probe found against doc's checkpoint.
func checkProbe(rep driver.Driver, p Probe, doc *state.Doc) error {
	if doc == nil {
		return nil
	}
	return rep.CheckProbe(p.Details, doc.Checkpoint.Cursor, doc.PollerName)
}

// probeDetails are the details the probe found; nil without a probe.
func probeDetails(p *Probe) []driver.Detail {
	if p == nil {
		return nil
	}
	return p.Details
}

// historyOps sums the history's rows by op; nil when no tick counted any.
func historyOps(history []state.Tick) map[string]int {
	var out map[string]int
	for _, t := range history {
		for op, n := range t.Ops {
			if out == nil {
				out = map[string]int{}
			}
			out[op] += n
		}
	}
	return out
}

// fromDoc fills what the state document says.
func (r *Row) fromDoc(d *state.Doc, b store.Blob, cfg Config) {
	r.State = StateOK
	r.HandlerVersion = d.HandlerVersion
	r.Cursor = d.Checkpoint.Cursor
	r.FencingToken = d.Lease.FencingToken
	margin := cfg.Margin
	if margin == 0 {
		margin = lease.DefaultMargin
	}
	r.LeaseOwner, r.LeaseLive = lease.Live(d.Lease, b.LastModified, b.Date, margin)
	r.LastBatchID = d.Checkpoint.LastSuccessfulBatchID
	if !d.Checkpoint.UpdatedAt.IsZero() {
		r.LastCommitAt = d.Checkpoint.UpdatedAt.UTC().Format(time.RFC3339)
	}
	if f := d.Failure; f != nil {
		r.FailedAttempts, r.FailedBatchID, r.FailureKeys = f.Attempts, f.BatchID, f.Keys
		r.LastError, r.QuarantineRequested = redact.Text(f.LastError), f.Quarantine
	}
	if d.Follow != nil && r.LeaseLive && (b.Date.IsZero() || b.Date.Before(d.Follow.Until.Time)) {
		r.Following = d.Follow
	}
	if r.Backfill = d.Backfill; d.Backfill != nil {
		now := b.Date // the storage service's clock, as the lease's judgement
		if now.IsZero() {
			now = time.Now()
			if cfg.Now != nil {
				now = cfg.Now()
			}
		}
		p := Progress(d.Backfill, now)
		r.BackfillProgress = &p
	}
	if len(d.History) > 0 {
		r.History = d.History
		r.HistoryOps = historyOps(d.History)
	}
	if r.Registered && (appsettings.Poison{MaxAttempts: r.MaxAttempts, OnPoison: r.OnPoison}).Blocks(r.FailedAttempts, r.QuarantineRequested) {
		r.Blocked = true
		r.Unblock = appsettings.UnblockHint(r.Poller)
	}
}

// OutcomeMisconfigured is the outcome a tick's liveness mark records when its error needs a
// change, not a retry (Misconfigured): its settings, the source's schema, the checkpoint.
const OutcomeMisconfigured = "misconfigured"

// ActorPrefix starts the lease owner that pollerctl records when it writes a state document: such
// a write is not a tick.
const ActorPrefix = "pollerctl/"

// stateTick is the tick the state document's last write tells of: a write by a tick's lease
// holder (not by pollerctl, nor a clone that no tick has taken yet).
func stateTick(d *state.Doc, b store.Blob) (LastTick, bool) {
	if d.Lease.OwnerID == "" || strings.HasPrefix(d.Lease.OwnerID, ActorPrefix) {
		return LastTick{}, false
	}
	t := LastTick{AgoSeconds: ago(b), Outcome: "committed", From: "state", rowsWaiting: -1}
	if n := len(d.History); n > 0 {
		h := d.History[n-1]
		t.Outcome, t.rowsWaiting, t.lag = h.Outcome, h.RowsWaiting, h.LagSeconds
	}
	if f := d.Failure; f != nil {
		if t.Outcome == "committed" {
			t.Outcome = "failed"
		}
		t.Error = redact.Text(f.LastError)
		t.failing(f.FirstFailureAt.Time, f.LastFailureAt.Time)
	}
	return t, true
}

// ago is how long before the read the blob was last written, on the service's clock.
func ago(b store.Blob) float64 {
	if b.LastModified.IsZero() || b.Date.IsZero() {
		return 0
	}
	return max(b.Date.Sub(b.LastModified).Seconds(), 0)
}

// newest returns the most recent of the ticks, or nil; of two as recent, the first.
func newest(ticks []LastTick) *LastTick {
	var best *LastTick
	for i := range ticks {
		if best == nil || ticks[i].AgoSeconds < best.AgoSeconds {
			best = &ticks[i]
		}
	}
	return best
}

func (c Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// expectedWithin is how recent a running poller's last tick always is: its liveness interval
// (an idle tick marks at least that often) plus three schedule periods.
func expectedWithin(reg Registered, now time.Time) time.Duration {
	interval := reg.LivenessInterval
	if interval <= 0 {
		interval = appsettings.DefaultLivenessInterval
	}
	// Without {P}_SCHEDULE (the host could not run the timer) the interval alone bounds it.
	return interval + 3*appsettings.SchedulePeriod(reg.Schedule, now)
}

// reason is why a poller has its health: a headline that says what is wrong and what to do, and
// the error it quotes ("" for none), which may be long (a driver's, of many lines).
type reason struct{ head, err string }

// String is the reason as one text: the headline, then ": " and the error.
func (r reason) String() string {
	if r.err == "" {
		return r.head
	}
	return r.head + ": " + r.err
}

// verdict is the one place that decides a poller's health, from what Read gathered into the row:
// the state document, the liveness signals (LastTick), the probe and the registered settings. The first
// rule that applies wins; the reason says why and what to do.
func verdict(r *Row, reg Registered, cfg Config) (string, reason) {
	name := r.Poller
	switch {
	case r.State == StateCorrupt:
		return HealthMisconfigured, reason{fmt.Sprintf("the state document does not decode, so every tick fails. Restore a backup: pollerctl backups %s, then pollerctl reset %s --from-backup latest",
			name, name), r.Problem}
	case r.Blocked:
		return HealthBlocked, reason{head: fmt.Sprintf("batch %s failed %d times (limit %d); it is retried every tick and never skipped. To unblock: %s",
			r.FailedBatchID, r.FailedAttempts, r.MaxAttempts, r.Unblock)}
	case !r.Registered && cfg.Elsewhere != "":
		return HealthUnknown, reason{head: NotInBuild(name, cfg.Elsewhere, r.HandlerVersion)}
	case !r.Registered:
		return HealthStopped, reason{head: fmt.Sprintf("not in this build: no function ticks it, only its state is left (pollerctl delete %s removes it)", name)}
	case r.SettingsProblem != "":
		return HealthMisconfigured, reason{"settings", r.SettingsProblem}
	case r.Probe != nil && !r.Probe.OK && r.Probe.Skipped == "" && r.Probe.Misconfigured:
		return HealthMisconfigured, reason{"the probe of its source finds what needs a change (settings, schema or checkpoint), not a retry", r.Probe.Error}
	case r.LastTick.Failed() && r.LastTick.Outcome == OutcomeMisconfigured:
		// The same facts as the probe's above, read from the tick's error: a pollerctl status
		// --no-probe says what the probe says.
		return HealthMisconfigured, reason{r.LastTick.failedText() + ", with an error that needs a change (settings, schema or checkpoint), not a retry", r.LastTick.Error}
	case r.State == StateUnreadable:
		return HealthFailing, reason{"the state document cannot be read", r.Problem}
	case r.LastTick.Failed():
		return HealthFailing, reason{r.LastTick.failedText(), r.LastTick.Error}
	case r.Probe != nil && !r.Probe.OK && r.Probe.Skipped == "":
		return HealthFailing, reason{"the source probe failed", r.Probe.Error}
	}
	if r.LastTick == nil {
		return HealthStopped, reason{head: "no tick recorded yet. " + stoppedCauses(name, reg, cfg)}
	}
	if within := r.LastTick.ExpectedWithinSeconds; within > 0 && r.LastTick.AgoSeconds > within {
		return HealthStopped, reason{head: fmt.Sprintf("no tick for %s, and a running poller records one at least every %s. %s",
			DurationText(r.LastTick.AgoSeconds), DurationText(within), stoppedCauses(name, reg, cfg))}
	}
	h, why := detailVerdict(r)
	if h == HealthFailing {
		return h, reason{head: why}
	}
	if r.DeadLetters.Count > 0 {
		return HealthDegraded, reason{head: r.DeadLetters.Text() + ": rows it gave up on, never delivered. Fix what failed them, then replay them (pollerctl deadletter replay " +
			name + " BATCH_ID) or discard them (pollerctl deadletter discard " + name + " BATCH_ID)"}
	}
	if len(r.SetupWarnings) > 0 {
		return HealthDegraded, reason{head: SetupText(name, r.SetupWarnings)}
	}
	if r.Cleanup != nil && r.Cleanup.Error != "" {
		return HealthDegraded, reason{cleanupReason(name), r.Cleanup.Error}
	}
	if h != "" {
		return h, reason{head: why}
	}
	maxLag := reg.MaxLag
	if maxLag <= 0 {
		maxLag = appsettings.DefaultMaxLag
	}
	if r.LagSeconds != nil && *r.LagSeconds > maxLag.Seconds() {
		return HealthLagging, reason{head: fmt.Sprintf("the oldest row waiting is %s old, more than %s_MAX_LAG (%s); rows waiting: %s",
			DurationText(*r.LagSeconds), appsettings.Prefix(name), maxLag, WaitingText(r.RowsWaiting))}
	}
	return HealthOK, reason{}
}

// stoppedCauses says, for a poller with no recent tick, how often its timer should fire and what
// to look at on the host's side: the timer never reaches the handler, so the handler cannot say.
func stoppedCauses(name string, reg Registered, cfg Config) string {
	setting := appsettings.Prefix(name) + "_SCHEDULE"
	interval := cmp.Or(reg.LivenessInterval, appsettings.DefaultLivenessInterval)
	expect := fmt.Sprintf("%s is not set, and the Functions host cannot run its timer without it: set it (NCRONTAB, six fields)", setting)
	if cfg.Elsewhere != "" {
		expect = fmt.Sprintf("%s is not set in pollerctl's environment, so the period its timer fires at is not known here", setting)
	}
	if period := appsettings.SchedulePeriod(reg.Schedule, cfg.now()); period > 0 {
		expect = fmt.Sprintf("Its timer should fire every %s (%s %q): a tick that fails or delivers rows is recorded each time, an idle one at least every %s (%s_LIVENESS_INTERVAL)",
			DurationText(period.Seconds()), setting, reg.Schedule, DurationText(interval.Seconds()), appsettings.Prefix(name))
	}
	return expect + ". No tick reaches the handler, so look at the host: is the function app running, and the function " + name + " enabled? " +
		"After a deployment the Functions host has been seen to stop every timer of an app (Azure/azure-functions-host#11828): restart the app. " +
		"Check " + setting + " in the app's settings, and the host's own logs (Application Insights traces whose category starts with Host.)"
}

// SetupText says what the setup warnings are and where their fixes are, for the health reason.
func SetupText(poller string, ws []setup.Finding) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, w.Check+": "+w.Detail)
	}
	return fmt.Sprintf("the source's set-up has %d problem(s): %s. The SQL that fixes them: pollerctl check %s --fix",
		len(ws), strings.Join(parts, "; "), poller)
}

// NotInBuild says why a reader that is not the app (pollerctl, of version elsewhere) does not
// judge a poller it does not have, with the version of the handler that last wrote its state
// (handler, "" when unrecorded), and what to do.
func NotInBuild(name, elsewhere, handler string) string {
	if handler == "" {
		handler = "not recorded"
	}
	return fmt.Sprintf("not in this pollerctl's build (pollerctl %s; the handler that last wrote its state: %s): the deployed app may have it, so it is not judged here. "+
		"Use a pollerctl built from the app's revision, or the app's status page", elsewhere, handler)
}

// DurationText renders seconds for people as a Go duration: tenths below a minute, whole seconds
// above (the status page, pollerctl and the health reasons all use it).
func DurationText(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d > -time.Minute && d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// deadLetters lists a poller's dead letters in one listing: it reads none of them, whatever
// their number (the oldest one's age comes from the listing's times).
func deadLetters(ctx context.Context, st Reader, app, pollerName string) DeadLetters {
	sum, err := deadletter.Summarize(ctx, st, app, pollerName)
	if err != nil {
		return DeadLetters{BatchIDs: []string{}, Problem: redact.Text(err.Error())}
	}
	d := DeadLetters{Count: len(sum.BatchIDs), BatchIDs: sum.BatchIDs}
	if d.Count > 0 {
		d.List = deadletter.ListCommand(pollerName)
		if sum.OldestAge != nil {
			age := sum.OldestAge.Seconds()
			d.OldestAgeSeconds = &age
		}
	}
	return d
}

// Text says how many dead letters there are, how old the oldest is and how to list them; "" when
// there are none.
func (d DeadLetters) Text() string {
	if d.Count == 0 {
		return ""
	}
	s := fmt.Sprintf("%d dead letter", d.Count)
	if d.Count > 1 {
		s += "s"
	}
	if d.OldestAgeSeconds != nil {
		s += ", the oldest written " + DurationText(*d.OldestAgeSeconds) + " ago"
	}
	return s + " (list them: " + d.List + ")"
}

// detailVerdict is what the driver's details make of the poller's health once its ticks are
// otherwise fine (a slot that keeps more WAL than allowed): the most urgent; "" when fine.
func detailVerdict(r *Row) (string, string) {
	worst := driver.Fine
	reason := ""
	for _, d := range r.Details {
		if d.Health > worst {
			worst, reason = d.Health, d.Reason
		}
	}
	switch worst {
	case driver.Failing:
		return HealthFailing, reason
	case driver.Lagging:
		return HealthLagging, reason
	}
	return "", ""
}
