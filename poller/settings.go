package poller

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Settings are one poller's app settings, validated. Names are {P}_..., where {P} is the poller
// name in upper case with '-' as '_' (orders -> ORDERS).
type Settings struct {
	Driver            string        // {P}_DB_DRIVER
	DSN               string        // {P}_DB_CONNECTION
	Schedule          string        // {P}_SCHEDULE
	BatchSize         int           // {P}_BATCH_SIZE
	LeaseTTL          time.Duration // {P}_LEASE_TTL
	HeartbeatInterval time.Duration // {P}_HEARTBEAT_INTERVAL
	TickBudget        time.Duration // {P}_TICK_BUDGET
	// CheckpointInterval is {P}_CHECKPOINT_INTERVAL: within a tick, commit at most this often
	// (0: after every batch); the tick's end always commits. A crash replays the batches since
	// the last commit.
	CheckpointInterval time.Duration
	SettleLag          time.Duration // {P}_SETTLE_LAG (source.NoSettleLag for an explicit 0)
	// MaxAttempts is {P}_MAX_ATTEMPTS: failed attempts at one batch before OnPoison applies.
	MaxAttempts int
	// OnPoison is {P}_ON_POISON: Block (keep retrying, loudly) or Quarantine (isolate the failing
	// rows, dead-letter them, deliver the rest and go on).
	OnPoison string
	// LivenessInterval is {P}_LIVENESS_INTERVAL: ticks that write nothing else (idle ones, and
	// those that fail before taking the lease) leave a liveness mark at most this often, so the
	// status knows the timer still runs (package liveness).
	LivenessInterval time.Duration
	// MaxLag is {P}_MAX_LAG: the status calls the poller lagging when the oldest row waiting is
	// older than this.
	MaxLag time.Duration
}

// Defaults of the status settings.
const (
	DefaultLivenessInterval = 5 * time.Minute
	DefaultMaxLag           = 5 * time.Minute
)

// What {P}_ON_POISON may say.
const (
	Block      = "block"
	Quarantine = "quarantine"
)

// UnblockHint says how to unblock a poller blocked on a poison batch.
func UnblockHint(name string) string {
	p := Prefix(name)
	return fmt.Sprintf("fix the handler or the rows (the next tick retries the batch); or set %s_ON_POISON=quarantine, "+
		"or run `pollerctl quarantine %s --yes`, to dead-letter the failing rows and go on", p, name)
}

// Defaults of the poison settings.
const (
	DefaultMaxAttempts = 5
	DefaultOnPoison    = Block
)

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

