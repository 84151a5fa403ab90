package row

import (
	"reflect"
	"strconv"
	"time"
	"unsafe"

	"github.com/pseudotrigger/pseudotrigger/internal/jsonenc"
)

// RawRows are a query's rows as the database sent them.
type RawRows interface {
	Next() bool
	// Values are the row's values (nil: NULL), valid until the next call of Next.
	Values() [][]byte
	// Columns decode each column's values; they are safe for concurrent use and keep working
	// after the rows are closed.
	Columns() []RawColumn
	Err() error
}

// A RawColumn decodes one column's values as the database sent them.
type RawColumn struct {
	// Value gives what the driver's database/sql Scan into an any gives.
	Value func([]byte) (any, error)
	// Int and Time, when not nil, give the value an integer or a timestamp column's Value would
	// give once normalized (a Row's value), without boxing it; ok false: use Value. Text says a
	// value's bytes are its text (text, varchar, an exact numeric in text format). Decode and
	// MarshalJSON read those columns through them.
	Int  func([]byte) (n int64, ok bool)
	Time func([]byte) (t time.Time, ok bool)
	Text bool
}

// lazyRow holds a row's values as the database sent them (nil: NULL), decoded when read.
type lazyRow struct {
	text [][]byte
	cols []RawColumn
}

// A direct is the typed way Decode can fill a field from a lazyRow, skipping the boxed value.
type direct uint8

const (
	directNone   direct = iota
	directInt           // an integer field from an integer column (RawColumn.Int)
	directTime          // a time.Time field from a date and time column (RawColumn.Time)
	directString        // a string field from a text or exact numeric column (RawColumn.Text)
)

// directFor is how Decode can fill a field of type t from column c without boxing its value.
func directFor(t reflect.Type, c *Column) direct {
	switch {
	case c.Class == ClassInt && t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return directInt
	case c.Class == ClassTime && t == timeType:
		return directTime
	case (c.Class == ClassText || c.Class == ClassDecimal) && t == stringType:
		return directString
	}
	return directNone
}

// set fills the field at ptr (of a type directFor chose d for, of kind k) with column i's value
// the direct way d; false when it cannot (no typed decoder, NULL, a value that does not fit):
// Decode then takes the general way, which says why.
func (l *lazyRow) set(ptr unsafe.Pointer, k reflect.Kind, i int, d direct) bool {
	t := l.text[i]
	if t == nil {
		return false
	}
	c := &l.cols[i]
	switch d {
	case directInt:
		if c.Int == nil {
			return false
		}
		n, ok := c.Int(t)
		return ok && setInt(ptr, k, n)
	case directTime:
		if c.Time == nil {
			return false
		}
		v, ok := c.Time(t)
		if ok {
			*(*time.Time)(ptr) = v
		}
		return ok
	case directString:
		if !c.Text {
			return false
		}
		*(*string)(ptr) = string(t)
		return true
	}
	return false
}

// setInt stores n in the integer of kind k at ptr; false when it does not fit.
func setInt(ptr unsafe.Pointer, k reflect.Kind, n int64) bool {
	switch k {
	case reflect.Int64:
		*(*int64)(ptr) = n
	case reflect.Int:
		if n != int64(int(n)) {
			return false
		}
		*(*int)(ptr) = int(n)
	case reflect.Int32:
		if n != int64(int32(n)) {
			return false
		}
		*(*int32)(ptr) = int32(n)
	case reflect.Int16:
		if n != int64(int16(n)) {
			return false
		}
		*(*int16)(ptr) = int16(n)
	case reflect.Int8:
		if n != int64(int8(n)) {
			return false
		}
		*(*int8)(ptr) = int8(n)
	default:
		return false
	}
	return true
}

// value is column i's value as the driver's database/sql Scan would give it, or already
// normalized (an integer, a time, text); bytes that do not decode (which the database never
// sends for the type it described) are returned as a string.
func (l *lazyRow) value(i int) any {
	t := l.text[i]
	if t == nil {
		return nil
	}
	c := &l.cols[i]
	switch {
	case c.Int != nil:
		if n, ok := c.Int(t); ok {
			return n
		}
	case c.Time != nil:
		if v, ok := c.Time(t); ok {
			return v
		}
	case c.Text:
		return string(t)
	}
	v, err := c.Value(t)
	if err != nil {
		return string(t)
	}
	return v
}

// appendJSON appends column i's value as MarshalJSON renders it, read straight from the bytes
// for an integer, a time, text and an exact numeric of column c; false for the others.
func (l *lazyRow) appendJSON(out []byte, i int, c *Column) ([]byte, bool) {
	t := l.text[i]
	if t == nil {
		return append(out, "null"...), true
	}
	rc := &l.cols[i]
	switch {
	case rc.Int != nil && c.Class == ClassInt:
		if n, ok := rc.Int(t); ok {
			return strconv.AppendInt(out, n, 10), true
		}
	case rc.Time != nil && c.Class == ClassTime:
		if v, ok := rc.Time(t); ok {
			return jsonenc.AppendTime(out, v), true
		}
	case rc.Text && (c.Class == ClassText || c.Class == ClassDecimal):
		return jsonenc.AppendString(out, t), true
	}
	return out, false
}

// rawBlock is the size of the blocks a batch's raw values are copied into.
const rawBlock = 32 << 10

// A RawCopier copies rows' raw values into blocks shared by a batch's rows (rawBlock bytes;
// per rows' value slices and lazyRows at a time): a row costs no allocation of its own.
type RawCopier struct {
	n, per int // values a row keeps (its first n), rows per allocation
	texts  [][]byte
	lazies []lazyRow
	block  []byte
}

// NewRawCopier copies the first n values of each row, allocating for per rows at a time.
func NewRawCopier(n, per int) *RawCopier { return &RawCopier{n: n, per: per} }

// Row copies the first n of vals and returns them as a row of shape sh, decoded by cols when
// read.
func (c *RawCopier) Row(sh *Shape, vals [][]byte, cols []RawColumn) Row {
	return Row{sh: sh, lz: c.lazy(vals, cols)}
}

// lazy copies the first n of vals and returns them as a lazyRow decoded by cols.
func (c *RawCopier) lazy(vals [][]byte, cols []RawColumn) *lazyRow {
	n := c.n
	if len(c.texts) < n {
		c.texts = make([][]byte, n*c.per)
	}
	t := c.texts[:n:n]
	c.texts = c.texts[n:]
	for i, v := range vals[:n] {
		if v == nil {
			t[i] = nil
			continue
		}
		if c.block == nil || cap(c.block)-len(c.block) < len(v) {
			c.block = make([]byte, 0, max(rawBlock, len(v)))
		}
		at := len(c.block)
		c.block = append(c.block, v...)
		t[i] = c.block[at:len(c.block):len(c.block)] // not nil, even when empty
	}
	if len(c.lazies) == 0 {
		c.lazies = make([]lazyRow, c.per)
	}
	lz := &c.lazies[0]
	c.lazies = c.lazies[1:]
	lz.text, lz.cols = t, cols[:n:n]
	return lz
}
