package mysql_test

import (
	"context"
	"database/sql"
	osexec "os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// lateCommitTable is a table stamped by the database at statement time, as applications stamp
// rows: the hazard of a transaction that commits long after its stamp.
func lateCommitTable(t *testing.T, db *sql.DB) string {
	return lateCommitTableOf(t, db, datetimeStamp)
}

// The two ways docs/mysql.md stamps a timestamp+pk cursor: a DATETIME(6) stamped in UTC, and the
// recipe's TIMESTAMP(6), which MySQL keeps in UTC, stamped by CURRENT_TIMESTAMP(6).
const (
	datetimeStamp  = "DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))"
	timestampStamp = "TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)"
)

// lateCommitTableOf is lateCommitTable with its ts column's type and default.
func lateCommitTableOf(t *testing.T, db *sql.DB, ts string) string {
	return mysqlTable(t, db, "late_", "(id BIGINT PRIMARY KEY, ts "+ts+", KEY (ts, id))")
}

// processUser is a user with SELECT on the test database and PROCESS, and nothing else (no
// SUPER): the role docs/mysql.md's grants make for a timestamp+pk poller.
func processUser(t *testing.T, db *sql.DB, dsn string) string {
	t.Helper()
	userDSN := testenv.MySQLUser(t, db, dsn, "SELECT")
	cfg, err := gomysql.ParseDSN(userDSN)
	if err != nil {
		t.Fatal(err)
	}
	mysqlExec(t, db, "GRANT PROCESS ON *.* TO '"+cfg.User+"'@'%'")
	rows, err := db.Query("SHOW GRANTS FOR '" + cfg.User + "'@'%'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(g, "SUPER") || strings.Contains(g, "ALL PRIVILEGES") {
			t.Fatalf("the poller's user holds more than SELECT and PROCESS: %s", g)
		}
	}
	return userDSN
}

// ids reads everything the source has now, from the cursor, and returns the ids and the cursor.
func readIDs(t *testing.T, src *source.Source, after *state.Cursor) ([]int64, *state.Cursor) {
	t.Helper()
	var got []int64
	for {
		b, err := src.Fetch(context.Background(), after, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range b.Rows {
			got = append(got, r.Get("id").(int64))
		}
		if len(b.Rows) == 0 {
			return got, after
		}
		after = b.To
	}
}

// reading follows a source as a poller does: the ids delivered so far and the cursor.
type reading struct {
	t     *testing.T
	src   *source.Source
	got   []int64
	after *state.Cursor
}

// until reads until done says so, failing at a deadline, or as soon as the ids delivered are not
// a prefix of want. Other tests' processes read innodb_trx too, which can keep it stale for a
// while (the source then holds its reads back): so the tests poll for a fresh bound.
func (r *reading) until(want []int64, what string, done func() bool) {
	r.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		var more []int64
		more, r.after = readIDs(r.t, r.src, r.after)
		r.got = append(r.got, more...)
		o, _ := openTrxOf(r.src)
		if len(r.got) > len(want) || !slices.Equal(r.got, want[:len(r.got)]) {
			r.t.Fatalf("delivered %v, want %v (bound: %s)", r.got, want, o)
		}
		if done() {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("waiting for %s: delivered %v, bound %s", what, r.got, o)
		}
		time.Sleep(50 * time.Millisecond) // polling the source, with a deadline
	}
}

// fresh says whether the source's last read was bounded by a list it trusted, just read.
func fresh(src *source.Source) bool {
	o, ok := openTrxOf(src)
	return ok && o.Active && o.Reason == ""
}

// TestMySQLOpenTrxBound: with no settle lag at all, a transaction that stamped a row and stays
// open holds the read back; a row committed after it, stamped later, waits for it, and both come
// in stamp order once it commits. The source names the open transaction. A role without PROCESS
// gets no such bound: it reads the later row at once and the held row, committed later, behind
// its cursor, is lost (the hazard the bound removes), and the source says why, naming the GRANT.
// The poller reads as a user with SELECT and PROCESS only (no SUPER), on a DATETIME(6) column
// stamped with UTC_TIMESTAMP(6) and on the recipe's TIMESTAMP(6) column: the bound's sentinels
// ('9999-12-31 23:59:59' for no bound, the weak role's; '1000-01-01' before a bound is trusted)
// lie outside TIMESTAMP's range and must still compare as DATETIME (readbound.go).
func TestMySQLOpenTrxBound(t *testing.T) {
	for _, c := range []struct{ name, ts string }{{"DATETIME(6)", datetimeStamp}, {"TIMESTAMP(6)", timestampStamp}} {
		t.Run(c.name, func(t *testing.T) { testOpenTrxBound(t, c.ts) })
	}
}

