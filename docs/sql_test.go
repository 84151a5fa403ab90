package docs

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/microsoft/go-mssqldb"
	_ "modernc.org/sqlite"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	srcmysql "github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlserver"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// databases are the ```sql classes that run on a database, as the source names its drivers.
var databases = []string{postgres.Name, srcmysql.Name, sqlite.Name, sqlserver.Name}

// The table every recipe starts from, and the row it already holds.
const (
	ordersTable    = "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL)"
	ordersTableSQL = "CREATE TABLE dbo.orders (id BIGINT PRIMARY KEY, customer NVARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL)"
	existingRow    = "INSERT INTO orders (id, customer, amount) VALUES (100, 'grace', 1.00)"
)

// fresh is a new, empty database of one server, made for one block and dropped after it.
type fresh struct {
	driver string
	dsn    string // the new database's, as the source takes it
	db     *sql.DB
}

// newDatabase makes a fresh database on driver's test server (or skips, as testenv does) with the
// orders table and its existing row.
func newDatabase(t *testing.T, driver string) *fresh {
	t.Helper()
	ctx := context.Background()
	name := testenv.Name("docs_")
	f := &fresh{driver: driver}
	var admin *sql.DB
	var drop []string
	var err error
	switch driver {
	case postgres.Name:
		base := testenv.Postgres(t)
		admin = open(t, "pgx", base)
		u, perr := url.Parse(base)
		if perr != nil {
			t.Fatalf("%s: %v", testenv.PostgresVar, perr)
		}
		u.Path = "/" + name
		f.dsn = u.String()
		execSQL(t, admin, "CREATE DATABASE "+name)
		drop = []string{
			"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '" + name + "'",
			"DROP DATABASE " + name + " WITH (FORCE)",
		}
	case srcmysql.Name:
		base := testenv.MySQL(t)
		admin = open(t, "mysql", base)
		cfg, perr := mysql.ParseDSN(base)
		if perr != nil {
			t.Fatalf("%s: %v", testenv.MySQLVar, perr)
		}
		cfg.DBName = name
		f.dsn = cfg.FormatDSN()
		execSQL(t, admin, "CREATE DATABASE "+name)
		drop = []string{"DROP DATABASE " + name}
	case sqlite.Name:
		f.dsn = filepath.Join(t.TempDir(), name+".db")
	case sqlserver.Name:
		base := testenv.SQLServer(t)
		admin = open(t, "sqlserver", base)
		u, perr := url.Parse(base)
		if perr != nil {
			t.Fatalf("%s: %v", testenv.SQLServerVar, perr)
		}
		q := u.Query()
		q.Set("database", name)
		u.RawQuery = q.Encode()
		f.dsn = u.String()
		execSQL(t, admin, "CREATE DATABASE ["+name+"]")
		drop = []string{"ALTER DATABASE [" + name + "] SET SINGLE_USER WITH ROLLBACK IMMEDIATE", "DROP DATABASE [" + name + "]"}
	}
	t.Cleanup(func() {
		if f.db != nil {
			f.db.Close()
		}
		for _, q := range drop {
			if _, err := admin.ExecContext(ctx, q); err != nil {
				t.Logf("cleaning up: %s: %v", q, err)
			}
		}
	})
	if f.db, err = sql.Open(sqlDriver(driver), f.dsn); err != nil {
		t.Fatal(err)
	}
	table := ordersTable
	if driver == sqlserver.Name {
		table = ordersTableSQL
	}
	execSQL(t, f.db, table)
	execSQL(t, f.db, existingRow)
	return f
}

// sqlDriver is database/sql's name of a source driver.
func sqlDriver(driver string) string {
	if driver == postgres.Name {
		return "pgx"
	}
	return driver
}

func open(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func execSQL(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

var (
	delimiterLine = regexp.MustCompile(`(?im)^\s*DELIMITER\s+(\S+)\s*$`)
	goLine        = regexp.MustCompile(`(?im)^\s*GO\s*$`)
)

// script runs a block as the database's own client would: PostgreSQL and SQLite take it whole;
// T-SQL goes in batches separated by GO lines (sqlcmd's); MySQL statement by statement, split at
// the current DELIMITER (the mysql client's). All on one session, so that a block's transaction
// (BEGIN ... COMMIT) holds its statements.
func (f *fresh) script(t *testing.T, b block) { f.scriptOn(t, f.db, b) }

// scriptOn runs a block as script does, on a session of db.
func (f *fresh) scriptOn(t *testing.T, db *sql.DB, b block) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var stmts []string
	switch f.driver {
	case sqlserver.Name:
		stmts = goLine.Split(b.body, -1)
	case srcmysql.Name:
		delim := ";"
		rest := b.body
		for rest != "" {
			loc := delimiterLine.FindStringSubmatchIndex(rest)
			chunk := rest
			if loc != nil {
				chunk = rest[:loc[0]]
			}
			stmts = append(stmts, strings.Split(chunk, delim)...)
			if loc == nil {
				break
			}
			delim, rest = rest[loc[2]:loc[3]], rest[loc[1]:]
		}
	default:
		stmts = []string{b.body}
	}
	for _, s := range stmts {
		if strings.TrimSpace(stripSQLComments(s)) == "" {
			continue
		}
		if _, err := conn.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v\nin:\n%s", b, err, s)
		}
	}
}

