package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// BenchmarkDecode decodes the pgoutput messages of 2,000 inserts in transactions of 5 (as the
// catch-up benchmark writes them), already read from the slot: the decoder's own cost per
// change, without the server's.
func BenchmarkDecode(b *testing.B) {
	db, dsn, table, slot := testenv.PostgresLogical(b, "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL, note text)")
	const txs, per = 400, 5
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
	cd, _ := openCaptured(b, "bench", dsn, table, slot)
	msgs := peekMessages(b, db, slot)
	if len(msgs) < txs*per {
		b.Fatalf("%d messages read from the slot", len(msgs))
	}
	b.ResetTimer()
	changes := 0
	for range b.N {
		p := &peeked{}
		d := cd.got.newDecoder(p)
		for _, m := range msgs {
			if err := d.message(m); err != nil {
				b.Fatal(err)
			}
		}
		changes += len(p.rows)
	}
	if changes < b.N*txs*per {
		b.Fatalf("%d changes decoded, want %d", changes, b.N*txs*per)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(changes), "ns/change")
}
