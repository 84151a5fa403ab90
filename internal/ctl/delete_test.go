package ctl_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
)

// TestDeleteWaitsThenDeletesTheMarkAsItIsNow: delete --wait waits for a live lease to end; the
// ticking owner rewrites its liveness mark meanwhile, and the delete removes the mark as it is
// after the wait. Before, it had read the mark before waiting, so its ETag was stale and the
// delete kept the mark, saying a tick wrote it again.
func TestDeleteWaitsThenDeletesTheMarkAsItIsNow(t *testing.T) {
	clk := clock.NewFake(time.Now())
	w := &world{t: t, st: memstore.New(clk), clk: clk, app: "test"}
	w.acquire("worker-1") // held, never released: it has to expire
	mark := blobpath.Liveness(w.app, "orders")
	markData := []byte(`{"version":1,"poller":"orders","at":null,"outcome":"idle","rows_waiting":0,"interval_seconds":300}`)
	if _, err := w.st.Put(ctx, mark, markData, store.IfNotExists()); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	var out bytes.Buffer
	go func() {
		done <- ctl.Run(ctx, []string{"delete", "orders", "--yes", "--wait"}, ctl.Env{
			Store: w.st, App: w.app, Getenv: func(k string) string { return settings[k] },
			Pollers: []*pollerdef.Def{orders}, Out: &out, In: strings.NewReader(""), Clock: clk, Actor: "pollerctl/test",
		})
	}()
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := clk.BlockUntilWaiters(wait, 1); err != nil {
		t.Fatal("the delete did not wait")
	}
	// The owner's last tick writes its mark again.
	b, err := w.st.Get(ctx, mark)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.Put(ctx, mark, markData, store.IfMatch(b.ETag)); err != nil {
		t.Fatal(err)
	}
	for range 40 { // past TTL + margin, in 2 s polling steps
		clk.Advance(2 * time.Second)
		for clk.Waiters() == 0 {
			select {
			case code := <-done:
				if code != 0 {
					t.Fatalf("after waiting: exit %d\n%s", code, out.String())
				}
				for _, blob := range []string{w.blob(), mark} {
					if _, err := w.st.Get(ctx, blob); !errors.Is(err, store.ErrNotFound) {
						t.Errorf("%s is still there (%v)\n%s", blob, err, out.String())
					}
				}
				return
			case <-wait.Done():
				t.Fatal("the delete neither finished nor waited again")
			case <-time.After(time.Millisecond):
			}
		}
	}
	t.Fatal("the delete never went through after the lease expired")
}

// goneMark deletes the liveness mark just before the delete command removes the state blob,
// as a concurrent cleanup would.
type goneMark struct {
	store.Store
	state, mark string
}

func (g goneMark) Delete(ctx context.Context, name string, cond store.Condition) error {
	if name == g.state {
		if b, err := g.Store.Get(ctx, g.mark); err == nil {
			_ = g.Store.Delete(ctx, g.mark, store.IfMatch(b.ETag))
		}
	}
	return g.Store.Delete(ctx, name, cond)
}

// TestDeleteMarkAlreadyGone: a liveness mark that went between the read and the delete is fine
// (absent is what the delete wants); before, the delete said a tick had written it again.
func TestDeleteMarkAlreadyGone(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		l := w.acquire("worker-1")
		if err := l.CommitAndRelease(ctx, cp("2026-04-07T01:23:45.123456Z", 42)); err != nil {
			t.Fatal(err)
		}
		mark := blobpath.Liveness(w.app, "orders")
		if _, err := w.st.Put(ctx, mark, []byte(`{"version":1,"poller":"orders"}`), store.IfNotExists()); err != nil {
			t.Fatal(err)
		}
		w.st = goneMark{Store: w.st, state: w.blob(), mark: mark}
		if code := w.run("delete", "orders", "--yes"); code != 0 || strings.Contains(w.out.String(), "kept") ||
			!strings.Contains(w.out.String(), "already gone") {
			t.Fatalf("delete: %d %s", code, w.out.String())
		}
	})
}

// TestDeleteWithDeadLettersRefusesBeforeWaiting: dead letters refuse a delete at once, without
// first waiting (--wait) for another owner's lease to end.
func TestDeleteWithDeadLettersRefusesBeforeWaiting(t *testing.T) {
	clk := clock.NewFake(time.Now())
	w := &world{t: t, st: memstore.New(clk), clk: clk, app: "test"}
	w.acquire("worker-1")
	if _, err := deadletter.Write(ctx, w.st, w.app, &deadletter.Letter{Poller: "orders", BatchID: "batch_dead"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() { done <- w.run("delete", "orders", "--yes", "--wait") }()
	select {
	case code := <-done:
		if code != ctl.ExitRefused || !strings.Contains(w.out.String(), "batch_dead") || !strings.Contains(w.out.String(), "deadletter discard") {
			t.Fatalf("exit %d\n%s", code, w.out.String())
		}
	case <-time.After(5 * time.Second):
		clk.Advance(time.Hour) // let it finish
		<-done
		t.Fatal("the delete waited for the lease before looking at the dead letters")
	}
}
