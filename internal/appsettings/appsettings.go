// Package appsettings holds the app settings of a poller, {P}_..., where {P} is the poller's name
// in upper case with '-' as '_' (orders -> ORDERS). Each setting is defined once, in Table: its
// name, meaning and default, and how it is read and checked. The settings table of docs/contract.md and
// `pollerctl new`'s list are made from the same rows (a test compares them).
package appsettings

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/suggest"
)

// Settings are one poller's app settings, validated.
type Settings struct {
	Driver string // {P}_DB_DRIVER
	DSN    string // {P}_DB_CONNECTION
	// Schedule is {P}_SCHEDULE, which the Functions host reads (as %{P}_SCHEDULE% in
	// {p}/function.json) to fire the timer; "" when it is not set, so the status cannot know the
	// schedule (and the host could not run the timer).
	Schedule          string
	BatchSize         int           // {P}_BATCH_SIZE
	LeaseTTL          time.Duration // {P}_LEASE_TTL
	HeartbeatInterval time.Duration // {P}_HEARTBEAT_INTERVAL
	TickBudget        time.Duration // {P}_TICK_BUDGET
	// CheckpointInterval is {P}_CHECKPOINT_INTERVAL: within a tick, commit at most this often
	// (0: after every batch); the tick's end always commits. A crash replays the batches since
	// the last commit.
	CheckpointInterval time.Duration
	// Follow is {P}_FOLLOW: a tick that has caught up keeps its lease and keeps reading until
	// this long after it started (0: off, the tick ends once caught up). FollowInterval
	// ({P}_FOLLOW_INTERVAL) is the pause between its looks when nothing came, FollowCommit
	// ({P}_FOLLOW_COMMIT) how often at most it commits while following.
	Follow, FollowInterval, FollowCommit time.Duration
	SettleLag                            time.Duration // {P}_SETTLE_LAG (sourcedef.NoSettleLag for an explicit 0)
	// MaxAttempts is {P}_MAX_ATTEMPTS: failed attempts at one batch before OnPoison applies.
	MaxAttempts int
	// OnPoison is {P}_ON_POISON: Block (keep retrying, loudly) or Quarantine (isolate the failing
	// rows, dead-letter them, deliver the rest and go on).
	OnPoison string
	// LivenessInterval is {P}_LIVENESS_INTERVAL: idle ticks (which write nothing else) leave a
	// liveness mark at most this often, so the status knows the timer still runs; a failed tick
	// leaves one each time (package liveness).
	LivenessInterval time.Duration
	// MaxLag is {P}_MAX_LAG: the status calls the poller lagging when the oldest row waiting is
	// older than this.
	MaxLag time.Duration
	// Slot and Publication are {P}_CDC_SLOT and {P}_CDC_PUBLICATION: what a logical cursor reads
	// (pollerctl cdc enable creates them); "" for the other cursor kinds.
	Slot        string
	Publication string
	// MaxRetained is {P}_CDC_MAX_RETAINED: the status flags a logical poller whose slot keeps
	// more WAL than this, in bytes (0 for the other cursor kinds).
	MaxRetained int64
}

// Defaults.
const (
	DefaultBatchSize = 500
	// MaxBatchSize bounds {P}_BATCH_SIZE, and a backfill's chunk.
	MaxBatchSize = 100_000
	// DefaultTickBudget: well under the 10-minute functionTimeout of host.json, since the host
	// kills the whole process on a time-out.
	DefaultTickBudget = 4 * time.Minute
	// DefaultCheckpointInterval: a commit per batch would cost a blob write per batch, about as
	// long as fetching a batch of 1,000 rows; committing every 2 s keeps catch-up at the
	// database's speed and bounds the replay after a crash.
	DefaultCheckpointInterval = 2 * time.Second
	// DefaultFollowInterval: a look every 100 ms (the cheap query an idle tick makes) keeps a
	// keyset cursor's latency near its settle lag at ten queries a second; DefaultFollowCommit: a
	// blob write a second while a stream flows.
	DefaultFollowInterval   = 100 * time.Millisecond
	DefaultFollowCommit     = time.Second
	DefaultMaxAttempts      = 5
	DefaultOnPoison         = Block
	DefaultLivenessInterval = 5 * time.Minute
	DefaultMaxLag           = 5 * time.Minute
)

