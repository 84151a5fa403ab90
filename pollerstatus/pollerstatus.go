// Package pollerstatus computes what operators see of each poller: one Row per poller, read from
// its state document (cursor, lag, lease, last batch, failed attempts, the history of its recent
// ticks) and from its dead letters. `pollerctl status` prints the rows as a table and the
// handler's `status` function serves them as JSON and as an HTML page.
//
// It only reads: the store it is given is wrapped so that a write through it is an error, and
// nothing in a Row comes from settings, so no connection string or key can reach one. Free-text
// errors copied from the state document (a handler's error may quote a URL) are redacted.
package pollerstatus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pseudotrigger/pseudotrigger/deadletter"
	"github.com/pseudotrigger/pseudotrigger/lease"
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/state"
	"github.com/pseudotrigger/pseudotrigger/store"
)

// The values of Row.State.
const (
	StateOK         = "ok"         // the document decodes
	StateNone       = "none"       // no document yet: the first tick creates it
	StateCorrupt    = "corrupt"    // the document does not decode (Problem says why)
	StateUnreadable = "unreadable" // the store failed to read it (Problem says why)
)

// Row is one poller's status.
type Row struct {
	Poller  string `json:"poller"`
	Blob    string `json:"blob"`
	State   string `json:"state"` // ok, none (no state yet), corrupt, unreadable
	Problem string `json:"problem,omitempty"`

	Cursor *state.Cursor `json:"cursor,omitempty"`
	// LagSeconds is the storage service's clock (the read's Date) minus a timestamp cursor's
	// value; nil for the other cursor kinds, which have no age.
	LagSeconds   *float64 `json:"lag_seconds,omitempty"`
	FencingToken int64    `json:"fencing_token"`
	LeaseOwner   string   `json:"lease_owner,omitempty"` // "" when the lease was released or never taken
	LeaseLive    bool     `json:"lease_live"`            // judged on the service's clock, as a contender would
	LastBatchID  string   `json:"last_batch_id,omitempty"`
	LastCommitAt string   `json:"last_commit_at,omitempty"` // RFC 3339 UTC

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
	// History is the state document's ring of recent ticks that wrote, oldest first.
	History []state.Tick `json:"history"`
	// Registered: this build has the poller (otherwise only its state blob was found).
	Registered bool `json:"registered"`
	// SettingsProblem is what is wrong with a registered poller's settings, if anything.
	SettingsProblem string `json:"settings_problem,omitempty"`
}

// DeadLetters are a poller's dead letters: deadletter/{app}/{poller}/{batch_id}.json.
type DeadLetters struct {
	Count    int      `json:"count"`
	BatchIDs []string `json:"batch_ids"`         // sorted
	Problem  string   `json:"problem,omitempty"` // listing them failed
}

// Reader is what the rows need of the state store: reads and listings. store.Store satisfies it.
type Reader interface {
	Get(ctx context.Context, name string) (store.Blob, error)
	List(ctx context.Context, prefix string) ([]string, error)
}

// Registered is a poller this build has, with the settings that decide Row.Blocked.
type Registered struct {
	Name string
	// MaxAttempts and OnPoison are the poller's {P}_MAX_ATTEMPTS and {P}_ON_POISON
	// (poller.Settings); zero values mean the defaults.
	MaxAttempts int
	OnPoison    string
	// Problem is what is wrong with its settings ("" when nothing); redacted before it is shown.
	Problem string
}

// RegisteredFrom describes a registered poller from its settings and their error. Only the
// poison settings are kept: nothing else of the settings (a DSN, a key) reaches a Row.
func RegisteredFrom(name string, s poller.Settings, err error) Registered {
	r := Registered{Name: name, MaxAttempts: s.MaxAttempts, OnPoison: s.OnPoison}
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
}

func (c Config) registered(name string) (Registered, bool) {
	for _, r := range c.Registered {
		if r.Name == name {
			return r, true
		}
	}
	return Registered{}, false
}

