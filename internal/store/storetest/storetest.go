// Package storetest is the conformance suite every store.Store must pass. memstore runs it
// always; blobstore runs it against Azurite (scripts/test.sh starts one) and, when configured,
// against a real account.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// Run runs the suite. newStore returns an empty store (or one in which the blob names the suite
// uses, all under a fresh random prefix, do not exist).
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	su := suite{newStore: newStore, prefix: fmt.Sprintf("conformance/%d/", time.Now().UnixNano())}
	for _, c := range []struct {
		name string
		run  func(*testing.T, suite)
	}{
		{"GetMissing", getMissing},
		{"CreateIfAbsent", createIfAbsent},
		{"IfMatch", ifMatch},
		{"IfMatchMissing", ifMatchMissing},
		{"UnconditionalRefused", unconditionalRefused},
		{"Delete", deleteBlob},
		{"DataRoundTrip", dataRoundTrip},
		{"List", list},
		{"RaceCreate", raceCreate},
		{"RaceUpdate", raceUpdate},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, su) })
	}
}

// suite is what every case gets: a new store, and blob names under the run's own prefix.
type suite struct {
	newStore func(t *testing.T) store.Store
	prefix   string
}

// name is a blob name of the case's own.
func (su suite) name(t *testing.T) string { return su.prefix + t.Name() + ".json" }

var ctx = context.Background()

func getMissing(t *testing.T, su suite) {
	s := su.newStore(t)
	_, err := s.Get(ctx, su.name(t))
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of a missing blob: got %v, want ErrNotFound", err)
	}
}

func createIfAbsent(t *testing.T, su suite) {
	s, n := su.newStore(t), su.name(t)
	w, err := s.Put(ctx, n, []byte(`{"a":1}`), store.IfNotExists())
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if w.ETag == "" || w.LastModified.IsZero() || w.Date.IsZero() {
		t.Fatalf("create returned %+v: want an ETag, Last-Modified and Date", w)
	}
	_, err = s.Put(ctx, n, []byte(`{"a":2}`), store.IfNotExists())
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second create: got %v, want ErrConflict", err)
	}
	b, err := s.Get(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if string(b.Data) != `{"a":1}` || b.ETag != w.ETag {
		t.Fatalf("after a refused create: data %s etag %s, want the first write's (%s)", b.Data, b.ETag, w.ETag)
	}
	if !b.LastModified.Equal(w.LastModified) {
		t.Fatalf("Get's Last-Modified %v differs from Put's %v", b.LastModified, w.LastModified)
	}
	if b.Date.Before(b.LastModified) {
		t.Fatalf("Date %v is before Last-Modified %v", b.Date, b.LastModified)
	}
}

func ifMatch(t *testing.T, su suite) {
	s, n := su.newStore(t), su.name(t)
	w1, err := s.Put(ctx, n, []byte("v1"), store.IfNotExists())
	if err != nil {
		t.Fatal(err)
	}
	w2, err := s.Put(ctx, n, []byte("v2"), store.IfMatch(w1.ETag))
	if err != nil {
		t.Fatalf("update with the current etag: %v", err)
	}
	if w2.ETag == w1.ETag {
		t.Fatalf("the etag did not change on write: %s", w2.ETag)
	}
	_, err = s.Put(ctx, n, []byte("stale"), store.IfMatch(w1.ETag))
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update with a stale etag: got %v, want ErrConflict", err)
	}
	b, err := s.Get(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Data, []byte("v2")) || b.ETag != w2.ETag {
		t.Fatalf("after a stale write: %q %s, want v2 %s", b.Data, b.ETag, w2.ETag)
	}
}

func ifMatchMissing(t *testing.T, su suite) {
	s, n := su.newStore(t), su.name(t)
	_, err := s.Put(ctx, n, []byte("x"), store.IfMatch(`"0x8D000000000000"`))
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("If-Match on a missing blob: got %v, want ErrConflict", err)
	}
	if _, err := s.Get(ctx, n); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused If-Match created the blob: Get says %v", err)
	}
}

func unconditionalRefused(t *testing.T, su suite) {
	s, n := su.newStore(t), su.name(t)
	for _, c := range []store.Condition{{}, {IfMatch: `"x"`, IfNoneMatch: true}} {
		if _, err := s.Put(ctx, n, []byte("x"), c); !errors.Is(err, store.ErrNoCondition) {
			t.Fatalf("Put with condition %+v: got %v, want ErrNoCondition", c, err)
		}
	}
	if _, err := s.Get(ctx, n); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused write created the blob: Get says %v", err)
	}
}

