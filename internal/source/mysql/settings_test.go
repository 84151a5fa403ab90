package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// settingsVar names a MySQL or MariaDB server started with the settings serverSettings wants,
// which the tests that use it may change (its global variables are theirs): in the GitHub
// workflow, a second MySQL 8 (docker run mysql:8.4 --default-time-zone=-05:00
// --log-bin-trust-function-creators=0; binary logging is on by default).
const settingsVar = "MYSQL_TZ_TEST_DSN"

// serverSettings returns the root DSN of a server whose default time zone is -05:00 (west of
// UTC), with binary logging on and log_bin_trust_function_creators OFF: the server settingsVar
// names, else a MariaDB of the test's own (when MYSQL_TEST_DSN says this is a MySQL test run and
// mariadbd is installed), stopped when the test ends. Tests never change the global variables of
// the shared server (every package's tests use it at once); they change this one's.
func serverSettings(t *testing.T) string {
	t.Helper()
	if dsn := os.Getenv(settingsVar); dsn != "" {
		return dsn
	}
	if os.Getenv(testenv.MySQLVar) == "" {
		t.Skipf("set %s (a server started with --default-time-zone=-05:00 --log-bin --log-bin-trust-function-creators=0), or %s with mariadbd installed (a MariaDB of the test's own), to run this test",
			settingsVar, testenv.MySQLVar)
	}
	bin := func(name string) string {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		if p := "/usr/sbin/" + name; fileExists(p) {
			return p
		}
		return ""
	}
	mariadbd, install := bin("mariadbd"), bin("mariadb-install-db")
	if mariadbd == "" || install == "" {
		t.Skipf("no mariadbd to start a server of the test's own, and %s is not set", settingsVar)
	}
	return startMariaDB(t, mariadbd, install, "--default-time-zone=-05:00", "--log-bin", "--log-bin-trust-function-creators=0")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// startMariaDB starts a throwaway MariaDB with options, as scripts/lib/services.sh's
// start_mariadb does (run as root, the server runs as the mysql user, in a directory it can
// enter), and returns its root DSN on the database pseudotrigger.
func startMariaDB(t *testing.T, mariadbd, install string, options ...string) string {
	t.Helper()
	dir, command := testenv.ServerDir(t, "pseudotrigger-mariadb-", "mysql")
	runAs := ""
	if os.Geteuid() == 0 {
		runAs = "mysql"
	}
	data := filepath.Join(dir, "data")
	if out, err := command(install, "--no-defaults", "--datadir="+data, "--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	args := []string{mariadbd, "--no-defaults", "--datadir=" + data, "--socket=" + filepath.Join(dir, "mysqld.sock"),
		"--pid-file=" + filepath.Join(dir, "mysqld.pid"), "--log-bin=" + filepath.Join(dir, "binlog"),
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(port), "--innodb-flush-log-at-trx-commit=2", "--innodb-buffer-pool-size=32M",
		"--character-set-server=utf8mb4", "--collation-server=utf8mb4_bin"}
	if runAs != "" {
		args = append(args, "--user="+runAs)
	}
	srv := command(append(args, options...)...)
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Stdout, srv.Stderr = logf, logf
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	// Stopped by its own pid (from its pid file: srv is runuser when run as root), then srv.
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(dir, "mysqld.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGTERM)
			}
		}
		srv.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			srv.Process.Kill()
			<-exited
		}
		logf.Close()
	})
	dsn := fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port)
	admin := testenv.DB(t, "mysql", dsn)
	for deadline := time.Now().Add(60 * time.Second); ; {
		err := admin.Ping()
		if err == nil {
			break
		}
		select {
		case e := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			t.Fatalf("mariadbd exited: %v\n%s", e, log)
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			t.Fatalf("mariadbd did not answer on port %d: %v\n%s", port, err, log)
		}
		time.Sleep(100 * time.Millisecond) // polling the server's start, with a deadline
	}
	if _, err := admin.Exec("CREATE DATABASE pseudotrigger CHARACTER SET utf8mb4"); err != nil {
		t.Fatal(err)
	}
	return dsn + "pseudotrigger"
}

