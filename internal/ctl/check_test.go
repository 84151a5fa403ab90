package ctl_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
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

// checkDB makes a table of ddl (@ its name) on the database of driver (sqlite: the file
// sqlite; postgres and mysql: the test servers, or skips) and returns its DSN, the database/sql
// driver's name, a connection and the table's name.
func checkDB(t *testing.T, driver, sqlite, ddl string) (dsn, sqlDriver string, conn *sql.DB, table string) {
	t.Helper()
	dsn, sqlDriver = sqlite, driver
	switch driver {
	case "postgres":
		dsn, sqlDriver = testenv.Postgres(t), "pgx"
	case "mysql":
		dsn = testenv.MySQL(t)
	}
	conn = testenv.DB(t, sqlDriver, dsn)
	return dsn, sqlDriver, conn, sourcetest.CheckTable(t, conn, "", []string{"DROP TABLE @"}, ddl).Name
}

// TestCheckRepeatedKey, on SQLite, PostgreSQL and MariaDB: a table without a key whose key
// column repeats (rows that differ in the cursor alone) gets a unique-key problem that names one
// repeated value and how many rows have it, and no CREATE UNIQUE INDEX as its fix (it would
// fail); the other problems keep theirs, and the last line says which have one. When the index
// is offered and fails all the same (the repeat lies past the rows the check reads), --fix --yes
// prints the database's own words on which key repeats.
func TestCheckRepeatedKey(t *testing.T) {
	for _, db := range []struct {
		driver, dsn, ddl, stamp string
		repeat                  func(table string) string // the database's words on the repeated key 100001
	}{
		{"sqlite", filepath.Join(t.TempDir(), "shop.db"), "CREATE TABLE @ (id BIGINT NOT NULL, amount TEXT NOT NULL, updated_at TEXT NOT NULL)", "2026-01-01T00:00:00.%06dZ",
			func(table string) string { return "UNIQUE constraint failed: " + table + ".id" }},
		{"postgres", "", "CREATE TABLE @ (id BIGINT NOT NULL, amount TEXT NOT NULL, updated_at TIMESTAMPTZ NOT NULL)", "2026-01-01 00:00:00.%06d+00",
			func(string) string { return "Key (id)=(100001) is duplicated." }},
		{"mysql", "", "CREATE TABLE @ (id BIGINT NOT NULL, amount VARCHAR(20) NOT NULL, updated_at DATETIME(6) NOT NULL)", "2026-01-01 00:00:00.%06d",
			func(string) string { return "Duplicate entry '100001'" }},
	} {
		t.Run(db.driver, func(t *testing.T) {
			dsn, sqlDriver, _, table := checkDB(t, db.driver, db.dsn, db.ddl)
			insert := func(ids ...int) {
				t.Helper()
				var values []string
				for i, id := range ids {
					values = append(values, fmt.Sprintf("(%d, 'x', '%s')", id, fmt.Sprintf(db.stamp, i%1_000_000)))
					if len(values) == 1000 || i == len(ids)-1 {
						testenv.DB(t, sqlDriver, dsn, "INSERT INTO "+table+" (id, amount, updated_at) VALUES "+strings.Join(values, ", "))
						values = nil
					}
				}
			}
			shop := pollerdef.Of(poller.New("shop", table, poller.TimestampPK, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
				poller.WithColumns("id", "amount"), poller.WithKey("id"), poller.WithCursorColumn("updated_at")))
			env := map[string]string{"SHOP_DB_DRIVER": db.driver, "SHOP_DB_CONNECTION": dsn}
			run := func(args ...string) (string, int) {
				var out bytes.Buffer
				code := ctl.Run(ctx, args, ctl.Env{Getenv: func(k string) string { return env[k] }, Pollers: []*pollerdef.Def{shop}, Out: &out})
				return out.String(), code
			}

			insert(1, 1, 2) // id 1 twice, at different stamps
			out, code := run("check", "shop")
			line := ""
			for l := range strings.SplitSeq(out, "\n") {
				if strings.HasPrefix(l, "  problem      unique key: ") {
					line = l
				}
			}
			if code != ctl.ExitRefused || !strings.Contains(line, "; and the key repeats: 2 rows have id=1, so a unique index over (id) cannot be made (no fix in SQL): remove the repeats, then CREATE UNIQUE INDEX") {
				t.Fatalf("check: exit %d, want %d and the repeat named on the unique key's line:\n%s", code, ctl.ExitRefused, out)
			}
			_, after, _ := strings.Cut(out, line+"\n")
			if strings.HasPrefix(after, "               fix:") || !strings.Contains(out, "(see above: 2 with a fix; for the others, do what each says)") {
				t.Errorf("the unique key's problem has a fix, or the last line does not say which have one:\n%s", out)
			}
			if out, _ := run("check", "shop", "--fix"); strings.Contains(out, "\nCREATE UNIQUE INDEX") {
				t.Errorf("check --fix offers the unique index that would fail:\n%s", out)
			}

			// A repeat past the rows the check reads: the index is offered, and fails with the
			// database's words.
			testenv.DB(t, sqlDriver, dsn, "DELETE FROM "+table)
			ids := make([]int, 0, source.DupScan+2)
			for id := 1; id <= source.DupScan+1; id++ {
				ids = append(ids, id)
			}
			insert(append(ids, source.DupScan+1)...)
			out, code = run("check", "shop", "--fix", "--yes")
			if code != ctl.ExitRefused || !strings.Contains(out, "failed: CREATE UNIQUE INDEX") || !strings.Contains(out, db.repeat(table)) {
				t.Fatalf("check --fix --yes of a repeat the check did not see: exit %d, want %d and %q:\n%s", code, ctl.ExitRefused, db.repeat(table), out)
			}
		})
	}
}

