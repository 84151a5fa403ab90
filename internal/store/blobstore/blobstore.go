// Package blobstore is the store.Store on Azure Blob Storage (and Azurite).
//
// Every write is one Put Blob request (blockblob.Client.Upload, never UploadBuffer, whose block
// path drops access conditions) carrying If-Match or If-None-Match: *, and returns the new ETag.
// Every read returns the service's Date and Last-Modified headers, the clock lease expiry is
// judged on. SDK errors are mapped to store.ErrNotFound and store.ErrConflict here and nowhere
// else. The container is created on the first write that finds it missing.
package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// Options tune the client. The zero value is production's defaults.
type Options struct {
	// Transport sends the HTTP requests; nil is the SDK's default. Tests use it to count, delay
	// or drop requests.
	Transport policy.Transporter
	// Retry is the SDK's retry policy. Zero fields take: 3 retries, 10 s per try, 200 ms first
	// delay, 2 s longest delay. A retried write that had landed comes back as ErrConflict; the
	// lease protocol settles that by re-reading.
	Retry policy.RetryOptions
	// Credential overrides the identity-based credential chosen from the settings.
	Credential azcore.TokenCredential
}

// Store is a store.Store on one blob container.
type Store struct {
	c        *container.Client
	describe string
	setting  string // the app setting the account came from
	account  string // the account's name, when the settings name it
}

// New connects to the container the settings name. It sends no request.
func New(s Settings, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	copts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: opts.Transport,
		Retry:     azconn.Retry(opts.Retry, 10*time.Second),
		Telemetry: policy.TelemetryOptions{ApplicationID: "pseudotrigger"},
	}}
	var (
		c   *container.Client
		err error
	)
	switch {
	case s.ConnectionString != "":
		c, err = container.NewClientFromConnectionString(s.ConnectionString, s.Container, copts)
		if err != nil {
			// The SDK's message may quote the string; do not pass it on.
			return nil, fmt.Errorf("%s: the connection string is not valid (%s)", s.Setting, redact.ConnectionString(s.ConnectionString))
		}
	case s.ServiceURL != "":
		cred := opts.Credential
		if cred == nil {
			cred, err = azconn.Identity{ClientID: s.ClientID, Credential: s.Credential}.TokenCredential(s.Setting)
			if err != nil {
				return nil, err
			}
		}
		c, err = container.NewClient(s.ServiceURL+"/"+s.Container, cred, copts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Setting, err)
		}
	default:
		return nil, ErrNotConfigured
	}
	return &Store{c: c, describe: s.String(), setting: s.Setting, account: s.account()}, nil
}

// String describes the store without secrets.
func (s *Store) String() string { return s.describe }

// Get reads a blob with the service's Date and Last-Modified.
func (s *Store) Get(ctx context.Context, name string) (store.Blob, error) {
	resp, err := s.c.NewBlobClient(name).DownloadStream(ctx, nil)
	if err != nil {
		return store.Blob{}, mapErr("get", name, err, false)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return store.Blob{}, fmt.Errorf("blobstore: get %q: reading the body: %w", name, err)
	}
	if resp.ETag == nil || resp.LastModified == nil || resp.Date == nil {
		return store.Blob{}, fmt.Errorf("blobstore: get %q: the reply lacks ETag, Last-Modified or Date", name)
	}
	return store.Blob{Data: data, ETag: string(*resp.ETag), LastModified: *resp.LastModified, Date: *resp.Date}, nil
}

// Put writes data in one request under cond, creating the container if it is missing.
func (s *Store) Put(ctx context.Context, name string, data []byte, cond store.Condition) (store.Written, error) {
	if err := cond.Validate(); err != nil {
		return store.Written{}, fmt.Errorf("blobstore: put %q: %w", name, err)
	}
	w, err := s.put(ctx, name, data, cond)
	if bloberror.HasCode(err, bloberror.ContainerNotFound) {
		if cerr := s.createContainer(ctx); cerr != nil {
			return store.Written{}, cerr
		}
		w, err = s.put(ctx, name, data, cond)
	}
	if err != nil {
		return store.Written{}, mapErr("put", name, err, true)
	}
	return w, nil
}

