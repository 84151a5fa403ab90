package testenv

import (
	"database/sql"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQLOrdersTable opens the MySQL/MariaDB of MySQLVar (or skips, as MySQL does) with
// MySQLBaselineDB, makes table with MySQLOrders, and returns the database, closed when the test
// ends, and its DSN.
func MySQLOrdersTable(tb testing.TB, table string, rows int) (*sql.DB, string) {
	tb.Helper()
	dsn := MySQL(tb)
	db, err := MySQLBaselineDB(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if err := MySQLOrders(db, table, rows, tb.Logf); err != nil {
		tb.Fatal(err)
	}
	return db, dsn
}

// mysqlFillChunk is how many rows one INSERT ... SELECT of MySQLOrders adds (and logs).
const mysqlFillChunk = 100_000

// MySQLOrders creates, unless it exists, a benchmark orders table (the example's shape) of rows
// rows one microsecond apart, stamped (DATETIME(6), taken as UTC) from two hours before now,
// indexed on (updated_at, id) and analysed. It is filled by INSERT ... SELECT from a table of
// the numbers 0..99,999 (a cross join of digits: portable between MariaDB and MySQL 8) in chunks
// of 100,000 rows, each logged with logf, into a table under another name that is renamed to
// table only when full, so that an interrupted fill is never taken for a finished one.
func MySQLOrders(db *sql.DB, table string, rows int, logf func(string, ...any)) error {
	var one int
	if db.QueryRow("SELECT 1 FROM "+table+" LIMIT 1").Scan(&one) == nil {
		return nil
	}
	fill, nums := table+"_fill", table+"_nums"
	exec := func(qs ...string) error {
		for _, q := range qs {
			if _, err := db.Exec(q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	}
	t0 := time.Now()
	logf("creating %s: %d rows ...", table, rows)
	if err := exec(
		"DROP TABLE IF EXISTS "+fill+", "+nums,
		"CREATE TABLE "+nums+" (n INT NOT NULL PRIMARY KEY)",
		"INSERT INTO "+nums+" SELECT a.d + 10*b.d + 100*c.d + 1000*d.d + 10000*e.d FROM "+
			"(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL "+
			"SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a "+
			"CROSS JOIN (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL "+
			"SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b "+
			"CROSS JOIN (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL "+
			"SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c "+
			"CROSS JOIN (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL "+
			"SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) d "+
			"CROSS JOIN (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL "+
			"SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) e",
		"CREATE TABLE "+fill+" (id BIGINT NOT NULL PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL, "+
			"updated_at DATETIME(6) NOT NULL, INDEX ix_updated_at_id (updated_at, id)) ENGINE=InnoDB",
	); err != nil {
		return err
	}
	// Every chunk stamps from the same start, on the server's clock, taken once.
	var from string
	if err := db.QueryRow("SELECT CAST(UTC_TIMESTAMP(6) - INTERVAL 2 HOUR AS CHAR)").Scan(&from); err != nil {
		return err
	}
	from = "'" + from + "'"
	for base := 0; base < rows; base += mysqlFillChunk {
		id := strconv.Itoa(base) + " + n + 1"
		if err := exec("INSERT INTO " + fill + " SELECT " + id + ", CONCAT('customer ', " + id + "), ((" + id + ") % 100000) / 100.0, " +
			"TIMESTAMP(" + from + ") + INTERVAL (" + id + ") MICROSECOND FROM " + nums +
			" WHERE n < " + strconv.Itoa(min(mysqlFillChunk, rows-base)) + " ORDER BY n"); err != nil {
			return err
		}
		logf("%s: %d of %d rows (%s)", table, min(base+mysqlFillChunk, rows), rows, time.Since(t0).Round(time.Second))
	}
	if err := exec("ANALYZE TABLE "+fill, "RENAME TABLE "+fill+" TO "+table, "DROP TABLE "+nums); err != nil {
		return err
	}
	logf("created %s in %s", table, time.Since(t0).Round(time.Second))
	return nil
}

// MySQLKeysetLoop is the hand-written baseline over a MySQLOrders table: database/sql with
// go-sql-driver/mysql on a connection set up as the source sets its own (parseTime=true,
// loc=UTC, interpolateParams=true: one round trip of the text protocol per read), typed scans,
// and the keyset on (updated_at, id) in the expanded form with a leading range, which MariaDB
// reads as a range of the index (a row comparison, (a, b) > (?, ?), it reads with a scan of the
// whole index from its start). It returns the rows read.
func MySQLKeysetLoop(db *sql.DB, table string, batch int) (int, error) {
	return ordersKeysetLoop(db,
		`SELECT id, customer, amount, updated_at FROM `+table+` ORDER BY updated_at, id LIMIT ?`,
		`SELECT id, customer, amount, updated_at FROM `+table+` WHERE updated_at >= ? AND (updated_at > ? OR id > ?) ORDER BY updated_at, id LIMIT ?`,
		batch, func(ts time.Time, id int64) []any { return []any{ts, ts, id} })
}

// MySQLBaselineDB opens dsn as MySQLKeysetLoop expects: parseTime=true, loc=UTC and
// interpolateParams=true, whatever dsn says.
func MySQLBaselineDB(dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}
