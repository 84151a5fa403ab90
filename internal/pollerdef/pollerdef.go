// Package pollerdef is a poller as the runtime reads it: its name, its table, its defaults, its
// setup and its handler. Package poller, which authors write with, builds one (poller.New) and
// exports nothing else for the runtime; the handler, pollerctl, the tick, the settings and
// pollertest read a *poller.Poller's Def through Of, and a declared poller whose poller.json
// cannot be read is a Failed Def.
//
// How Of reads a *poller.Poller without poller exporting a way: poller imports this package, not
// the reverse, so poller.New hands over (Expose) the function that returns the Def a Poller
// holds. A *poller.Poller exists only once New ran, so Of always has that function when it
// needs it; there is no init() and nothing registered per poller.
package pollerdef

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Batch is a batch as the runtime hands it to a poller's handler (Def.Handle): the rows as read,
// in cursor order, and what a sink needs to deduplicate and to fence out stale writers. poller.New's
// handler shows it to the author as a poller.Batch.
type Batch struct {
	Poller       string
	ID           string // deterministic: the same poller, source and cursor range give the same ID
	FencingToken int64  // the lease's
	Attempt      int64  // 1, then 2 after a failure...
	From         *state.Cursor
	To           *state.Cursor
	Rows         []row.Row
}

// Spec is what poller.New builds from an author's arguments.
type Spec struct {
	Name      string
	Source    sourcedef.Definition
	BatchSize int // the default for {P}_BATCH_SIZE (0: the runtime's)
	// Setup, if set, runs once per process with the app settings (poller.WithSetup).
	Setup func(getenv func(string) string) error
	// Target, if set, says where the handler delivers (poller.WithTarget).
	Target func() string
	// Deliver decodes the batch's rows into the author's row type and runs the author's handler.
	Deliver func(ctx context.Context, b *Batch) error
	// Raw shows a batch as a handler of poller.Row receives it: a *poller.Batch[poller.Row],
	// with the poller's Tables.
	Raw func(b *Batch) any
}

// Def is one poller of the app, as the runtime reads it.
type Def struct {
	spec Spec
	err  error // Failed: the definition could not be read
}

// New returns the Def of s.
func New(s Spec) *Def { return &Def{spec: s} }

// Failed returns the Def of a poller whose definition could not be read (a declared poller's bad
// poller.json): it is listed and shown like the others, and every use of it (its settings, its
// ticks, pollerctl) fails with err, which names the file and the field.
func Failed(name string, err error) *Def {
	return &Def{spec: Spec{Name: name, Deliver: func(context.Context, *Batch) error { return err }}, err: err}
}

// Name is the poller's name: its pollers/<name> folder, its <name>/function.json function and,
// in upper case with '-' as '_', its settings' prefix {P}.
func (d *Def) Name() string { return d.spec.Name }

// Err is the error of a Failed poller, else nil.
func (d *Def) Err() error { return d.err }

// Source is the poller's table definition (a copy: the caller may change it).
func (d *Def) Source() sourcedef.Definition {
	s := d.spec.Source
	s.Columns, s.PK = slices.Clone(s.Columns), slices.Clone(s.PK)
	return s
}

// BatchSize is the poller's default for {P}_BATCH_SIZE (0: the runtime's default).
func (d *Def) BatchSize() int { return d.spec.BatchSize }

// Target says where the handler delivers ("" when the poller does not say).
func (d *Def) Target() string {
	if d.spec.Target == nil {
		return ""
	}
	return d.spec.Target()
}

// Setup runs the poller's setup, if any.
func (d *Def) Setup(getenv func(string) string) error {
	if d.spec.Setup == nil {
		return nil
	}
	return d.spec.Setup(getenv)
}

// Handle hands b to the poller's handler; a panic becomes an error that carries the stack.
func (d *Def) Handle(ctx context.Context, b *Batch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return d.spec.Deliver(ctx, b)
}

// Raw returns b as a handler of poller.Row would receive it from this poller: a
// *poller.Batch[poller.Row] (pollertest records what a handler got so; a test makes a poller's
// rows of the runtime's with it). Nil for a Failed poller.
func (d *Def) Raw(b *Batch) any {
	if d.spec.Raw == nil {
		return nil
	}
	return d.spec.Raw(b)
}

// read is the function package poller handed over: the Def a *poller.Poller holds.
var read atomic.Pointer[func(p any) (*Def, bool)]

// Expose is how package poller hands over the function that returns the Def a *poller.Poller
// holds (false for anything else); poller.New calls it, and the first one given stays.
func Expose(f func(p any) (*Def, bool)) {
	if read.Load() == nil {
		read.CompareAndSwap(nil, &f)
	}
}

// Of returns the Def of p, a *poller.Poller built by poller.New. Anything else (nil, a zero
// Poller) is a programming error: Of panics, naming it.
func Of(p any) *Def {
	if f := read.Load(); f != nil {
		if d, ok := (*f)(p); ok {
			return d
		}
	}
	panic(fmt.Sprintf("pollerdef.Of(%T): not a poller built by poller.New", p))
}

// OfAll returns the Defs of pollers, []*poller.Poller (pollers.All()), in order.
func OfAll[P any](pollers []P) []*Def {
	out := make([]*Def, len(pollers))
	for i, p := range pollers {
		out[i] = Of(p)
	}
	return out
}

var validName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// ReservedNames are the function folders that are not pollers (the status function): no poller,
// scaffold or clone may take them.
var ReservedNames = []string{"status"}

// ErrReservedName is wrapped by CheckName's error for a reserved name.
var ErrReservedName = errors.New("reserved name")

// CheckName says why name cannot be a poller's name, or nil: it must be a valid function name
// (letters, digits, - and _, starting with a letter, at most 64) and not one of ReservedNames
// (compared without regard to case, as Functions compares function names). poller.New, declared
// pollers, pollerctl new and pollerctl clone apply it.
func CheckName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("%q is not a valid poller and function name: letters, digits, - and _, starting with a letter, at most 64", name)
	}
	for _, r := range ReservedNames {
		if strings.EqualFold(name, r) {
			return fmt.Errorf("%q is %w: the %s function (%s/function.json) is another function of the app, not a poller; choose another name", name, ErrReservedName, r, r)
		}
	}
	return nil
}
