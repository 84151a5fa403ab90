package sqlserver_test

import (
	"database/sql"
	"fmt"
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

// TestChangeTrackingPagingSQLServer pages Change Tracking backlogs against the SQL Server of
// MSSQL_TEST_DSN (skipped without it; the GitHub workflow's SQL Server job sets it):
//   - a row inserted in a backlog and updated before the poller came to it arrives as an insert
//     although a batch ends after its insert's version (the reads of one backlog keep one base);
//   - as a login with only the grants docs/sqlserver.md lists, changes come without a commit
//     time, and with one once the login has VIEW SERVER STATE;
//   - one transaction of 100,000 changes read in batches of 500: every change once, and the time
//     each batch took, logged (CHANGETABLE computes every change after its base for each read).
func TestChangeTrackingPagingSQLServer(t *testing.T) {
	admin, db, dsn, name := ctDatabase(t, testenv.SQLServer(t))
	exec := func(db *sql.DB, q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(admin, "ALTER DATABASE ["+name+"] SET ALLOW_SNAPSHOT_ISOLATION ON")
	open := func(table string) *source.Source {
		t.Helper()
		exec(db, "CREATE TABLE "+table+" (id BIGINT PRIMARY KEY, v NVARCHAR(20) NOT NULL)")
		exec(db, "ALTER TABLE "+table+" ENABLE CHANGE_TRACKING")
		src, err := drivers.Open(ctx, source.Config{Poller: table, Driver: sqlserver.Name, DSN: dsn, Definition: sourcedef.Definition{
			Table: sourcedef.Table{Schema: "dbo", Name: table}, Columns: []string{"id", "v"}, Cursor: sourcedef.Cursor{Kind: state.KindChangeTracking}, PK: []string{"id"}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		return src
	}

	t.Run("insert overtaken by an update", func(t *testing.T) {
		src := open("overtaken")
		// Version a: ids 1-10; version b: id 11; version c: id 5 updated. Read in batches of 10:
		// the first holds a's nine other rows and 11 (5 is at c now), and the next resumes after
		// b, past 5's insert: from there, CHANGETABLE alone calls 5 an update.
		inTx(t, db, true, "INSERT INTO overtaken (id, v) SELECT value, 'a' FROM GENERATE_SERIES(CAST(1 AS bigint), CAST(10 AS bigint))")
		inTx(t, db, true, "INSERT INTO overtaken (id, v) VALUES (11, 'b')")
		inTx(t, db, true, "UPDATE overtaken SET v = 'c' WHERE id = 5")
		ops := map[int64]string{}
		fetchAll(t, src, 10, 10, func(r row.Row) bool {
			id, _ := r.Key()["id"].(int64)
			if _, again := ops[id]; again {
				t.Errorf("id %d came twice", id)
			}
			ops[id] = r.Op()
			return true
		})
		if len(ops) != 11 {
			t.Errorf("%d of 11 rows came: %v", len(ops), ops)
		}
		for id, op := range ops {
			if op != row.OpInsert {
				t.Errorf("id %d came as %s; every row was inserted after the poller's beginning", id, op)
			}
		}
	})

	// As a login with the grants docs/sqlserver.md lists for changetracking (SELECT, VIEW CHANGE
	// TRACKING): the changes come, without a commit time; with VIEW SERVER STATE too, with it.
	t.Run("least privilege", func(t *testing.T) {
		exec(db, "CREATE TABLE granted (id BIGINT PRIMARY KEY, v NVARCHAR(20) NOT NULL)")
		exec(db, "ALTER TABLE granted ENABLE CHANGE_TRACKING")
		login, reader := leastPrivilege(t, admin, db, dsn)
		exec(db, "GRANT SELECT ON dbo.granted TO ["+login+"]")
		exec(db, "GRANT VIEW CHANGE TRACKING ON dbo.granted TO ["+login+"]")
		def := sourcedef.Definition{Table: sourcedef.Table{Schema: "dbo", Name: "granted"}, Columns: []string{"id", "v"}, Cursor: sourcedef.Cursor{Kind: state.KindChangeTracking}, PK: []string{"id"}}
		read := func(id int) (row.Transaction, bool) {
			t.Helper()
			src, err := drivers.Open(ctx, source.Config{Poller: "granted", Driver: sqlserver.Name, DSN: reader, Definition: def})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			inTx(t, db, true, fmt.Sprintf("INSERT INTO granted (id, v) VALUES (%d, 'x')", id))
			var tx row.Transaction
			found := false
			fetchAll(t, src, 100, 100, func(r row.Row) bool {
				if r.Key()["id"] == int64(id) {
					tx, found = r.Transaction()
					return false
				}
				return true
			})
			if !found {
				t.Fatalf("the insert of %d never came, or without its transaction", id)
			}
			return tx, found
		}
		if tx, ok := read(1); !ok || !tx.CommitTime.IsZero() {
			t.Errorf("without VIEW SERVER STATE: transaction %+v (%v), want one without a commit time", tx, ok)
		}
		exec(admin, "GRANT VIEW SERVER STATE TO ["+login+"]")
		tx, ok := read(2)
		if !ok || tx.CommitTime.IsZero() || time.Since(tx.CommitTime).Abs() > 5*time.Minute {
			t.Errorf("with VIEW SERVER STATE: transaction %+v (%v), want a commit time of the last minutes (UTC)", tx, ok)
		}
	})

	t.Run("100000 changes in one transaction", func(t *testing.T) {
		src := open("large")
		const n, batch = 100_000, 500
		inTx(t, db, true, fmt.Sprintf("INSERT INTO large (id, v) SELECT value, 'x' FROM GENERATE_SERIES(CAST(1 AS bigint), CAST(%d AS bigint))", n))
		seen := make(map[int64]bool, n)
		start := time.Now()
		took := fetchAll(t, src, batch, 2*n/batch, func(r row.Row) bool {
			id, _ := r.Key()["id"].(int64)
			if seen[id] {
				t.Fatalf("id %d came twice", id)
			}
			seen[id] = true
			return true
		})
		total := time.Since(start)
		if len(seen) != n {
			t.Fatalf("%d of %d changes in %d batches", len(seen), n, len(took))
		}
		k := len(took) / 10
		t.Logf("100000 changes of one transaction in %d batches of %d: %v in all (%.0f changes/s); first tenth of the batches %v each, last tenth %v each",
			len(took), batch, total.Round(time.Millisecond), float64(n)/total.Seconds(), mean(took[:k]), mean(took[len(took)-k:]))
	})
}

func mean(d []time.Duration) time.Duration {
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return (sum / time.Duration(max(len(d), 1))).Round(time.Microsecond)
}
