// Package row is a source's rows as the runtime hands them on: each row's values as the database
// sent them, normalized when read (docs/types.md), what a change-stream row says of its change
// and transaction, its cursor, and its decoding into a poller's row type or JSON. A source lays
// out a Shape when it opens (its table, columns and key) and its rows point at it.
package row

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/pseudotrigger/pseudotrigger/internal/jsonenc"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Row is one source row. Its values are normalized: integers int64 (a MySQL BIGINT UNSIGNED
// above the largest int64: uint64, exact), exact numerics as decimal strings, timestamps
// time.Time in UTC, binary []byte, UUIDs canonical lower-case strings, JSON columns
// json.RawMessage, arrays []any, NULL nil; docs/types.md has every type's.
//
// A Row holds the driver's values and normalizes each one when it is read, so a handler pays
// only for the conversions it uses. It is safe for concurrent readers.
type Row struct {
	sh  *Shape
	raw []any
	ch  *Change // what a change-stream cursor read (logical, changetracking); nil for a keyset row
	// read says the row is a backfill's (ReadChunk): its current values, not a change.
	read bool
	lz   *lazyRow // a keyset row as the database sent it (Driver.ReadRaw), when raw is nil
}

// IsNull says whether column i is NULL in a row read from the table (not a change), without
// decoding it.
func (r Row) IsNull(i int) bool {
	if r.lz != nil {
		return r.lz.text[i] == nil
	}
	return r.raw[i] == nil
}

// At is column i's value, normalized. It normalizes what Sent gives, written out here rather than
// calling it: At runs for every value a handler reads.
func (r Row) At(i int) any {
	if r.lz != nil {
		return normalize(&r.sh.Cols[i], r.lz.value(i))
	}
	if r.ch != nil && r.ch.Text != nil {
		return normalize(&r.sh.Cols[i], r.ch.decode(i))
	}
	return normalize(&r.sh.Cols[i], r.raw[i])
}

// Values returns the normalized values in column order (Columns), in a new slice.
func (r Row) Values() []any {
	out := make([]any, len(r.sh.Cols))
	for i := range out {
		out[i] = r.At(i)
	}
	return out
}

// Get returns the value of a column, or nil when there is no such column.
func (r Row) Get(column string) any {
	for i, c := range r.sh.Cols {
		if c.Name == column {
			return r.At(i)
		}
	}
	return nil
}

// Key returns the row's key columns and values: its identity, for deduplication.
func (r Row) Key() map[string]any {
	out := make(map[string]any, len(r.sh.PK))
	for _, k := range r.sh.PK {
		out[k] = r.Get(k)
	}
	return out
}

// The changes a row can stand for (its Op).
const (
	OpInsert = "insert"
	OpUpdate = "update"
	OpDelete = "delete"
	// OpUpsert is an insert or an update: what the keyset cursor kinds see, as they cannot tell
	// the two apart (and see no delete).
	OpUpsert = "upsert"
	// OpRead is a row's current values sent by a backfill (Source.ReadChunk), not a change: a
	// consumer applies it as an upsert; none is sent after a newer change of its row.
	OpRead = "read"
)

// Op is the change the row stands for: OpUpsert for every keyset cursor kind; OpInsert,
// OpUpdate or OpDelete for the change-stream kinds (logical, changetracking); OpRead for a
// backfill's row.
func (r Row) Op() string {
	if r.read {
		return OpRead
	}
	if r.ch == nil {
		return OpUpsert
	}
	return r.ch.Op
}

// Tx is the id of the transaction of a change-stream row's change (Commit.ID); 0 for any other.
func (r Row) Tx() uint64 {
	if r.ch == nil || r.ch.Commit == nil {
		return 0
	}
	return r.ch.Commit.ID
}

// Table is the row's table, as the poller names it (schema-qualified when it names a schema).
func (r Row) Table() string { return r.sh.Table }

// Columns are the names of the row's columns, in the order of Values: its table's.
func (r Row) Columns() []string { return slices.Clone(r.sh.Names) }