// What {P}_ON_POISON may say.
const (
	Block      = "block"
	Quarantine = "quarantine"
)

// Setting is one app setting of every poller, {P}_<Suffix>.
type Setting struct {
	Suffix  string
	Meaning string // as docs/contract.md's settings table says it
	Default string // as docs/contract.md's settings table says it
	// read sets the setting's field from v (trimmed; "" when unset), or returns the problem.
	read func(s *Settings, v string, p *pollerdef.Def) error
}

// onlyFor are the settings that apply to some cursor kinds only (each refuses a value for the
// others); every other setting applies to every poller.
var onlyFor = map[string][]string{
	"SETTLE_LAG":       kindsWhere(state.SettleLagKind),
	"CDC_SLOT":         {state.KindLogical},
	"CDC_PUBLICATION":  {state.KindLogical},
	"CDC_MAX_RETAINED": {state.KindLogical},
}

// kindsWhere lists the cursor kinds of which has says true.
func kindsWhere(has func(kind string) bool) []string {
	var out []string
	for _, k := range state.Kinds {
		if has(k) {
			out = append(out, k)
		}
	}
	return out
}

// AppliesTo reports whether the setting means anything for a poller whose cursor is of kind
// (what `pollerctl new` prints, and the only settings such a poller accepts a value for).
func (st Setting) AppliesTo(kind string) bool {
	kinds, ok := onlyFor[st.Suffix]
	return !ok || slices.Contains(kinds, kind)
}

