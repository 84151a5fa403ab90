package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/faultpoint"
)

// pollerctl builds cmd/pollerctl once.
func pollerctl(t *testing.T) string { return buildOnce(t, "pollerctl", "../cmd/pollerctl") }

// ctl runs pollerctl with the handler's settings and returns its output; it fails the test on a
// non-zero exit.
func (w *world) ctl(t *testing.T, env []string, args ...string) string {
	t.Helper()
	return ctlRun(t, env, args...)
}

// ctlRun runs pollerctl with env and returns its output; it fails the test on a non-zero exit.
func ctlRun(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(pollerctl(t), args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pollerctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (h *webhook) count(id int64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[id]
}

func (w *world) poison(ids ...int64) {
	w.hook.mu.Lock()
	defer w.hook.mu.Unlock()
	w.hook.poison = map[int64]bool{}
	for _, id := range ids {
		w.hook.poison[id] = true
	}
}

// letters reads every dead letter of the orders poller.
func (w *world) letters(t *testing.T) []*deadletter.Letter {
	t.Helper()
	ids, err := deadletter.List(context.Background(), w.st, w.app, "orders")
	if err != nil {
		t.Fatal(err)
	}
	var out []*deadletter.Letter
	for _, id := range ids {
		l, _, err := deadletter.Read(context.Background(), w.st, w.app, "orders", id)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// deadIDs lists the ids of the rows in the letters.
func deadIDs(letters []*deadletter.Letter) []string {
	var ids []string
	for _, l := range letters {
		for _, r := range l.Rows {
			ids = append(ids, string(r.Key["id"]))
		}
	}
	slices.Sort(ids)
	return ids
}

// tickUntilIdle ticks p (failed ticks included) until a tick is idle.
func tickUntilIdle(t *testing.T, p *proc, deadline time.Duration) {
	t.Helper()
	untilIdle(t, p, p.tick, deadline)
}

// untilIdle calls tick, a timer's invocation of one of p's pollers (failed ones included), until
// one is idle; at the deadline it fails the test with what p printed.
func untilIdle(t *testing.T, p *proc, tick func() reply, deadline time.Duration) {
	t.Helper()
	end := time.Now().Add(deadline)
	pace := time.NewTicker(20 * time.Millisecond) // a timer's schedule
	defer pace.Stop()
	for time.Now().Before(end) {
		if r := tick(); r.status == 200 && r.outcome() == "idle" {
			return
		}
		<-pace.C
	}
	t.Fatalf("no idle tick within %v; the handler printed:\n%s", deadline, p.out.String())
}

// checkAllBut: every row from 1 to n but the poison ones was delivered; the checkpoint is on n.
func (w *world) checkAllBut(t *testing.T, n int64, poison ...int64) {
	t.Helper()
	w.hook.mu.Lock()
	var missing, wrong []int64
	for id := int64(1); id <= n; id++ {
		seen := w.hook.seen[id] > 0
		if slices.Contains(poison, id) && seen {
			wrong = append(wrong, id)
		} else if !slices.Contains(poison, id) && !seen {
			missing = append(missing, id)
		}
	}
	w.hook.mu.Unlock()
	if len(missing) > 0 || len(wrong) > 0 {
		t.Fatalf("rows never delivered: %v; poison rows reported delivered: %v", missing, wrong)
	}
	d, _ := w.doc()
	if d == nil || d.Checkpoint.Cursor == nil || string(d.Checkpoint.Cursor.Tiebreaker["id"]) != fmt.Sprint(n) || d.Failure != nil {
		t.Fatalf("state after the quarantine: %+v, want the checkpoint on row %d and no failure", d, n)
	}
}

// TestPoisonBlocks: a row that always fails stops the poller at its batch. After
// ORDERS_MAX_ATTEMPTS (5) failed attempts every tick says loudly that it is blocked, what on and
// how to unblock it; nothing after the batch is delivered, the checkpoint stays put. Then
// `pollerctl quarantine` unblocks it: the next tick dead-letters exactly that row and goes on.
func TestPoisonBlocks(t *testing.T) {
	w := newWorld(t)
	w.insert(30)
	w.poison(17)
	env := w.env("ORDERS_BATCH_SIZE=10")
	p := start(t, env)
	for attempt := 1; attempt <= 7; attempt++ {
		r := p.tick()
		if r.status != 500 {
			t.Fatalf("attempt %d: %d %s, want 500", attempt, r.status, r.raw)
		}
		blocked := strings.Contains(r.raw, "poller blocked")
		if blocked != (attempt >= 5) {
			t.Fatalf("attempt %d: blocked %v: %s", attempt, blocked, r.raw)
		}
		if blocked && (!strings.Contains(r.raw, "ORDERS_ON_POISON=quarantine") || !strings.Contains(r.raw, "pollerctl quarantine orders") ||
			!strings.Contains(r.raw, `{\"id\":11}..{\"id\":20}`)) {
			t.Fatalf("attempt %d: the error does not say how to unblock or which rows: %s", attempt, r.raw)
		}
		d, _ := w.doc()
		if string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "10" || d.Failure == nil || d.Failure.Attempts != int64(attempt) {
			t.Fatalf("attempt %d: checkpoint %s, failure %+v", attempt, d.Checkpoint.Cursor.Tiebreaker["id"], d.Failure)
		}
	}
	w.hook.mu.Lock()
	for id := int64(11); id <= 30; id++ {
		if w.hook.seen[id] > 0 {
			t.Errorf("row %d was delivered although the poller is blocked before it", id)
		}
	}
	w.hook.mu.Unlock()
	out := p.out.String()
	if !strings.Contains(out, `"msg":"poller blocked"`) || !strings.Contains(out, `"attempts":7`) || !strings.Contains(out, `"keys":"{\"id\":11}..{\"id\":20}"`) {
		t.Fatalf("no 'poller blocked' log line naming the batch, its keys and 7 attempts:\n%s", out)
	}
	if letters := w.letters(t); len(letters) != 0 {
		t.Fatalf("block wrote dead letters: %+v", letters)
	}

	// Unblock it.
	dry := w.ctl(t, env, "quarantine", "orders")
	if !strings.Contains(dry, "dry run") {
		t.Fatalf("quarantine without --yes: %s", dry)
	}
	w.ctl(t, env, "quarantine", "orders", "--yes")
	tickUntilIdle(t, p, time.Minute)
	if ids := deadIDs(w.letters(t)); !slices.Equal(ids, []string{"17"}) {
		t.Fatalf("dead rows %v, want exactly row 17", ids)
	}
	w.checkAllBut(t, 30, 17)
}

// TestQuarantineIsolatesTheRow: with ORDERS_ON_POISON=quarantine, in batches of 1, 7 and 1000, a
// row that always fails is dead-lettered alone with its error, every other row is delivered and
// the checkpoint moves past it; `pollerctl deadletter replay` then delivers it, once the
// webhook takes it, and deletes the letter.
func TestQuarantineIsolatesTheRow(t *testing.T) {
	for _, batch := range []int{1, 7, 1000} {
		t.Run(fmt.Sprintf("batch_%d", batch), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.insert(40)
			w.poison(17)
			env := w.env(fmt.Sprint("ORDERS_BATCH_SIZE=", batch), "ORDERS_ON_POISON=quarantine")
			p := start(t, env)
			tickUntilIdle(t, p, time.Minute)
			letters := w.letters(t)
			if ids := deadIDs(letters); !slices.Equal(ids, []string{"17"}) {
				t.Fatalf("dead rows %v, want exactly row 17", ids)
			}
			l := letters[0]
			if r := l.Rows[0]; !strings.Contains(r.Error, "500") || r.Attempts != 5 || !strings.Contains(string(r.Data), `"customer 17"`) {
				t.Fatalf("dead row: %+v", r)
			}
			if want := min(batch, 40); l.BatchRows != want || l.Delivered != want-1 {
				t.Fatalf("letter of a batch of %d rows, %d delivered; want %d and %d", l.BatchRows, l.Delivered, want, want-1)
			}
			w.checkAllBut(t, 40, 17)
			if !strings.Contains(p.out.String(), `"msg":"batch quarantined"`) {
				t.Fatalf("no 'batch quarantined' log line")
			}

			// Replay it once the webhook takes the row.
			w.poison()
			dry := w.ctl(t, env, "deadletter", "replay", "orders", l.BatchID)
			if !strings.Contains(dry, "dry run") || w.hook.count(17) != 0 {
				t.Fatalf("replay without --yes: %s", dry)
			}
			out := w.ctl(t, env, "deadletter", "replay", "orders", l.BatchID, "--yes")
			if seen := w.hook.count(17); seen != 1 || !strings.Contains(out, "replayed 1 row") {
				t.Fatalf("after the replay row 17 was delivered %d times:\n%s", seen, out)
			}
			if letters := w.letters(t); len(letters) != 0 {
				t.Fatalf("the replayed letter is still there: %+v", letters)
			}
		})
	}
}

// TestQuarantineKilledAtEveryStep: the handler killed at each step of a quarantine (each part
// handed over alone, after the dead letter is stored, before and after the commit); another
// process resumes after the lease's TTL. No row is lost and the poison row ends in a letter.
func TestQuarantineKilledAtEveryStep(t *testing.T) {
	bin := buildFaultBinary(t)
	// 30 rows, batches of 7, row 17 poison: the batch 15..21 is bisected into 15-17, 15, 16-17,
	// 16, 17 and 18-21: six parts.
	type step struct {
		point faultpoint.Point
		nth   int
	}
	var steps []step
	for n := 1; n <= 6; n++ {
		steps = append(steps, step{faultpoint.QuarantineTry, n})
	}
	steps = append(steps, step{faultpoint.AfterDeadLetter, 1})
	for _, s := range steps {
		t.Run(fmt.Sprintf("%s_%d", s.point, s.nth), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.insert(30)
			w.poison(17)
			ctl := newController(t)
			ctl.killAt(s.point, s.nth)
			env := w.env("ORDERS_BATCH_SIZE=7", "ORDERS_ON_POISON=quarantine", "ORDERS_MAX_ATTEMPTS=2", "ORDERS_LEASE_TTL=4s",
				"ORDERS_HEARTBEAT_INTERVAL=1s", "ORDERS_CHECKPOINT_INTERVAL=0s", faultpointEnv+"="+ctl.srv.URL)
			p := startWith(t, bin, env)
			end := time.Now().Add(2 * time.Minute)
			for ctl.fired() == 0 {
				if time.Now().After(end) {
					t.Fatal("the kill never happened")
				}
				if r := p.tick(); r.status == -1 {
					break
				}
			}
			p.kill9()
			p = startWith(t, bin, env)
			tickUntilIdle(t, p, 2*time.Minute)
			if ids := deadIDs(w.letters(t)); !slices.Equal(ids, []string{"17"}) {
				t.Fatalf("dead rows %v, want exactly row 17", ids)
			}
			w.checkAllBut(t, 30, 17)
		})
	}
}
