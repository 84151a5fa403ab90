package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
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
	cd := &captureDriver{}
	src, err := source.Open(context.Background(), source.Drivers{cd}, source.Config{Poller: "bench", Driver: Name, DSN: dsn, MaxOpenConns: 1,
		Definition: source.Definition{Table: source.Table{Name: table}, Columns: []string{"id", "name", "note"}, PK: []string{"id"},
			Cursor: source.Cursor{Kind: state.KindLogical}, Slot: slot, Publication: slot}})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	rows, err := db.Query(`SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2, 'messages', 'true')`, slot, slot)
	if err != nil {
		b.Fatal(err)
	}
	var msgs [][]byte
	for rows.Next() {
		var m []byte
		if err := rows.Scan(&m); err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	rows.Close()
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