// stripSQLComments drops -- comments (for telling an empty statement).
func stripSQLComments(s string) string { return regexp.MustCompile(`--[^\n]*`).ReplaceAllString(s, "") }

// The SQL tests: each ```sql DATABASE block runs on a fresh database of its kind. Their names say
// the database, so that `-run MySQL` (the GitHub workflow's MySQL 8 job) and `-run SQLServer`
// pick theirs.
func TestSQLPostgres(t *testing.T)  { testSQL(t, postgres.Name) }
func TestSQLMySQL(t *testing.T)     { testSQL(t, srcmysql.Name) }
func TestSQLSQLite(t *testing.T)    { testSQL(t, sqlite.Name) }
func TestSQLSQLServer(t *testing.T) { testSQL(t, sqlserver.Name) }

func testSQL(t *testing.T, driver string) {
	t.Parallel()
	bs := blocksOf(t, "sql", driver)
	if len(bs) == 0 {
		t.Fatalf("no ```sql %s blocks: every database has its recipes", driver)
	}
	for _, b := range bs {
		t.Run(fmt.Sprintf("%s:%d", filepath.Base(b.page), b.line), func(t *testing.T) {
			if kind := b.arg("insert"); kind != "" { // run by its outbox block
				outboxBlock(t, bs, b, kind)
				return
			}
			f := newDatabase(t, driver)
			f.principal(t)
			kind, recipe := b.words[1], b.arg("recipe")
			switch {
			case recipe != "":
				f.script(t, b)
				proveRecipe(t, b, f, recipe)
				if cursorColumns[recipe] != "" { // a cursor column: the recipe is pollerctl check's fix
					proveFix(t, b, driver, recipe)
				}
			case b.arg("outbox") != "":
				proveOutbox(t, b, f, insertBlock(t, bs, b, b.arg("outbox")))
			case kind == "grants": // run on the table, to the role
				f.script(t, b)
			case kind == "query":
				f.script(t, b)
			default:
				t.Fatalf("%s: %q is not recipe=KIND, outbox=KIND, insert=KIND, grants or query", b, kind)
			}
		})
	}
}

// principal makes the role the grants name, id-myapp, as the Entra statements would (a recipe may
// grant it what its cursor kind needs).
func (f *fresh) principal(t *testing.T) {
	t.Helper()
	switch f.driver {
	case postgres.Name:
		execSQL(t, f.db, `DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'id-myapp') THEN CREATE ROLE "id-myapp"; END IF; END $$`)
	case srcmysql.Name:
		execSQL(t, f.db, "CREATE USER IF NOT EXISTS 'id-myapp'@'%'")
	case sqlserver.Name:
		execSQL(t, f.db, "CREATE USER [id-myapp] WITHOUT LOGIN")
	}
}

// cursorColumns are the column each recipe adds for its cursor kind (none for change streams).
var cursorColumns = map[string]string{
	state.KindTimestampPK: "updated_at", state.KindInteger: "version", state.KindXID: "txid", state.KindRowversion: "rv",
}

// open opens def's table as a poller of its cursor kind would (in the database's schema, a
// timestamp cursor without a settle lag, a logical one with its publication and slot), and returns
// the source and the connection to write to it through (one whose commits a slot sees at once).
func (f *fresh) open(t *testing.T, b block, def sourcedef.Definition) (*source.Source, *sql.DB) {
	t.Helper()
	if def.Cursor.Kind == state.KindTimestampPK {
		def.SettleLag = sourcedef.NoSettleLag // read up to the database's clock: no waiting in a test
	}
	if f.driver == sqlserver.Name {
		def.Table.Schema = "dbo"
	}
	writer := f.db
	if def.Cursor.Kind == state.KindLogical {
		writer = f.logical(t, &def)
	}
	src, err := drivers.Open(context.Background(), source.Config{Poller: def.Table.Name, Driver: f.driver, DSN: f.dsn, Definition: def})
	if err != nil {
		t.Fatalf("%s: the poller cannot open table %s: %v", b, def.Table.Name, err)
	}
	t.Cleanup(func() { src.Close() })
	return src, writer
}