// TestCheckSaysWhichHaveAFix: check's last line says "each with its fix" only when each problem
// was printed with one; problems without a fix in SQL (a column the table lacks, settings
// pollerctl does not have) are told to do what each says.
func TestCheckSaysWhichHaveAFix(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "shop.db")
	testenv.DB(t, "sqlite", dsn, `CREATE TABLE orders (id BIGINT PRIMARY KEY, amount TEXT NOT NULL, updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000Z','now')))`)
	def := func(name string, cols ...string) *pollerdef.Def {
		return pollerdef.Of(poller.New(name, "orders", poller.TimestampPK, func(context.Context, *poller.Batch[poller.Row]) error { return nil },
			poller.WithColumns(cols...), poller.WithKey("id"), poller.WithCursorColumn("updated_at")))
	}
	pollers := []*pollerdef.Def{def("lacking", "id", "nosuch"), def("unset", "id"), def("shop", "id", "amount")}
	env := map[string]string{"LACKING_DB_DRIVER": "sqlite", "LACKING_DB_CONNECTION": dsn, "SHOP_DB_DRIVER": "sqlite", "SHOP_DB_CONNECTION": dsn}
	for _, tc := range []struct {
		args []string
		last string
	}{
		{[]string{"check", "lacking"}, "pollerctl: check: 1 problem(s) in 1 poller(s) (see above: it has no fix in SQL: do what it says)\n"},
		{[]string{"check", "unset"}, "pollerctl: check: 1 problem(s) in 1 poller(s) (see above: it has no fix in SQL: do what it says)\n"},
		{[]string{"check", "shop"}, "pollerctl: check: 2 problem(s) in 1 poller(s) (see above: each with its fix)\n"},
		{[]string{"check"}, "pollerctl: check: 4 problem(s) in 3 poller(s) (see above: 2 with a fix; for the others, do what each says)\n"},
	} {
		var out bytes.Buffer
		code := ctl.Run(ctx, tc.args, ctl.Env{Getenv: func(k string) string { return env[k] }, Pollers: pollers, Out: &out})
		if code != ctl.ExitRefused || !strings.HasSuffix(out.String(), tc.last) {
			t.Errorf("pollerctl %s: exit %d, want %d and the last line %q:\n%s", strings.Join(tc.args, " "), code, ctl.ExitRefused, tc.last, out.String())
		}
	}
}
