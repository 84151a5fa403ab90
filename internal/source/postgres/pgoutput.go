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
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
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
		switch {
		case !m.Transactional || d.tx == nil: // written outside a transaction: no place in commit order
		case m.Prefix == keepUpPrefix:
			d.tx.keepUp = true
		case d.l.events != nil && m.Prefix == d.l.def.Outbox.Messages && !d.tx.skip:
			return d.event(m)
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
		d.commits = make([]row.Commit, 64)
	}
	meta := &d.commits[0]
	d.commits = d.commits[1:]
	*meta = row.Commit{ID: uint64(xid), LSN: uint64(commit), Time: at.UTC()}
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
		return d.add(row.OpInsert, cur, nil, false)
	case 'U':
		return d.update(old, oldKind, cur)
	}
	if old == nil {
		return fmt.Errorf("no old tuple")
	}
	return d.add(row.OpDelete, old, nil, oldKind == 'K')
}

// decoder turns pgoutput messages into rows.
type decoder struct {
	l       *logical
	p       *peeked
	rels    []relation    // by table (logical.tabs): each as the stream last described it
	cur     *relation     // the table of the change being decoded
	lastEnd pglogrepl.LSN // the end of the last transaction decoded
	// decoded, when not 0, is where the stream a continuing decoder was given starts to be new
	// to it: the transactions committed before it (whose begin says so) are passed over, whole
	// (passing: inside one). See continues.
	decoded pglogrepl.LSN
	passing bool
	changes []change     // newChange's blocks
	commits []row.Commit // begin's blocks
	texts   [][]byte
	arena   []byte // the changes' messages, copied (keep)
	tx      *txn   // the transaction being decoded (&txBuf), nil between transactions
	txBuf   txn
	oldT    tuple // the tuples of the change being decoded
	newT    tuple
}

// relation is one of the poller's tables as the stream last described it (a relation message):
// rel is nil before. A relation is replaced whole, never changed (a decoder continuing another
// peek's shares them).
type relation struct {
	tab    int32
	t      *ltable
	rel    []relCol                    // the table's columns
	dec    []func([]byte) (any, error) // their decoders, by Row column (Change.Decode)
	absent []int                       // the columns the poller reads that the description lacks, by Row column
	added  string                      // a column the description has that the source lacks (AllColumns)
}

// relCol is a column of the table in a relation message: where it goes in a Row (-1: not read)
// and how its text is decoded.
type relCol struct {
	idx    int
	decode func(src []byte) (any, error)
}

// txn is the transaction being decoded.
type txn struct {
	commit  pglogrepl.LSN // its commit record's position
	meta    *row.Commit   // its xid, commit position and time, as its changes say them (Row.Transaction)
	entries []entry
	keepUp  bool // it carries a keep-up message: its end is a place to move to
	skip    bool // its replication origin is the skipped writer's: its changes are left out
}

// entry is a change of the transaction: a row, or a stop (a change the poller cannot deliver),
// whose error is made once its position is known; neither: a keep-up mark.
type entry struct {
	ch   *change
	stop func(at pgcdc.Position) error
}

// newDecoder starts decoding the stream of p.
func (l *logical) newDecoder(p *peeked) *decoder {
	d := &decoder{l: l, p: p, rels: make([]relation, len(l.tabs))}
	for i, t := range l.tabs {
		d.rels[i] = relation{tab: int32(i), t: t}
	}
	return d
}

// table is the relation of the poller's table whose oid is oid; nil for another table's.
func (d *decoder) table(oid uint32) *relation {
	i, ok := d.l.rels[oid]
	if !ok {
		return nil
	}
	return &d.rels[i]
}

