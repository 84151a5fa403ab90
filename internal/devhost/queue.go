package devhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
	"github.com/pseudotrigger/pseudotrigger/internal/declared"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// Overlay sets each of values' keys that the environment (lookup) also sets to the
// environment's value: the environment wins over local.settings.json, as with Core Tools.
func Overlay(values map[string]string, lookup func(string) (string, bool)) {
	for k := range values {
		if v, ok := lookup(k); ok {
			values[k] = v
		}
	}
}

// Missing returns, sorted, the keys that example sets and values lacks.
func Missing(values, example map[string]string) []string {
	var out []string
	for k := range example {
		if _, ok := values[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Queue is the storage queue a declared poller sends to, for its depth in the progress lines.
type Queue struct {
	Name   string // the queue's name
	client *azqueue.QueueClient
}

// StorageQueue returns the storage queue root/name/poller.json sends to, resolving its
// connection from values as the sink does (UseDevelopmentStorage=true is Azurite's queue on
// 127.0.0.1:10001). It returns nil and no error when the folder has no poller.json or its sink
// is not a storage queue (a webhook), also when the file has an error but names another sink
// or none (or is no JSON): there is no queue to speak of, and the handler names the file's error
// on each tick. Errors never quote a connection string.
func StorageQueue(root, name string, values map[string]string) (*Queue, error) {
	data, err := os.ReadFile(filepath.Join(root, name, declared.File))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	// The sink's type alone first: a file with an error elsewhere still says whether it has a queue.
	var kind struct {
		Sink struct{ Type string }
	}
	if json.Unmarshal(data, &kind) != nil || kind.Sink.Type != sink.StorageQueue {
		return nil, nil
	}
	spec, err := declared.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", name, declared.File, err)
	}
	getenv := func(k string) string { return values[k] }
	q := &Queue{Name: spec.Sink.Queue}
	// One request a progress line, no retries: the next line asks again.
	opts := &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}}
	if q.client, _, err = azconn.QueueClient(getenv, spec.Sink.Connection, q.Name, opts); err != nil {
		return nil, err
	}
	return q, nil
}

// URL is the queue's URL (no key in it).
func (q *Queue) URL() string { return q.client.URL() }

// Depth says how many messages the queue holds, from one GetProperties call
// (ApproximateMessagesCount), as the end of a progress line: "queue orders-changes holds 1500
// messages", or why it cannot tell, by the service's status and error code only.
func (q *Queue) Depth(ctx context.Context) string {
	props, err := q.client.GetProperties(ctx, nil)
	if err != nil {
		var re *azcore.ResponseError
		switch {
		case errors.As(err, &re) && re.StatusCode == 404:
			return fmt.Sprintf("queue %s not created yet", q.Name)
		case errors.As(err, &re):
			return fmt.Sprintf("queue %s: depth unknown (HTTP %d %s)", q.Name, re.StatusCode, re.ErrorCode)
		case ctx.Err() != nil:
			return fmt.Sprintf("queue %s: depth unknown (no answer in time)", q.Name)
		}
		return fmt.Sprintf("queue %s: depth unknown (not reachable)", q.Name)
	}
	n := int32(0)
	if props.ApproximateMessagesCount != nil {
		n = *props.ApproximateMessagesCount
	}
	if n == 1 {
		return fmt.Sprintf("queue %s holds 1 message", q.Name)
	}
	return fmt.Sprintf("queue %s holds %d messages", q.Name, n)
}