// A Transaction is what a commit-ordered cursor (logical, changetracking) says of a change's
// transaction: enough to apply a transaction at once (collect its changes until Last) and to
// tell how old a change is.
type Transaction struct {
	// ID is the transaction as the database numbers it: PostgreSQL's xid; SQL Server's change
	// version (Change Tracking numbers each committed transaction that changed a tracked table).
	ID uint64
	// CommitLSN is the PostgreSQL commit record's position, as PostgreSQL writes an LSN
	// ("16/B374D848"); "" for other databases.
	CommitLSN string
	// ChangeVersion is SQL Server's change version; 0 for other databases.
	ChangeVersion int64
	// CommitTime is when the transaction committed; zero when the database does not say.
	CommitTime time.Time
	// Index is the change's place among its transaction's changes of the table, from 1; 0 when
	// not known. Last marks the transaction's last change of the table.
	Index int
	Last  bool
}

// Transaction returns the transaction of a change-stream row's change; false for the keyset
// cursors' rows, a backfill's reads and a stream that does not say.
func (r Row) Transaction() (Transaction, bool) {
	if r.ch == nil || r.ch.Commit == nil || r.read {
		return Transaction{}, false
	}
	c := r.ch.Commit
	t := Transaction{ID: c.ID, ChangeVersion: c.Version, CommitTime: c.Time, Index: int(r.ch.Index), Last: r.ch.Last}
	if c.LSN != 0 {
		t.CommitLSN = FormatLSN(c.LSN)
	}
	return t, true
}

// FormatLSN writes a PostgreSQL log sequence number as PostgreSQL does: two hexadecimal halves.
func FormatLSN(lsn uint64) string {
	b := strconv.AppendUint(make([]byte, 0, 17), lsn>>32, 16)
	b = append(b, '/')
	return strings.ToUpper(string(strconv.AppendUint(b, lsn&0xffffffff, 16)))
}

// Before returns the row as it was before the change: for an update or a delete whose old row
// the database sent (PostgreSQL under REPLICA IDENTITY FULL); false otherwise (the keyset
// cursors, SQL Server Change Tracking, a default replica identity, inserts and reads).
func (r Row) Before() (Row, bool) {
	old := r.old()
	if old == nil || r.read {
		return Row{}, false
	}
	// A column the change lacks (added after it was written) is missing from its old row too.
	return Row{sh: r.sh, ch: &Change{Op: r.ch.Op, Text: old, Decode: r.ch.Decode, Commit: r.ch.Commit, Unchanged: r.ch.Unchanged}}, true
}

// old is the row before the change, as the database sent it: an update's Images.Old, a delete's
// own values when it has its row; nil when none.
func (r Row) old() [][]byte {
	switch {
	case r.ch == nil:
		return nil
	case r.ch.Op == OpDelete && !r.ch.KeyOnly:
		return r.ch.Text
	case r.ch.Images != nil:
		return r.ch.Images.Old
	}
	return nil
}

// Changed lists the columns an update changed, in column order, and true; false when that is
// not known: every op but update, and an update whose database gave neither its old row nor a
// column mask. An update that changed no value gives an empty list and true.
func (r Row) Changed() ([]string, bool) {
	if r.ch == nil || r.ch.Op != OpUpdate || r.read {
		return nil, false
	}
	ch, im, out := r.ch, r.ch.Images, []string{}
	switch {
	case im == nil:
		return nil, false
	case im.Changed != nil:
		out = r.sh.columnsIn(out, im.Changed)
	case im.Old != nil && ch.Text != nil:
		for i := range ch.Text {
			if r.unchanged(i) {
				continue
			}
			if (im.Old[i] == nil) != (ch.Text[i] == nil) || string(im.Old[i]) != string(ch.Text[i]) {
				out = append(out, r.sh.Cols[i].Name)
			}
		}
	default:
		return nil, false
	}
	return out, true
}

// HasRow reports whether the row carries its columns' values: false for a delete of which the
// database gave only the key (Key still has it). A delete with the old row has it.
func (r Row) HasRow() bool { return r.ch == nil || !r.ch.KeyOnly }