// Table is every poller setting, in the order they are read (a default may depend on an earlier
// setting's value).
var Table = []Setting{
	{"DB_DRIVER", "`sqlserver`, `postgres`, `mysql` (MySQL, MariaDB) or `sqlite`", "- (required)", func(s *Settings, v string, _ *pollerdef.Def) error {
		switch {
		case slices.Contains(drivers.Names(), v):
			s.Driver = v
			return nil
		case v == "":
			return fmt.Errorf("missing: set it to one of %s", strings.Join(drivers.Names(), ", "))
		}
		return fmt.Errorf("%q is not one of %s", v, strings.Join(drivers.Names(), ", "))
	}},
	{"DB_CONNECTION", "the source DSN (SQL Server, PostgreSQL and MySQL may use Entra ID, see below)", "- (required)", func(s *Settings, v string, _ *pollerdef.Def) error {
		if s.DSN = v; v == "" {
			return errors.New("missing: set it to the source database's connection string")
		}
		return nil
	}},
	{"SCHEDULE", "NCRONTAB (six fields, seconds first), read by the Functions host as `%{P}_SCHEDULE%` in `{p}/function.json`", "- (the host needs it: `main.bicepparam` sets it on deploy, `local.settings.json` locally)", func(s *Settings, v string, _ *pollerdef.Def) error {
		if s.Schedule = v; v == "" {
			return nil
		}
		if _, err := ParseSchedule(v); err != nil {
			return fmt.Errorf("%q is not an NCRONTAB schedule with six fields (second minute hour day month weekday): %v", v, err)
		}
		return nil
	}},
	{"BATCH_SIZE", "rows per batch (1 to 100000)", "the poller's own (`poller.WithBatchSize`, or `batch_size` in its `poller.json`), else 500", func(s *Settings, v string, p *pollerdef.Def) error {
		return whole(&s.BatchSize, v, cmp.Or(p.BatchSize(), DefaultBatchSize), MaxBatchSize)
	}},
	{"LEASE_TTL", "Go duration, at least 4s", "`60s`", func(s *Settings, v string, _ *pollerdef.Def) error {
		if err := duration(&s.LeaseTTL, v, lease.DefaultTTL, false); err != nil {
			return err
		}
		if s.LeaseTTL < 4*time.Second {
			return fmt.Errorf("%v is too short: at least 4s (the expiry margin is at least 1s)", s.LeaseTTL)
		}
		return nil
	}},
	{"HEARTBEAT_INTERVAL", "Go duration, below TTL/3", "TTL/4", func(s *Settings, v string, p *pollerdef.Def) error {
		if err := duration(&s.HeartbeatInterval, v, s.LeaseTTL/4, false); err != nil {
			return err
		}
		if s.LeaseTTL >= 4*time.Second && 3*s.HeartbeatInterval >= s.LeaseTTL {
			return fmt.Errorf("%v must be less than a third of %s_LEASE_TTL (%v)", s.HeartbeatInterval, Prefix(p.Name()), s.LeaseTTL)
		}
		return nil
	}},
	{"TICK_BUDGET", "stop taking batches after this (keep it well under `functionTimeout`, 10 min in `host.json`)", "`4m`", func(s *Settings, v string, _ *pollerdef.Def) error {
		return duration(&s.TickBudget, v, DefaultTickBudget, false)
	}},
	{"CHECKPOINT_INTERVAL", "commit at most this often within a tick; `0s` after every batch; below TTL/2", "`2s`", func(s *Settings, v string, p *pollerdef.Def) error {
		if err := duration(&s.CheckpointInterval, v, DefaultCheckpointInterval, true); err != nil {
			return err
		}
		return belowHalfTTL(s.CheckpointInterval, s, p)
	}},
	{"FOLLOW", "follow mode: a tick that has caught up keeps its lease and keeps reading until this long after it started, then commits and ends; at most `{P}_TICK_BUDGET` and below the schedule's period (docs/follow.md)", "off", func(s *Settings, v string, p *pollerdef.Def) error {
		if err := duration(&s.Follow, v, 0, true); err != nil {
			return err
		}
		gap, _ := scheduleGaps(s.Schedule, time.Now())
		switch {
		case s.Follow == 0:
		case s.Follow > s.TickBudget:
			return fmt.Errorf("%v is more than %s_TICK_BUDGET (%v): a tick follows within its budget", s.Follow, Prefix(p.Name()), s.TickBudget)
		case gap > 0 && s.Follow >= gap:
			return fmt.Errorf("%v is not below the schedule's shortest period (%v between firings, %s_SCHEDULE %q): the next tick would find the lease held; leave a few seconds between them", s.Follow, gap, Prefix(p.Name()), s.Schedule)
		}
		return nil
	}},
	{"FOLLOW_INTERVAL", "while following, the pause between looks that found nothing (at least 10ms)", "`100ms`", func(s *Settings, v string, _ *pollerdef.Def) error {
		return durationAtLeast(&s.FollowInterval, v, DefaultFollowInterval, 10*time.Millisecond, "each look is a query")
	}},
	{"FOLLOW_COMMIT", "while following, commit at most this often (each commit is a blob write); below TTL/2", "`1s`", func(s *Settings, v string, p *pollerdef.Def) error {
		if err := duration(&s.FollowCommit, v, DefaultFollowCommit, false); err != nil {
			return err
		}
		return belowHalfTTL(s.FollowCommit, s, p)
	}},
	{"SETTLE_LAG", "timestamp cursors read only rows older than the database's clock minus this; `0s` is unsafe with late commits. Refused for the other cursor kinds, which have no age (xid and rowversion are bounded by the open transactions, integer by nothing)", "the poller's own (`poller.WithSettleLag`, or `source.settle_lag` in its `poller.json`; `orders`: 5s), else 10s", func(s *Settings, v string, p *pollerdef.Def) error {
		def := p.Source()
		if s.SettleLag = def.SettleLag; v == "" {
			return nil
		}
		dur, err := time.ParseDuration(v)
		switch {
		case def.Cursor.Kind != "" && !state.SettleLagKind(def.Cursor.Kind):
			// Only a timestamp has an age: an integer, xid or rowversion cursor would silently
			// ignore the setting, and its user would believe it protects against late commits.
			return sourcedef.SettleLagRefused(def.Cursor.Kind)
		case err != nil || dur < 0:
			return fmt.Errorf("%q is not a Go duration like 10s (0s reads up to the database's clock, unsafe with late commits)", v)
		case dur == 0:
			s.SettleLag = sourcedef.NoSettleLag
		default:
			s.SettleLag = dur
		}
		return nil
	}},
	{"MAX_ATTEMPTS", "failed attempts at one batch before `{P}_ON_POISON` applies (1 to 1000)", "`5`", func(s *Settings, v string, _ *pollerdef.Def) error {
		return whole(&s.MaxAttempts, v, DefaultMaxAttempts, 1000)
	}},
	{"ON_POISON", "`block`: keep retrying the batch every tick, never skip it, and fail each tick loudly (500, a `poller blocked` log line naming the batch, its rows' keys, the attempts, the last error and how to unblock); `quarantine`: hand the batch's halves to the handler, down to single rows, dead-letter the rows that fail alone, deliver the rest and go on", "`block`", func(s *Settings, v string, _ *pollerdef.Def) error {
		switch v = strings.ToLower(v); v {
		case "":
			s.OnPoison = DefaultOnPoison
		case Block, Quarantine:
			s.OnPoison = v
		default:
			return fmt.Errorf("%q is not block or quarantine", v)
		}
		return nil
	}},
	{"LIVENESS_INTERVAL", "an idle tick leaves a liveness mark at most this often, a failed one each time (at least 10s); a poller silent for longer than this plus three schedule periods is `stopped`", "`5m`", func(s *Settings, v string, _ *pollerdef.Def) error {
		return durationAtLeast(&s.LivenessInterval, v, DefaultLivenessInterval, 10*time.Second, "every mark is a blob write")
	}},
	{"MAX_LAG", "the status calls the poller `lagging` when the oldest row waiting is older than this", "`5m`", func(s *Settings, v string, _ *pollerdef.Def) error {
		return duration(&s.MaxLag, v, DefaultMaxLag, false)
	}},
	{"CDC_SLOT", "`logical` cursors: the PostgreSQL logical replication slot the poller reads (lower-case letters, digits, `_`; `pollerctl cdc enable` creates it). Refused for the other cursor kinds", "`pseudotrigger_{app}_{poller}` (lower case, other characters as `_`, at most 63)", func(s *Settings, v string, p *pollerdef.Def) error {
		return cdcName(&s.Slot, v, "slot", p)
	}},
	{"CDC_PUBLICATION", "`logical` cursors: the publication of the poller's table that the slot is read with. Refused for the other cursor kinds", "the slot's name", func(s *Settings, v string, p *pollerdef.Def) error {
		return cdcName(&s.Publication, v, "publication", p)
	}},
	{"CDC_MAX_RETAINED", "`logical` cursors: the status calls the poller not ok when its slot keeps more WAL than this (bytes, or with a unit: `500MiB`, `2GiB`); the disk it fills is the database server's. Refused for the other cursor kinds", "`1GiB`", func(s *Settings, v string, p *pollerdef.Def) error {
		if kind := p.Source().Cursor.Kind; kind != state.KindLogical {
			if v != "" {
				return fmt.Errorf("applies to logical cursors only; this poller's cursor is %s", kind)
			}
			return nil
		}
		return byteSize(&s.MaxRetained, v, DefaultMaxRetained)
	}},
}

