// Package ctl is pollerctl: operators see every poller's state and move one on purpose. It
// speaks to the state store only through compare-and-swap writes, so it never races a live tick
// silently: a tick that slipped in makes the command fail cleanly instead.
//
// Exit codes: 0 done (or a dry run shown), 1 refused by a guardrail or failed (check: a set-up
// problem found), 2 bad usage or input, 3 (status) a poller is not ok.
package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/scaffold"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitRefused = 1
	ExitUsage   = 2
	// ExitUnhealthy is status's when a poller shown is not ok (its health), so that scripts and
	// scheduled checks can alert on it.
	ExitUnhealthy = 3
	// ExitUnreachable: the state store's address refuses connections or does not answer
	// (Azurite not started, or no network path to the storage account); said once, with how to
	// start it or reach it.
	ExitUnreachable = 4
)

// Env is what a command runs with.
type Env struct {
	Store    store.Store // nil when the state store settings are bad (StoreErr says why)
	StoreErr error
	App      string
	Getenv   func(string) string
	Pollers  []*pollerdef.Def // the app's pollers: declared.Load(root, pollers.All())
	Out      io.Writer
	// Err, if set, gets the line that says which app, store and settings a command uses
	// (stderr, so that status --json's output stays JSON).
	Err io.Writer
	// StoreName describes the state store without secrets; Source says where the settings came
	// from ("local.settings.json and the environment").
	StoreName string
	Source    string
	In        io.Reader
	Terminal  bool   // In is an interactive terminal
	Root      string // the repository root, for `new`
	Clock     clock.Clock
	Actor     string // who runs the command, recorded as the lease owner of a reset
	// Margin is the lease expiry margin (default lease.DefaultMargin).
	Margin time.Duration
	// Settings are the names of the settings pollerctl sees (the environment's and
	// local.settings.json's): a misspelt poller setting among them is warned of on Err.
	Settings []string
	// Version is pollerctl's own version (package version): status names it beside the handler
	// version a poller's state records when this build does not have the poller.
	Version string
	// Seen are the poller folders pollerctl can see (declared.Folders): listed even when this
	// build does not have them, as pollers it does not know, never as leftovers.
	Seen []string
}

// refusal is a guardrail saying no (exit 1); usage is bad usage or input (exit 2).
type (
	refusal struct{ msg string }
	usage   struct{ msg string }
)

func (r refusal) Error() string { return r.msg }
func (u usage) Error() string   { return u.msg }

func refusedf(format string, args ...any) error { return refusal{fmt.Sprintf(format, args...)} }
func usagef(format string, args ...any) error   { return usage{fmt.Sprintf(format, args...)} }

// helpTail is what pollerctl's help says after the commands (writeTopHelp).
const helpTail = `
Writes are dry runs unless --yes is given. A reset backs the old document up to
backups/{app}/{poller}/{utc}.json first, refuses while another owner's lease is live (--wait waits
for it to end), and bumps the fencing token. When POLLER_APP_NAME contains "prod" (or with
--production) it asks you to type the poller's name, and without a terminal needs --yes=POLLER.
Settings are the handler's: StateStorage (or AzureWebJobsStorage), STATE_CONTAINER,
POLLER_APP_NAME, {P}_DB_DRIVER, {P}_DB_CONNECTION, read from the environment and, run in the app
folder, from local.settings.json's Values (the environment wins, as with Core Tools). Every
command but new and help says first, on stderr, which app, state store and settings it uses.
status lists the pollers of this build, the poller folders here and the state under
state/{app}/; one this build does not have (a newer app's) is "unknown", not judged, and delete,
a restore (reset --from-file/--from-backup) and a clone over it need --force.
pollerctl --version says which build it is (as the handler's and devhost's do).
pollerctl help COMMAND (or pollerctl COMMAND --help) shows a command's flags and an example.
Exit codes: 0 done, 1 refused by a guardrail (check: a problem found), 2 bad usage or input, 3
(status) a poller is not ok, 4 the state store is not reachable (Azurite not started, or no
network path to the account).
`