func testOpenTrxBound(t *testing.T, ts string) {
	db, dsn := mysqlDB(t)
	table := lateCommitTableOf(t, db, ts)
	def := sourcedef.Definition{Table: sourcedef.Table{Name: table}, Columns: []string{"id", "ts"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "ts"}, SettleLag: sourcedef.NoSettleLag}
	src := mysqlOpen(t, processUser(t, db, dsn), def)
	weak := mysqlOpen(t, testenv.MySQLUser(t, db, dsn, "SELECT"), def)

	mysqlExec(t, db, "INSERT INTO "+table+" VALUES (1, UTC_TIMESTAMP(6) - INTERVAL 10 SECOND)")
	held, thread := testenv.MySQLHeld(t, db, table, 2)
	mysqlExec(t, db, "INSERT INTO "+table+" (id) VALUES (3)") // stamped later, committed now

	r := &reading{t: t, src: src}
	r.until([]int64{1, 2, 3}, "a fresh bound naming row 2's transaction", func() bool {
		o, _ := openTrxOf(src)
		return fresh(src) && o.OldestThread == thread && len(r.got) == 1
	})
	o, _ := openTrxOf(src)
	t.Logf("bound while row 2 is held: %s", o)
	// Row 3, committed behind it, is what waits: the backlog and its lag show the held
	// transaction, instead of a poller with nothing to do.
	b, err := src.Backlog(context.Background(), r.after, 100)
	if err != nil || b.Rows != 1 || b.Oldest == nil || string(b.Oldest.Tiebreaker["id"]) != "3" {
		t.Fatalf("backlog with row 2 held: %+v, %v; want row 3 waiting", b, err)
	}
	weakGot, _ := readIDs(t, weak, nil)
	if !slices.Equal(weakGot, []int64{1, 3}) {
		t.Fatalf("without PROCESS, read %v; want [1 3] (the hazard: the later row first)", weakGot)
	}
	w, ok := openTrxOf(weak)
	if !ok || w.Active || !strings.Contains(w.Reason, "GRANT PROCESS ON *.* TO '") || !strings.Contains(w.String(), "settle lag only") {
		t.Fatalf("without PROCESS, the bound is %+v, %v; want inactive, naming the GRANT", w, ok)
	}
	t.Logf("without PROCESS: %s", w)

	if err := held.Commit(); err != nil {
		t.Fatal(err)
	}
	r.until([]int64{1, 2, 3}, "rows 2 and 3", func() bool { return len(r.got) == 3 })
}

