package source

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// ErrChunkKey says a backfill's stored key does not fit the source's primary key.
var ErrChunkKey = errors.New("the backfill's key does not fit the table's primary key")

// ErrChunkPosition says a change-stream cursor's backfill was given a live position: its rows are
// compared with the change stream's watermarks instead.
var ErrChunkPosition = errors.New("a change-stream cursor's backfill compares its rows with the change stream, not with a position")

// ErrChunkAgain says a change-stream chunk could not be judged against the stream: a transaction
// had committed but was not yet visible when its snapshot was taken (its changes may already have
// been delivered). Nothing of the chunk is used; the caller reads it again after its next live
// batch. Not a failure.
var ErrChunkAgain = errors.New("a transaction committed but not yet visible to the chunk's snapshot: the chunk is read again")

// Backfills says whether the source can run a backfill (ReadChunk): nil for a keyset cursor and
// for a change stream that writes watermarks; else an error wrapping ErrNoWatermark that says why
// not.
func (s *Source) Backfills() error {
	if !s.def.Changes() {
		return nil
	}
	if o := s.def.Outbox; o != nil && o.Messages != "" {
		return fmt.Errorf("source: poller %q: a backfill reads a table's rows, and this outbox has none: its events are the messages of prefix %q, "+
			"which are only in the WAL (an event set aside as a dead letter is sent again with pollerctl deadletter replay)", s.poller, o.Messages)
	}
	if len(s.parts) > 0 {
		return fmt.Errorf("source: poller %q: a backfill reads one table, and the poller reads %s (%w for several tables yet): give a table a poller of its own for its backfill", s.poller, s.label, driver.ErrNoWatermark)
	}
	err := s.reader.(streamReader).Watermarks()
	if err == driver.ErrNoWatermark { //nolint:errorlint // StreamDefaults' bare sentinel, which names nothing
		return fmt.Errorf("source: poller %q: a %s cursor: %w", s.poller, s.def.Cursor.Kind, err)
	}
	return err
}

// A Chunk is one read of a backfill: the table's current rows in primary-key order, a chunk at a
// time, beside the live changes.
type Chunk struct {
	// Rows are the rows to send as reads. For a keyset cursor, those whose version (their cursor)
	// is at or before the live position ReadChunk was given; for a change-stream cursor, every
	// row read (the caller compares them with the change stream: its watermarks).
	Rows []row.Row
	// Left counts the rows read whose version is after the live position: the live batches
	// deliver them; a batch read ahead may hold an older version, which must not follow a read.
	Left int
	// Next is the primary key of the last row read (sent or left), as a backfill's progress
	// keeps it: the next chunk starts after it. Nil when the chunk read no row.
	Next map[string]json.RawMessage
	// Full says the chunk read its limit of rows: more may follow. False: the backfill is done.
	Full bool
	// Watermark, for a change-stream cursor, judges the stream's changes against the chunk's
	// snapshot; nil for a keyset cursor.
	Watermark driver.Watermark
}

