package ctl

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/suggest"
)

// announce says, on env.Err, which app, state store and settings the command works with, so that
// a mistyped POLLER_APP_NAME or a forgotten local.settings.json is seen at once; and when the app
// has no state but the container holds other apps' state, it names them.
func (env Env) announce(ctx context.Context) {
	if env.Err == nil {
		return
	}
	storeName := env.StoreName
	if storeName == "" && env.StoreErr != nil {
		// Why is the command's error, printed once, after this line.
		storeName = "not usable"
	}
	source := env.Source
	if source == "" {
		source = "the environment"
	}
	fmt.Fprintf(env.Err, "pollerctl: app %q · state store %s · settings from %s\n", env.App, storeName, source)
	for _, w := range appsettings.Misspelt(env.Settings, env.names()) {
		fmt.Fprintf(env.Err, "pollerctl: warning: %s\n", w)
	}
	if env.Store == nil {
		return
	}
	mine, err := env.Store.List(ctx, blobpath.StatePrefix(env.App))
	if err != nil || len(mine) > 0 {
		return
	}
	if others := otherApps(ctx, env); len(others) > 0 {
		fmt.Fprintf(env.Err, "pollerctl: no state under state/%s/; this container has state for apps: %s (set POLLER_APP_NAME)\n",
			env.App, strings.Join(others, ", "))
	}
}

// otherApps lists the apps with state in the container other than env.App.
func otherApps(ctx context.Context, env Env) []string {
	names, err := env.Store.List(ctx, blobpath.StateRoot)
	if err != nil {
		return nil
	}
	var apps []string
	for _, n := range names {
		parts := strings.Split(strings.TrimPrefix(n, blobpath.StateRoot), "/")
		if len(parts) == 2 && parts[0] != env.App && !slices.Contains(apps, parts[0]) {
			apps = append(apps, parts[0])
		}
	}
	slices.Sort(apps)
	return apps
}

// names are the names of this build's pollers.
func (env Env) names() []string {
	out := make([]string, len(env.Pollers))
	for i, d := range env.Pollers {
		out[i] = d.Name()
	}
	return out
}

// pollerArg is the one poller name cmd takes as its argument (a usage error otherwise).
func pollerArg(cmd string, pos []string) (string, error) {
	if len(pos) != 1 {
		return "", usagef("%s takes one poller name", cmd)
	}
	return pos[0], nil
}

// knownPollerArg is pollerArg of a poller that is somewhere (knownPoller).
func (env Env) knownPollerArg(ctx context.Context, cmd string, pos []string) (string, error) {
	name, err := pollerArg(cmd, pos)
	if err != nil {
		return "", err
	}
	return name, env.knownPoller(ctx, name)
}

// knownPoller returns nil when name is a poller pollerctl can work on: this build has it, or the
// state container has its state, backups or dead letters. Otherwise a usage error says so, with
// the name meant when one is near (a slip in the name would otherwise list nothing, or act on
// nothing, without a word).
func (env Env) knownPoller(ctx context.Context, name string) error {
	names := env.names()
	if slices.Contains(names, name) || env.Store == nil {
		return nil
	}
	for _, prefix := range []string{blobpath.State(env.App, name), blobpath.Backups(env.App, name), blobpath.DeadLetters(env.App, name)} {
		if found, err := env.Store.List(ctx, prefix); err != nil || len(found) > 0 {
			return nil // a listing that fails is the command's own to report
		}
	}
	if stored, err := env.Store.List(ctx, blobpath.StatePrefix(env.App)); err == nil {
		for _, n := range stored {
			if p, ok := strings.CutSuffix(strings.TrimPrefix(n, blobpath.StatePrefix(env.App)), ".json"); ok && !strings.Contains(p, "/") && !slices.Contains(names, p) {
				names = append(names, p)
			}
		}
	}
	return usagef("no poller %q in app %q: this build has none of that name, and the state container holds no state, backups or dead letters for it%s",
		name, env.App, suggest.DidYouMean(name, names, strconv.Quote))
}
