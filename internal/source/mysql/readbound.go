package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// The commit-safe bound of a MySQL timestamp+pk cursor.
//
// A row stamped by the database (DEFAULT / ON UPDATE CURRENT_TIMESTAMP(6), NOW(6) in the
// statement) carries the time its statement started, and becomes visible when its transaction
// commits, possibly much later. The settle lag covers transactions shorter than it; this bound
// covers the rest without guessing: InnoDB lists its open transactions, with the time each began,
// in information_schema.innodb_trx (readable with the PROCESS privilege). A read is kept below
// the start of the oldest open write transaction minus openTrxMargin, as well as below the clock
// minus the settle lag. A transaction open now began before its stamps were taken, so its rows
// sort at or after its start; one that begins later stamps later still; one that committed is
// visible to the read, which starts after the list was taken.
//
// innodb_trx is a cache: InnoDB refreshes it only when nobody has read it for 100 ms
// (trx0i_s.cc, CACHE_MIN_IDLE_TIME_US), so under frequent reads (several pollers, a monitoring
// tool) it can be seconds old and miss a transaction begun since. Each read therefore opens a
// transaction of its own first and trusts the list only if that transaction is in it, running
// the very statement that reads the list (its text carries a random nonce: a list cached from
// an earlier read on the same connection shows that read's nonce): then the list was taken after
// this reader's transaction began, and every transaction begun later stamps later than the
// bound. A stale list is retried twice, 150 ms apart; past that the last trusted bound is kept
// (it stays safe, it only lags; before any, nothing is read) while the list has been stale for
// less than openTrxStaleFor, and after that the read is bounded by the settle lag alone, which
// OpenTrxBound says, with the reason, as it does for a role without PROCESS.
//
// What it does not cover, the settle lag still does: a stamp the application takes before its
// transaction's first InnoDB statement (the InnoDB transaction begins there, not at BEGIN), and
// a statement waiting for a metadata lock (an ALTER TABLE on the table) before its transaction
// begins. trx_started has whole seconds, in the server's system time zone, not the session's, on
// MySQL 8 as on MariaDB: InnoDB fills it with localtime_r, the process's zone (mysql-server
// storage/innobase/handler/i_s.cc, field_store_time_t, whose use of the session's zone is
// compiled out with #if 0). The bound only ever compares it with this reader's own
// transaction's trx_started, so the zone does not matter (a daylight-saving fold in a server's
// system time zone would, for its hour; Azure's servers run in UTC).
//
// A read replica cannot give this bound: a transaction still open on the source is not in the
// replica's innodb_trx (the replica applies it only once the source has committed it and written
// it to its binary log), so a late commit on the source reaches the replica behind the cursor.
// A read-only server (@@read_only, which MySQL's super_read_only turns on too:
// https://dev.mysql.com/doc/refman/8.4/en/server-system-variables.html#sysvar_super_read_only),
// as replicas are run and as Azure's are
// (https://learn.microsoft.com/en-us/azure/mysql/flexible-server/concepts-read-replicas: "a
// read-only server"), is therefore taken for one: the read is bounded by the settle lag alone,
// and OpenTrxBound says why. @@read_only is readable by any user; SHOW REPLICA STATUS would
// need REPLICATION CLIENT. A replica run with read_only OFF is not seen.

// openTrxMargin is how far below the oldest open transaction's start the bound is kept.
const openTrxMargin = time.Second

// How often a process reads innodb_trx per server and user (each read is four round trips), how long a stale list is
// retried and the last trusted bound kept, and how often a role without PROCESS is retried.
const (
	openTrxEvery    = time.Second
	openTrxRetry    = 150 * time.Millisecond
	openTrxStaleFor = time.Minute
	openTrxRecheck  = 5 * time.Minute
)