// DefaultMaxRetained is {P}_CDC_MAX_RETAINED's default: 1 GiB of WAL, 64 segments of 16 MiB.
const DefaultMaxRetained int64 = 1 << 30

// byteSize sets *n from v, a whole number of bytes with an optional unit (KiB, MiB, GiB, TiB;
// KB, MB, GB, TB as powers of 1000), or def when v is empty.
func byteSize(n *int64, v string, def int64) error {
	if v == "" {
		*n = def
		return nil
	}
	num := strings.TrimRight(v, "KMGTiB ")
	unit := strings.TrimSpace(v[len(num):])
	mult := map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
		"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[unit]
	i, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || mult == 0 || i < 1 || i > (1<<62)/mult {
		return fmt.Errorf("%q is not a size like 1GiB, 500MiB or 1073741824 (bytes)", v)
	}
	*n = i * mult
	return nil
}

// cdcName sets *name from v for a logical cursor (Load fills in the defaults, which depend on the
// app's name); v must be empty for the other kinds.
func cdcName(name *string, v, what string, p *pollerdef.Def) error {
	if kind := p.Source().Cursor.Kind; kind != state.KindLogical {
		if v != "" {
			return fmt.Errorf("applies to logical cursors only; this poller's cursor is %s", kind)
		}
		return nil
	}
	return logicalName(name, v, what)
}

