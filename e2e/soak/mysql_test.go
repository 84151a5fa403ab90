package soak

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
)

// mysqlSlack is how far behind the database's clock minus the settle lag a MySQL timestamp+pk
// source's bound may be when no transaction holds it back: the open-transaction bound's 1 s
// margin, plus the whole seconds of innodb_trx's trx_started.
const mysqlSlack = 2 * time.Second

// mysqlScenarios are the late-commit cases on MySQL and MariaDB. The timestamp+pk scenarios
// differ in the poller's role as much as in the lag: with the PROCESS privilege the source keeps
// its reads behind the server's open write transactions (information_schema.innodb_trx), without
// it the settle lag is all it has. Scenario 1 is therefore run by a role without PROCESS too, so
// that its zero shows what the lag alone does, and scenario 3 has the lag of scenario 2 and a
// role with PROCESS: the same hazard, covered by the open-transaction bound.
func mysqlScenarios(w workload) []scenario {
	above, below := 3*w.maxTxn, w.maxTxn/10
	return []scenario{
		{name: "timestamp+pk_lag_above_txn_no_PROCESS", kind: state.KindTimestampPK, lag: above, bound: boundLag, updates: true, expect: missNothing},
		{name: "timestamp+pk_lag_below_txn_no_PROCESS", kind: state.KindTimestampPK, lag: below, bound: boundLag, updates: true, expect: missSomething},
		{name: "timestamp+pk_lag_below_txn_PROCESS", kind: state.KindTimestampPK, lag: below, bound: boundOpenTrx, updates: true, expect: missNothing},
		// AUTO_INCREMENT hands out its values when the statement runs, as a sequence does.
		{name: "integer_lag_above_txn", kind: state.KindInteger, lag: above, bound: boundNone, expect: missSomething},
	}
}

// TestLateCommitMySQL is TestLateCommit on MySQL or MariaDB (MYSQL_TEST_DSN, a user with every
// privilege): every scenario at once, each in a table of its own in the test database, reported
// in one table and checked in subtests. See the package documentation.
func TestLateCommitMySQL(t *testing.T) {
	dsn := testenv.MySQL(t)
	w := newWorkload(t)
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("%s: %v", redact.DSN(dsn), err)
	}
	// The writers' sessions stamp rows in UTC, as the source reads them.
	cfg.ParseTime, cfg.Loc = true, time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("opening %s: %v", redact.DSN(dsn), err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxIdleConns(4 * w.writers * len(mysqlScenarios(w)))
	if err := db.PingContext(t.Context()); err != nil {
		t.Fatalf("connecting to %s: %v", redact.DSN(dsn), err)
	}
	// The role of the scenarios bounded by the settle lag alone: it may read the tables and
	// nothing else, as sql-grants.sh --mysql --no-process grants.
	noProcess := testenv.MySQLUser(t, db, dsn, "SELECT")
	soak(t, mysqlDB{conn: db, dsn: dsn, noProcess: noProcess}, w, mysqlScenarios(w))
}

// mysqlDB is the soak's MySQL or MariaDB: each scenario in a table of its own in the test
// database, whose name needs quoting (a hyphen, spaces), so that every statement the
// source makes shows that it quotes it.
type mysqlDB struct {
	conn      *sql.DB
	dsn       string // the test's user: every privilege, PROCESS among them
	noProcess string // a user with SELECT on the test database only
}

func (mysqlDB) String() string { return "MySQL/MariaDB" }

func (m mysqlDB) db() *sql.DB { return m.conn }

