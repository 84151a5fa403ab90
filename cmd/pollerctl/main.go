// Command pollerctl shows every poller's state and moves one on purpose (see package ctl):
//
//	pollerctl status [POLLER] [--json]
//	pollerctl reset POLLER --to-beginning | --to-cursor VALUE --pk K=V | --from-file F  [--yes]
//	pollerctl clone POLLER --to NEW [--yes]
//	pollerctl new NAME
//	pollerctl deadletter list|show|replay|discard POLLER [BATCH_ID] [--yes]
//	pollerctl quarantine POLLER [--yes]
//
// It reads the handler's settings from the environment.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/pseudotrigger/pseudotrigger/ctl"
	"github.com/pseudotrigger/pseudotrigger/poller"
	_ "github.com/pseudotrigger/pseudotrigger/pollers/all"
	"github.com/pseudotrigger/pseudotrigger/store/blobstore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	env := ctl.Env{
		App:     poller.AppName(os.Getenv),
		Getenv:  os.Getenv,
		Pollers: poller.All(),
		Out:     os.Stdout,
		In:      os.Stdin,
		Root:    repoRoot(),
	}
	// A terminal answers the termios ioctl; /dev/null and pipes do not.
	if _, err := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS); err == nil {
		env.Terminal = true
	}
	if s, err := blobstore.SettingsFromEnv(os.Getenv); err != nil {
		env.StoreErr = err
	} else if st, err := blobstore.New(s, nil); err != nil {
		env.StoreErr = err
	} else {
		env.Store = st
	}
	os.Exit(ctl.Run(ctx, os.Args[1:], env))
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