// logicalName sets *name from v, a slot or publication name (what), unless v is empty.
func logicalName(name *string, v, what string) error {
	if v == "" {
		return nil
	}
	if err := postgres.CheckSlotName(what, v); err != nil {
		return err
	}
	*name = v
	return nil
}

// cdcDefaults fills in a logical poller's default slot (named after the app and the poller) and
// publication (the slot's name).
func cdcDefaults(slot, publication *string, getenv func(string) string, pollerName string) {
	*slot = cmp.Or(*slot, SlotName(AppName(getenv), pollerName))
	*publication = cmp.Or(*publication, *slot)
}

// cdcNames reads the replication slot and the publication of a logical poller called name,
// {P}_CDC_SLOT and {P}_CDC_PUBLICATION, checked and defaulted as Load does: a clone reads
// them for the new poller, which this build may not have yet (CloneConfig). Every problem is reported, each
// naming its setting (a *SettingError).
func cdcNames(name string, getenv func(string) string) (slot, publication string, err error) {
	var errs []error
	for _, n := range []struct {
		suffix, what string
		name         *string
	}{{"CDC_SLOT", "slot", &slot}, {"CDC_PUBLICATION", "publication", &publication}} {
		setting := Prefix(name) + "_" + n.suffix
		if err := logicalName(n.name, strings.TrimSpace(getenv(setting)), n.what); err != nil {
			errs = append(errs, &SettingError{Setting: setting, Problem: err.Error()})
		}
	}
	cdcDefaults(&slot, &publication, getenv, name)
	return slot, publication, errors.Join(errs...)
}

// SlotName is a logical poller's default slot (and publication) name:
// pseudotrigger_{app}_{poller} in lower case, other characters as '_', and when that is longer
// than PostgreSQL's 63 bytes, cut to 54 and followed by '_' and 8 hex digits of its SHA-256.
func SlotName(app, pollerName string) string {
	name := []byte(strings.ToLower("pseudotrigger_" + app + "_" + pollerName))
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			name[i] = '_'
		}
	}
	if len(name) <= 63 {
		return string(name)
	}
	sum := sha256.Sum256(name)
	return string(name[:54]) + "_" + hex.EncodeToString(sum[:4])
}