// Unchanged lists the columns whose value the change did not carry (PostgreSQL sends an
// unchanged TOAST value of an update as "unchanged" unless the table has REPLICA IDENTITY FULL):
// Get returns nil for them and MarshalJSON leaves them out. Empty for every other row.
func (r Row) Unchanged() []string {
	if r.ch == nil {
		return nil
	}
	return r.sh.columnsIn(nil, r.ch.Unchanged)
}

// columnsIn appends to out the names of the columns mask marks, in column order.
func (s *Shape) columnsIn(out []string, mask []bool) []string {
	for i, m := range mask {
		if m {
			out = append(out, s.Cols[i].Name)
		}
	}
	return out
}

func (r Row) unchanged(i int) bool { return r.ch != nil && r.ch.Unchanged != nil && r.ch.Unchanged[i] }

// Cursor returns the cursor just after this row: what a checkpoint records.
func (r Row) Cursor() (state.Cursor, error) {
	if r.ch != nil && r.ch.Pos != nil {
		return r.ch.Pos.Cursor(), nil
	}
	if r.ch != nil {
		return r.ch.Cursor, nil
	}
	s := r.sh
	c := state.Cursor{Kind: s.Kind}
	for j, idx := range s.KeyIdx {
		raw, err := s.Codecs[j].Encode(r.At(idx))
		if err != nil {
			key, _ := json.Marshal(r.Key())
			fix := ""
			if j == 0 && errors.Is(err, ErrUnreachableRow) {
				fix = ". " + s.StampFix
			}
			return state.Cursor{}, fmt.Errorf("source: poller %q, table %s, column %q, the row with key %s: %w%s", s.Poller, s.Table, s.KeyCols[j], key, err, fix)
		}
		if j == 0 {
			c.Value = raw
			continue
		}
		if c.Tiebreaker == nil {
			c.Tiebreaker = make(map[string]json.RawMessage, len(s.KeyIdx)-1)
		}
		c.Tiebreaker[s.KeyCols[j]] = raw
	}
	return c, nil
}

// MarshalJSON renders the row as an object in column order. Timestamps are RFC 3339 in UTC with
// their full fractional precision, exact numerics strings, binary base64, NaN and the infinities
// strings, NULL null (docs/types.md). Columns the change did not carry (Unchanged) are left out.
func (r Row) MarshalJSON() ([]byte, error) {
	out := make([]byte, 0, 32*len(r.sh.Cols))
	out = append(out, '{')
	first := true
	for i, c := range r.sh.Cols {
		if r.unchanged(i) {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = jsonenc.AppendString(out, c.Name)
		out = append(out, ':')
		if r.lz != nil {
			var ok bool
			if out, ok = r.lz.appendJSON(out, i, &r.sh.Cols[i]); ok {
				continue
			}
		}
		var err error
		if out, err = appendValue(out, r.At(i), &r.sh.Cols[i]); err != nil {
			return nil, fmt.Errorf("source: column %q: %w", c.Name, err)
		}
	}
	return append(out, '}'), nil
}

// appendValue appends v, a value of column c as a Row holds it, in its JSON form
// (docs/types.md): floats as encoding/json writes them (a single-precision column's with float32
// digits) but NaN and the infinities as strings, times as jsonenc.AppendTime writes them, an
// array's elements as their type's values.
func appendValue(out []byte, v any, c *Column) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(out, "null"...), nil
	case int64:
		return strconv.AppendInt(out, v, 10), nil
	case string:
		return jsonenc.AppendString(out, v), nil
	case time.Time:
		return jsonenc.AppendTime(out, v), nil
	case float64:
		if c.Class == ClassReal {
			return jsonenc.AppendFloat(out, v, 32), nil
		}
		return jsonenc.AppendFloat(out, v, 64), nil
	case float32:
		return jsonenc.AppendFloat(out, float64(v), 32), nil
	case []any:
		e := c
		if c.elem != nil {
			e = c.elem
		}
		out = append(out, '[')
		for i, x := range v {
			if i > 0 {
				out = append(out, ',')
			}
			var err error
			if out, err = appendValue(out, x, e); err != nil {
				return nil, err
			}
		}
		return append(out, ']'), nil
	}
	j, err := json.Marshal(v)
	if raw, ok := v.(json.RawMessage); ok && err != nil {
		// A JSON column holding text that is not JSON (MariaDB's JSON with its check switched
		// off): the text, as a string, rather than a batch that cannot be sent.
		return jsonenc.AppendString(out, []byte(raw)), nil
	}
	if err != nil {
		return nil, err
	}
	return append(out, j...), nil
}

