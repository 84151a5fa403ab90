// Package store holds the contract of a state store: named blobs written only by compare-and-swap
// on their ETag, read together with the storage service's own clock.
//
// Two implementations live in subpackages: blobstore (Azure Blob Storage, or Azurite) and
// memstore (in memory, for unit tests). storetest is the conformance suite both must pass.
// Implementations map their provider's errors to the sentinels here, so nothing above a store
// inspects SDK errors.
package store

import (
	"context"
	"errors"
	"time"
)

var (
	// ErrNotFound: Get found no blob by that name.
	ErrNotFound = errors.New("store: blob not found")
	// ErrConflict: a write's condition was not met: If-None-Match: * on an existing blob, or
	// If-Match on a blob whose ETag differs or that does not exist.
	ErrConflict = errors.New("store: condition not met")
	// ErrNoCondition: an unconditional write was attempted; every write must be a CAS.
	ErrNoCondition = errors.New("store: a write needs a condition (If-Match or If-None-Match: *)")
)

// Condition is the precondition of a write: exactly one of IfMatch and IfNoneMatch.
type Condition struct {
	IfMatch     string // the ETag the blob must have
	IfNoneMatch bool   // the blob must not exist (If-None-Match: *)
}

// IfMatch is the condition that the blob still has etag.
func IfMatch(etag string) Condition { return Condition{IfMatch: etag} }

// IfNotExists is the condition that the blob does not exist yet.
func IfNotExists() Condition { return Condition{IfNoneMatch: true} }

// Validate returns ErrNoCondition unless exactly one condition is set.
func (c Condition) Validate() error {
	if (c.IfMatch == "") == !c.IfNoneMatch {
		return ErrNoCondition
	}
	return nil
}

// Blob is what a read returned.
type Blob struct {
	Data         []byte
	ETag         string
	LastModified time.Time // the service's clock when the blob was last written (1 s resolution)
	Date         time.Time // the service's clock when it answered the read (1 s resolution)
}

// Written is what a successful write returned.
type Written struct {
	ETag         string
	LastModified time.Time
	Date         time.Time
}

// Store is a blob store whose every write is conditional.
type Store interface {
	// Get reads a blob. A missing blob is ErrNotFound.
	Get(ctx context.Context, name string) (Blob, error)
	// Put writes data under cond. A condition not met is ErrConflict.
	Put(ctx context.Context, name string, data []byte, cond Condition) (Written, error)
	// Delete removes a blob if it still has the ETag cond.IfMatch; another ETag, or no blob, is
	// ErrConflict.
	Delete(ctx context.Context, name string, cond Condition) error
	// List returns the names of the blobs that start with prefix, sorted.
	List(ctx context.Context, prefix string) ([]string, error)
}

// Listed is one blob of a timed listing.
type Listed struct {
	Name         string
	LastModified time.Time // the service's clock when the blob was last written (1 s resolution)
}

// Listing is what a timed listing returned: the blobs, sorted by name, and the service's clock
// when it answered, so that an age is judged on one clock.
type Listing struct {
	Blobs []Listed
	Date  time.Time
}

// Names are the listed blobs' names, in the listing's order.
func (l Listing) Names() []string {
	var names []string
	for _, b := range l.Blobs {
		names = append(names, b.Name)
	}
	return names
}

// TimedLister is a store whose listing also says when each blob was last written, in the same
// requests as List (no blob is read). Both stores here implement it; callers that can do without
// the times ask for it with a type assertion.
type TimedLister interface {
	ListTimed(ctx context.Context, prefix string) (Listing, error)
}