// TestMySQLOpenTrxStale: innodb_trx read more often than every 100 ms is not refreshed, so it
// does not list a transaction begun since. The source's own transaction is then missing from it
// too: the source keeps its last trusted bound (below the held row) instead of trusting the stale
// list, which would let it read the later row and lose the held one. Once the reads stop, the
// list is fresh again and both rows come in order.
func TestMySQLOpenTrxStale(t *testing.T) {
	db, dsn := mysqlDB(t)
	table := lateCommitTable(t, db)
	src := mysqlOpen(t, dsn, sourcedef.Definition{Table: sourcedef.Table{Name: table}, Columns: []string{"id", "ts"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "ts"}, SettleLag: sourcedef.NoSettleLag})
	r := &reading{t: t, src: src}
	r.until([]int64{1, 2}, "a trusted bound, with nothing open", func() bool { return fresh(src) })
	trusted, _ := openTrxOf(src)

	// Another session reads innodb_trx every 5 ms, freezing its cache, until stopped.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	reads := make(chan struct{}, 1)
	wg.Go(func() {
		for ctx.Err() == nil {
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.innodb_trx").Scan(&n); err != nil && ctx.Err() == nil {
				t.Errorf("reading innodb_trx: %v", err)
				return
			}
			select {
			case reads <- struct{}{}:
			default:
			}
			t := time.NewTimer(5 * time.Millisecond)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
	})
	<-reads
	held, _ := testenv.MySQLHeld(t, db, table, 1)
	mysqlExec(t, db, "INSERT INTO "+table+" (id) VALUES (2)")
	// The clock passes row 2's stamp by more than the margin, and the source's next read of
	// innodb_trx is due: a stale list that trusted would read row 2 now.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var past bool
		if err := db.QueryRow("SELECT UTC_TIMESTAMP(6) > (SELECT MAX(ts) FROM " + table + ") + INTERVAL 1500000 MICROSECOND").Scan(&past); err != nil {
			t.Fatal(err)
		}
		if past {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the database clock did not pass the rows' stamps")
		}
		time.Sleep(20 * time.Millisecond) // polling the database's clock, with a deadline
	}
	got, _ := readIDs(t, src, r.after)
	o, _ := openTrxOf(src)
	if len(got) != 0 {
		t.Fatalf("with innodb_trx frozen and row 1 held, read %v (bound %s); want nothing", got, o)
	}
	if !o.Active || !o.Bound.Equal(trusted.Bound) || !strings.Contains(o.Reason, "has not been refreshed") {
		t.Fatalf("bound %+v with innodb_trx frozen; want the trusted one (%v), saying why", o, trusted.Bound)
	}
	t.Logf("bound while innodb_trx is frozen: %s", o)
	stop()
	wg.Wait()
	if err := held.Commit(); err != nil {
		t.Fatal(err)
	}
	r.until([]int64{1, 2}, "rows 1 and 2", func() bool { return len(r.got) == 2 })
}

// TestMySQLGrantsScript: what `scripts/sql-grants.sh --mysql --no-principal` prints, run as the
// admin, is all a timestamp+pk poller's user needs: it reads the table, bounded by the open
// transactions. With --no-process it reads by the settle lag alone, and says so.
func TestMySQLGrantsScript(t *testing.T) {
	db, dsn := mysqlDB(t)
	table := lateCommitTable(t, db)
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	mysqlExec(t, db, "INSERT INTO "+table+" VALUES (1, UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE)")
	for _, c := range []struct {
		flags  []string
		active bool
	}{{nil, true}, {[]string{"--no-process"}, false}} {
		userDSN := testenv.MySQLUser(t, db, dsn, "USAGE")
		user, _ := gomysql.ParseDSN(userDSN)
		args := append(append([]string{"../../../scripts/sql-grants.sh", "--mysql", "--no-principal"}, c.flags...), user.User, cfg.DBName+"."+table)
		out, err := osexec.Command("bash", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("sql-grants.sh %v: %v\n%s", args[1:], err, out)
		}
		for stmt := range strings.SplitSeq(string(out), ";\n") {
			var lines []string
			for l := range strings.SplitSeq(stmt, "\n") {
				if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--") {
					lines = append(lines, l)
				}
			}
			if len(lines) > 0 {
				mysqlExec(t, db, strings.Join(lines, " "))
			}
		}
		src := mysqlOpen(t, userDSN, sourcedef.Definition{Table: sourcedef.Table{Name: table}, Columns: []string{"id", "ts"}, PK: []string{"id"},
			Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "ts"}})
		r := &reading{t: t, src: src}
		r.until([]int64{1}, "the row, read by "+user.User, func() bool {
			o, ok := openTrxOf(src)
			return len(r.got) == 1 && ok && (o.Reason == "" || !o.Active)
		})
		if o, _ := openTrxOf(src); o.Active != c.active {
			t.Fatalf("sql-grants.sh %v:\n%s\nbound %s; want active %v", args[1:], out, o, c.active)
		}
	}
}

// openTrxOf is the open-transaction bound the source's stats show (ok false before any read).
func openTrxOf(src *source.Source) (mysql.OpenTrx, bool) {
	for _, d := range src.Stats().Details {
		if o, ok := d.Value.(mysql.OpenTrx); ok {
			return o, true
		}
	}
	return mysql.OpenTrx{}, false
}
