package row

import (
	"slices"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Batch is one fetch's rows.
type Batch struct {
	shape *Shape
	From  *state.Cursor // the cursor the batch was read after (nil: the beginning)
	To    *state.Cursor // the cursor after the last row (nil when the batch is empty)
	Rows  []Row
}

// Batch makes an empty batch of the shape's rows, read after from, with room for n rows.
func (s *Shape) Batch(from *state.Cursor, n int) *Batch {
	return &Batch{shape: s, From: from, Rows: make([]Row, 0, n)}
}

// Columns returns the column names, in the order of each row's values: the first table's, for
// a poller of several tables, whose rows each have their table's (Row.Columns); none for a
// batch that no shape made.
func (b *Batch) Columns() []string {
	if b.shape == nil {
		return nil
	}
	return slices.Clone(b.shape.Names)
}

// MarshalJSON renders the rows as a JSON array of objects.
func (b *Batch) MarshalJSON() ([]byte, error) {
	out := []byte{'['}
	for i, r := range b.Rows {
		if i > 0 {
			out = append(out, ',')
		}
		j, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, j...)
	}
	return append(out, ']'), nil
}