// relation maps the stream's columns of table r onto the Row's. A column the poller reads that
// the stream lacks (dropped or renamed) makes each change of the table a stop, which names it. A
// column whose type changed is decoded with the type it had when the change was written.
func (d *decoder) relation(r *relation, m *pglogrepl.RelationMessage) error {
	names := r.t.lay.Columns()
	nr := relation{tab: r.tab, t: r.t}
	rel := make([]relCol, len(m.Columns))
	seen := make([]bool, len(names))
	for j, c := range m.Columns {
		rel[j].idx = -1
		for i := range names {
			if names[i] == c.Name {
				rel[j].idx, seen[i] = i, true
				rel[j].decode = textDecoder(d.l.types, &d.l.typesMu, c.DataType)
			}
		}
	}
	nr.dec = make([]func([]byte) (any, error), len(names))
	for _, rc := range rel {
		if rc.idx >= 0 {
			nr.dec[rc.idx] = rc.decode
		}
	}
	for i, ok := range seen {
		if !ok {
			nr.absent = append(nr.absent, i)
		}
	}
	if r.t.lay.AllColumns() {
		for j, rc := range rel {
			if rc.idx < 0 {
				nr.added = m.Columns[j].Name
				break
			}
		}
	}
	nr.rel = rel
	*r = nr
	return nil
}

// where names the transaction being decoded, for errors.
func (d *decoder) where() string {
	if d.tx == nil {
		return "the start of the stream"
	}
	return fmt.Sprintf("the transaction committed at LSN %s (%s)", d.tx.commit, d.tx.meta.Time.Format(time.RFC3339))
}

// stop adds a change the poller cannot deliver; why gets the position just past it.
func (d *decoder) stop(why func(at pgcdc.Position) error) error {
	if d.tx == nil {
		return d.l.lay.Errorf("a change came outside a transaction (protocol error)")
	}
	d.tx.entries = append(d.tx.entries, entry{stop: why})
	return nil
}

// truncate is the stop for a TRUNCATE of the poller's tables, named "table T" or "tables T, U".
func (d *decoder) truncate(tables string) error {
	l, where := d.l, d.where()
	return d.stop(func(at pgcdc.Position) error {
		return fmt.Errorf("source: poller %q, %s: %w in %s: the rows it removed cannot be delivered one by one, so the poller stops here, after the changes before it. Clear what you built from the table, then skip the truncate: pollerctl reset %s --to-cursor %s --yes",
			l.poller, tables, ErrTruncate, where, l.poller, at)
	})
}

// schemaStop is the stop for a change of table r that lacks a column the poller reads.
func (d *decoder) schemaStop(r *relation) error {
	l, where, col, table := d.l, d.where(), r.t.lay.Columns()[r.absent[0]], r.t.def.Table
	return d.stop(func(at pgcdc.Position) error {
		return fmt.Errorf("source: poller %q, table %s, column %q: %w: the change in %s has no such column (it was dropped or renamed); the poller stops before it. Take the column out of the poller's columns (a new definition: pollerctl reset %s --to-beginning), or add the column back; to skip only this change: pollerctl reset %s --to-cursor %s --yes",
			l.poller, table, col, source.ErrSchema, where, l.poller, l.poller, at)
	})
}

// columnsStop is the stop for a change of table r written with a column added since the source
// opened (it reads every column): the tick opens the source again, which reads the column.
func (d *decoder) columnsStop(r *relation) error {
	l, where, col, table := d.l, d.where(), r.added, r.t.def.Table
	return d.stop(func(at pgcdc.Position) error {
		return fmt.Errorf("source: poller %q, table %s, column %q: %w: the change in %s carries a column added since the source opened",
			l.poller, table, col, source.ErrColumnsChanged, where)
	})
}

// update adds an update, or a delete and an insert when it changed the key. old is the old
// tuple when the server sent one (oldKind 'K': its key only; 'O': the whole row, under REPLICA
// IDENTITY FULL).
func (d *decoder) update(old *tuple, oldKind byte, cur *tuple) error {
	if old != nil && d.keyChanged(old, cur) {
		if err := d.add(row.OpDelete, old, nil, oldKind == 'K'); err != nil {
			return err
		}
		return d.add(row.OpInsert, cur, old, false)
	}
	if oldKind != 'O' {
		old = nil
	}
	return d.add(row.OpUpdate, cur, old, false)
}

// keyChanged compares the key columns' text in two tuples.
func (d *decoder) keyChanged(old, cur *tuple) bool {
	r := d.cur
	names := r.t.lay.Columns()
	for j, rc := range r.rel {
		if rc.idx < 0 || !slices.Contains(r.t.def.PK, names[rc.idx]) || j >= len(old.kind) || j >= len(cur.kind) {
			continue
		}
		if old.kind[j] != cur.kind[j] || string(old.val[j]) != string(cur.val[j]) {
			return true
		}
	}
	return false
}