// Run runs one command and returns its exit code.
func Run(ctx context.Context, args []string, env Env) int {
	if env.Clock == nil {
		env.Clock = clock.System{}
	}
	if env.Margin == 0 {
		env.Margin = lease.DefaultMargin
	}
	if env.Actor == "" {
		env.Actor = actor()
	}
	if len(args) == 0 || isHelp(args[0]) || args[0] == "help" && len(args) == 1 {
		writeTopHelp(env.Out)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	asked := args[0] == "help" // pollerctl help COMMAND [SUBCOMMAND]
	if asked {
		args = args[1:]
	}
	c, path, args, err := find(args)
	switch {
	case err != nil:
		fmt.Fprintln(env.Out, "pollerctl:", err)
		return ExitUsage
	case asked && len(args) > 0 && !isHelp(args[0]):
		fmt.Fprintf(env.Out, "pollerctl: help %s: %q is none of its subcommands (pollerctl help %s says what it takes)\n", path, args[0], path)
		return ExitUsage
	case asked, c.subs != nil && len(args) > 0: // help COMMAND, or a group's --help
		writeHelp(env.Out, c, path)
		return ExitOK
	case c.subs != nil:
		fmt.Fprintf(env.Out, "pollerctl: %s needs a subcommand: %s (pollerctl help %s says what each does)\n", path, strings.Join(commandNames(c.subs), ", "), path)
		return ExitUsage
	}
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	run := c.flags(fs)
	pos, err := parse(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		writeHelp(env.Out, c, path)
		return ExitOK
	case err != nil:
		fmt.Fprintln(env.Out, "pollerctl:", err)
		return ExitUsage
	}
	switch c.store {
	case storeNeeded:
		if err := env.unreachable(ctx); err != nil {
			reportUnreachable(env, err)
			return ExitUnreachable
		}
		env.announce(ctx)
	case storeOptional:
		env = env.withoutStoreIfAway(ctx, path)
	}
	err = run(ctx, pos, env)
	var u usage
	var sick unhealthy
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &sick):
		return ExitUnhealthy
	case errors.As(err, &u):
		fmt.Fprintln(env.Out, "pollerctl:", err)
		return ExitUsage
	case refused(err):
		reportUnreachable(env, err)
		return ExitUnreachable
	default:
		fmt.Fprintln(env.Out, "pollerctl:", err)
		return ExitRefused
	}
}

// newCmd is `pollerctl new`: package scaffold writes the poller.
func newCmd(fs *flag.FlagSet) runner {
	sinkType := fs.String("sink", "", "write a declared poller sending to a sink of this `TYPE` ("+strings.Join(sink.Types, ", ")+") instead of a Go poller")
	return func(_ context.Context, pos []string, env Env) error {
		registered := make([]string, len(env.Pollers))
		for i, d := range env.Pollers {
			registered[i] = d.Name()
		}
		args := pos
		if *sinkType != "" {
			args = append(args, "--sink="+*sinkType)
		}
		err := scaffold.Run(args, scaffold.Env{Out: env.Out, Root: env.Root, Registered: registered})
		if u := (*scaffold.UsageError)(nil); errors.As(err, &u) {
			return usage{u.Error()}
		}
		return err
	}
}

func actor() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return "pollerctl/" + name + "@" + host
}

// parse parses a command's flags, allowing them before and after positional arguments; a -h or
// --help among them is flag.ErrHelp.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			return nil, err
		} else if err != nil {
			return nil, usagef("%s: %v (pollerctl %s --help shows its flags)", fs.Name(), err, fs.Name())
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

func (env Env) store() (store.Store, error) {
	if env.Store == nil {
		return nil, usagef("state store: %v", env.StoreErr)
	}
	return env.Store, nil
}

func (env Env) blob(pollerName string) string { return blobpath.State(env.App, pollerName) }

func (env Env) definition(name string) (*pollerdef.Def, bool) {
	for _, d := range env.Pollers {
		if d.Name() == name {
			return d, true
		}
	}
	return nil, false
}

// identity is the configured source as a tick records it (its fingerprint and parts), from the
// poller's settings, without connecting. Only the settings it needs must be usable.
func (env Env) identity(d *pollerdef.Def) (state.SourceDef, error) {
	if err := d.Err(); err != nil { // a definition that could not be read: no fingerprint either
		return state.SourceDef{}, usagef("%v", err)
	}
	s, _ := appsettings.Load(d, env.Getenv)
	id, err := s.Identity(d)
	if err != nil {
		return state.SourceDef{}, usagef("%v: the reset records the configured source's fingerprint", err)
	}
	return id, nil
}