// Decode copies the row into the struct dst points to. A field takes the column named by its
// `db` tag, else the column whose name equals the field's name ignoring case; a field tagged
// `db:"-"` is skipped, and columns without a field are ignored. Values convert as they would in
// database/sql's Scan: numbers and decimal strings to any numeric field, timestamps from
// time.Time or RFC 3339 text, and any field implementing sql.Scanner receives the value.
func (r Row) Decode(dst any) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("source: Decode needs a pointer to a struct, not %T", dst)
	}
	base := rv.UnsafePointer()
	rv = rv.Elem()
	plan := r.sh.planFor(rv.Type())
	for _, p := range plan {
		if p.direct != directNone && r.lz != nil && r.lz.set(unsafe.Add(base, p.offset), p.kind, p.col, p.direct) {
			continue
		}
		f, v := rv.FieldByIndex(p.field), r.At(p.col)
		var err error
		if p.scanner {
			err = f.Addr().Interface().(sql.Scanner).Scan(v)
		} else {
			err = assignValue(f, v)
		}
		if err != nil {
			return fmt.Errorf("source: column %q into field %s.%s: %w", r.sh.Cols[p.col].Name, rv.Type().Name(), rv.Type().FieldByIndex(p.field).Name, err)
		}
	}
	return nil
}

// fieldPlan is where Decode puts a column: the field's index and what it is, found once per
// struct type and source rather than per row.
type fieldPlan struct {
	field   []int
	col     int
	scanner bool // *T implements sql.Scanner: the value goes to its Scan
	// direct is how a raw row's value can go to the field without boxing (lazyRow.set): to the
	// field of kind kind at offset in the struct (directNone for a field reached through an
	// embedded pointer).
	direct direct
	kind   reflect.Kind
	offset uintptr
}

// TaggedField is an exported, non-embedded struct field with a `db:"column[,option...]"` tag
// other than "-".
type TaggedField struct {
	reflect.StructField
	Column  string   // "" when the tag names none
	Options []string // what follows the column: key, cursor (package poller)
}

// TaggedFields lists t's tagged fields in order (none when t is not a struct): the one reading of
// the db tag for poller.New, pollertest and Decode's tagged fields.
func TaggedFields(t reflect.Type) []TaggedField {
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []TaggedField
	for _, f := range reflect.VisibleFields(t) {
		tag, ok := f.Tag.Lookup("db")
		if !ok || tag == "-" || !f.IsExported() || f.Anonymous {
			continue
		}
		column, options, _ := strings.Cut(tag, ",")
		tf := TaggedField{StructField: f, Column: column}
		if options != "" {
			tf.Options = strings.Split(options, ",")
		}
		out = append(out, tf)
	}
	return out
}

// A decodePlan is Decode's plan for one struct type.
type decodePlan struct {
	t    reflect.Type
	plan []fieldPlan
}

