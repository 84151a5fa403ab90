package ctl_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// trap is a state store that fails the test on any use, reachability probe included.
type trap struct{ t *testing.T }

var errTrap = errors.New("the state store was used")

func (s trap) fail(what string) error {
	s.t.Errorf("the state store was used: %s", what)
	return errTrap
}
func (s trap) Reachable(context.Context) error { return s.fail("Reachable") }
func (s trap) Get(_ context.Context, name string) (store.Blob, error) {
	return store.Blob{}, s.fail("Get " + name)
}
func (s trap) Put(_ context.Context, name string, _ []byte, _ store.Condition) (store.Written, error) {
	return store.Written{}, s.fail("Put " + name)
}
func (s trap) Delete(_ context.Context, name string, _ store.Condition) error {
	return s.fail("Delete " + name)
}
func (s trap) List(_ context.Context, prefix string) ([]string, error) {
	return nil, s.fail("List " + prefix)
}

// TestHelp walks the command table: for every command, group and subcommand, --help, -h and
// `pollerctl help PATH` print its usage, its flags and an example on stdout and exit 0, without
// touching the state store (a store that fails the test on any call, or none at all) or reading
// a setting; each example parses with the command's own flags.
func TestHelp(t *testing.T) {
	for _, c := range ctl.Commands() {
		path := strings.Join(c.Path, " ")
		if !c.Group {
			if err := ctl.ParseExample(c.Example); err != nil || !strings.HasPrefix(c.Example, "pollerctl "+path+" ") {
				t.Errorf("%s: its example %q is not one: %v", path, c.Example, err)
			}
		}
		for _, args := range [][]string{append(slices.Clone(c.Path), "--help"), append(slices.Clone(c.Path), "-h"), append([]string{"help"}, c.Path...)} {
			for _, st := range []struct {
				name  string
				store store.Store
				err   error
			}{{"a store that fails the test", trap{t}, nil}, {"no store settings", nil, errors.New("no state storage configured: set StateStorage")}} {
				var out, errOut bytes.Buffer
				code := ctl.Run(ctx, args, ctl.Env{
					Store: st.store, StoreErr: st.err, StoreName: "trap", App: "test",
					Getenv: func(k string) string {
						t.Errorf("pollerctl %s read the setting %s", strings.Join(args, " "), k)
						return ""
					},
					Pollers: []*pollerdef.Def{orders}, Out: &out, Err: &errOut, In: strings.NewReader(""),
				})
				got := out.String()
				if code != ctl.ExitOK || errOut.Len() > 0 {
					t.Errorf("pollerctl %s (%s): exit %d, stderr:\n%s", strings.Join(args, " "), st.name, code, errOut.String())
				}
				want := []string{"Usage: pollerctl " + path + " "}
				for _, f := range c.Flags {
					want = append(want, "  --"+f+" ")
				}
				if c.Group {
					want = append(want, "Subcommands:\n", "Examples:\n  pollerctl "+path+" ")
				} else {
					want = append(want, "Example:\n  "+c.Example+"\n")
				}
				for _, w := range want {
					if !strings.Contains(got, w) {
						t.Errorf("pollerctl %s: no %q in:\n%s", strings.Join(args, " "), w, got)
					}
				}
			}
		}
	}
}

// TestHelpOfSubcommands: a group's help lists each of its subcommands, and the same help comes
// whichever way it is asked.
func TestHelpOfSubcommands(t *testing.T) {
	run := func(args ...string) string {
		var out bytes.Buffer
		if code := ctl.Run(ctx, args, ctl.Env{Store: trap{t}, App: "test", Out: &out}); code != ctl.ExitOK {
			t.Fatalf("pollerctl %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
		}
		return out.String()
	}
	for _, c := range ctl.Commands() {
		if len(c.Path) < 2 {
			continue
		}
		group := run(c.Path[0], "--help")
		if !strings.Contains(group, "  pollerctl "+strings.Join(c.Path, " ")+" ") {
			t.Errorf("pollerctl %s --help does not list %s:\n%s", c.Path[0], c.Path[1], group)
		}
		if a, b := run(append(slices.Clone(c.Path), "--help")...), run(append([]string{"help"}, c.Path...)...); a != b {
			t.Errorf("pollerctl %s --help and pollerctl help %[1]s differ:\n%s\n---\n%s", strings.Join(c.Path, " "), a, b)
		}
	}
	// Help asked after a poller's name and flags is still help.
	if got := run("backfill", "orders", "--chunk", "10", "--help"); !strings.Contains(got, "Usage: pollerctl backfill POLLER") {
		t.Errorf("pollerctl backfill orders --chunk 10 --help:\n%s", got)
	}
}

// TestUnknownSubcommand: a subcommand or command pollerctl does not have, and a group without
// one, exit 2 naming what there is, with the one meant when one is near; so does help of one.
func TestUnknownSubcommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cdc", "enble", "orders"}, `unknown cdc subcommand "enble" (enable, disable; see pollerctl help cdc) (did you mean "enable"?)`},
		{[]string{"deadletter", "lst"}, `unknown deadletter subcommand "lst" (list, show, replay, discard; see pollerctl help deadletter) (did you mean "list"?)`},
		{[]string{"help", "stauts"}, `unknown command "stauts" (status, reset,`},
		{[]string{"help", "cdc", "enble"}, `(did you mean "enable"?)`},
		{[]string{"cdc"}, "cdc needs a subcommand: enable, disable"},
		{[]string{"help", "status", "orders"}, `help status: "orders" is none of its subcommands`},
		{[]string{"status", "--jsn"}, "status: flag provided but not defined: -jsn (pollerctl status --help shows its flags)"},
	} {
		var out bytes.Buffer
		code := ctl.Run(ctx, tc.args, ctl.Env{Store: trap{t}, App: "test", Out: &out})
		if code != ctl.ExitUsage || !strings.Contains(out.String(), tc.want) {
			t.Errorf("pollerctl %s: exit %d, want %d and %q:\n%s", strings.Join(tc.args, " "), code, ctl.ExitUsage, tc.want, out.String())
		}
	}
}
