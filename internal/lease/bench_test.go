package lease_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// BenchmarkLeaseCycle measures, on Azurite, one full tick's lease traffic per iteration:
// read + acquire, a commit, a heartbeat, and the final commit that releases. It reports each
// step's p50 and blob requests, beside a bare GET and a bare conditional PUT measured in the same
// run as the baseline (scripts/bench.sh prints the ratios).
func BenchmarkLeaseCycle(b *testing.B) {
	cs := testenv.Azurite(b)
	ct := &testenv.CountingTransport{}
	bs, err := blobstore.New(blobstore.Settings{Setting: testenv.AzuriteVar, ConnectionString: cs, Container: testenv.Name("bench-")},
		&blobstore.Options{Transport: ct})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	blob := blobName()
	m, err := lease.New(bs, lease.Config{Poller: testPoller, Blob: blob, Owner: "bench", Fingerprint: testFingerprint, Clock: clock.System{}})
	if err != nil {
		b.Fatal(err)
	}
	base, err := bs.Put(ctx, "baseline.json", []byte(`{"x":1}`), store.IfNotExists())
	if err != nil {
		b.Fatal(err)
	}
	etag := base.ETag

	type step struct {
		name       string
		lat        []time.Duration
		gets, puts int64
	}
	steps := map[string]*step{}
	measure := func(name string, fn func()) {
		s := steps[name]
		if s == nil {
			s = &step{name: name}
			steps[name] = s
		}
		g0, p0 := ct.Gets.Load(), ct.Puts.Load()
		t0 := time.Now()
		fn()
		s.lat = append(s.lat, time.Since(t0))
		s.gets += ct.Gets.Load() - g0
		s.puts += ct.Puts.Load() - p0
	}
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}

	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		measure("baseline-get", func() { _, err := bs.Get(ctx, "baseline.json"); must(err) })
		measure("baseline-put", func() {
			w, err := bs.Put(ctx, "baseline.json", []byte(`{"x":2}`), store.IfMatch(etag))
			must(err)
			etag = w.ETag
		})
		var l *lease.Lease
		measure("acquire", func() {
			snap, err := m.Read(ctx)
			must(err)
			res, err := m.Acquire(ctx, snap)
			must(err)
			if !res.Won() {
				b.Fatalf("lease held by %s", res.Holder)
			}
			l = res.Lease
		})
		measure("commit", func() { must(l.Commit(ctx, checkpoint(2*i))) })
		measure("heartbeat", func() { must(l.Heartbeat(ctx)) })
		measure("commit+release", func() { must(l.CommitAndRelease(ctx, checkpoint(2*i+1))) })
	}
	b.StopTimer()
	n := float64(b.N)
	for _, name := range []string{"baseline-get", "baseline-put", "acquire", "commit", "heartbeat", "commit+release"} {
		s := steps[name]
		slices.Sort(s.lat)
		b.ReportMetric(float64(s.lat[len(s.lat)/2].Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(s.gets)/n, name+"-gets")
		b.ReportMetric(float64(s.puts)/n, name+"-puts")
	}
}