func (s *Store) put(ctx context.Context, name string, data []byte, cond store.Condition) (store.Written, error) {
	mac := &blob.ModifiedAccessConditions{}
	if cond.IfNoneMatch {
		star := azcore.ETagAny
		mac.IfNoneMatch = &star
	} else {
		etag := azcore.ETag(cond.IfMatch)
		mac.IfMatch = &etag
	}
	contentType := "application/json"
	resp, err := s.c.NewBlockBlobClient(name).Upload(ctx, streaming.NopCloser(bytes.NewReader(data)), &blockblob.UploadOptions{
		HTTPHeaders:      &blob.HTTPHeaders{BlobContentType: &contentType},
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: mac},
	})
	if err != nil {
		return store.Written{}, err
	}
	if resp.ETag == nil || resp.LastModified == nil || resp.Date == nil {
		return store.Written{}, fmt.Errorf("blobstore: put %q: the reply lacks ETag, Last-Modified or Date", name)
	}
	return store.Written{ETag: string(*resp.ETag), LastModified: *resp.LastModified, Date: *resp.Date}, nil
}

func (s *Store) createContainer(ctx context.Context) error {
	_, err := s.c.Create(ctx, nil)
	if err == nil || bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		return nil
	}
	return mapErr("create container", "", err, false)
}

// Delete removes a blob if it still has the ETag cond.IfMatch.
func (s *Store) Delete(ctx context.Context, name string, cond store.Condition) error {
	if cond.IfMatch == "" {
		return fmt.Errorf("blobstore: delete %q: %w", name, store.ErrNoCondition)
	}
	etag := azcore.ETag(cond.IfMatch)
	_, err := s.c.NewBlobClient(name).Delete(ctx, &blob.DeleteOptions{AccessConditions: &blob.AccessConditions{
		ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &etag},
	}})
	if err != nil {
		return mapErr("delete", name, err, true)
	}
	return nil
}

// mapErr turns an SDK error into a store sentinel where one applies, and otherwise into a short
// message with the status and the service's error code (the SDK's own text spans many lines).
func mapErr(op, name string, err error, conditional bool) error {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return fmt.Errorf("blobstore: %s %q: %w", op, name, err)
	}
	code := re.ErrorCode
	switch {
	case re.StatusCode == 412 || code == string(bloberror.BlobAlreadyExists):
		return fmt.Errorf("blobstore: %s %q: %s: %w", op, name, code, store.ErrConflict)
	case re.StatusCode == 404 && conditional:
		// Azure may answer If-Match on a missing blob (or container) with 404, Azurite answers
		// 412: both are a condition not met.
		return fmt.Errorf("blobstore: %s %q: %s: %w", op, name, code, store.ErrConflict)
	case re.StatusCode == 404:
		return fmt.Errorf("blobstore: %s %q: %s: %w", op, name, code, store.ErrNotFound)
	case re.StatusCode == 403:
		return fmt.Errorf("blobstore: %s %q: HTTP 403 %s: the identity needs the Storage Blob Data Contributor role on the state container", op, name, code)
	}
	return fmt.Errorf("blobstore: %s %q: HTTP %d %s", op, name, re.StatusCode, code)
}

// List returns the names of the blobs that start with prefix, sorted (the service lists in
// name order). A missing container lists nothing.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	l, err := s.ListTimed(ctx, prefix)
	return l.Names(), err
}

// ListTimed is List with each blob's Last-Modified, as the listing reports it, and the service's
// Date of its first page. A missing container lists nothing.
func (s *Store) ListTimed(ctx context.Context, prefix string) (store.Listing, error) {
	var l store.Listing
	pager := s.c.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if bloberror.HasCode(err, bloberror.ContainerNotFound) {
			return store.Listing{}, nil
		}
		if err != nil {
			return store.Listing{}, mapErr("list", prefix, err, false)
		}
		if l.Date.IsZero() && page.Date != nil {
			l.Date = page.Date.UTC()
		}
		for _, b := range page.Segment.BlobItems {
			if b.Name == nil {
				continue
			}
			item := store.Listed{Name: *b.Name}
			if b.Properties != nil && b.Properties.LastModified != nil {
				item.LastModified = b.Properties.LastModified.UTC()
			}
			l.Blobs = append(l.Blobs, item)
		}
	}
	return l, nil
}