// planFor returns Decode's plan for struct type t: from the source's last one when it is for t
// (a poller decodes into one type, row after row: one pointer comparison per row), else from
// its map of plans by type.
func (s *Shape) planFor(t reflect.Type) []fieldPlan {
	if p := s.lastPlan.Load(); p != nil && p.t == t {
		return p.plan
	}
	if p, ok := s.plans.Load(t); ok {
		s.lastPlan.Store(p.(*decodePlan))
		return p.(*decodePlan).plan
	}
	var plan []fieldPlan
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name, tagged := f.Tag.Lookup("db")
		name, _, _ = strings.Cut(name, ",") // options such as key and cursor (package poller)
		if name == "-" {
			continue
		}
		for i, c := range s.Cols {
			if (tagged && c.Name == name) || (!tagged && strings.EqualFold(c.Name, f.Name)) {
				p := fieldPlan{field: f.Index, col: i, scanner: scans(f.Type)}
				if off, ok := fieldOffset(t, f.Index); ok && !p.scanner {
					p.direct, p.kind, p.offset = directFor(f.Type, &s.Cols[i]), f.Type.Kind(), off
				}
				plan = append(plan, p)
				break
			}
		}
	}
	p := &decodePlan{t: t, plan: plan}
	s.plans.Store(t, p)
	s.lastPlan.Store(p)
	return plan
}

// fieldOffset is the offset in struct type t of the field at index, false when the way to it
// goes through an embedded pointer.
func fieldOffset(t reflect.Type, index []int) (uintptr, bool) {
	var off uintptr
	for n, i := range index {
		if t.Kind() != reflect.Struct {
			return 0, false
		}
		f := t.Field(i)
		off += f.Offset
		if t = f.Type; n < len(index)-1 && t.Kind() == reflect.Pointer {
			return 0, false
		}
	}
	return off, true
}

var (
	scannerType = reflect.TypeFor[sql.Scanner]()
	timeType    = reflect.TypeFor[time.Time]()
	stringType  = reflect.TypeFor[string]()
)

// scanners caches, by type T, whether *T implements sql.Scanner: reflect's Implements, asked
// for every field of every row, was half the handler's CPU catching up through a typed poller.
var scanners sync.Map // reflect.Type -> bool

func scans(t reflect.Type) bool {
	if v, ok := scanners.Load(t); ok {
		return v.(bool)
	}
	ok := reflect.PointerTo(t).Implements(scannerType)
	scanners.Store(t, ok)
	return ok
}

func assign(f reflect.Value, v any) error {
	if f.CanAddr() && scans(f.Type()) {
		return f.Addr().Interface().(sql.Scanner).Scan(v)
	}
	return assignValue(f, v)
}

// setTime sets a time.Time field, through its address when it has one: reflect.ValueOf(t)
// would box each time.Time.
func setTime(f reflect.Value, t time.Time) {
	if f.CanAddr() {
		*f.Addr().Interface().(*time.Time) = t
		return
	}
	f.Set(reflect.ValueOf(t))
}

