package testenv

import (
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// MySQLUser creates a MySQL user with only grants (a privilege list such as "SELECT") on dsn's
// database, drops it when the test ends, and returns its DSN: the role a poller runs as, without
// the root's privileges (PROCESS among them). db is a connection as dsn's user. On MySQL 8,
// whose users sign in with caching_sha2_password, the driver asks the server for its RSA key to
// send the password over a connection without TLS; MariaDB signs it in directly.
func MySQLUser(t testing.TB, db *sql.DB, dsn, grants string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	user := Name("u_")
	pass := "pw-" + user
	for _, q := range []string{
		"CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + pass + "'",
		"GRANT " + grants + " ON `" + cfg.DBName + "`.* TO '" + user + "'@'%'",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { db.Exec("DROP USER '" + user + "'@'%'") })
	c := cfg.Clone()
	c.User, c.Passwd = user, pass
	return c.FormatDSN()
}

// MySQLHeld begins a transaction on db, inserts the row id into table (its other columns take
// their defaults: a stamp taken now) and returns the transaction, still open, and its
// connection id; it is rolled back when the test ends unless committed. The late-commit hazard:
// a row stamped now that becomes visible only when the transaction commits.
func MySQLHeld(t testing.TB, db *sql.DB, table string, id int64) (*sql.Tx, int64) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	var thread int64
	if err := tx.QueryRow("SELECT CONNECTION_ID()").Scan(&thread); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO "+table+" (id) VALUES (?)", id); err != nil {
		t.Fatal(err)
	}
	return tx, thread
}
