package postgres

// The pgoutput messages a catch-up is made of (begin, insert, update, delete, commit: all but a
// handful of a peek's rows) are read here by hand, straight into the changes' values; the rest
// (relation, truncate, logical decoding message, type, origin) go through pglogrepl.Parse.
// pglogrepl.Parse allocates a message, a tuple, and a column and a copy of its bytes for every
// value; here a change's message is copied once into the decoder's arena and its values are
// slices of that copy. The layouts (protocol version 1) are PostgreSQL's "Logical Replication
// Message Formats".

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
)

// tuple is a TupleData: each column's kind ('n' null, 'u' unchanged TOAST, 't' text, 'b'
// binary) and its bytes (nil but for text and binary). A decoder reuses its two tuples.
type tuple struct {
	kind []byte
	val  [][]byte
}

// parse reads a TupleData from b into t and returns what follows it.
func (t *tuple) parse(b []byte) ([]byte, error) {
	if len(b) < 2 {
		return nil, errShort
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	t.kind, t.val = t.kind[:0], t.val[:0]
	for range n {
		if len(b) < 1 {
			return nil, errShort
		}
		k := b[0]
		b = b[1:]
		var v []byte
		switch k {
		case pglogrepl.TupleDataTypeText, pglogrepl.TupleDataTypeBinary:
			if len(b) < 4 {
				return nil, errShort
			}
			ln := int(binary.BigEndian.Uint32(b))
			b = b[4:]
			if ln < 0 || len(b) < ln {
				return nil, errShort
			}
			v, b = b[:ln:ln], b[ln:]
		case pglogrepl.TupleDataTypeNull, pglogrepl.TupleDataTypeToast:
		default:
			return nil, fmt.Errorf("a column of kind %q", k)
		}
		t.kind = append(t.kind, k)
		t.val = append(t.val, v)
	}
	return b, nil
}

var errShort = fmt.Errorf("the message ends early")

// arenaBlock is the size of the blocks a decoder copies the changes' messages into.
const arenaBlock = 256 << 10

// keep copies b into the decoder's arena: the changes' values are slices of the copy, and the
// reader's buffer that b is in is reused for the next row.
func (d *decoder) keep(b []byte) []byte {
	if len(b) > cap(d.arena)-len(d.arena) {
		d.arena = make([]byte, 0, max(arenaBlock, len(b)))
	}
	n := len(d.arena)
	d.arena = append(d.arena, b...)
	return d.arena[n:len(d.arena):len(d.arena)]
}

// PostgreSQL's epoch, 2000-01-01 00:00:00 UTC, in Unix seconds and microseconds: what its binary
// timestamps count from.
const (
	pgEpochSeconds = 946684800
	pgEpoch        = pgEpochSeconds * 1000000
)

// message decodes one pgoutput message; data is the reader's and is not kept (what a change
// needs of it is copied).
func (d *decoder) message(data []byte) error {
	if len(data) == 0 {
		return d.l.lay.Errorf("decoding a pgoutput message: an empty message")
	}
	if d.decoded != 0 {
		if pass, err := d.pass(data); pass || err != nil {
			return err
		}
	}
	switch data[0] {
	case 'B': // Int64 final LSN, Int64 commit time, Int32 xid
		if len(data) < 21 {
			return d.l.lay.Errorf("decoding a pgoutput begin message: %v", errShort)
		}
		at := time.UnixMicro(pgEpoch + int64(binary.BigEndian.Uint64(data[9:])))
		d.begin(pglogrepl.LSN(binary.BigEndian.Uint64(data[1:])), at, binary.BigEndian.Uint32(data[17:]))
		return nil
	case 'C': // Int8 flags, Int64 commit LSN, Int64 end LSN, Int64 commit time
		if len(data) < 26 {
			return d.l.lay.Errorf("decoding a pgoutput commit message: %v", errShort)
		}
		end := pglogrepl.LSN(binary.BigEndian.Uint64(data[10:]))
		d.lastEnd = end
		d.commit(end)
		return nil
	case 'I', 'U', 'D': // Int32 relation, then tuples
		if len(data) < 5 {
			return d.l.lay.Errorf("decoding a pgoutput %c message: %v", data[0], errShort)
		}
		r := d.table(binary.BigEndian.Uint32(data[1:]))
		if r == nil || (d.tx != nil && d.tx.skip) {
			return nil
		}
		d.cur = r
		if err := d.change(d.keep(data)); err != nil {
			return d.l.lay.Errorf("decoding a pgoutput %c message: %v", data[0], err)
		}
		return nil
	}
	m, err := pglogrepl.Parse(data)
	if err != nil {
		return d.l.lay.Errorf("decoding a pgoutput message: %v", err)
	}
	switch m := m.(type) {
	case *pglogrepl.RelationMessage:
		if r := d.table(m.RelationID); r != nil {
			return d.relation(r, m)
		}
	case *pglogrepl.TruncateMessage:
		var names []string
		for _, oid := range m.RelationIDs {
			if r := d.table(oid); r != nil {
				names = append(names, r.t.def.Table.String())
			}
		}
		if len(names) == 1 {
			return d.truncate("table " + names[0])
		}
		if names != nil { // one stop: the truncate is one change of the stream
			return d.truncate("tables " + strings.Join(names, ", "))
		}
	case *pglogrepl.OriginMessage: // after a begin, when the transaction has a replication origin
		if d.tx != nil && skipsOrigin(d.l.def.SkipWriter, m.Name) {
			d.tx.skip = true
		}
	case *pglogrepl.LogicalDecodingMessage:
		if m.Transactional && m.Prefix == keepUpPrefix && d.tx != nil {
			d.tx.keepUp = true
		}
	}
	return nil
}

// pass says whether a continuing decoder passes over message data, which the decoder it
// continues decoded already (see continues): the messages of a transaction that committed before
// d.decoded, and those between transactions (which change nothing). The first begin of a
// transaction committed later ends the passing.
func (d *decoder) pass(data []byte) (bool, error) {
	switch {
	case d.passing:
		d.passing = data[0] != 'C'
		return true, nil
	case data[0] != 'B':
		return true, nil
	case len(data) < 9:
		return false, d.l.lay.Errorf("decoding a pgoutput begin message: %v", errShort)
	case pglogrepl.LSN(binary.BigEndian.Uint64(data[1:])) < d.decoded: // its commit's position
		d.passing = true
		return true, nil
	}
	d.decoded = 0
	return false, nil
}

// skipsOrigin says whether a change of a transaction whose replication origin is origin is left
// out for the writer named writer (Definition.SkipWriter): the origin is the writer's name, or
// starts with it and a dot (a writer with several sessions at once needs an origin for each,
// since PostgreSQL lets one session at a time use an origin).
func skipsOrigin(writer, origin string) bool {
	return writer != "" && (origin == writer || strings.HasPrefix(origin, writer+"."))
}

// begin starts a transaction; its entries reuse the last one's array (commit has moved them
// into the stream).
func (d *decoder) begin(commit pglogrepl.LSN, at time.Time, xid uint32) {
	if len(d.commits) == 0 {
		d.commits = make([]source.Commit, 64)
	}
	meta := &d.commits[0]
	d.commits = d.commits[1:]
	*meta = source.Commit{ID: uint64(xid), LSN: uint64(commit), Time: at.UTC()}
	d.txBuf = txn{commit: commit, meta: meta, entries: d.txBuf.entries[:0]}
	d.tx = &d.txBuf
}

// change decodes an insert ('I': 'N' and the new tuple), an update ('U': 'K' or 'O' and the old
// tuple when the server sent it, then 'N' and the new one) or a delete ('D': 'K' or 'O' and the
// old tuple) of the table; data is kept (the values are slices of it).
func (d *decoder) change(data []byte) error {
	op, b := data[0], data[5:]
	var err error
	var old, cur *tuple
	var oldKind byte
	if (op == 'U' || op == 'D') && len(b) > 0 && (b[0] == 'K' || b[0] == 'O') {
		oldKind, old = b[0], &d.oldT
		if b, err = old.parse(b[1:]); err != nil {
			return err
		}
	}
	if op != 'D' {
		if len(b) == 0 || b[0] != 'N' {
			return fmt.Errorf("no new tuple")
		}
		cur = &d.newT
		if _, err = cur.parse(b[1:]); err != nil {
			return err
		}
	}
	switch op {
	case 'I':
		return d.add(source.OpInsert, cur, nil, false)
	case 'U':
		return d.update(old, oldKind, cur)
	}
	if old == nil {
		return fmt.Errorf("no old tuple")
	}
	return d.add(source.OpDelete, old, nil, oldKind == 'K')
}