func quoteMySQL(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// create makes the scenario's table: an AUTO_INCREMENT key, and a DATETIME(6) that MySQL sets to
// the statement's start (CURRENT_TIMESTAMP(6) is fixed when the statement begins) on insert and
// on update. A transaction held open after its statement commits a stamp from the past.
func (m mysqlDB) create(ctx context.Context, s scenario, cleanup func(func())) (*table, error) {
	name := testenv.Name("soak-") + " " + strings.NewReplacer("timestamp+pk", "ts", "_", " ").Replace(s.name)
	t := &table{quoted: quoteMySQL(name), name: name, columns: []string{"id", "version", "writer", "updated_at"},
		driver: mysql.Name, dsn: m.dsn}
	if s.bound == boundLag {
		t.dsn = m.noProcess
	}
	if _, err := m.conn.ExecContext(ctx, `CREATE TABLE `+t.quoted+` (
			id         BIGINT AUTO_INCREMENT PRIMARY KEY,
			version    BIGINT NOT NULL DEFAULT 1,
			writer     BIGINT NOT NULL,
			payload    TEXT NOT NULL,
			updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
			KEY `+quoteMySQL("by updated_at, id")+` (updated_at, id)
		) ENGINE=InnoDB`); err != nil {
		return nil, fmt.Errorf("creating the soak table %s: %w", t.quoted, err)
	}
	cleanup(func() { _, _ = m.conn.ExecContext(context.Background(), `DROP TABLE `+t.quoted) })
	return t, nil
}

func (mysqlDB) insert(ctx context.Context, tx *sql.Tx, t *table, writer int, payload string) (rowKey, error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO `+t.quoted+` (writer, payload) VALUES (?, ?)`, writer, payload)
	if err != nil {
		return rowKey{}, err
	}
	id, err := res.LastInsertId()
	return rowKey{id, 1}, err
}

// update counts the version up; ON UPDATE takes the new timestamp.
func (mysqlDB) update(ctx context.Context, tx *sql.Tx, t *table, id int64, payload string) (k rowKey, err error) {
	res, err := tx.ExecContext(ctx, `UPDATE `+t.quoted+` SET version = version + 1, payload = ? WHERE id = ?`, payload, id)
	if err != nil {
		return k, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return k, fmt.Errorf("updating row %d: %d rows affected (%v)", id, n, err)
	}
	err = tx.QueryRowContext(ctx, `SELECT id, version FROM `+t.quoted+` WHERE id = ?`, id).Scan(&k.id, &k.version)
	return k, err
}

// settled: every row is older than the database's clock minus the lag and the slack of the
// open-transaction bound, and, when the source's reads are bounded by the open transactions,
// its last bound is past the newest row by more than a second (a transaction that began after
// the read that gave the bound can bring the next one down by up to a second: trx_started has
// whole seconds). That bound is the source's own reading of innodb_trx, so a write transaction
// left open by anything else on the server (a test of another package) keeps the soak waiting,
// as it keeps the poller's reads behind it; the soak does not read innodb_trx itself, since every
// reader keeps InnoDB from refreshing that list for the others.
func (m mysqlDB) settled(ctx context.Context, t *table, s scenario, src tick.Source) (bool, error) {
	if s.kind != state.KindTimestampPK {
		return true, nil // no bound
	}
	var newest sql.NullTime
	var old bool
	if err := m.conn.QueryRowContext(ctx, `SELECT MAX(updated_at), COALESCE(MAX(updated_at) < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND, TRUE) FROM `+
		t.quoted, (s.effectiveLag()+mysqlSlack).Microseconds()).Scan(&newest, &old); err != nil {
		return false, fmt.Errorf("checking whether the rows are inside the bound: %w", err)
	}
	if !old {
		return false, nil
	}
	if o, ok := openTrxOf(src.Stats()); ok && o.Active && newest.Valid {
		return o.Bound.Add(-time.Second).After(newest.Time), nil
	}
	return true, nil
}

func (mysqlDB) missed(t *table, kind string, ids []int64) (string, []any) {
	cursor := `''`
	if kind == state.KindTimestampPK {
		cursor = `CONCAT('updated_at ', DATE_FORMAT(updated_at, '%H:%i:%s.%f'))`
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return `SELECT id, version, writer, ` + cursor + ` FROM ` + t.quoted + ` WHERE id IN (?` + strings.Repeat(`, ?`, len(ids)-1) + `) ORDER BY id`, args
}