// assignValue is assign for a field that is not a sql.Scanner.
func assignValue(f reflect.Value, v any) error {
	if f.Kind() == reflect.Pointer {
		if v == nil {
			f.SetZero()
			return nil
		}
		p := reflect.New(f.Type().Elem())
		if err := assign(p.Elem(), v); err != nil {
			return err
		}
		f.Set(p)
		return nil
	}
	if v == nil {
		f.SetZero()
		return nil
	}
	if f.Type() == timeType {
		switch x := v.(type) {
		case time.Time:
			setTime(f, x)
			return nil
		case string:
			t, err := jsonenc.ParseTime(x)
			if err != nil {
				return err
			}
			setTime(f, t.UTC())
			return nil
		}
		return fmt.Errorf("cannot decode %T", v)
	}
	if raw, ok := v.(json.RawMessage); ok {
		if f.Type() == reflect.TypeFor[json.RawMessage]() {
			f.SetBytes(append([]byte(nil), raw...))
			return nil
		}
		p := reflect.New(f.Type())
		if err := json.Unmarshal(raw, p.Interface()); err != nil {
			return err
		}
		f.Set(p.Elem())
		return nil
	}
	switch f.Kind() {
	case reflect.String:
		switch x := v.(type) {
		case string:
			f.SetString(x)
		case []byte:
			f.SetString(string(x))
		case int64:
			f.SetString(strconv.FormatInt(x, 10))
		case uint64:
			f.SetString(strconv.FormatUint(x, 10))
		case float64:
			f.SetString(strconv.FormatFloat(x, 'g', -1, 64))
		case bool:
			f.SetString(strconv.FormatBool(x))
		case time.Time:
			f.SetString(x.UTC().Format(time.RFC3339Nano))
		default:
			return fmt.Errorf("cannot decode %T", v)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var n int64
		switch x := v.(type) {
		case int64:
			n = x
		case uint64: // MySQL's BIGINT UNSIGNED above the largest int64
			if x > math.MaxInt64 {
				return fmt.Errorf("%d overflows %s", x, f.Type())
			}
			n = int64(x)
		case string:
			var err error
			if n, err = strconv.ParseInt(x, 10, 64); err != nil {
				return err
			}
		case bool:
			if x {
				n = 1
			}
		default:
			return fmt.Errorf("cannot decode %T", v)
		}
		if f.OverflowInt(n) {
			return fmt.Errorf("%d overflows %s", n, f.Type())
		}
		f.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		var n uint64
		switch x := v.(type) {
		case uint64: // MySQL's BIGINT UNSIGNED above the largest int64
			n = x
		case int64:
			if x < 0 {
				return fmt.Errorf("%d is negative", x)
			}
			n = uint64(x)
		case string:
			var err error
			if n, err = strconv.ParseUint(x, 10, 64); err != nil {
				return err
			}
		default:
			return fmt.Errorf("cannot decode %T", v)
		}
		if f.OverflowUint(n) {
			return fmt.Errorf("%d overflows %s", n, f.Type())
		}
		f.SetUint(n)
	case reflect.Float32, reflect.Float64:
		switch x := v.(type) {
		case float64:
			f.SetFloat(x)
		case int64:
			f.SetFloat(float64(x))
		case uint64:
			f.SetFloat(float64(x))
		case string:
			g, err := strconv.ParseFloat(x, 64)
			if err != nil {
				return err
			}
			f.SetFloat(g)
		default:
			return fmt.Errorf("cannot decode %T", v)
		}
	case reflect.Bool:
		switch x := v.(type) {
		case bool:
			f.SetBool(x)
		case int64:
			f.SetBool(x != 0)
		default:
			return fmt.Errorf("cannot decode %T", v)
		}
	case reflect.Slice:
		if a, ok := v.([]any); ok { // an array: element by element, as its elements' columns would
			s := reflect.MakeSlice(f.Type(), len(a), len(a))
			for i, x := range a {
				if err := assign(s.Index(i), x); err != nil {
					return fmt.Errorf("element %d: %w", i, err)
				}
			}
			f.Set(s)
			return nil
		}
		if f.Type().Elem().Kind() != reflect.Uint8 {
			return fmt.Errorf("cannot decode %T into %s", v, f.Type())
		}
		switch x := v.(type) {
		case []byte:
			f.SetBytes(append([]byte(nil), x...))
		case string:
			f.SetBytes([]byte(x))
		default:
			return fmt.Errorf("cannot decode %T", v)
		}
	default:
		rv := reflect.ValueOf(v)
		if !rv.Type().AssignableTo(f.Type()) {
			return fmt.Errorf("cannot decode %T into %s", v, f.Type())
		}
		f.Set(rv)
	}
	return nil
}

// BackfillKey is the row's primary key as one string, the same for a backfill's read of a row
// and for a change of it (each column's value in its key codec, in the key's order): a tick
// matches a chunk's reads with the changes delivered meanwhile by it.
func (r Row) BackfillKey() (string, error) {
	s := r.sh
	var b []byte
	for i, pk := range s.PK {
		idx, codec := s.pkCodec(pk)
		raw, err := codec.Encode(r.At(idx))
		if err != nil {
			return "", fmt.Errorf("source: poller %q, table %s, column %q: %w", s.Poller, s.Table, pk, err)
		}
		if i > 0 {
			b = append(b, 0) // JSON never holds a raw NUL
		}
		b = append(b, raw...)
	}
	return string(b), nil
}
