// Command pollerctl shows every poller's state and moves one on purpose (see package ctl).
// Usage:
//
//	pollerctl COMMAND [ARGS] [FLAGS]
//
// `pollerctl help` lists the commands; `pollerctl help COMMAND`, or COMMAND --help, says one's
// flags and gives an example, touching nothing.
//
// It reads the handler's settings from the environment and, run in the app folder (or below the
// repository root), from local.settings.json's Values, as Core Tools does: the environment wins.
// Every command but new and help first says on stderr which app, state store and settings it
// uses.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/declared"
	"github.com/pseudotrigger/pseudotrigger/internal/devhost"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/version"
	"github.com/pseudotrigger/pseudotrigger/pollers"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println("pollerctl", version.String())
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root := repoRoot()
	getenv, source, keys, err := settings(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pollerctl:", err)
		os.Exit(ctl.ExitUsage)
	}
	appRoot := root // declared pollers: the repository's folders, or the app's when deployed
	if r := getenv("AzureWebJobsScriptRoot"); r != "" || root == "" {
		appRoot = declared.Root(getenv)
	}
	all, err := declared.Load(appRoot, pollers.All())
	if err != nil {
		fmt.Fprintln(os.Stderr, "pollerctl:", err)
		os.Exit(ctl.ExitUsage)
	}
	seen := declared.Folders(appRoot)
	for _, n := range declared.Folders(".") {
		if !slices.Contains(seen, n) {
			seen = append(seen, n)
		}
	}
	env := ctl.Env{
		Version: version.String(),
		Seen:    seen,
		App:     appsettings.AppName(getenv),
		Getenv:  getenv,
		Pollers: all,
		Out:     os.Stdout,
		Err:     os.Stderr,
		Source:  source,
		In:      os.Stdin,
		Root:    root,
	}
	env.Settings = keys
	// A terminal answers the termios ioctl; /dev/null and pipes do not.
	if _, err := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS); err == nil {
		env.Terminal = true
	}
	if s, err := blobstore.SettingsFromEnv(getenv); err != nil {
		env.StoreErr = err
	} else if st, err := blobstore.New(s, nil); err != nil {
		env.StoreErr = err
	} else {
		env.Store, env.StoreName = st, st.String()
	}
	os.Exit(ctl.Run(ctx, os.Args[1:], env))
}

// settings returns pollerctl's settings: the environment over the Values of local.settings.json
// in the working directory or, failing that, at the repository root; and says where they came
// from, and their names. A local.settings.json that does not parse is an error naming it.
func settings(root string) (func(string) string, string, []string, error) {
	var keys []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	candidates := []string{"local.settings.json"}
	if root != "" {
		candidates = append(candidates, filepath.Join(root, "local.settings.json"))
	}
	for _, p := range candidates {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		values, err := devhost.LoadSettings(p)
		if err != nil {
			return nil, "", nil, err
		}
		for k := range values {
			keys = append(keys, k)
		}
		abs, _ := filepath.Abs(p)
		return func(k string) string {
			if v, ok := os.LookupEnv(k); ok {
				return v
			}
			return values[k]
		}, "the environment and " + abs, keys, nil
	}
	return os.Getenv, "the environment (no local.settings.json here)", keys, nil
}

// repoRoot finds the directory of the go.mod declaring this module, from the working directory up.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/pseudotrigger/pseudotrigger\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
