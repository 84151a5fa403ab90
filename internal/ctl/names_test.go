package ctl_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
)

// TestDidYouMeanPoller: every command that takes a poller's name refuses a name that is nowhere
// (not in this build, no state, backups or dead letters) with exit 2, naming the poller meant,
// instead of acting on nothing or listing nothing.
func TestDidYouMeanPoller(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		for _, args := range [][]string{
			{"status", "ordres"}, {"deadletter", "list", "ordres"}, {"deadletter", "show", "ordres", "batch_x"},
			{"deadletter", "discard", "ordres", "batch_x"}, {"deadletter", "replay", "ordres", "batch_x"},
			{"quarantine", "ordres"}, {"delete", "ordres"}, {"backups", "ordres"}, {"clone", "ordres", "--to", "copy"},
			{"reset", "ordres", "--to-beginning"}, {"cdc", "enable", "ordres"},
		} {
			if code := w.run(args...); code != ctl.ExitUsage || !strings.Contains(w.out.String(), `(did you mean "orders"?)`) {
				t.Errorf("%v: exit %d\n%s", args, code, w.out.String())
			}
		}
		// A name far from every poller's gets no guess, but still the refusal.
		if code := w.run("deadletter", "list", "customers"); code != ctl.ExitUsage || !strings.Contains(w.out.String(), `no poller "customers"`) ||
			strings.Contains(w.out.String(), "did you mean") {
			t.Errorf("a far name: exit %d\n%s", code, w.out.String())
		}
	})
}

// TestUnknownCommand: a command pollerctl does not have exits 2, listing the ones it has.
func TestUnknownCommand(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		const want = `unknown command "stats" (status, reset, clone, delete, backups, new, deadletter, quarantine, backfill, cdc, check; see pollerctl --help)`
		if code := w.run("stats", "orders"); code != ctl.ExitUsage || !strings.Contains(w.out.String(), want) {
			t.Errorf("exit %d\n%s", code, w.out.String())
		}
	})
}

// TestMisspeltSettingWarned: pollerctl warns on stderr of a setting it sees (environment or
// local.settings.json) that looks like a poller's but is none, naming the one meant.
func TestMisspeltSettingWarned(t *testing.T) {
	var out, errOut bytes.Buffer
	clk := clock.NewFake(clock.System{}.Now())
	ctl.Run(ctx, []string{"status", "--no-probe"}, ctl.Env{
		Store: memstore.New(clk), App: "test", Getenv: func(k string) string { return settings[k] }, Clock: clk,
		Pollers: []*pollerdef.Def{orders}, Out: &out, Err: &errOut, In: strings.NewReader(""),
		Settings: []string{"ORDERS_DB_DRIVER", "ORDERS_BATCHSIZE", "PATH"},
	})
	if !strings.Contains(errOut.String(), "pollerctl: warning: ORDERS_BATCHSIZE is not a setting: did you mean ORDERS_BATCH_SIZE?\n") ||
		strings.Count(errOut.String(), "warning") != 1 {
		t.Fatalf("stderr:\n%s", errOut.String())
	}
}

// TestStoreErrorOnce: a state store that is not usable is said once: the first line says it is
// not usable, the command's error says why (before, both quoted the whole error).
func TestStoreErrorOnce(t *testing.T) {
	var out, errOut bytes.Buffer
	why := "no state storage configured: set StateStorage"
	code := ctl.Run(ctx, []string{"status"}, ctl.Env{
		StoreErr: errors.New(why), App: "test", Getenv: func(string) string { return "" },
		Pollers: []*pollerdef.Def{orders}, Out: &out, Err: &errOut, In: strings.NewReader(""),
	})
	all := errOut.String() + out.String()
	if code != ctl.ExitUsage || strings.Count(all, why) != 1 || !strings.Contains(errOut.String(), "state store not usable") {
		t.Fatalf("exit %d\nstderr:\n%s\nstdout:\n%s", code, errOut.String(), out.String())
	}
}
