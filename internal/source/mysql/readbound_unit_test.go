package mysql

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// TestMySQLOpenTrxBoundStates walks the bound through what innodb_trx can answer, on a fake clock:
// stale before any fresh list (nothing is read), fresh (the bound), reused within a second,
// stale (the last trusted bound, saying so), stale for a minute (the settle lag alone, saying
// so), fresh again, and a role without PROCESS (the settle lag alone, naming the GRANT, asked
// again only after five minutes).
func TestMySQLOpenTrxBoundStates(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	type answer struct {
		o     OpenTrx
		fresh bool
		err   error
	}
	var answers []answer
	reads := 0
	b := &openTrxBound{user: "app", clock: func() time.Time { return now }, pause: time.Nanosecond,
		read: func(context.Context, *sql.DB) (OpenTrx, bool, error) {
			reads++
			if len(answers) == 0 {
				t.Fatal("an unexpected read of innodb_trx")
			}
			a := answers[0]
			answers = answers[1:]
			return a.o, a.fresh, a.err
		}}
	stale := answer{}
	step := func(name string, give []answer, advance time.Duration, wantArg time.Time, wantReads int, wantText string) {
		t.Helper()
		now = now.Add(advance)
		answers, reads = give, 0
		arg, err := b.arg(context.Background(), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		o, _ := b.current()
		if !arg.Equal(wantArg) || reads != wantReads || !strings.Contains(o.String(), wantText) || len(answers) != 0 {
			t.Fatalf("%s: argument %v after %d reads (%d answers left), bound %q; want %v after %d reads, %q",
				name, arg, reads, len(answers), o, wantArg, wantReads, wantText)
		}
	}
	bound1 := now.Add(-3 * time.Second)
	fresh1 := answer{o: OpenTrx{Active: true, Bound: bound1, OldestThread: 42, OldestSeconds: 2}, fresh: true}
	bound2 := now.Add(time.Minute)
	fresh2 := answer{o: OpenTrx{Active: true, Bound: bound2}, fresh: true}

	step("stale before any fresh list", []answer{stale, stale, stale}, 0, openTrxHeld, 3, "open transactions (none trusted yet): no bound trusted yet, rows wait")
	step("fresh", []answer{fresh1}, time.Second, bound1, 1, "open transactions (the oldest, connection 42, open 2 s)")
	step("within a second: reused", nil, 500*time.Millisecond, bound1, 0, "connection 42")
	step("stale: the last trusted bound", []answer{stale, stale, stale}, 20*time.Second, bound1, 3, "the bound of 21s ago: information_schema.innodb_trx has not been refreshed")
	step("stale then fresh on the retry", []answer{stale, fresh2}, 10*time.Second, bound2, 2, "open transactions (none open)")
	step("stale again", []answer{stale, stale, stale}, time.Second, bound2, 3, "the bound of 1s ago")
	step("still stale, 59 s on", []answer{stale, stale, stale}, 59*time.Second, bound2, 3, "the bound of 1m0s ago")
	step("stale for a minute: the settle lag alone", []answer{stale, stale, stale}, time.Second, openTrxNone, 3,
		"settle lag only: information_schema.innodb_trx has not been refreshed for this reader (InnoDB refreshes it only after 100 ms without a reader; other sessions read it more often) for 1m0s")
	step("fresh again", []answer{fresh1}, time.Second, bound1, 1, "connection 42")

	denied := answer{err: &gomysql.MySQLError{Number: 1227, Message: "Access denied; you need (at least one of) the PROCESS privilege(s) for this operation"}}
	step("denied", []answer{denied}, time.Second, openTrxNone, 1, "settle lag only: the role cannot read information_schema.innodb_trx (MySQL error 1227)")
	if o, _ := b.current(); !strings.Contains(o.Reason, "GRANT PROCESS ON *.* TO 'app'@'%'") {
		t.Fatalf("denied: %q does not name the GRANT", o.Reason)
	}
	step("denied: not asked again within 5 minutes", nil, 4*time.Minute, openTrxNone, 0, "settle lag only: the role cannot")
	step("asked again after 5 minutes, granted", []answer{fresh2}, time.Minute, bound2, 1, "open transactions (none open)")

	answers = []answer{{err: sql.ErrConnDone}}
	now = now.Add(time.Second)
	if _, err := b.arg(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "information_schema.innodb_trx") {
		t.Fatalf("a failed read: %v; want an error naming innodb_trx", err)
	}
}

// TestMySQLOpenTrxReadOnly: on a read-only server, taken for a read replica whose innodb_trx
// cannot list the source's open transactions, the read is bounded by the settle lag alone, the
// status says why and marks it unsafe, and the server is asked again after five minutes (a
// promoted replica gets its bound back).
func TestMySQLOpenTrxReadOnly(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	answers := []error{errReadOnly}
	b := &openTrxBound{user: "app", clock: func() time.Time { return now }, pause: time.Nanosecond,
		read: func(context.Context, *sql.DB) (OpenTrx, bool, error) {
			if len(answers) == 0 {
				t.Fatal("an unexpected read of innodb_trx")
			}
			err := answers[0]
			answers = answers[1:]
			if err != nil {
				return OpenTrx{}, false, err
			}
			return OpenTrx{Active: true, Bound: now.Add(-time.Second)}, true, nil
		}}
	arg, err := b.arg(context.Background(), nil)
	if err != nil || !arg.Equal(openTrxNone) {
		t.Fatalf("read-only: argument %v, %v; want no bound (%v)", arg, err, openTrxNone)
	}
	o, _ := b.current()
	d := o.Detail()
	if o.Active || !strings.Contains(o.Reason, "read-only (@@read_only=ON), as a read replica is") || !strings.Contains(o.Reason, "source (primary) server") ||
		!d.Bad || !strings.Contains(d.Line, "NOT SAFE") || !strings.Contains(b.Stats().LateCommits, "settle lag only: the server is read-only") {
		t.Fatalf("read-only: bound %+v, detail %+v", o, d)
	}
	now = now.Add(4 * time.Minute)
	if _, err := b.arg(context.Background(), nil); err != nil { // not asked again yet
		t.Fatal(err)
	}
	answers = []error{nil}
	now = now.Add(time.Minute)
	if arg, err := b.arg(context.Background(), nil); err != nil || !arg.Equal(now.Add(-time.Second)) {
		t.Fatalf("promoted: argument %v, %v; want the bound again", arg, err)
	}
}
