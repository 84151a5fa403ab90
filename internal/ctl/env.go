package ctl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
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
		storeName = "not usable: " + env.StoreErr.Error()
	}
	source := env.Source
	if source == "" {
		source = "the environment"
	}
	fmt.Fprintf(env.Err, "pollerctl: app %q · state store %s · settings from %s\n", env.App, storeName, source)
	if env.Store == nil {
		return
	}
	mine, err := env.Store.List(ctx, state.Prefix(env.App))
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
	names, err := env.Store.List(ctx, state.Root)
	if err != nil {
		return nil
	}
	var apps []string
	for _, n := range names {
		parts := strings.Split(strings.TrimPrefix(n, state.Root), "/")
		if len(parts) == 2 && parts[0] != env.App && !slices.Contains(apps, parts[0]) {
			apps = append(apps, parts[0])
		}
	}
	slices.Sort(apps)
	return apps
}
