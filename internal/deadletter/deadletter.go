// Package deadletter stores the rows a poller gave up on. Each quarantined batch is one JSON blob,
// deadletter/{app}/{poller}/{batch_id}.json in the state container, holding each failing row
// with its key, its cursor, the row as the handler was given it, the error and the attempts.
//
// The tick writes a dead letter before it moves the checkpoint past the batch, so a crash between
// the two re-runs the batch (and writes the letter again); a row is never dropped without its
// letter. pollerctl lists, shows, replays and discards them.
package deadletter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// Version is the letter format's version.
const Version = 1

// Letter is one quarantined batch.
type Letter struct {
	Version           int           `json:"version"`
	Poller            string        `json:"poller"`
	BatchID           string        `json:"batch_id"`
	SourceFingerprint string        `json:"source_fingerprint"`
	From              *state.Cursor `json:"from"` // the checkpoint before the batch (nil: the beginning)
	To                *state.Cursor `json:"to"`   // the batch's last row
	FencingToken      int64         `json:"fencing_token"`
	CreatedAt         state.Time    `json:"created_at"`
	BatchRows         int           `json:"batch_rows"` // rows in the batch
	Delivered         int           `json:"delivered"`  // of which delivered
	Rows              []Row         `json:"rows"`       // the rows that failed alone
}

// Row is one dead-lettered row.
type Row struct {
	// Table is the row's table (a poller may read several); absent in letters written before
	// it was recorded, whose rows are the poller's first table's.
	Table string `json:"table,omitempty"`
	// Op is the change the row stood for (insert, update, delete; upsert for the keyset cursor
	// kinds): a change-stream poller's replay depends on it. Absent in letters written before it
	// was recorded.
	Op       string                     `json:"op,omitempty"`
	Key      map[string]json.RawMessage `json:"key"`
	Cursor   state.Cursor               `json:"cursor"`
	Data     json.RawMessage            `json:"data"` // the row as the handler was given it
	Error    string                     `json:"error"`
	Attempts int64                      `json:"attempts"`
}

// ErrNotFound: no such dead letter.
var ErrNotFound = errors.New("no such dead letter")

// ReadWriter is what Write needs of a store.
type ReadWriter interface {
	Get(ctx context.Context, name string) (store.Blob, error)
	Put(ctx context.Context, name string, data []byte, cond store.Condition) (store.Written, error)
}

// Write stores l, replacing a letter of the same batch (a re-run after a crash between the letter
// and the checkpoint writes it again).
func Write(ctx context.Context, st ReadWriter, app string, l *Letter) (string, error) {
	l.Version = Version
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return "", err
	}
	name := blobpath.DeadLetter(app, l.Poller, l.BatchID)
	for range 3 {
		_, err = st.Put(ctx, name, data, store.IfNotExists())
		if !errors.Is(err, store.ErrConflict) {
			break
		}
		var b store.Blob
		if b, err = st.Get(ctx, name); errors.Is(err, store.ErrNotFound) {
			continue // discarded meanwhile: create it again
		} else if err != nil {
			break
		}
		if _, err = st.Put(ctx, name, data, store.IfMatch(b.ETag)); !errors.Is(err, store.ErrConflict) {
			break
		}
	}
	if err != nil {
		return "", fmt.Errorf("dead letter %s: %w", name, err)
	}
	return name, nil
}

// Read reads one letter.
func Read(ctx context.Context, st ReadWriter, app, poller, batchID string) (*Letter, store.Blob, error) {
	name := blobpath.DeadLetter(app, poller, batchID)
	b, err := st.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, b, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return nil, b, fmt.Errorf("dead letter %s: %w", name, err)
	}
	l, err := Decode(b.Data)
	if err != nil {
		return nil, b, fmt.Errorf("dead letter %s: %w", name, err)
	}
	return l, b, nil
}

// Decode parses a letter strictly.
func Decode(data []byte) (*Letter, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var l Letter
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("not a dead letter: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not a dead letter: data after the letter")
	}
	if l.Version != Version {
		return nil, fmt.Errorf("dead letter version %d, this build reads version %d", l.Version, Version)
	}
	if l.Poller == "" || l.BatchID == "" {
		return nil, errors.New("not a dead letter: no poller or batch_id")
	}
	return &l, nil
}

// Lister is what List and Summarize need of a store.
type Lister interface {
	List(ctx context.Context, prefix string) ([]string, error)
}

// List returns the batch ids of a poller's letters, sorted.
func List(ctx context.Context, st Lister, app, poller string) ([]string, error) {
	s, err := Summarize(ctx, st, app, poller)
	return s.BatchIDs, err
}

// Summary is what one listing tells of a poller's letters, without reading any of them.
type Summary struct {
	BatchIDs []string // sorted
	// OldestAge is how long before the listing the oldest letter was last written, on the
	// storage service's clock; nil when the store's listing has no times (store.TimedLister).
	OldestAge *time.Duration
}

// Summarize lists a poller's letters in one listing (no letter is read, whatever their number):
// their batch ids and, where the store's listing has times, the oldest one's age.
func Summarize(ctx context.Context, st Lister, app, poller string) (Summary, error) {
	prefix := blobpath.DeadLetters(app, poller)
	var l store.Listing
	if tl, ok := st.(store.TimedLister); ok {
		var err error
		if l, err = tl.ListTimed(ctx, prefix); err != nil {
			return Summary{}, fmt.Errorf("listing %s: %w", prefix, err)
		}
	} else {
		names, err := st.List(ctx, prefix)
		if err != nil {
			return Summary{}, fmt.Errorf("listing %s: %w", prefix, err)
		}
		for _, n := range names {
			l.Blobs = append(l.Blobs, store.Listed{Name: n})
		}
	}
	s := Summary{BatchIDs: make([]string, 0, len(l.Blobs))}
	var oldest time.Time
	for _, b := range l.Blobs {
		id, ok := strings.CutSuffix(strings.TrimPrefix(b.Name, prefix), ".json")
		if !ok || strings.Contains(id, "/") {
			continue
		}
		s.BatchIDs = append(s.BatchIDs, id)
		if !b.LastModified.IsZero() && (oldest.IsZero() || b.LastModified.Before(oldest)) {
			oldest = b.LastModified
		}
	}
	slices.Sort(s.BatchIDs)
	if len(s.BatchIDs) > 0 && !oldest.IsZero() && !l.Date.IsZero() {
		age := max(l.Date.Sub(oldest), 0)
		s.OldestAge = &age
	}
	return s, nil
}

// ListCommand is the command that lists a poller's dead letters (the status and the handler's
// log name it).
func ListCommand(poller string) string { return "pollerctl deadletter list " + poller }

// Delete removes a letter if it is still the one read (etag).
func Delete(ctx context.Context, st store.Store, app, poller, batchID, etag string) error {
	name := blobpath.DeadLetter(app, poller, batchID)
	if err := st.Delete(ctx, name, store.IfMatch(etag)); err != nil {
		return fmt.Errorf("dead letter %s: %w", name, err)
	}
	return nil
}