// whole sets *n from v, a whole number from 1 to most, or def when v is empty.
func whole(n *int, v string, def, most int) error {
	if v == "" {
		*n = def
		return nil
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 1 || i > most {
		return fmt.Errorf("%q is not a whole number from 1 to %d", v, most)
	}
	*n = i
	return nil
}

// duration sets *d from v, or def when v is empty.
func duration(d *time.Duration, v string, def time.Duration, allowZero bool) error {
	if v == "" {
		*d = def
		return nil
	}
	dur, err := time.ParseDuration(v)
	if err != nil || dur < 0 || (dur == 0 && !allowZero) {
		*d = def
		return fmt.Errorf("%q is not a positive Go duration like 60s or 2m", v)
	}
	*d = dur
	return nil
}

// durationAtLeast sets *d from v (def when empty) and refuses one shorter than least, saying why
// not.
func durationAtLeast(d *time.Duration, v string, def, least time.Duration, why string) error {
	if err := duration(d, v, def, false); err != nil {
		return err
	}
	if *d < least {
		return fmt.Errorf("%v is too short: at least %v (%s)", *d, least, why)
	}
	return nil
}

// belowHalfTTL refuses an interval between lease writes (a commit's) of half {P}_LEASE_TTL or
// more, when the TTL itself is valid: the lease would come near expiry between them.
func belowHalfTTL(d time.Duration, s *Settings, p *pollerdef.Def) error {
	if s.LeaseTTL >= 4*time.Second && d >= s.LeaseTTL/2 {
		return fmt.Errorf("%v must be less than half of %s_LEASE_TTL (%v)", d, Prefix(p.Name()), s.LeaseTTL)
	}
	return nil
}

// Load reads and validates a poller's settings. Every problem is reported, each naming its
// setting (a *SettingError).
func Load(p *pollerdef.Def, getenv func(string) string) (Settings, error) {
	if err := p.Err(); err != nil { // a definition that could not be read: nothing else matters
		return Settings{}, err
	}
	var s Settings
	var errs []error
	for _, st := range Table {
		name := Prefix(p.Name()) + "_" + st.Suffix
		if err := st.read(&s, strings.TrimSpace(getenv(name)), p); err != nil {
			errs = append(errs, &SettingError{Setting: name, Problem: err.Error()})
		}
	}
	if p.Source().Cursor.Kind == state.KindLogical {
		cdcDefaults(&s.Slot, &s.Publication, getenv, p.Name())
	}
	return s, errors.Join(errs...)
}

// Config is the source.Config that opens p's source with these settings: the one place the
// poller's definition meets its settings (the settle lag of a cursor kind with an age, which
// Load refuses for the others; the slot and publication; and the keep-up distance: a quarter of
// {P}_CDC_MAX_RETAINED, at most postgres.DefaultKeepUp).
func (s Settings) Config(p *pollerdef.Def) source.Config {
	def := p.Source()
	if state.SettleLagKind(def.Cursor.Kind) {
		def.SettleLag = s.SettleLag
	}
	def.Slot, def.Publication = s.Slot, s.Publication
	if s.MaxRetained > 0 { // keep up well before the status calls the retained WAL too much
		def.KeepUp = min(postgres.DefaultKeepUp, s.MaxRetained/4)
	}
	return source.Config{Poller: p.Name(), Driver: s.Driver, DSN: s.DSN, Definition: def}
}

// Identity is p's source as its ticks record it in the state document (source.Identify of
// Config's definition; its Fingerprint is the fingerprint), computed from these settings without
// connecting. Only the settings that are part of the source must be usable: the driver and the
// DSN, and for a logical cursor its slot; the error names the one at fault.
func (s Settings) Identity(p *pollerdef.Def) (state.SourceDef, error) {
	pre := Prefix(p.Name())
	if s.Driver == "" || s.DSN == "" {
		return state.SourceDef{}, fmt.Errorf("%s_DB_DRIVER and %s_DB_CONNECTION must be set", pre, pre)
	}
	loc, err := drivers.ParseLocation(s.Driver, s.DSN)
	if err != nil {
		return state.SourceDef{}, fmt.Errorf("%s_DB_CONNECTION: %v", pre, err)
	}
	def := s.Config(p).Definition
	if def.Cursor.Kind == state.KindLogical && def.Slot == "" {
		return state.SourceDef{}, fmt.Errorf("%s_CDC_SLOT is not usable (the fingerprint names the slot)", pre)
	}
	return source.Identify(s.Driver, loc, def), nil
}

// CloneConfig is the source.Config of poller to, a clone of the poller these settings are
// orig's (pollerctl clone): the same database, with def (to's definition when this build has it,
// else orig's). A logical clone reads its own slot and publication ({TO}_CDC_SLOT and
// {TO}_CDC_PUBLICATION, checked and defaulted as Load does), never orig's: a slot is one reader's
// stream. Errors name the setting at fault.
func (s Settings) CloneConfig(orig *pollerdef.Def, to string, def sourcedef.Definition, getenv func(string) string) (source.Config, error) {
	if def.Cursor.Kind == state.KindLogical {
		var err error
		if def.Slot, def.Publication, err = cdcNames(to, getenv); err != nil {
			return source.Config{}, err
		}
		if def.Slot == s.Slot || def.Publication == s.Publication {
			p := Prefix(to)
			return source.Config{}, fmt.Errorf("%s would share %s's slot %s or publication %s: a slot is one reader's stream; leave %s_CDC_SLOT and %s_CDC_PUBLICATION unset (their defaults are %s's own) or name others",
				to, orig.Name(), s.Slot, s.Publication, p, p, to)
		}
	}
	return source.Config{Poller: to, Driver: s.Driver, DSN: s.DSN, Definition: def}, nil
}

// Poison is the one rule for a batch that keeps failing, from {P}_MAX_ATTEMPTS and
// {P}_ON_POISON (zero values: the defaults): the tick applies it, the status reports it.
type Poison struct {
	MaxAttempts int
	OnPoison    string
}

// Poison returns the poller's poison rule.
func (s Settings) Poison() Poison { return Poison{MaxAttempts: s.MaxAttempts, OnPoison: s.OnPoison} }

// Limit is the number of failed attempts that makes a batch poison.
func (p Poison) Limit() int { return cmp.Or(max(p.MaxAttempts, 0), DefaultMaxAttempts) }

// Poisoned reports whether a batch that has failed attempts times is poison.
func (p Poison) Poisoned(attempts int64) bool { return attempts >= int64(p.Limit()) }

// Quarantines reports whether the poison rule isolates such a batch's failing rows
// ({P}_ON_POISON=quarantine).
func (p Poison) Quarantines(attempts int64) bool {
	return p.Poisoned(attempts) && cmp.Or(p.OnPoison, DefaultOnPoison) == Quarantine
}

// Blocks reports whether such a batch blocks the poller: poison, {P}_ON_POISON=block, and no
// quarantine asked for (pollerctl quarantine).
func (p Poison) Blocks(attempts int64, quarantineRequested bool) bool {
	return p.Poisoned(attempts) && cmp.Or(p.OnPoison, DefaultOnPoison) == Block && !quarantineRequested
}

// UnblockHint says how to unblock a poller blocked on a poison batch.
func UnblockHint(name string) string {
	p := Prefix(name)
	return fmt.Sprintf("fix the handler or the rows (the next tick retries the batch); or set %s_ON_POISON=quarantine, "+
		"or run `pollerctl quarantine %s --yes`, to dead-letter the failing rows and go on", p, name)
}

// Prefix returns {P} for a poller name.
func Prefix(name string) string {
	return strings.ReplaceAll(strings.ToUpper(name), "-", "_")
}

// SettingError is a bad or missing app setting.
type SettingError struct {
	Setting string
	Problem string
}

func (e *SettingError) Error() string { return e.Setting + ": " + e.Problem }

// ErrSetting is wrapped by every *SettingError (errors.Is).
var ErrSetting = errors.New("bad setting")

// Is makes errors.Is(err, ErrSetting) true.
func (e *SettingError) Is(target error) bool { return target == ErrSetting }

// ParseSchedule parses an NCRONTAB expression (six fields, seconds first), as the Functions
// timer trigger does.
func ParseSchedule(expr string) (cron.Schedule, error) {
	return cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow).Parse(expr)
}