// ReadChunk reads up to limit of the table's current rows in primary-key order, after the key
// after (nil: from the first), those that the definition's filter and where (SQL; "": all)
// select: a backfill's chunk. For a keyset cursor each row's version is compared with position,
// the live position (the tick's cursor; nil: the beginning), in the database, with its own
// collation and types: a row after it is left to the live changes (Chunk.Left). A change-stream
// cursor takes no position: every row is returned, read in a snapshot its stream's Watermark
// judges (an error wrapping ErrNoWatermark when the stream has none).
func (s *Source) ReadChunk(ctx context.Context, after map[string]json.RawMessage, where string, position *state.Cursor, limit int) (*Chunk, error) {
	if limit < 1 {
		return nil, fmt.Errorf("source: poller %q: the backfill's chunk is %d rows: at least 1", s.poller, limit)
	}
	if s.def.Changes() && position != nil {
		return nil, fmt.Errorf("source: poller %q, %s cursor: %w", s.poller, s.def.Cursor.Kind, ErrChunkPosition)
	}
	dl := s.dl
	n := 0
	next := func() string { n++; return dl.Placeholder(n) }
	var args []any
	// The last column says whether the row is after the live position: 1 left, 0 sent.
	left := "0"
	if !s.def.Changes() {
		left = "1" // no position: the live changes deliver every row
		if position != nil {
			pos, err := s.keyArgs(position)
			if err != nil {
				return nil, err
			}
			pred, order := dl.Keyset(s.def.Cursor.Kind, driver.QuoteAll(dl, s.shape.KeyCols), keyMarkers(s.shape.Codecs, next), driver.After)
			args = append(args, inMarkerOrder(pos, order)...)
			left = "CASE WHEN " + pred + " THEN 1 ELSE 0 END"
		}
	}
	var preds []string
	if after != nil {
		key, err := s.chunkKeyArgs(after)
		if err != nil {
			return nil, err
		}
		codecs := make([]row.KeyCodec, len(s.def.PK))
		for i, pk := range s.def.PK {
			_, codecs[i] = s.pkCodec(pk)
		}
		pred, order := dl.Keyset(state.KindInteger, driver.QuoteAll(dl, s.def.PK), keyMarkers(codecs, next), driver.After)
		preds = append(preds, pred)
		args = append(args, inMarkerOrder(key, order)...)
	}
	q := dl.Limit(s.sel+", "+left, s.chunkFrom(where, preds...)+" ORDER BY "+strings.Join(driver.QuoteAll(dl, s.def.PK), ", "), next())
	args = append(args, limit)
	if !s.def.Changes() {
		return s.scanChunk(ctx, s.db, q, args, where, limit)
	}
	if err := s.Backfills(); err != nil {
		return nil, err
	}
	var c *Chunk
	wm, err := s.reader.(streamReader).Watermark(ctx, func(tx driver.Querier) error {
		var err error
		c, err = s.scanChunk(ctx, tx, q, args, where, limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	c.Watermark = wm
	return c, nil
}

// scanChunk runs a chunk's query q (ReadChunk) with db: through the driver's ReadRaw when it
// has one and db is the pool (a keyset cursor's chunk), else through database/sql. The query's
// last column says whether the row is after the live position (1: left to the live changes).
func (s *Source) scanChunk(ctx context.Context, db driver.Querier, q string, args []any, where string, limit int) (*Chunk, error) {
	c := &Chunk{}
	var last row.Row
	read := 0
	add := func(r row.Row, left bool) error {
		last = r
		read++
		if left {
			c.Left++
			return nil
		}
		if err := s.checkKeys(r); err != nil { // the live reads never reach it: say so rather than send it
			key, _ := json.Marshal(r.Key())
			return fmt.Errorf("%w, the row with key %s", err, key)
		}
		r = r.AsRead()
		c.Rows = append(c.Rows, r)
		return nil
	}
	n := len(s.shape.Cols)
	if pool, ok := db.(*sql.DB); ok {
		var scanErr error
		handled, err := s.dl.ReadRaw(ctx, pool, q, args, func(rows row.RawRows) error {
			cols := rows.Columns()
			if len(cols) != n+1 {
				scanErr = fmt.Errorf("source: poller %q, table %s: backfill chunk: the query returned %d columns, want %d", s.poller, s.def.Table, len(cols), n+1)
				return scanErr
			}
			cp := row.NewRawCopier(n, min(limit, 256))
			for rows.Next() {
				vals := rows.Values()
				left, err := rawFlag(cols[n], vals[n])
				if err != nil {
					scanErr = s.chunkErr(where, err)
					return scanErr
				}
				if scanErr = add(cp.Row(s.shape, vals, cols), left); scanErr != nil {
					return scanErr
				}
			}
			return rows.Err()
		})
		if handled {
			switch {
			case scanErr != nil:
				return nil, scanErr
			case err != nil:
				return nil, s.chunkErr(where, err)
			}
			return s.endChunk(c, last, read, limit)
		}
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.chunkErr(where, err)
	}
	defer rows.Close()
	for rows.Next() {
		vals := make([]any, n+1)
		ptrs := make([]any, n+1)
		for i := range vals[:n] {
			ptrs[i] = &vals[i]
		}
		var left sql.NullInt64
		ptrs[n] = &left
		if err := rows.Scan(ptrs...); err != nil {
			return nil, s.chunkErr(where, err)
		}
		if err := add(s.shape.Row(vals[:n:n], nil), left.Int64 == 1); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, s.chunkErr(where, err)
	}
	return s.endChunk(c, last, read, limit)
}

// endChunk completes c, which read rows ending with last: Full, Next.
func (s *Source) endChunk(c *Chunk, last row.Row, read, limit int) (*Chunk, error) {
	c.Full = read == limit
	if read > 0 {
		var err error
		if c.Next, err = s.chunkKey(last); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// rawFlag reads a chunk's last column as the database sent it: 1 (true) or 0.
func rawFlag(col row.RawColumn, v []byte) (bool, error) {
	if col.Int != nil {
		if n, ok := col.Int(v); ok {
			return n == 1, nil
		}
	}
	x, err := col.Value(v)
	if err != nil {
		return false, err
	}
	switch n := x.(type) {
	case int64:
		return n == 1, nil
	case int32:
		return n == 1, nil
	}
	return false, fmt.Errorf("the chunk's flag column holds %T, not an integer", x)
}

// CountCap bounds the count of a backfill's estimate (CountChunkRows), so that it stays a short
// read.
const CountCap = 10_000_000

// CountChunkRows counts the rows a backfill with where would read (the definition's filter and
// where), up to limit: a backfill's estimate, the database's own count, bounded so that it stays
// a short read.
func (s *Source) CountChunkRows(ctx context.Context, where string, limit int64) (int64, error) {
	var n int64
	q := "SELECT COUNT(*) FROM (" + s.dl.Limit("1 AS one", s.chunkFrom(where), s.dl.Placeholder(1)) + ") c"
	if err := s.db.QueryRowContext(ctx, q, limit).Scan(&n); err != nil {
		return 0, s.chunkErr(where, err)
	}
	return n, nil
}

// chunkFrom is a backfill's FROM clause: the table, preds, the definition's filter and where.
func (s *Source) chunkFrom(where string, preds ...string) string {
	for _, f := range []string{s.def.Filter, where} {
		if f = strings.TrimSpace(f); f != "" {
			preds = append(preds, "("+f+")")
		}
	}
	from := " FROM " + driver.QuoteTable(s.dl, s.def.Table)
	if len(preds) > 0 {
		from += " WHERE " + strings.Join(preds, " AND ")
	}
	return from
}

func (s *Source) chunkErr(where string, err error) error {
	if strings.TrimSpace(where) == "" {
		return fmt.Errorf("source: poller %q, table %s: backfill chunk: %w", s.poller, s.def.Table, err)
	}
	return fmt.Errorf("source: poller %q, table %s: backfill chunk with --where %q: %w", s.poller, s.def.Table, where, err)
}

// pkCodec returns the codec of primary-key column pk (every key column has one: see lay).
func (s *Source) pkCodec(pk string) (int, row.KeyCodec) {
	i := slices.Index(s.shape.KeyCols, pk)
	return s.shape.KeyIdx[i], s.shape.Codecs[i]
}

// chunkKey is row r's primary key as a backfill keeps it: each column's value in its key codec.
func (s *Source) chunkKey(r row.Row) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(s.def.PK))
	for _, pk := range s.def.PK {
		idx, codec := s.pkCodec(pk)
		raw, err := codec.Encode(r.At(idx))
		if err != nil {
			return nil, fmt.Errorf("source: poller %q, table %s, column %q: %w", s.poller, s.def.Table, pk, err)
		}
		out[pk] = raw
	}
	return out, nil
}

// chunkKeyArgs decodes a backfill's stored key into the primary key's values, in its order.
func (s *Source) chunkKeyArgs(key map[string]json.RawMessage) ([]any, error) {
	if len(key) != len(s.def.PK) {
		return nil, fmt.Errorf("source: poller %q: %w: it has %d columns, the key %d (%s)", s.poller, ErrChunkKey, len(key), len(s.def.PK), strings.Join(s.def.PK, ", "))
	}
	out := make([]any, len(s.def.PK))
	for i, pk := range s.def.PK {
		raw, ok := key[pk]
		if !ok {
			return nil, fmt.Errorf("source: poller %q: %w: it lacks column %q", s.poller, ErrChunkKey, pk)
		}
		_, codec := s.pkCodec(pk)
		v, err := codec.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("source: poller %q: %w: column %q, value %s: %v", s.poller, ErrChunkKey, pk, raw, err)
		}
		out[i] = v
	}
	return out, nil
}
