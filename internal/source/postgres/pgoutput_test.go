package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// openCaptured opens a logical source of poller on the table (columns id, name, note) with a pool
// of one connection, and returns the driver that kept its logical cursor.
func openCaptured(t testing.TB, poller, dsn, table, slot string) (*captureDriver, *source.Source) {
	t.Helper()
	cd := &captureDriver{}
	src, err := source.Open(context.Background(), driver.Drivers{cd}, source.Config{Poller: poller, Driver: Name, DSN: dsn, MaxOpenConns: 1,
		Definition: sourcedef.Definition{Table: sourcedef.Table{Name: table}, Columns: []string{"id", "name", "note"}, PK: []string{"id"},
			Cursor: sourcedef.Cursor{Kind: state.KindLogical}, Slot: slot, Publication: slot}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	if cd.got == nil {
		t.Fatal("Open made no logical cursor")
	}
	return cd, src
}

// captureDriver is the driver, keeping the logical cursor Open makes (with its Layout).
type captureDriver struct {
	Driver
	got *logical
}

func (c *captureDriver) ChangeStream(kind string, l driver.Layout) (driver.ChangeStream, error) {
	cs, err := c.Driver.ChangeStream(kind, l)
	c.got, _ = cs.(*logical)
	return cs, err
}

// TestDecoderRealMessages decodes the pgoutput messages PostgreSQL sent for inserts, updates
// (one of the key, one leaving a TOASTed value alone), deletes and another table's changes, under
// REPLICA IDENTITY FULL: whole, they give the changes in order; and every message of the table
// cut short (begin, commit, insert, update, delete) is an error naming the poller, never a
// panic or a change made of what is left.
func TestDecoderRealMessages(t *testing.T) {
	db, dsn, table, slot := testenv.PostgresLogical(t, "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL, note text)")
	other := table + "_other"
	for _, q := range []string{
		"ALTER TABLE " + table + " REPLICA IDENTITY FULL",
		"CREATE TABLE " + other + " (id int PRIMARY KEY)",
		"ALTER PUBLICATION " + slot + " ADD TABLE " + other,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + other) })
	big := "(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 3000) g)" // 96,000 characters: TOASTed, hardly compressed
	testenv.ExecFlushed(t, db,
		"INSERT INTO "+table+" VALUES (1, 'a', NULL), (2, 'b', "+big+")",
		"INSERT INTO "+other+" VALUES (1)",
		"UPDATE "+table+" SET name = 'b2' WHERE id = 2",
		"UPDATE "+table+" SET id = 3 WHERE id = 1",
		"DELETE FROM "+table+" WHERE id = 2")

	cd, _ := openCaptured(t, "dec", dsn, table, slot)
	msgs := peekMessages(t, db, slot)

	decode := func(msgs [][]byte) (*peeked, error) {
		p := &peeked{}
		d := cd.got.newDecoder(p)
		for _, m := range msgs {
			if err := d.message(m); err != nil {
				return p, err
			}
		}
		return p, nil
	}
	p, err := decode(msgs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, c := range p.rows {
		if c == nil && p.stops[i] == nil {
			continue // a keep-up mark: another test's idle tick wrote one into the WAL meanwhile
		}
		if c == nil {
			t.Fatalf("change %d is a stop: %v", i, p.stops[i])
		}
		got = append(got, fmt.Sprintf("%s %s/%s/%d", c.Op, c.Text[0], c.Text[1], len(c.Text[2])))
	}
	// The update of 2 leaves note alone: FULL's old row supplies it. The key change of 1 is a
	// delete and an insert; the delete of 2 carries the old row.
	want := []string{"insert 1/a/0", "insert 2/b/96000", "update 2/b2/96000", "delete 1/a/0", "insert 3/a/0", "delete 2/b2/96000"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("changes:\n got %v\nwant %v", got, want)
	}

	cut := 0
	for k, m := range msgs {
		switch m[0] {
		case 'B', 'C', 'I', 'U', 'D':
		default:
			continue
		}
		if m[0] == 'I' || m[0] == 'U' || m[0] == 'D' {
			if p, err := decode(msgs[:k]); err != nil || p == nil {
				t.Fatal(err)
			}
			if rel := uint32(m[1])<<24 | uint32(m[2])<<16 | uint32(m[3])<<8 | uint32(m[4]); !hasRel(cd.got, rel) {
				continue // another table's: not read past its relation
			}
		}
		for n := 1; n < len(m); n++ {
			if n > 16 && n < len(m)-16 && n%4999 != 0 {
				continue // a long value: its ends, and some places between
			}
			_, err := decode(append(msgs[:k:k], m[:n]))
			if err == nil {
				t.Fatalf("message %d (%c, %d bytes) cut to %d bytes: no error", k, m[0], len(m), n)
			}
			cut++
		}
	}
	if cut == 0 {
		t.Fatal("no message was cut")
	}
	if _, err := decode(append(msgs[:1:1], []byte{'B', 0})); err == nil || !strings.Contains(err.Error(), `poller "dec"`) || !strings.Contains(err.Error(), "begin") {
		t.Fatalf("a short begin: %v", err)
	}
}

// peekMessages reads the slot's messages as the cursor asks for them.
func peekMessages(t testing.TB, db *sql.DB, slot string) [][]byte {
	t.Helper()
	rows, err := db.Query(`SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2, 'messages', 'true')`, slot, slot)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var m []byte
		if err := rows.Scan(&m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPeekStatementByExecMode: with pgx's default query mode the peek is a statement prepared
// once on the connection; with a mode a DSN through a transaction pooler sets (exec,
// simple_protocol, cache_describe) no statement stays on the connection. Each reads the changes.
func TestPeekStatementByExecMode(t *testing.T) {
	db, dsn, table, slot := testenv.PostgresLogical(t, "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL, note text)")
	testenv.ExecFlushed(t, db, "INSERT INTO "+table+" SELECT g, 'n', NULL FROM generate_series(1, 7) g")
	for _, tc := range []struct {
		mode     string
		prepared int
	}{{"", 1}, {"cache_statement", 1}, {"cache_describe", 0}, {"exec", 0}, {"simple_protocol", 0}} {
		t.Run("mode="+tc.mode, func(t *testing.T) {
			d := dsn
			if tc.mode != "" {
				d = testenv.WithParam(dsn, "default_query_exec_mode", tc.mode)
			}
			cd, src := openCaptured(t, "peek", d, table, slot)
			b, err := src.Fetch(context.Background(), nil, 100)
			if err != nil || len(b.Rows) != 7 {
				t.Fatalf("fetch: %v rows, %v", b, err)
			}
			var n int
			// The pool's one connection, the peek's.
			err = cd.got.lay.DB().QueryRowContext(context.Background(), "SELECT count(*) FROM pg_prepared_statements WHERE name IN ($1, $2)", peekStmt, peekStmt13).Scan(&n)
			if err != nil || n != tc.prepared {
				t.Fatalf("%d peek statements prepared on the connection, want %d (%v)", n, tc.prepared, err)
			}
		})
	}
}

// hasRel says whether the logical reader l reads the table of oid rel.
func hasRel(l *logical, rel uint32) bool {
	_, ok := l.rels[rel]
	return ok
}

// TestContinueResentRelation: a decoder continuing the last peek from the same position passes
// over the transactions that peek decoded by their commit positions, so a relation message that
// pgoutput sent again in one peek and not the other (it resends one after a relcache
// invalidation reaches the decoding backend mid-peek) changes nothing. Passing over the last
// peek's count of messages instead began one message late or early: with the extra relation
// message in the last peek, the next transaction's begin was skipped and its update of the key
// was "a delete change ... outside a transaction (protocol error)" (CI, a replica test).
func TestContinueResentRelation(t *testing.T) {
	db, dsn, table, slot := testenv.PostgresLogical(t, "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL, note text)")
	for _, q := range []string{"INSERT INTO " + table + " VALUES (1, 'a', NULL)", "UPDATE " + table + " SET id = 3 WHERE id = 1", "INSERT INTO " + table + " VALUES (4, 'd', NULL)"} {
		testenv.ExecFlushed(t, db, q) // a transaction each
	}
	cd, _ := openCaptured(t, "cont", dsn, table, slot)
	var msgs [][]byte // the transactions with a change of the table: not the keep-up marks (a
	var tx [][]byte   // logical decoding message of their own) other tests' ticks write meanwhile
	for _, m := range peekMessages(t, db, slot) {
		tx = append(tx, m)
		if m[0] == 'C' {
			if slices.ContainsFunc(tx, func(m []byte) bool { return m[0] == 'I' || m[0] == 'U' || m[0] == 'D' }) {
				msgs = append(msgs, tx...)
			}
			tx = nil
		}
	}
	rel, commit := -1, -1 // the first transaction's relation message and commit
	for i, m := range msgs {
		if m[0] == 'R' && rel < 0 {
			rel = i
		}
		if m[0] == 'C' && rel >= 0 {
			commit = i
			break
		}
	}
	if rel < 0 || commit < 0 {
		t.Fatalf("no relation message and commit in the stream (%d messages)", len(msgs))
	}
	resent := func(ms [][]byte) [][]byte { // the stream with the relation message sent twice
		return slices.Insert(slices.Clone(ms), rel+1, msgs[rel])
	}
	twice := func(ms [][]byte) [][]byte { return resent(resent(ms)) } // and three times
	first := msgs[:commit+1]
	for _, tc := range []struct {
		name       string
		last, next [][]byte
	}{
		{"none", first, msgs},
		{"in the last peek", resent(first), msgs},
		{"in the next peek", first, resent(msgs)},
		{"in both", resent(first), resent(msgs)},
		{"twice in the next peek", first, twice(msgs)},
		{"twice in the last peek", twice(first), msgs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := &peeked{from: 1}
			prev.d = cd.got.newDecoder(prev)
			for _, m := range tc.last {
				if err := prev.d.message(m); err != nil {
					t.Fatal(err)
				}
			}
			prev.msgs = len(tc.last)
			if len(prev.rows) != 1 {
				t.Fatalf("the last peek decoded %d changes, want the first insert", len(prev.rows))
			}
			p := &peeked{from: 1}
			d := p.continues(prev, prev.pos[len(prev.pos)-1], cd.got)
			for _, m := range tc.next {
				if err := d.message(m); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for _, c := range p.rows {
				got = append(got, fmt.Sprintf("%s %s", c.Op, c.Text[0]))
			}
			if want := []string{"delete 1", "insert 3", "insert 4"}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("the continuing peek's changes: %v, want %v", got, want)
			}
		})
	}
}