func deleteBlob(t *testing.T, su suite) {
	s, n := su.newStore(t), su.name(t)
	w1, err := s.Put(ctx, n, []byte("v1"), store.IfNotExists())
	if err != nil {
		t.Fatal(err)
	}
	w2, err := s.Put(ctx, n, []byte("v2"), store.IfMatch(w1.ETag))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, n, store.IfMatch(w1.ETag)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("delete with a stale etag: got %v, want ErrConflict", err)
	}
	if err := s.Delete(ctx, n, store.IfMatch(w2.ETag)); err != nil {
		t.Fatalf("delete with the current etag: %v", err)
	}
	if _, err := s.Get(ctx, n); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete: got %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, n, store.IfMatch(w2.ETag)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("delete of a missing blob: got %v, want ErrConflict", err)
	}
	// A deleted blob can be created again (a reset may rely on it).
	if _, err := s.Put(ctx, n, []byte("v3"), store.IfNotExists()); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
}

func dataRoundTrip(t *testing.T, su suite) {
	s, n := su.newStore(t), su.name(t)
	data := make([]byte, 64<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if _, err := s.Put(ctx, n, data, store.IfNotExists()); err != nil {
		t.Fatal(err)
	}
	data[0] = 1 // the store must have copied
	b, err := s.Get(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if b.Data[0] != 0 || len(b.Data) != len(data) || !bytes.Equal(b.Data[1:], data[1:]) {
		t.Fatal("the blob's bytes differ from what was written")
	}
}

func list(t *testing.T, su suite) {
	s := su.newStore(t)
	base := su.prefix + "list/"
	for _, n := range []string{"b.json", "a.json", "sub/c.json"} {
		if _, err := s.Put(ctx, base+n, []byte("{}"), store.IfNotExists()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, su.prefix+"other.json", []byte("{}"), store.IfNotExists()); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{base + "a.json", base + "b.json", base + "sub/c.json"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("List(%q) = %v, want %v", base, got, want)
	}
	if got, err := s.List(ctx, su.prefix+"nothing-here/"); err != nil || len(got) != 0 {
		t.Fatalf("an empty su.prefix listed %v, %v", got, err)
	}
	tl, ok := s.(store.TimedLister)
	if !ok {
		return
	}
	b, err := s.Get(ctx, base+"a.json")
	if err != nil {
		t.Fatal(err)
	}
	l, err := tl.ListTimed(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range l.Blobs {
		names = append(names, x.Name)
		if x.Name == base+"a.json" && !x.LastModified.Equal(b.LastModified) {
			t.Errorf("ListTimed: %s last modified %v, Get says %v", x.Name, x.LastModified, b.LastModified)
		}
	}
	if fmt.Sprint(names) != fmt.Sprint(want) || l.Date.IsZero() || l.Date.Before(b.LastModified) {
		t.Fatalf("ListTimed(%q) = %v at %v, want %v at or after %v", base, names, l.Date, want, b.LastModified)
	}
}

func raceCreate(t *testing.T, su suite) {
	s, n := su.newStore(t), su.name(t)
	wins, conflicts := race(t, 20, func(i int) error {
		_, err := s.Put(ctx, n, fmt.Appendf(nil, "writer %d", i), store.IfNotExists())
		return err
	})
	oneWinner(t, s, n, "creates", wins, conflicts)
}

func raceUpdate(t *testing.T, su suite) {
	s, n := su.newStore(t), su.name(t)
	w, err := s.Put(ctx, n, []byte("start"), store.IfNotExists())
	if err != nil {
		t.Fatal(err)
	}
	wins, conflicts := race(t, 20, func(i int) error {
		_, err := s.Put(ctx, n, fmt.Appendf(nil, "writer %d", i), store.IfMatch(w.ETag))
		return err
	})
	oneWinner(t, s, n, "updates", wins, conflicts)
}

// oneWinner checks a race of 20 writers to n: one won, 19 got ErrConflict, the blob holds the
// winner's data.
func oneWinner(t *testing.T, s store.Store, n, what string, wins []int, conflicts int) {
	t.Helper()
	if len(wins) != 1 || conflicts != 19 {
		t.Fatalf("20 racing %s: %d winners %v and %d conflicts, want 1 and 19", what, len(wins), wins, conflicts)
	}
	b, err := s.Get(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("writer %d", wins[0]); string(b.Data) != want {
		t.Fatalf("the blob holds %q, want the winner's %q", b.Data, want)
	}
}

// race starts n goroutines at one barrier and returns which succeeded and how many got
// ErrConflict; any other error fails the test.
func race(t *testing.T, n int, write func(i int) error) (wins []int, conflicts int) {
	t.Helper()
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		mu    sync.Mutex
		other []error
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			err := write(i)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins = append(wins, i)
			case errors.Is(err, store.ErrConflict):
				conflicts++
			default:
				other = append(other, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("racing writers got errors other than ErrConflict: %v", errors.Join(other...))
	}
	return wins, conflicts
}