// Blob is a poller's state blob: state/{app}/{poller}.json.
func Blob(app, pollerName string) string { return statePrefix(app) + pollerName + ".json" }

func statePrefix(app string) string { return "state/" + app + "/" }

// Pollers returns the names of the pollers that have a state blob under state/{app}/ or are
// registered, sorted.
func Pollers(ctx context.Context, st Reader, cfg Config) ([]string, error) {
	prefix := statePrefix(cfg.App)
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
	return rows, nil
}

// Read returns one poller's row. A missing, corrupt or unreadable document is a row that says
// so (State, Problem), not an error.
func Read(ctx context.Context, st Reader, cfg Config, pollerName string) Row {
	reg, registered := cfg.registered(pollerName)
	r := Row{Poller: pollerName, Blob: Blob(cfg.App, pollerName), Registered: registered, History: []state.Tick{}}
	if registered {
		r.MaxAttempts, r.OnPoison = reg.MaxAttempts, reg.OnPoison
		if r.MaxAttempts <= 0 {
			r.MaxAttempts = poller.DefaultMaxAttempts
		}
		if r.OnPoison == "" {
			r.OnPoison = poller.DefaultOnPoison
		}
		r.SettingsProblem = Redact(reg.Problem)
	}
	r.DeadLetters = deadLetters(ctx, st, cfg.App, pollerName)

	b, err := st.Get(ctx, r.Blob)
	switch {
	case errors.Is(err, store.ErrNotFound):
		r.State, r.Problem = StateNone, "no state yet (the first tick creates it)"
		return r
	case err != nil:
		r.State, r.Problem = StateUnreadable, Redact(err.Error())
		return r
	}
	d, err := state.Decode(r.Blob, pollerName, b.Data)
	if err != nil {
		r.State, r.Problem = StateCorrupt, Redact(err.Error())
		return r
	}
	r.State = StateOK
	r.Cursor = d.Checkpoint.Cursor
	r.LagSeconds = lag(d.Checkpoint.Cursor, b.Date)
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
		r.LastError, r.QuarantineRequested = Redact(f.LastError), f.Quarantine
	}
	if len(d.History) > 0 {
		r.History = d.History
	}
	if registered && r.OnPoison == poller.Block && r.FailedAttempts >= int64(r.MaxAttempts) && !r.QuarantineRequested {
		r.Blocked = true
		r.Unblock = poller.UnblockHint(pollerName)
	}
	return r
}

// lag is date minus a timestamp cursor's value in seconds; nil for the other kinds.
func lag(c *state.Cursor, date time.Time) *float64 {
	ts, ok := c.Time()
	if !ok {
		return nil
	}
	l := date.Sub(ts).Seconds()
	return &l
}

func deadLetters(ctx context.Context, st Reader, app, pollerName string) DeadLetters {
	ids, err := deadletter.List(ctx, readOnly{st}, app, pollerName)
	if err != nil {
		return DeadLetters{BatchIDs: []string{}, Problem: Redact(err.Error())}
	}
	slices.Sort(ids)
	return DeadLetters{Count: len(ids), BatchIDs: ids}
}

// errReadOnly: the status never writes.
var errReadOnly = errors.New("pollerstatus: the status only reads")

// readOnly gives a Reader the shape of a store.Store (deadletter.List asks for one) whose writes
// fail.
type readOnly struct{ Reader }

func (readOnly) Put(context.Context, string, []byte, store.Condition) (store.Written, error) {
	return store.Written{}, errReadOnly
}

func (readOnly) Delete(context.Context, string, store.Condition) error { return errReadOnly }

// CursorText renders a cursor for people: its value, then each tiebreaker column=value in
// column order; "(beginning)" for nil.
func CursorText(c *state.Cursor) string {
	if c == nil {
		return "(beginning)"
	}
	s := string(c.Value)
	keys := make([]string, 0, len(c.Tiebreaker))
	for k := range c.Tiebreaker {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		s += " " + k + "=" + string(c.Tiebreaker[k])
	}
	return s
}