// TestMySQLServerSettings runs on a server of its own (serverSettings: default time zone -05:00,
// binary logging on, log_bin_trust_function_creators OFF), whose global variables it changes:
//
//   - a DATETIME cursor column stamped by CURRENT_TIMESTAMP (the server's local time, five hours
//     behind the UTC the source reads it in) is a problem of the set-up check, naming the column
//     and the zone; its fix, triggers stamping UTC_TIMESTAMP(6), then stamps rows in UTC;
//   - the fix's CREATE TRIGGER needs SUPER on this server, which the check says, and a user
//     without SUPER gets ERROR 1419 running it;
//   - a read-only server (as a read replica is) gives no open-transaction bound, and the source
//     says why.
func TestMySQLServerSettings(t *testing.T) {
	dsn := serverSettings(t)
	ctx := context.Background()
	admin, err := sql.Open("mysql", dsn) // a session in the server's default zone, as an application's
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := admin.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var zone string
	var logBin, trust int
	if err := admin.QueryRow("SELECT @@global.time_zone, @@global.log_bin, @@global.log_bin_trust_function_creators").Scan(&zone, &logBin, &trust); err != nil {
		t.Fatal(err)
	}
	if zone != "-05:00" || logBin != 1 || trust != 0 {
		t.Fatalf("the server runs with time_zone %q, log_bin %d, log_bin_trust_function_creators %d; want -05:00, 1, 0", zone, logBin, trust)
	}
	t.Run("a DATETIME stamped in local time", func(t *testing.T) {
		table := testenv.Name("tz_")
		exec("CREATE TABLE " + table + " (id BIGINT PRIMARY KEY, amount DECIMAL(12,2) NOT NULL, " +
			"updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6), KEY (updated_at, id))")
		t.Cleanup(func() { admin.Exec("DROP TABLE " + table) })
		tb := sourcedef.Table{Name: table}

		// A user that may change the table and create triggers, without SUPER.
		owner := testenv.MySQLUser(t, admin, dsn, "SELECT, INSERT, UPDATE, CREATE, ALTER, INDEX, TRIGGER")
		s := sourcetest.Setup(t, mysql.Driver{}, owner, tb, state.KindTimestampPK, "updated_at")
		f := sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictProblem,
			[]string{"DATETIME column updated_at is stamped by the server's local clock (INSERT by current_timestamp, UPDATE by current_timestamp)",
				`@@global.time_zone "-05:00"`, "UTC-5 h now", "never delivered",
				"log_bin_trust_function_creators=OFF, so CREATE TRIGGER needs the SUPER privilege", "ERROR 1419"},
			"BEFORE INSERT ON `"+table+"`", "BEFORE UPDATE ON `"+table+"`", "SET NEW.`updated_at` = UTC_TIMESTAMP(6)",
			"ALTER TABLE `"+table+"` MODIFY `updated_at` datetime(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))")
		t.Logf("%s: %s", f.Check, f.Detail)
		// Until the column is fixed, the poller reads nothing, saying why, once a row shows the
		// local stamps (before, the catalog alone cannot tell a writer whose session runs in UTC).
		exec("INSERT INTO " + table + " (id, amount) VALUES (100, 1)")
		def := sourcedef.Definition{Table: tb, Columns: []string{"id", "updated_at"}, PK: []string{"id"},
			Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "updated_at"}}
		src := mysqlOpen(t, dsn, def)
		if _, err := src.Fetch(ctx, nil, 10); !errors.Is(err, source.ErrMisconfigured) || !strings.Contains(err.Error(), "stamped by the server's local clock") || !strings.Contains(err.Error(), "--fix") {
			t.Fatalf("a read of a DATETIME stamped in local time west of UTC: %v; want it refused, saying why", err)
		}
		_, err := s.Apply(ctx)
		var me *gomysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1419 {
			t.Fatalf("the fix run by a user without SUPER: %v; want ERROR 1419", err)
		}
		// Refused at its first trigger, the fix left the column as it was (its MODIFY comes last).
		var extra string
		if err := admin.QueryRow("SELECT EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'updated_at'", table).Scan(&extra); err != nil || !strings.Contains(strings.ToLower(extra), "on update") {
			t.Fatalf("after the refused fix the column's EXTRA is %q (%v): the fix changed it half-way", extra, err)
		}

		// As root (SUPER), the fix runs; then the column is stamped in UTC on insert, on a
		// single-table update and on a multi-table update of another column (where MySQL 8
		// applies ON UPDATE after the BEFORE triggers), and when set by hand.
		s = sourcetest.Setup(t, mysql.Driver{}, dsn, tb, state.KindTimestampPK, "updated_at")
		sourcetest.FixAndRecheck(t, s)
		if _, err := mysqlOpen(t, dsn, def).Fetch(ctx, nil, 10); err != nil {
			t.Fatalf("a read after the fix: %v", err)
		}
		exec("CREATE TABLE " + table + "_x (id BIGINT PRIMARY KEY)")
		t.Cleanup(func() { admin.Exec("DROP TABLE " + table + "_x") })
		exec("INSERT INTO " + table + "_x VALUES (1)")
		for _, step := range []string{
			"INSERT INTO " + table + " (id, amount) VALUES (1, 1)",
			"UPDATE " + table + " SET amount = 2 WHERE id = 1",
			"UPDATE " + table + "_x AS x STRAIGHT_JOIN " + table + " AS o ON o.id = x.id SET o.amount = 3", // o is not first: not updated on the fly
			"UPDATE " + table + " SET updated_at = '2000-01-01' WHERE id = 1",
		} {
			exec(step)
			var behind sql.NullFloat64
			if err := admin.QueryRow("SELECT ABS(TIMESTAMPDIFF(SECOND, updated_at, UTC_TIMESTAMP())) FROM " + table + " WHERE id = 1").Scan(&behind); err != nil || !behind.Valid || behind.Float64 > 60 {
				t.Fatalf("after the fix and %s, the stamp is %v s from the UTC clock (%v); want within a minute", step, behind, err)
			}
		}
	})

	t.Run("ON UPDATE CURRENT_TIMESTAMP beside UTC triggers", func(t *testing.T) {
		// The triggers win a single-table UPDATE, but MySQL 8 applies ON UPDATE after them in a
		// multi-table one: a problem, whose fix mends the column and adds no trigger.
		table := testenv.Name("tzon_")
		exec("CREATE TABLE " + table + " (id BIGINT PRIMARY KEY, amount DECIMAL(12,2) NOT NULL, " +
			"updated_at DATETIME(6) NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6) COMMENT 'stamp''s', KEY (updated_at, id))")
		t.Cleanup(func() { admin.Exec("DROP TABLE " + table) })
		exec("CREATE TRIGGER " + table + "_i BEFORE INSERT ON " + table + " FOR EACH ROW SET NEW.updated_at = UTC_TIMESTAMP(6)")
		exec("CREATE TRIGGER " + table + "_u BEFORE UPDATE ON " + table + " FOR EACH ROW SET NEW.updated_at = UTC_TIMESTAMP(6)")
		s := sourcetest.Setup(t, mysql.Driver{}, dsn, sourcedef.Table{Name: table}, state.KindTimestampPK, "updated_at")
		f := sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictProblem,
			[]string{"UPDATE by ON UPDATE CURRENT_TIMESTAMP, which MySQL 8 applies after the BEFORE triggers"},
			"ALTER TABLE `"+table+"` MODIFY `updated_at` datetime(6) NULL DEFAULT (UTC_TIMESTAMP(6)) COMMENT 'stamp''s'")
		if strings.Contains(strings.Join(f.Fix, "\n"), "CREATE TRIGGER") {
			t.Errorf("the fix adds a trigger beside the UTC ones: %v", f.Fix)
		}
		// Its rows are stamped in UTC (the triggers): the catalog's problem alone does not stop
		// the poller's reads (a writer whose session runs in UTC stamps so too).
		exec("INSERT INTO " + table + " (id, amount) VALUES (1, 1)")
		src := mysqlOpen(t, dsn, sourcedef.Definition{Table: sourcedef.Table{Name: table}, Columns: []string{"id", "updated_at"}, PK: []string{"id"},
			Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "updated_at"}})
		if _, err := src.Fetch(ctx, nil, 10); err != nil {
			t.Errorf("a read of a table whose stamps are UTC: %v", err)
		}
		sourcetest.FixAndRecheck(t, s)
		var comment string
		if err := admin.QueryRow("SELECT COLUMN_COMMENT FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'updated_at'", table).Scan(&comment); err != nil || comment != "stamp's" {
			t.Errorf("the fix left the column's comment %q (%v)", comment, err)
		}
	})

	t.Run("a DATETIME stamped in UTC", func(t *testing.T) {
		// Stamped with UTC_TIMESTAMP(6), by its default and a trigger: no zone problem.
		table := testenv.Name("tzutc_")
		exec("CREATE TABLE " + table + " (id BIGINT PRIMARY KEY, amount DECIMAL(12,2) NOT NULL, updated_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)), KEY (updated_at, id))")
		exec("CREATE TRIGGER " + table + "_u BEFORE UPDATE ON " + table + " FOR EACH ROW SET NEW.updated_at = UTC_TIMESTAMP(6)")
		t.Cleanup(func() { admin.Exec("DROP TABLE " + table) })
		s := sourcetest.Setup(t, mysql.Driver{}, dsn, sourcedef.Table{Name: table}, state.KindTimestampPK, "updated_at")
		sourcetest.Expect(t, s, setup.CheckStamped, setup.VerdictOK, nil)
	})

	t.Run("a read-only server", func(t *testing.T) {
		table := testenv.Name("ro_")
		exec("CREATE TABLE " + table + " (id BIGINT PRIMARY KEY, ts DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)), KEY (ts, id))")
		t.Cleanup(func() { admin.Exec("DROP TABLE " + table) })
		exec("INSERT INTO " + table + " (id, ts) VALUES (1, UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE)")
		exec("SET GLOBAL read_only = ON")
		t.Cleanup(func() { admin.Exec("SET GLOBAL read_only = OFF") })
		// A user of its own: the bounds are shared by server and user.
		reader := testenv.MySQLUser(t, admin, dsn, "SELECT")
		rcfg, _ := gomysql.ParseDSN(reader)
		exec("GRANT PROCESS ON *.* TO '" + rcfg.User + "'@'%'")
		src := mysqlOpen(t, reader, sourcedef.Definition{Table: sourcedef.Table{Name: table}, Columns: []string{"id", "ts"}, PK: []string{"id"},
			Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "ts"}})
		got, _ := readIDs(t, src, nil)
		o, ok := openTrxOf(src)
		if !ok || o.Active || !strings.Contains(o.Reason, "read-only") || !strings.Contains(o.Reason, "read replica") {
			t.Fatalf("on a read-only server: read %v, bound %+v; want the settle lag alone, saying the server is read-only", got, o)
		}
		t.Logf("read %v; %s", got, o.Detail().Line)
	})
}
