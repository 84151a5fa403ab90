package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// The decode benchmarks' changes: 2,000 inserts in transactions of txs rows of per.
const txs, per = 400, 5

// decodeBenchMessages writes the decode benchmarks' inserts into a table of a slot of their own
// and returns them as a peek reads them, with the DSN, table and slot.
func decodeBenchMessages(b *testing.B) (dsn, table, slot string, msgs [][]byte) {
	db, dsn, table, slot := testenv.PostgresLogical(b, "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL, note text)")
	for i := range txs {
		var vals []string
		for j := range per {
			vals = append(vals, fmt.Sprintf("(%d, 'customer %d', 'a note of some length')", i*per+j, i))
		}
		if i == txs-1 { // flushed: decoding reads flushed WAL, and the server commits without waiting
			testenv.ExecFlushed(b, db, "INSERT INTO "+table+" VALUES "+strings.Join(vals, ", "))
		} else if _, err := db.Exec("INSERT INTO " + table + " VALUES " + strings.Join(vals, ", ")); err != nil {
			b.Fatal(err)
		}
	}
	msgs = peekMessages(b, db, slot)
	if len(msgs) < txs*per {
		b.Fatalf("%d messages read from the slot", len(msgs))
	}
	return dsn, table, slot, msgs
}

// BenchmarkDecode decodes the pgoutput messages of 2,000 inserts in transactions of 5 (as the
// catch-up benchmark writes them), already read from the slot: the decoder's own cost per
// change, without the server's.
func BenchmarkDecode(b *testing.B) {
	dsn, table, slot, msgs := decodeBenchMessages(b)
	cd, _ := openCaptured(b, "bench", dsn, table, slot)
	changes := 0
	for b.Loop() {
		changes += decodeAll(b, cd, msgs)
	}
	if changes < b.N*txs*per {
		b.Fatalf("%d changes decoded, want %d", changes, b.N*txs*per)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(changes), "ns/change")
}

// decodeAll decodes msgs, a peek's messages, as a logical tick does, and returns the changes.
// scripts/bench.sh instructions counts its instructions alone (callgrind's --toggle-collect).
//
//go:noinline
func decodeAll(b *testing.B, cd *captureDriver, msgs [][]byte) int {
	p := &peeked{}
	d := cd.got.newDecoder(p)
	for _, m := range msgs {
		if err := d.message(m); err != nil {
			b.Fatal(err)
		}
	}
	return len(p.rows)
}

// BenchmarkDecodeBare parses BenchmarkDecode's messages with pglogrepl alone, as the bare peek of
// scripts/bench.sh logical does (parseAll): the hand loop the decoder is weighed against.
func BenchmarkDecodeBare(b *testing.B) {
	_, _, _, msgs := decodeBenchMessages(b)
	changes := 0
	for b.Loop() {
		changes += parseAll(b, msgs)
	}
	if changes < b.N*txs*per {
		b.Fatalf("%d inserts parsed, want %d", changes, b.N*txs*per)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(changes), "ns/change")
}

// parseAll parses msgs with pglogrepl and returns the inserts among them.
//
//go:noinline
func parseAll(b *testing.B, msgs [][]byte) int {
	n := 0
	for _, m := range msgs {
		pm, err := pglogrepl.Parse(m)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := pm.(*pglogrepl.InsertMessage); ok {
			n++
		}
	}
	return n
}
