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