// proveRecipe opens the recipe's table as a poller of that cursor kind would, and shows that an
// inserted row is read, and that the same row updated is read again.
func proveRecipe(t *testing.T, b block, f *fresh, kind string) {
	t.Helper()
	def := sourcedef.Definition{
		Table:   sourcedef.Table{Name: "orders"},
		Columns: []string{"id", "customer", "amount"},
		Cursor:  sourcedef.Cursor{Kind: kind, Column: cursorColumns[kind]},
		PK:      []string{"id"},
	}
	src, writer := f.open(t, b, def)

	execSQL(t, writer, "INSERT INTO orders (id, customer, amount) VALUES (1, 'ada', 9.50)")
	if state.ChangeKind(kind) {
		proveStream(t, b, src, writer)
		return
	}
	// The keyset: the existing row first (its cursor set by the recipe), then the insert.
	all := backlog(t, src, nil, 2)
	existing := backlog(t, src, all.Oldest, 1)
	if id := keyOf(all.Oldest); id != "100" {
		t.Fatalf("%s: the row that was in the table before the recipe comes first (keyset order), got id %s", b, id)
	}
	inserted := existing.Oldest
	if id := keyOf(inserted); id != "1" {
		t.Fatalf("%s: after the existing row the poller reads the inserted row 1, got id %s", b, id)
	}
	if n := backlog(t, src, inserted, 0).Rows; n != 0 {
		t.Fatalf("%s: %d rows wait after the inserted row, want none", b, n)
	}
	execSQL(t, writer, "UPDATE orders SET amount = amount + 1 WHERE id = 1")
	updated := backlog(t, src, inserted, 1)
	if id := keyOf(updated.Oldest); id != "1" {
		t.Fatalf("%s: after the UPDATE the poller reads row 1 again, got id %s", b, id)
	}
	if string(updated.Oldest.Value) == string(inserted.Value) {
		t.Fatalf("%s: the UPDATE left the cursor column at %s", b, inserted.Value)
	}
}

// backlog returns what waits after the cursor, read with the product's keyset query (the one the
// status probe and each tick's lag use): Rows waiting and the Oldest's cursor. It is the
// poller's read without the bounds that follow other sessions' open transactions (xid,
// rowversion, MySQL's), which tests running beside this one may hold; the source's own tests
// cover those bounds. A timestamp cursor reads only rows older than the database's clock, which
// may not have passed the row's stamp yet (SQLite's has milliseconds): it is read again until
// want rows wait, for at most 5 s, without sleeping.
func backlog(t *testing.T, src *source.Source, after *state.Cursor, want int64) driver.Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := src.Backlog(context.Background(), after, 10)
		if err != nil {
			t.Fatal(err)
		}
		if b.Rows >= want || time.Now().After(deadline) {
			if b.Rows != want {
				t.Fatalf("%d rows wait after %s, want %d: the recipe does not move the cursor column as the poller needs", b.Rows, after.Text(), want)
			}
			return b
		}
	}
}

// keyOf is a keyset cursor's id, or a change's.
func keyOf(c *state.Cursor) string {
	if c == nil {
		return "none"
	}
	return string(c.Tiebreaker["id"])
}

// logical makes the publication and the slot `pollerctl cdc enable` would for def's table, names them in def,
// and returns a connection whose commits logical decoding sees at once (the test server runs
// with synchronous_commit off, which would delay them by up to wal_writer_delay).
func (f *fresh) logical(t *testing.T, def *sourcedef.Definition) *sql.DB {
	t.Helper()
	def.Slot = testenv.Name("docs_slot_")
	def.Publication = def.Slot
	execSQL(t, f.db, `CREATE PUBLICATION `+def.Publication+` FOR TABLE `+def.Table.Name+` WITH (publish = 'insert, update, delete, truncate')`)
	execSQL(t, f.db, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, def.Slot)
	u, err := url.Parse(f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("synchronous_commit", "on")
	u.RawQuery = q.Encode()
	return open(t, "pgx", u.String())
}

// proveStream: a change stream delivers the insert, then the update, each with its op.
func proveStream(t *testing.T, b block, src *source.Source, writer *sql.DB) {
	t.Helper()
	ctx := context.Background()
	first, err := src.Fetch(ctx, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Rows) != 1 || first.Rows[0].Op() != "insert" || fmt.Sprint(first.Rows[0].Key()["id"]) != "1" {
		t.Fatalf("%s: the stream's first change is the insert of row 1; got %d changes", b, len(first.Rows))
	}
	after, err := first.Rows[0].Cursor()
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, writer, "UPDATE orders SET amount = amount + 1 WHERE id = 1")
	next, err := src.Fetch(ctx, &after, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Rows) != 1 || next.Rows[0].Op() != "update" {
		t.Fatalf("%s: after the UPDATE the stream delivers an update of row 1; got %d changes", b, len(next.Rows))
	}
}
