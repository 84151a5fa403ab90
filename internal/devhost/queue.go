package devhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	Name       string // the queue's name
	connection string // the sink's connection (an app setting or its prefix)
	client     *azqueue.QueueClient
}

// StorageQueues returns the storage queues root/name/poller.json sends to (its "sink", its
// tables' and its route's sinks, in the file's order), resolving each one's connection from
// values as the sink does (UseDevelopmentStorage=true is Azurite's queue on 127.0.0.1:10001). It
// returns none and no error when the folder has no poller.json or no sink of it is a storage
// queue (webhooks), also when the file has an error but names no storage queue (or is no JSON):
// there is no queue to speak of, and the handler names the file's error on each tick. Errors
// never quote a connection string.
func StorageQueues(root, name string, values map[string]string) ([]*Queue, error) {
	data, err := os.ReadFile(filepath.Join(root, name, declared.File))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	// The sinks' types alone first: a file with an error elsewhere still says whether it has a
	// queue (an unchecked decode; a field of the wrong type leaves the rest).
	var loose declared.Spec
	_ = json.Unmarshal(data, &loose)
	if !slices.ContainsFunc(loose.Sinks(), isQueue) {
		return nil, nil
	}
	spec, err := declared.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", name, declared.File, err)
	}
	getenv := func(k string) string { return values[k] }
	// One request a progress line, no retries: the next line asks again.
	opts := &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}}
	var out []*Queue
	for _, p := range spec.Sinks() {
		if !isQueue(p) || slices.ContainsFunc(out, func(q *Queue) bool { return q.Name == p.Config.Queue && q.connection == p.Config.Connection }) {
			continue
		}
		q := &Queue{Name: p.Config.Queue, connection: p.Config.Connection}
		if q.client, _, err = azconn.QueueClient(getenv, p.Config.Connection, q.Name, opts); err != nil {
			return nil, fmt.Errorf("%s/%s: %s: %w", name, declared.File, p.Path, err)
		}
		out = append(out, q)
	}
	return out, nil
}

// isQueue says whether p is a storage queue sink.
func isQueue(p declared.PlacedSink) bool { return p.Config.Type == sink.StorageQueue }

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
