package ctl

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
)

// reacher is the part of a state store that can say in one try whether its address answers
// (blobstore.Store); stores without it (in memory) are always there.
type reacher interface {
	Reachable(ctx context.Context) error
}

// unreachable checks, before a command, that the state store answers, and says once, when it
// does not, what is not reachable and how to start it or reach it.
func (env Env) unreachable(ctx context.Context) error {
	r, ok := env.Store.(reacher)
	if !ok || env.Store == nil {
		return nil
	}
	return r.Reachable(ctx)
}

// reportUnreachable prints what an unreachable state store means, with the way out: Azurite
// on this machine, or the storage account and its network.
func reportUnreachable(env Env, err error) {
	var u *blobstore.UnreachableError
	if !errors.As(err, &u) {
		fmt.Fprintf(env.Err, "pollerctl: the state store is not reachable: %v\n", err)
		fmt.Fprintln(env.Err, "  start Azurite (scripts/dev.sh starts it) or check the storage account's name and network")
		return
	}
	fmt.Fprintf(env.Err, "pollerctl: the state store is not reachable: %v\n", u)
	if u.Local() {
		fmt.Fprintf(env.Err, "  %s points at Azurite, the local storage emulator, on %s, and it is not running there. Start it:\n", u.Setting, u.Address)
		fmt.Fprintln(env.Err, "    scripts/dev.sh    (starts Azurite on 127.0.0.1:10000 and :10001 with the example pollers), or Azurite alone:")
		fmt.Fprintln(env.Err, "    npx azurite --skipApiVersionCheck --location .dev/azurite-sqlite")
		fmt.Fprintf(env.Err, "  or point %s at the Azurite or storage account you use (the environment wins over local.settings.json).\n", u.Setting)
		return
	}
	account := u.Account
	if account == "" {
		account = "the account"
	}
	fmt.Fprintf(env.Err, "  %s names the storage account %s at %s: check that the name is right and that this machine can reach it\n", u.Setting, account, u.Address)
	fmt.Fprintf(env.Err, "  (a firewall or private endpoint on the account lets only the app's network in: az storage account show -n %s --query networkRuleSet).\n", account)
}

// refused reports whether err is a connection refused by the state store's address (Azurite
// stopped while the command ran).
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// withoutStoreIfAway is env for a command that reads the databases only (check): when the state
// store is not usable or not reachable it says so in one line, with what that leaves out, and
// the command goes on without it; else it announces, as before every command.
func (env Env) withoutStoreIfAway(ctx context.Context, path string) Env {
	why := env.StoreErr
	if env.Store == nil && why == nil {
		why = errors.New("none given")
	}
	if env.Store != nil {
		why = env.unreachable(ctx)
	}
	if why == nil {
		env.announce(ctx)
		return env
	}
	env.Store, env.StoreErr = nil, why
	env.announce(ctx)
	if env.Err != nil {
		fmt.Fprintf(env.Err, "pollerctl: the state store was not read (%v): %s needs only each poller's database; left out: the app's state (checkpoints, leases, dead letters: pollerctl status shows them)\n", why, path)
	}
	return env
}