// add decodes a tuple into a Row of op. old, when not nil, is the old row under REPLICA
// IDENTITY FULL, which supplies the values PostgreSQL left out (unchanged TOAST); keyOnly marks
// a delete that carries only its key.
func (d *decoder) add(op string, tup, old *tuple, keyOnly bool) error {
	r := d.cur
	t, n := r.t, len(r.t.lay.Columns())
	if d.tx == nil || r.rel == nil || tup == nil {
		return t.lay.Errorf("a %s change came outside a transaction or before the table's description (protocol error)", op)
	}
	// A source of every column reads a change written before one of them was added without it
	// (not carried: Unchanged), and stops at one written with a column added since it opened.
	before := t.lay.AllColumns() && d.tx.commit < d.l.layoutAt
	switch {
	case len(r.absent) > 0 && !before:
		return d.schemaStop(r)
	case r.added != "" && !before:
		return d.columnsStop(r)
	}
	if len(tup.kind) != len(r.rel) {
		return t.lay.Errorf("a %s change has %d columns, the table's description %d (protocol error)", op, len(tup.kind), len(r.rel))
	}
	ch := d.newChange(n)
	ch.tab = r.tab
	ch.Op, ch.KeyOnly, ch.Decode, ch.Commit = op, keyOnly, r.dec, d.tx.meta
	var oldRow [][]byte // an update's old row (REPLICA IDENTITY FULL)
	if op == row.OpUpdate && old != nil {
		oldRow = d.newTexts(n)
		ch.Images = &row.Images{Old: oldRow}
	}
	for j, rc := range r.rel {
		if rc.idx < 0 {
			continue
		}
		kind, val := tup.kind[j], tup.val[j]
		if kind == pglogrepl.TupleDataTypeToast && old != nil && j < len(old.kind) {
			kind, val = old.kind[j], old.val[j]
		}
		if oldRow != nil && j < len(old.kind) && (old.kind[j] == pglogrepl.TupleDataTypeText || old.kind[j] == pglogrepl.TupleDataTypeBinary) {
			oldRow[rc.idx] = old.val[j]
		}
		switch kind {
		case pglogrepl.TupleDataTypeNull:
		case pglogrepl.TupleDataTypeToast:
			if ch.Unchanged == nil {
				ch.Unchanged = make([]bool, n)
			}
			ch.Unchanged[rc.idx] = true
		default:
			ch.Text[rc.idx] = val // decoded when read (Change.Decode)
		}
	}
	if len(r.absent) > 0 { // written before those columns were added
		if ch.Unchanged == nil {
			ch.Unchanged = make([]bool, n)
		}
		for _, i := range r.absent {
			ch.Unchanged[i] = true
		}
	}
	for j, idx := range t.lay.KeyIndex() {
		if ch.Text[idx] == nil {
			return fmt.Errorf("source: poller %q, table %s, column %q: %w: a %s change in %s carries no value for the key column", d.l.poller, t.def.Table, t.lay.KeyColumns()[j], source.ErrNullCursor, op, d.where())
		}
	}
	d.tx.entries = append(d.tx.entries, entry{ch: ch})
	return nil
}

// newChange returns a zero change with room for n values, from blocks allocated for many changes
// at once (a catch-up decodes hundreds of thousands). A block of 64 changes (11 KiB) is a small
// object; one of 256 (45 KiB) was a large one, fresh memory each time, and the first writes to
// it were most of newChange's time in a CPU profile.
func (d *decoder) newChange(n int) *change {
	if len(d.changes) == 0 {
		d.changes = make([]change, 64)
	}
	ch := &d.changes[0]
	d.changes = d.changes[1:]
	ch.Text = d.newTexts(n)
	return ch
}

// newTexts returns n nil values, from the same blocks.
func (d *decoder) newTexts(n int) [][]byte {
	if len(d.texts) < n {
		d.texts = make([][]byte, 64*n)
	}
	t := d.texts[:n:n]
	d.texts = d.texts[n:]
	return t
}