// openTrxNone is the bound's argument when there is none: after every stamp; openTrxHeld when
// no bound is trusted yet: before every stamp (DATETIME's smallest value). Both lie outside
// TIMESTAMP's range (1970-01-01 00:00:01 to 2038-01-19 03:14:07 UTC), which does not matter: a
// TIMESTAMP column compared with a string constant (go-sql-driver interpolates a time.Time as
// '9999-12-31 23:59:59') is compared as DATETIME, the constant not stored into the column's type
// (mysql-server sql/item_cmpfunc.cc, Item_bool_func2::convert_constant_arg: no conversion for a
// temporal field with a date and a STRING_RESULT constant;
// https://dev.mysql.com/doc/refman/8.4/en/type-conversion.html). MariaDB 10.11 does the same,
// through an index range too (seen here); TestMySQLOpenTrxBound runs on a TIMESTAMP(6) column
// as well as on a DATETIME(6) one, on MariaDB here and on MySQL 8 in the GitHub workflow.
var (
	openTrxNone = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	openTrxHeld = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// OpenTrx says how a MySQL timestamp+pk source's last read was kept behind transactions that may
// still commit (Source.OpenTrxBound).
type OpenTrx struct {
	// Active: the read was bounded by the server's open transactions, as well as by the settle
	// lag.
	Active bool `json:"active"`
	// Bound is that bound, on the database's clock (UTC): rows stamped at or after it wait.
	Bound time.Time `json:"bound,omitzero"`
	// OldestSeconds is how long the oldest open write transaction had been open (whole seconds)
	// and OldestThread its connection id (SHOW PROCESSLIST's Id; 0 for InnoDB's own); both 0
	// when none was open.
	OldestSeconds int64 `json:"oldest_seconds,omitempty"`
	OldestThread  int64 `json:"oldest_thread,omitempty"`
	// Reason says why the read was bounded by the settle lag alone, or why the bound is older than
	// the last read, when it is.
	Reason string `json:"reason,omitempty"`
}

// String is the bound for a log line or a status.
func (o OpenTrx) String() string {
	var s string
	switch {
	case !o.Active:
		return "settle lag only: " + o.Reason
	case o.Bound.Equal(openTrxHeld):
		s = "open transactions (none trusted yet)"
	case o.OldestSeconds > 0 || o.OldestThread > 0:
		s = fmt.Sprintf("open transactions (the oldest, connection %d, open %d s)", o.OldestThread, o.OldestSeconds)
	default:
		s = "open transactions (none open)"
	}
	if o.Reason != "" {
		s += ": " + o.Reason
	}
	return s
}

// ReadBound keeps a timestamp+pk read behind the server's open write transactions too. The
// sources of one process that read one server as one user share a bound (one read of innodb_trx
// a second between them, not one each: every read anyone makes keeps the list from being
// refreshed). A bound read from a fresh list stays safe for every reader of the server; the
// user is in the key because a denial is the user's.
//
// In front of it, each poller's reads are refused while its DATETIME cursor column is stamped by
// the local clock of a server whose zone is not UTC (zoneGuard).
func (Driver) ReadBound(dsn string, d sourcedef.Definition) (driver.ReadBound, bool) {
	if d.Cursor.Kind != state.KindTimestampPK {
		return nil, false
	}
	return &zoneGuard{ReadBound: sharedBound(dsn), def: d}, true
}

// zoneGuard refuses a poller's reads while its cursor is a DATETIME column stamped by the
// server's local clock in a zone that is not UTC (zoneRule's problem), as its newest stamp
// shows (stampedLocal): such a poller would lose the rows of late commits without a word, so it
// delivers nothing until the column is fixed (pollerctl check NAME --fix), rather than deliver
// around the hole. The verdict is read at the
// first read and again every zoneRecheck, so a fix takes effect without a restart; a column or
// zone that cannot be read is left to pollerctl check (the read goes on).
type zoneGuard struct {
	driver.ReadBound
	def sourcedef.Definition

	mu      sync.Mutex
	at      time.Time // when the verdict was read (zero: never)
	problem string    // the problem, "" when none
}

// zoneRecheck is how long a zoneGuard's verdict is kept.
const zoneRecheck = time.Minute

// Arg refuses the read while the column has the problem, else is the shared bound's.
func (z *zoneGuard) Arg(ctx context.Context, db *sql.DB) (any, error) {
	z.mu.Lock()
	if z.at.IsZero() || time.Since(z.at) >= zoneRecheck {
		z.problem, z.at = Driver{}.zoneProblem(ctx, db, z.def), time.Now()
	}
	problem := z.problem
	z.mu.Unlock()
	if problem != "" {
		return nil, source.Mark(fmt.Errorf("%s. The poller reads nothing until the column is fixed: pollerctl check <poller> --fix", problem), source.ErrMisconfigured)
	}
	return z.ReadBound.Arg(ctx, db)
}

// sharedBound is the bound of the server and user of dsn.
func sharedBound(dsn string) *openTrxBound {
	var user, key string
	if cfg, err := mysqlConfig(dsn); err == nil {
		user, key = cfg.User, cfg.Net+"|"+strings.ToLower(cfg.Addr)+"|"+cfg.User
	}
	if key == "" {
		return &openTrxBound{user: user}
	}
	b, _ := sharedOpenTrx.LoadOrStore(key, &openTrxBound{user: user})
	return b.(*openTrxBound)
}

// sharedOpenTrx holds the bounds by server and user (see openTrx).
var sharedOpenTrx sync.Map

// openTrxBound reads and keeps a source's bound. It is safe for concurrent use.
type openTrxBound struct {
	user string // the role, for the GRANT a denial names
	// read, clock and pause are readOpenTrx, the system clock and the pause between reads of a
	// stale list (openTrxRetry) when nil or zero; a unit test gives its own.
	read  func(ctx context.Context, db *sql.DB) (OpenTrx, bool, error)
	clock func() time.Time
	pause time.Duration

	mu     sync.Mutex
	last   OpenTrx   // what the last read used
	readAt time.Time // when last was decided (local clock)
	good   OpenTrx   // the last bound read from a list that was fresh
	goodAt time.Time
	// staleSince is when the reads began to find the list stale (zero while it is fresh).
	staleSince time.Time
	deniedAt   time.Time // when the role was found without PROCESS, or the server read-only
}

// Arg is the bound's argument for a read (a time.Time): arg's.
func (b *openTrxBound) Arg(ctx context.Context, db *sql.DB) (any, error) { return b.arg(ctx, db) }

// Stats says how the last read was kept behind late commits: whether it may have stopped short
// of committed rows (an open write transaction bounded it, or an older bound than a fresh one),
// the bound's text, and its detail for the status.
func (b *openTrxBound) Stats() driver.Stats {
	o, ok := b.current()
	if !ok {
		return driver.Stats{}
	}
	return driver.Stats{HoldBack: o.Active && (o.Reason != "" || o.OldestThread != 0 || o.OldestSeconds != 0), LateCommits: o.String(), Details: []driver.Detail{o.Detail()}}
}

// OpenTrxDetail is the member of the status JSON (a probe) that says how a timestamp+pk
// poller's reads are kept behind late commits.
const OpenTrxDetail = "open_trx"

// Detail is the bound as the status shows it: the page's late commits row, pollerctl status's
// line, marked when the reads are bounded by the settle lag alone.
func (o OpenTrx) Detail() driver.Detail {
	text := o.String()
	line := "late commits: " + text
	if !o.Active {
		line += " (NOT SAFE FROM TRANSACTIONS LONGER THAN THE SETTLE LAG)"
	}
	return driver.Detail{Key: OpenTrxDetail, Value: o, Label: "late commits", Class: "latecommits", Text: text, Line: line, Bad: !o.Active}
}

// arg is the bound's argument for a read: the bound, or openTrxNone when there is none. It reads
// innodb_trx at most once per openTrxEvery; reads in between reuse the last bound, which stays
// safe. A database error other than a denial fails the read.
func (b *openTrxBound) arg(ctx context.Context, db *sql.DB) (time.Time, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	read, clock, pause := readOpenTrx, time.Now, cmp.Or(b.pause, openTrxRetry)
	if b.read != nil {
		read = b.read
	}
	if b.clock != nil {
		clock = b.clock
	}
	now := clock()
	if !b.readAt.IsZero() && now.Sub(b.readAt) < openTrxEvery ||
		!b.deniedAt.IsZero() && now.Sub(b.deniedAt) < openTrxRecheck {
		return b.last.argument(), nil
	}
	var (
		o     OpenTrx
		fresh bool
		err   error
	)
	for attempt := 0; ; attempt++ {
		o, fresh, err = read(ctx, db)
		if err != nil || fresh || attempt == 2 {
			break
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return time.Time{}, ctx.Err()
		case <-t.C:
		}
	}
	var me *gomysql.MySQLError
	switch {
	case errors.Is(err, errReadOnly):
		b.deniedAt = clock() // asked again after openTrxRecheck, as a denial (a promoted replica)
		b.last = OpenTrx{Reason: "the server is read-only (@@read_only=ON), as a read replica is: a replica's information_schema.innodb_trx " +
			"does not list the transactions still open on the source, so transactions longer than the settle lag can commit rows behind the cursor; " +
			"point the poller at the source (primary) server"}
	case errors.As(err, &me) && (me.Number == 1227 || me.Number == 1142 || me.Number == 1044):
		b.deniedAt = clock()
		b.last = OpenTrx{Reason: fmt.Sprintf("the role cannot read information_schema.innodb_trx (MySQL error %d), so transactions longer "+
			"than the settle lag can commit rows behind the cursor; GRANT PROCESS ON *.* TO %s", me.Number, b.grantee())}
	case err != nil:
		return time.Time{}, fmt.Errorf("reading the open transactions (information_schema.innodb_trx): %w", err)
	case fresh:
		b.deniedAt = time.Time{}
		b.good, b.goodAt, b.last, b.staleSince = o, clock(), o, time.Time{}
	default:
		b.deniedAt = time.Time{}
		if b.staleSince.IsZero() {
			b.staleSince = clock()
		}
		why := "information_schema.innodb_trx has not been refreshed for this reader (InnoDB refreshes it only after 100 ms without a reader; other sessions read it more often)"
		switch {
		case clock().Sub(b.staleSince) >= openTrxStaleFor:
			b.last = OpenTrx{Reason: fmt.Sprintf("%s for %v, so transactions longer than the settle lag can commit rows behind the cursor",
				why, clock().Sub(b.staleSince).Round(time.Second))}
		case b.goodAt.IsZero(): // nothing trusted yet: nothing is read until a fresh list comes
			b.last = OpenTrx{Active: true, Bound: openTrxHeld, Reason: "no bound trusted yet, rows wait: " + why}
		default:
			b.last = b.good
			b.last.Reason = fmt.Sprintf("the bound of %s ago: %s", clock().Sub(b.goodAt).Round(time.Second), why)
		}
	}
	b.readAt = clock()
	return b.last.argument(), nil
}

func (o OpenTrx) argument() time.Time {
	if !o.Active {
		return openTrxNone
	}
	return o.Bound
}

func (b *openTrxBound) grantee() string {
	if b.user == "" {
		return "the poller's user"
	}
	return "'" + b.user + "'@'%' (or its host)"
}

// current is what the last read used; ok is false before any read.
func (b *openTrxBound) current() (OpenTrx, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last, !b.readAt.IsZero()
}

// openTrxQuery lists this connection's transaction first, then the oldest open write
// transaction: one that is not READ ONLY and has modified rows, holds table locks or is running
// a statement. (A transaction idle in between statements that has written nothing has no stamp
// waiting to commit: its next statement stamps later than this list.)
// The statement text of this connection's row is returned, to find the nonce in.
const openTrxQuery = `SELECT trx_mysql_thread_id = CONNECTION_ID(), trx_mysql_thread_id, trx_started,
  IF(trx_mysql_thread_id = CONNECTION_ID(), trx_query, NULL)
FROM information_schema.innodb_trx
WHERE trx_mysql_thread_id = CONNECTION_ID()
   OR NOT (trx_is_read_only = 1 OR (trx_rows_modified = 0 AND trx_tables_locked = 0 AND trx_query IS NULL))
ORDER BY 1 DESC, trx_started
LIMIT 2`

// errReadOnly is readOpenTrx's answer on a read-only server, taken for a replica (above).
var errReadOnly = errors.New("the server is read-only")

// readOpenTrx reads the bound on a connection of its own: the clock, then a transaction of its
// own begun, then the list. fresh says whether the list has that transaction in it.
func readOpenTrx(ctx context.Context, db *sql.DB) (o OpenTrx, fresh bool, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return o, false, err
	}
	defer conn.Close()
	var (
		t0       time.Time
		readOnly string // 0 or 1 (a word, OFF or ON, is taken too)
	)
	if err := conn.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(6), @@global.read_only").Scan(sqlTime{&t0}, &readOnly); err != nil {
		return o, false, err
	}
	if readOnly != "0" && !strings.EqualFold(readOnly, "OFF") {
		return o, false, errReadOnly
	}
	if _, err := conn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
		return o, false, err
	}
	defer func() {
		if _, cerr := conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); cerr != nil && err == nil {
			err = cerr
		}
	}()
	nonce := strconv.FormatUint(rand.Uint64(), 36)
	rows, err := conn.QueryContext(ctx, "/* pseudotrigger open-transaction bound "+nonce+" */ "+openTrxQuery)
	if err != nil {
		return o, false, err
	}
	defer rows.Close()
	type trx struct {
		mine    bool
		thread  int64
		started time.Time
		query   sql.NullString
	}
	var list []trx
	for rows.Next() {
		var x trx
		if err := rows.Scan(&x.mine, &x.thread, sqlTime{&x.started}, &x.query); err != nil {
			return o, false, err
		}
		list = append(list, x)
	}
	if err := rows.Err(); err != nil {
		return o, false, err
	}
	if len(list) == 0 || !list[0].mine || !strings.Contains(list[0].query.String, nonce) {
		return o, false, nil
	}
	o = OpenTrx{Active: true, Bound: t0}
	if len(list) == 2 {
		// The other's start, on the database's clock: its trx_started and this transaction's
		// differ by d, and this one began at or after t0, so in or after t0's second.
		d := list[1].started.Sub(list[0].started)
		if started := t0.Truncate(time.Second).Add(d); started.Before(o.Bound) {
			o.Bound = started
		}
		o.OldestThread = list[1].thread
		o.OldestSeconds = int64(t0.Sub(t0.Truncate(time.Second).Add(d)) / time.Second)
	}
	o.Bound = o.Bound.Add(-openTrxMargin)
	return o, true, nil
}
