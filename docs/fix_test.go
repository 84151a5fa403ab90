package docs

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlserver"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// proveFix shows that the recipe is exactly what `pollerctl check orders --fix` prints for the
// orders table lacking its cursor set-up, on a fresh database, and that `--fix --yes` makes it:
// the check is then clean, and an UPDATE after the INSERT is read again (proveRecipe).
func proveFix(t *testing.T, b block, driver, kind string) {
	t.Helper()
	f := newDatabase(t, driver)
	f.principal(t)
	opts := []poller.Option{poller.WithColumns("id", "customer", "amount"), poller.WithKey("id"), poller.WithCursorColumn(cursorColumns[kind])}
	if driver == sqlserver.Name {
		opts = append(opts, poller.WithSchema("dbo"))
	}
	p := poller.New("orders", "orders", poller.CursorKind(kind), func(context.Context, *poller.Batch[poller.Row]) error { return nil }, opts...)
	settings := map[string]string{"ORDERS_DB_DRIVER": driver, "ORDERS_DB_CONNECTION": f.dsn, "ORDERS_SCHEDULE": "*/30 * * * * *"}
	pollerctl := func(args ...string) (string, int) {
		var out bytes.Buffer
		code := ctl.Run(context.Background(), args, ctl.Env{Out: &out, Pollers: []*pollerdef.Def{pollerdef.Of(p)}, App: "docs",
			Getenv: func(k string) string { return settings[k] }})
		return out.String(), code
	}

	out, code := pollerctl("check", "orders", "--fix")
	if code != ctl.ExitRefused {
		t.Fatalf("%s: pollerctl check orders --fix on the table without the recipe: exit %d, want %d (problems):\n%s", b, code, ctl.ExitRefused, out)
	}
	_, script, ok := strings.Cut(out, "\nfix orders (")
	if ok {
		_, script, _ = strings.Cut(script, "):\n")
		script, _, ok = strings.Cut(script, "dry run: nothing was changed.")
	}
	if !ok {
		t.Fatalf("%s: pollerctl check orders --fix printed no fix:\n%s", b, out)
	}
	if strings.TrimSpace(script) != strings.TrimSpace(b.body) {
		t.Fatalf("%s: the recipe is not what pollerctl check orders --fix prints; it prints:\n%s", b, script)
	}

	out, code = pollerctl("check", "orders", "--fix", "--yes")
	if code != ctl.ExitOK || !strings.Contains(out, "checked again:") {
		t.Fatalf("%s: pollerctl check orders --fix --yes: exit %d:\n%s", b, code, out)
	}
	if out, code := pollerctl("check", "orders"); code != ctl.ExitOK {
		t.Fatalf("%s: after --fix --yes, pollerctl check orders: exit %d:\n%s", b, code, out)
	}
	proveRecipe(t, b, f, kind)
}