// LoadSettings reads and validates a poller's settings. Every problem is reported, each naming
// its setting.
func LoadSettings(d Definition, getenv func(string) string) (Settings, error) {
	p := Prefix(d.Name)
	var errs []error
	bad := func(setting, format string, args ...any) {
		errs = append(errs, &SettingError{Setting: setting, Problem: fmt.Sprintf(format, args...)})
	}
	get := func(suffix string) (string, string) {
		name := p + "_" + suffix
		return name, strings.TrimSpace(getenv(name))
	}
	duration := func(suffix string, def time.Duration, allowZero bool) time.Duration {
		name, v := get(suffix)
		if v == "" {
			return def
		}
		dur, err := time.ParseDuration(v)
		if err != nil || dur < 0 || (dur == 0 && !allowZero) {
			bad(name, "%q is not a positive Go duration like 60s or 2m", v)
			return def
		}
		return dur
	}
	var s Settings
	name, v := get("DB_DRIVER")
	switch v {
	case source.SQLServer, source.Postgres, source.SQLite:
		s.Driver = v
	case "":
		bad(name, "missing: set it to sqlserver, postgres or sqlite")
	default:
		bad(name, "%q is not sqlserver, postgres or sqlite", v)
	}
	name, s.DSN = get("DB_CONNECTION")
	if s.DSN == "" {
		bad(name, "missing: set it to the source database's connection string")
	}

	name, s.Schedule = get("SCHEDULE")
	if s.Schedule == "" {
		s.Schedule = d.Schedule
		if s.Schedule == "" {
			s.Schedule = DefaultSchedule
		}
	}
	if _, err := ParseSchedule(s.Schedule); err != nil {
		bad(name, "%q is not an NCRONTAB schedule with six fields (second minute hour day month weekday): %v", s.Schedule, err)
	}

	s.BatchSize = d.BatchSize
	if s.BatchSize == 0 {
		s.BatchSize = DefaultBatchSize
	}
	if name, v := get("BATCH_SIZE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100_000 {
			bad(name, "%q is not a whole number from 1 to 100000", v)
		} else {
			s.BatchSize = n
		}
	}

	s.LeaseTTL = duration("LEASE_TTL", lease.DefaultTTL, false)
	s.HeartbeatInterval = duration("HEARTBEAT_INTERVAL", s.LeaseTTL/4, false)
	if s.LeaseTTL < 4*time.Second {
		bad(p+"_LEASE_TTL", "%v is too short: at least 4s (the expiry margin is at least 1s)", s.LeaseTTL)
	} else if 3*s.HeartbeatInterval >= s.LeaseTTL {
		bad(p+"_HEARTBEAT_INTERVAL", "%v must be less than a third of %s_LEASE_TTL (%v)", s.HeartbeatInterval, p, s.LeaseTTL)
	}
	s.TickBudget = duration("TICK_BUDGET", DefaultTickBudget, false)
	s.CheckpointInterval = duration("CHECKPOINT_INTERVAL", DefaultCheckpointInterval, true)
	if s.CheckpointInterval >= s.LeaseTTL/2 && s.LeaseTTL >= 4*time.Second {
		bad(p+"_CHECKPOINT_INTERVAL", "%v must be less than half of %s_LEASE_TTL (%v)", s.CheckpointInterval, p, s.LeaseTTL)
	}

	s.MaxAttempts = DefaultMaxAttempts
	if name, v := get("MAX_ATTEMPTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			bad(name, "%q is not a whole number from 1 to 1000", v)
		} else {
			s.MaxAttempts = n
		}
	}
	s.OnPoison = DefaultOnPoison
	if name, v := get("ON_POISON"); v != "" {
		switch v = strings.ToLower(v); v {
		case Block, Quarantine:
			s.OnPoison = v
		default:
			bad(name, "%q is not block or quarantine", v)
		}
	}

	s.LivenessInterval = duration("LIVENESS_INTERVAL", DefaultLivenessInterval, false)
	if s.LivenessInterval < 10*time.Second {
		bad(p+"_LIVENESS_INTERVAL", "%v is too short: at least 10s (every mark is a blob write)", s.LivenessInterval)
	}
	s.MaxLag = duration("MAX_LAG", DefaultMaxLag, false)

	s.SettleLag = d.Source.SettleLag
	if name, v := get("SETTLE_LAG"); v != "" {
		dur, err := time.ParseDuration(v)
		switch {
		case d.Source.Cursor.Kind != "" && d.Source.Cursor.Kind != state.KindTimestampPK:
			// Only a timestamp has an age: an integer, xid or rowversion cursor would silently
			// ignore the setting, and its user would believe it protects against late commits.
			bad(name, "applies to timestamp+pk cursors only; this poller's cursor is %s (xid and rowversion are bounded by the database's open transactions, integer by nothing: use it on append-only tables)", d.Source.Cursor.Kind)
		case err != nil || dur < 0:
			bad(name, "%q is not a Go duration like 10s (0s reads up to the database's clock, unsafe with late commits)", v)
		case dur == 0:
			s.SettleLag = source.NoSettleLag
		default:
			s.SettleLag = dur
		}
	}
	if len(errs) > 0 {
		return s, errors.Join(errs...)
	}
	return s, nil
}

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

// SchedulePeriod is the longest gap between the next few firings of an NCRONTAB schedule after
// at: how long a poller may go between ticks when its timer runs. 0 for a schedule that does not
// parse.
func SchedulePeriod(expr string, at time.Time) time.Duration {
	s, err := ParseSchedule(expr)
	if err != nil {
		return 0
	}
	var longest time.Duration
	t := s.Next(at)
	for range 4 {
		n := s.Next(t)
		longest = max(longest, n.Sub(t))
		t = n
	}
	return longest
}
