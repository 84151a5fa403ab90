package sqlserver_test

import (
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlserver"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestKeyTypesSQLServer reads, in batches of 2, tables whose cursor and key columns are of the
// types older schemas hold (datetime, smalldatetime, datetimeoffset; char and varchar keys with
// punctuation and mixed case under SQL_Latin1_General_CP1_CI_AS, where the Unicode and the
// non-Unicode orders differ), with many ties, as a login that has only the grants
// docs/sqlserver.md lists (SELECT on the table): every row must come exactly once. Skipped
// without MSSQL_TEST_DSN (the GitHub workflow's SQL Server job sets it).
func TestKeyTypesSQLServer(t *testing.T) {
	dsn := testenv.SQLServer(t)
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != "sqlserver" {
		t.Skipf("%s is not a sqlserver:// URL: the test makes a database and a login of its own", testenv.SQLServerVar)
	}
	admin := testenv.DB(t, "sqlserver", dsn)
	exec := func(db *sql.DB, q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	name := testenv.Name("keys_")
	exec(admin, "CREATE DATABASE ["+name+"] COLLATE SQL_Latin1_General_CP1_CI_AS")
	t.Cleanup(func() {
		_, _ = admin.ExecContext(ctx, "ALTER DATABASE ["+name+"] SET SINGLE_USER WITH ROLLBACK IMMEDIATE")
		_, _ = admin.ExecContext(ctx, "DROP DATABASE ["+name+"]")
	})
	q := u.Query()
	q.Set("database", name)
	u.RawQuery = q.Encode()
	db := testenv.DB(t, "sqlserver", u.String())
	login, reader := leastPrivilege(t, admin, db, u.String())

	// Each table: 60 rows, three to a cursor value, so that batches of 2 end between ties.
	for _, c := range []struct {
		name, ddl, cursor, key, stamp string
	}{
		{"datetime", "ts DATETIME NOT NULL, k INT NOT NULL", "ts", "k",
			"DATEADD(millisecond, (n / 3) * 3, CAST('2026-01-01T00:00:00' AS datetime))"},
		{"smalldatetime", "ts SMALLDATETIME NOT NULL, k INT NOT NULL", "ts", "k",
			"DATEADD(minute, n / 3, CAST('2026-01-01T00:00:00' AS smalldatetime))"},
		{"datetimeoffset", "ts DATETIMEOFFSET(7) NOT NULL, k INT NOT NULL", "ts", "k",
			"TODATETIMEOFFSET(DATEADD(second, n / 3, CAST('2026-01-01T00:00:00' AS datetime2)), CASE n % 2 WHEN 0 THEN '+02:00' ELSE '-05:00' END)"},
		{"varchar", "ts DATETIME2(7) NOT NULL, k VARCHAR(20) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL", "ts", "k",
			"CAST('2026-01-01T00:00:00' AS datetime2)"},
		{"char", "ts DATETIME2(7) NOT NULL, k CHAR(12) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL", "ts", "k",
			"CAST('2026-01-01T00:00:00' AS datetime2)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			table := "t_" + c.name
			exec(db, "CREATE TABLE "+table+" ("+c.ddl+", CONSTRAINT pk_"+table+" PRIMARY KEY (k))")
			exec(db, "CREATE INDEX ix_"+table+" ON "+table+" ("+c.cursor+", "+c.key+")")
			// Keys with punctuation and mixed case: 'a-c' < 'ab' under the SQL collation's
			// non-Unicode rules, N'a-c' > N'ab' under Unicode's.
			key := "n"
			if c.name == "varchar" || c.name == "char" {
				key = "CONCAT(CHAR(97 + n % 3), CASE n % 4 WHEN 0 THEN '-' WHEN 1 THEN '' WHEN 2 THEN '''' ELSE ' _' END, CHAR(65 + n % 7), n)"
			}
			exec(db, "INSERT INTO "+table+" (ts, k) SELECT "+c.stamp+", "+key+" FROM (SELECT TOP (60) ROW_NUMBER() OVER (ORDER BY (SELECT NULL)) - 1 AS n FROM sys.all_objects) s")
			exec(db, "GRANT SELECT ON "+table+" TO ["+login+"]")
			def := sourcedef.Definition{Table: sourcedef.Table{Schema: "dbo", Name: table}, Columns: []string{c.cursor, c.key},
				Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: c.cursor}, PK: []string{c.key}}
			src, err := drivers.Open(ctx, source.Config{Poller: table, Driver: sqlserver.Name, DSN: reader, Definition: def})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			seen := map[string]int{}
			fetchAll(t, src, 2, 100, func(r row.Row) bool {
				seen[fmt.Sprint(r.Get(c.key))]++
				return true
			})
			var twice []string
			for k, n := range seen {
				if n != 1 {
					twice = append(twice, fmt.Sprintf("%q x%d", k, n))
				}
			}
			if len(seen) != 60 || len(twice) > 0 {
				t.Errorf("%d of 60 keys read; read more than once: %s", len(seen), strings.Join(twice, ", "))
			}
		})
	}
}

// leastPrivilege makes a login of the test's own, a user of it in db's database with no
// permission yet (the test grants what docs/sqlserver.md lists), and returns its name and the
// database's DSN (dsn) signed in as it. The login is dropped when the test ends.
func leastPrivilege(t *testing.T, admin, db *sql.DB, dsn string) (login, readerDSN string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	login = testenv.Name("reader_")
	password := "Reader-" + login + "-1a"
	for _, run := range []struct {
		db *sql.DB
		q  string
	}{
		{admin, "CREATE LOGIN [" + login + "] WITH PASSWORD = '" + password + "', CHECK_POLICY = OFF"},
		{db, "CREATE USER [" + login + "] FOR LOGIN [" + login + "]"},
	} {
		if _, err := run.db.ExecContext(ctx, run.q); err != nil {
			t.Fatalf("%s: %v", run.q, err)
		}
	}
	t.Cleanup(func() {
		// The login's sessions end with the test's connections; the database goes first.
		_, _ = admin.ExecContext(ctx, "DROP LOGIN ["+login+"]")
	})
	u.User = url.UserPassword(login, password)
	return login, u.String()
}

// fetchAll reads src from the beginning in batches of limit, as a poller does, giving each row
// to each until it says stop, or a batch comes back empty; more than most batches fail the test
// (a cursor stuck on ties, say). It returns each fetch's time.
func fetchAll(t *testing.T, src *source.Source, limit, most int, each func(row.Row) bool) []time.Duration {
	t.Helper()
	var cur *state.Cursor
	var took []time.Duration
	for {
		if len(took) == most {
			t.Fatalf("still reading after %d batches of %d", most, limit)
		}
		t0 := time.Now()
		b, err := src.Fetch(ctx, cur, limit)
		if err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(t0))
		if len(b.Rows) == 0 {
			return took
		}
		for _, r := range b.Rows {
			if !each(r) {
				return took
			}
		}
		cur = b.To
	}
}
