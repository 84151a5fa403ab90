// Package memstore is an in-memory store.Store with the semantics of Azure Blob Storage: opaque
// ETags that change on every write, conditional writes, and Last-Modified and Date read off an
// injected clock at one-second resolution, like HTTP dates. It passes the same conformance suite
// (storetest) as the blob store.
package memstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// Store is an in-memory store.Store, safe for concurrent use.
type Store struct {
	clock clock.Clock

	mu    sync.Mutex
	seq   uint64
	blobs map[string]entry
}

type entry struct {
	data         []byte
	etag         string
	lastModified time.Time
}

// New returns an empty store reading time from c (the system clock when nil).
func New(c clock.Clock) *Store {
	if c == nil {
		c = clock.System{}
	}
	return &Store{clock: c, blobs: map[string]entry{}}
}

// now is the service clock, truncated to the second like an HTTP date.
func (s *Store) now() time.Time { return s.clock.Now().UTC().Truncate(time.Second).Round(0) }

// Get returns a copy of the blob.
func (s *Store) Get(ctx context.Context, name string) (store.Blob, error) {
	if err := ctx.Err(); err != nil {
		return store.Blob{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.blobs[name]
	if !ok {
		return store.Blob{}, fmt.Errorf("memstore: get %q: %w", name, store.ErrNotFound)
	}
	return store.Blob{
		Data:         append([]byte(nil), e.data...),
		ETag:         e.etag,
		LastModified: e.lastModified,
		Date:         s.now(),
	}, nil
}

// Put writes a copy of data if cond holds.
func (s *Store) Put(ctx context.Context, name string, data []byte, cond store.Condition) (store.Written, error) {
	if err := cond.Validate(); err != nil {
		return store.Written{}, fmt.Errorf("memstore: put %q: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		return store.Written{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, exists := s.blobs[name]
	if cond.IfNoneMatch && exists {
		return store.Written{}, fmt.Errorf("memstore: put %q: blob exists: %w", name, store.ErrConflict)
	}
	if cond.IfMatch != "" && (!exists || e.etag != cond.IfMatch) {
		return store.Written{}, fmt.Errorf("memstore: put %q: etag is not %s: %w", name, cond.IfMatch, store.ErrConflict)
	}
	s.seq++
	now := s.now()
	e = entry{
		data:         append([]byte(nil), data...),
		etag:         fmt.Sprintf("\"0x%016X\"", s.seq),
		lastModified: now,
	}
	s.blobs[name] = e
	return store.Written{ETag: e.etag, LastModified: now, Date: now}, nil
}

// Delete removes the blob if its ETag is cond.IfMatch.
func (s *Store) Delete(ctx context.Context, name string, cond store.Condition) error {
	if cond.IfMatch == "" {
		return fmt.Errorf("memstore: delete %q: %w", name, store.ErrNoCondition)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.blobs[name]; !ok || e.etag != cond.IfMatch {
		return fmt.Errorf("memstore: delete %q: etag is not %s: %w", name, cond.IfMatch, store.ErrConflict)
	}
	delete(s.blobs, name)
	return nil
}

// List returns the sorted names that start with prefix.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	l, err := s.ListTimed(ctx, prefix)
	return l.Names(), err
}

// ListTimed is List with each blob's Last-Modified and the store's clock.
func (s *Store) ListTimed(ctx context.Context, prefix string) (store.Listing, error) {
	if err := ctx.Err(); err != nil {
		return store.Listing{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := store.Listing{Date: s.now()}
	for n, e := range s.blobs {
		if strings.HasPrefix(n, prefix) {
			l.Blobs = append(l.Blobs, store.Listed{Name: n, LastModified: e.lastModified})
		}
	}
	sort.Slice(l.Blobs, func(i, j int) bool { return l.Blobs[i].Name < l.Blobs[j].Name })
	return l, nil
}