// commit gives the transaction's changes their positions and adds them to the stream: the last
// one ends the transaction, the others count the changes done inside it.
func (d *decoder) commit(end pglogrepl.LSN) {
	tx := d.tx
	d.tx = nil
	if tx == nil {
		return
	}
	if tx.keepUp && len(tx.entries) == 0 {
		tx.entries = append(tx.entries, entry{}) // a mark: no row, a position
	}
	// n counts the changes; a transaction with a stop has no last change this decoding delivers
	// (after a stop of a column added, a source opened again decodes it whole and marks it).
	last, n := len(tx.entries)-1, 0
	for _, e := range tx.entries {
		if e.ch != nil {
			n++
		}
		if e.stop != nil {
			n = -1
			break
		}
	}
	index := 0
	for i, e := range tx.entries {
		at := pgcdc.Position{LSN: tx.commit, Changes: i + 1}
		if i == last {
			at = pgcdc.Position{LSN: end}
		}
		switch {
		case e.stop != nil:
			if d.p.stops == nil {
				d.p.stops = map[int]error{}
			}
			d.p.stops[len(d.p.rows)] = e.stop(at)
		case e.ch != nil:
			e.ch.pos = at
			e.ch.Pos = &e.ch.pos
			index++
			e.ch.Index, e.ch.Last = int32(index), index == n
		}
		d.p.rows = append(d.p.rows, e.ch)
		d.p.pos = append(d.p.pos, at)
	}
}

// textDecoder turns a column's text (pgoutput sends values as text) into what pgx's
// database/sql driver returns for the type (its stdlib Rows.Next), so that a logical row holds
// the values a keyset read of the same row would. Rows decode their values when read, from any
// goroutine: the common types are parsed here without shared state, the others through pgx's
// type map, which is not safe for concurrent use, under a lock.
func textDecoder(m *pgtype.Map, mu *sync.Mutex, oid uint32) func([]byte) (any, error) {
	switch oid {
	case pgtype.BoolOID:
		return func(src []byte) (any, error) { return len(src) > 0 && src[0] == 't', nil }
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID:
		return func(src []byte) (any, error) { return strconv.ParseInt(string(src), 10, 64) }
	case pgtype.Float4OID, pgtype.Float8OID:
		bits := 64
		if oid == pgtype.Float4OID {
			bits = 32 // as the driver does: a float32, widened
		}
		return func(src []byte) (any, error) {
			switch string(src) {
			case "NaN":
				return math.NaN(), nil
			case "Infinity":
				return math.Inf(1), nil
			case "-Infinity":
				return math.Inf(-1), nil
			}
			return strconv.ParseFloat(string(src), bits)
		}
	case pgtype.JSONOID, pgtype.JSONBOID, pgtype.XMLOID:
		return func(src []byte) (any, error) { return slices.Clone(src), nil }
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID, pgtype.NumericOID, pgtype.UUIDOID:
		return func(src []byte) (any, error) { return string(src), nil }
	case pgtype.ByteaOID, pgtype.DateOID, pgtype.TimestampOID, pgtype.TimestamptzOID, pgtype.CIDOID, pgtype.OIDOID, pgtype.XIDOID:
	default:
		return func(src []byte) (any, error) { return string(src), nil }
	}
	return func(src []byte) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		switch oid {
		case pgtype.ByteaOID:
			var v []byte
			err := m.PlanScan(oid, pgtype.TextFormatCode, &v).Scan(src, &v)
			return v, err
		case pgtype.DateOID:
			var v pgtype.Date
			if err := m.PlanScan(oid, pgtype.TextFormatCode, &v).Scan(src, &v); err != nil {
				return nil, err
			}
			return v.Value()
		case pgtype.TimestampOID:
			var v pgtype.Timestamp
			if err := m.PlanScan(oid, pgtype.TextFormatCode, &v).Scan(src, &v); err != nil {
				return nil, err
			}
			return v.Value()
		case pgtype.TimestamptzOID:
			var v pgtype.Timestamptz
			if err := m.PlanScan(oid, pgtype.TextFormatCode, &v).Scan(src, &v); err != nil {
				return nil, err
			}
			return v.Value()
		}
		var v pgtype.Uint32
		if err := m.PlanScan(oid, pgtype.TextFormatCode, &v).Scan(src, &v); err != nil {
			return nil, err
		}
		return v.Value()
	}
}