// AppName is {app} in state/{app}/{poller}.json: POLLER_APP_NAME, else WEBSITE_SITE_NAME (set by
// App Service), else "local".
func AppName(getenv func(string) string) string {
	for _, k := range []string{"POLLER_APP_NAME", "WEBSITE_SITE_NAME"} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
	}
	return "local"
}

// PoolSizeSetting bounds the connections the handler holds to one database, all its pollers on
// it together (source.Pools).
const PoolSizeSetting = "POLLER_DB_MAX_CONNECTIONS"

// PoolSize reads PoolSizeSetting: source.DefaultPoolSize when unset; an error naming the setting
// when it is not a whole number from 1 to 1000.
func PoolSize(getenv func(string) string) (int, error) {
	v := strings.TrimSpace(getenv(PoolSizeSetting))
	if v == "" {
		return source.DefaultPoolSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, &SettingError{Setting: PoolSizeSetting, Problem: fmt.Sprintf("%q is not a number of connections from 1 to 1000 (default %d)", v, source.DefaultPoolSize)}
	}
	return n, nil
}

// SchedulePeriod is the longest gap between the next few firings of an NCRONTAB schedule after
// at: how long a poller may go between ticks when its timer runs. 0 for a schedule that does not
// parse.
func SchedulePeriod(expr string, at time.Time) time.Duration {
	_, longest := scheduleGaps(expr, at)
	return longest
}

