package ctl_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestCheck: pollerctl check prints one line per check and each problem's fix, and exits 1;
// --fix prints the fixes as one script and changes nothing; --fix --yes runs them, says what
// ran and checks again; then the check is clean (exit 0). Usage errors exit 2.
func TestCheck(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "shop.db")
	testenv.DB(t, "sqlite", dsn, `CREATE TABLE orders (id BIGINT PRIMARY KEY, amount TEXT NOT NULL, updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000Z','now')))`)
	shop := pollerdef.Of(poller.New("shop", "orders", poller.TimestampPK, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
		poller.WithColumns("id", "amount"), poller.WithKey("id"), poller.WithCursorColumn("updated_at")))
	env := map[string]string{"SHOP_DB_DRIVER": "sqlite", "SHOP_DB_CONNECTION": dsn}
	run := func(args ...string) (string, int) {
		var out bytes.Buffer
		code := ctl.Run(ctx, args, ctl.Env{Getenv: func(k string) string { return env[k] }, Pollers: []*pollerdef.Def{shop}, Out: &out})
		return out.String(), code
	}
	contains := func(out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("the output lacks %q:\n%s", w, out)
			}
		}
	}

	out, code := run("check", "shop")
	if code != ctl.ExitRefused {
		t.Fatalf("check with problems: exit %d, want %d:\n%s", code, ctl.ExitRefused, out)
	}
	contains(out, "check shop (sqlite ", "  ok           table: orders\n", "  ok           columns: id, amount, updated_at\n",
		"  problem      keyset index: no index leads with (updated_at, id)",
		"               fix:\n                 CREATE INDEX \"orders_updated_at_id\" ON \"orders\" (\"updated_at\", \"id\");\n",
		"  problem      stamped on insert and update: column updated_at: no UPDATE trigger stamps it: every UPDATE after the insert is never delivered",
		"                 CREATE TRIGGER \"orders_stamp_updated_at_update\" AFTER UPDATE ON \"orders\" FOR EACH ROW\n",
		"  ok           privileges", "pollerctl: check: 2 problem(s) in 1 poller(s) (see above: each with its fix)")

	out, code = run("check", "shop", "--fix")
	if code != ctl.ExitRefused {
		t.Fatalf("check --fix (a dry run): exit %d, want %d:\n%s", code, ctl.ExitRefused, out)
	}
	contains(out, "fix shop (in one transaction):\nCREATE INDEX \"orders_updated_at_id\" ON \"orders\" (\"updated_at\", \"id\");\nCREATE TRIGGER",
		"END;\ndry run: nothing was changed. Add --yes to run it.\n")
	if out, code := run("check", "shop"); code != ctl.ExitRefused {
		t.Fatalf("the dry run changed something: exit %d:\n%s", code, out)
	}

	out, code = run("check", "shop", "--fix", "--yes")
	if code != ctl.ExitOK {
		t.Fatalf("check --fix --yes: exit %d:\n%s", code, out)
	}
	contains(out, "ran: CREATE INDEX \"orders_updated_at_id\" ON \"orders\" (\"updated_at\", \"id\")\n",
		"ran: CREATE TRIGGER \"orders_stamp_updated_at_update\" AFTER UPDATE ON \"orders\" FOR EACH ROW BEGIN UPDATE",
		"checked again:\ncheck shop", "  ok           keyset index", "  ok           stamped on insert and update")
	if out, code := run("check"); code != ctl.ExitOK || strings.Contains(out, "problem") {
		t.Fatalf("after the fix, check (every poller): exit %d:\n%s", code, out)
	}

	for _, args := range [][]string{{"check", "nosuch"}, {"check", "shop", "--yes"}, {"check", "--fix"}, {"check", "a", "b"}} {
		if out, code := run(args...); code != ctl.ExitUsage {
			t.Errorf("%v: exit %d, want %d (usage):\n%s", args, code, ctl.ExitUsage, out)
		}
	}
}
