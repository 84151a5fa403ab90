// Package poller holds what a poller is: its definition (source, defaults, Go handler), the
// registry that pollers/<name> packages join from init(), and the app settings that configure
// each one.
package poller

import (
	"context"
	"fmt"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Batch is what a poller's handler receives: rows in cursor order and the facts a sink needs to
// deduplicate and to fence out stale writers.
type Batch struct {
	Poller string
	// ID is deterministic: the same poller, source and cursor range always give the same ID, so
	// a redelivered batch has the ID it had the first time. Use it as an idempotency key.
	ID string
	// FencingToken is the lease's token; pass it to sinks that can refuse older tokens.
	FencingToken int64
	// Attempt counts deliveries of the batch after this checkpoint: 1, then 2 after a failure...
	Attempt int64
	From    *state.Cursor // the checkpoint the batch follows (nil: the beginning)
	To      *state.Cursor // the checkpoint after its last row
	Rows    []source.Row
}

// Handler processes one batch. Returning an error (or panicking) leaves the batch uncommitted:
// it is delivered again, with Attempt + 1. ctx is cancelled when the lease is lost.
type Handler func(ctx context.Context, b *Batch) error

// Call runs h on b, turning a panic into an error that carries the stack.
func (h Handler) Call(ctx context.Context, b *Batch) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return h(ctx, b)
}

// Definition is what a pollers/<name> package registers.
type Definition struct {
	// Name is the poller's folder name and Functions function name (letters, digits, - and _).
	Name string
	// Source is what to read. Its SettleLag is the default for {P}_SETTLE_LAG.
	Source source.Definition
	// Handler processes each batch.
	Handler Handler
	// Schedule is the default NCRONTAB schedule (six fields, with seconds) for {P}_SCHEDULE.
	Schedule string
	// BatchSize is the default for {P}_BATCH_SIZE (0: 500).
	BatchSize int
	// Setup, optional, runs once per process with the poller's settings before its first tick
	// (e.g. to read the poller's own app settings). An error fails the poller's invocations.
	Setup func(getenv func(string) string) error
}

var validName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// ValidName reports whether name can be a poller (and Functions function) name.
func ValidName(name string) bool { return validName.MatchString(name) }

var (
	mu       sync.Mutex
	registry = map[string]Definition{}
)

// Register adds a poller; pollers/<name> packages call it from init(). It panics on an invalid
// or duplicate name, which is a programming error found at start-up.
func Register(d Definition) {
	mu.Lock()
	defer mu.Unlock()
	if !ValidName(d.Name) {
		panic(fmt.Sprintf("poller: invalid poller name %q", d.Name))
	}
	if _, dup := registry[d.Name]; dup {
		panic(fmt.Sprintf("poller: %q registered twice", d.Name))
	}
	if d.Handler == nil {
		panic(fmt.Sprintf("poller: %q has no handler", d.Name))
	}
	registry[d.Name] = d
}

// Lookup returns a registered poller.
func Lookup(name string) (Definition, bool) {
	mu.Lock()
	defer mu.Unlock()
	d, ok := registry[name]
	return d, ok
}

// All returns the registered pollers by name.
func All() []Definition {
	mu.Lock()
	defer mu.Unlock()
	out := make([]Definition, 0, len(registry))
	for _, d := range registry {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DefaultSchedule is used when a poller names none: every 30 seconds.
const DefaultSchedule = "*/30 * * * * *"

// DefaultBatchSize is {P}_BATCH_SIZE's default.
const DefaultBatchSize = 500

// DefaultCheckpointInterval is {P}_CHECKPOINT_INTERVAL's default: a commit per batch would
// cost a blob write per batch, about as long as fetching a batch of 1,000 rows; committing every
// 2 s keeps catch-up at the database's speed and bounds the replay after a crash.
const DefaultCheckpointInterval = 2 * time.Second

// DefaultTickBudget is {P}_TICK_BUDGET's default: well under the 10-minute functionTimeout of
// host.json, since the host kills the whole process on a time-out.
const DefaultTickBudget = 4 * time.Minute

// ReservedNames are the function folders that are not pollers (handler/status.go serves
// status/function.json): no poller, scaffold or clone may take them.
var ReservedNames = []string{"status"}

// CheckNewName says why name cannot be a new poller's name, or nil: it must be a valid
// function name and not one of ReservedNames (compared without regard to case, as Functions
// compares function names).
func CheckNewName(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("%q is not a valid poller and function name: letters, digits, - and _, starting with a letter, at most 64", name)
	}
	for _, r := range ReservedNames {
		if strings.EqualFold(name, r) {
			return fmt.Errorf("%q is reserved: %s/function.json is another function of the app; choose another name", name, r)
		}
	}
	return nil
}