// NextFiring is when an NCRONTAB schedule fires next after at; false for a schedule that does
// not parse (or none).
func NextFiring(expr string, at time.Time) (time.Time, bool) {
	s, err := ParseSchedule(expr)
	if err != nil {
		return time.Time{}, false
	}
	return s.Next(at), true
}

// scheduleGaps are the shortest and the longest gap between the next few firings of an NCRONTAB
// schedule after at (0 and 0 for a schedule that does not parse): "0,10 * * * * *" fires 10 s
// and 50 s apart.
func scheduleGaps(expr string, at time.Time) (shortest, longest time.Duration) {
	s, err := ParseSchedule(expr)
	if err != nil {
		return 0, 0
	}
	t := s.Next(at)
	for i := range 4 {
		n := s.Next(t)
		gap := n.Sub(t)
		if i == 0 || gap < shortest {
			shortest = gap
		}
		longest = max(longest, gap)
		t = n
	}
	return shortest, longest
}

// Misspelt returns a warning for each setting name among keys (the environment's, or
// local.settings.json's Values) that looks like a poller setting but is none, so a slip does not
// leave a default silently in force: a known poller's prefix with a suffix near a known one
// (ORDERS_BATCHSIZE: did you mean ORDERS_BATCH_SIZE?), or a known suffix after a prefix that is
// no poller's (ORDRES_BATCH_SIZE), with the nearest poller's setting when there is one. Names
// with "__" (a connection's settings) are left alone. Sorted, one per name.
func Misspelt(keys, pollerNames []string) []string {
	var suffixes, prefixes, valid []string
	for _, st := range Table {
		suffixes = append(suffixes, st.Suffix)
	}
	for _, n := range pollerNames {
		p := Prefix(n)
		prefixes = append(prefixes, p)
		for _, s := range suffixes {
			valid = append(valid, p+"_"+s)
		}
	}
	var out []string
	for _, k := range keys {
		if slices.Contains(valid, k) || strings.Contains(k, "__") || k == PoolSizeSetting || k == "POLLER_APP_NAME" { // the app's own, which a poller named "poller" would prefix
			continue
		}
		if w := misspelt(k, prefixes, suffixes); w != "" && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

func misspelt(k string, prefixes, suffixes []string) string {
	// A known poller's prefix with a suffix that is a slip from a known one.
	for _, p := range prefixes {
		rest, ok := strings.CutPrefix(k, p+"_")
		if !ok {
			continue
		}
		if s, ok := suggest.Closest(rest, suffixes); ok && s != rest {
			return fmt.Sprintf("%s is not a setting: did you mean %s_%s?", k, p, s)
		}
	}
	// A known suffix after a prefix that is no poller's.
	for _, s := range suffixes {
		p, ok := strings.CutSuffix(k, "_"+s)
		if !ok || p == "" || slices.Contains(prefixes, p) {
			continue
		}
		if near, ok := suggest.Closest(p, prefixes); ok {
			return fmt.Sprintf("%s is set, but no poller's settings start with %s_: did you mean %s_%s?", k, p, near, s)
		}
		return fmt.Sprintf("%s is set, but no poller's settings start with %s_ (the pollers' prefixes: %s)", k, p, strings.Join(prefixes, ", "))
	}
	return ""
}
