package sink

import (
	"context"

	"golang.org/x/sync/errgroup"
)

// each runs f(ctx, i) for i in [0, n), at most limit at a time, and returns the first error;
// after an error no new call starts and ctx is cancelled for the running ones.
func each(ctx context.Context, n, limit int, f func(ctx context.Context, i int) error) error {
	if n == 1 || limit == 1 {
		for i := range n {
			if err := f(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { return f(ctx, i) })
	}
	return g.Wait()
}

// byKey groups msgs by Key, in the order each key first appears, each key's messages in order.
func byKey(msgs []Message) [][]Message {
	return groupBy(msgs, func(m Message) string { return m.Key })
}

// groupBy groups msgs by group(m), in the order each group first appears, each group's messages
// in order.
func groupBy[K comparable](msgs []Message, group func(Message) K) [][]Message {
	at := map[K]int{}
	var groups [][]Message
	for _, m := range msgs {
		k := group(m)
		i, ok := at[k]
		if !ok {
			i = len(groups)
			at[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], m)
	}
	return groups
}

// eachInOrder runs f for each message, at most limit at a time, keeping the order of the
// messages of one key (one row's changes): those go one after another, while different keys go
// concurrently. A change stream's insert, update and delete of a row thus reach the service in
// commit order. The first error stops it, as in each.
func eachInOrder(ctx context.Context, msgs []Message, limit int, f func(ctx context.Context, m Message) error) error {
	groups := byKey(msgs)
	return each(ctx, len(groups), limit, func(ctx context.Context, i int) error {
		for _, m := range groups[i] {
			if err := f(ctx, m); err != nil {
				return err
			}
		}
		return nil
	})
}
