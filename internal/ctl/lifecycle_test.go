package ctl_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/clock"
	"github.com/pseudotrigger/pseudotrigger/internal/ctl"
	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
)

// TestDeleteAndBackups: a clone no tick runs can be deleted (state and liveness mark, the state
// backed up first), after a dry run that deletes nothing; a poller with dead letters or another
// owner's live lease is refused; backups are listed newest first and one is restored by name or
// as latest, without a local file.
func TestDeleteAndBackups(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		l := w.acquire("worker-1")
		if err := l.CommitAndRelease(ctx, cp("2026-04-07T01:23:45.123456Z", 42)); err != nil {
			t.Fatal(err)
		}
		if code := w.run("clone", "orders", "--to", "exp", "--yes"); code != 0 {
			t.Fatalf("clone: %d %s", code, w.out.String())
		}
		mark := blobpath.Liveness(w.app, "exp")
		if _, err := w.st.Put(ctx, mark, []byte(`{"version":1,"poller":"exp","at":null,"outcome":"idle","rows_waiting":0,"interval_seconds":300}`), store.IfNotExists()); err != nil {
			t.Fatal(err)
		}
		expBlob := "state/" + w.app + "/exp.json"
		if code := w.run("delete", "exp"); code != 0 || !strings.Contains(w.out.String(), "dry run") {
			t.Fatalf("dry run: %d %s", code, w.out.String())
		}
		if _, err := w.st.Get(ctx, expBlob); err != nil {
			t.Fatal("the dry run deleted the state")
		}
		// Dead letters hold rows never delivered: refused.
		name, err := deadletter.Write(ctx, w.st, w.app, &deadletter.Letter{Poller: "exp", BatchID: "batch_dead"})
		if err != nil {
			t.Fatal(err)
		}
		if code := w.run("delete", "exp", "--yes"); code != ctl.ExitRefused || !strings.Contains(w.out.String(), "batch_dead") {
			t.Fatalf("delete with a dead letter: %d %s", code, w.out.String())
		}
		b, _ := w.st.Get(ctx, name)
		if err := w.st.Delete(ctx, name, store.IfMatch(b.ETag)); err != nil {
			t.Fatal(err)
		}
		if code := w.run("delete", "exp", "--yes", "--force"); code != 0 || !strings.Contains(w.out.String(), "backed up to backups/"+w.app+"/exp/") { // exp is not in this build
			t.Fatalf("delete: %d %s", code, w.out.String())
		}
		for _, blob := range []string{expBlob, mark} {
			if _, err := w.st.Get(ctx, blob); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s is still there: %v", blob, err)
			}
		}
		if code := w.run("delete", "exp"); code != ctl.ExitUsage || !strings.Contains(w.out.String(), "nothing to delete") {
			t.Fatalf("delete of nothing: %d %s", code, w.out.String())
		}

		// A registered poller: refused while another owner holds the lease; said loudly otherwise.
		held := w.acquire("worker-2")
		if code := w.run("delete", "orders", "--yes"); code != ctl.ExitRefused || !strings.Contains(w.out.String(), "worker-2") {
			t.Fatalf("delete under a live lease: %d %s", code, w.out.String())
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if code := w.run("delete", "orders"); code != 0 || !strings.Contains(w.out.String(), "starts over from the beginning") {
			t.Fatalf("dry run of a registered poller: %d %s", code, w.out.String())
		}

		// Backups: two resets make two; the newest comes first; latest restores it.
		for _, id := range []string{"7", "8"} {
			if code := w.run("reset", "orders", "--to-cursor", "2026-04-07T01:23:45Z", "--pk", "id="+id, "--yes"); code != 0 {
				t.Fatalf("reset: %d %s", code, w.out.String())
			}
		}
		if code := w.run("backups", "orders", "--json"); code != 0 {
			t.Fatalf("backups: %d %s", code, w.out.String())
		}
		var list []struct {
			File   string
			Cursor *state.Cursor
		}
		if err := json.Unmarshal(w.out.Bytes(), &list); err != nil || len(list) != 2 || string(list[0].Cursor.Tiebreaker["id"]) != "7" ||
			string(list[1].Cursor.Tiebreaker["id"]) != "42" {
			t.Fatalf("backups: %v %s", err, w.out.String())
		}
		if code := w.run("reset", "orders", "--from-backup", "latest", "--yes"); code != 0 {
			t.Fatalf("reset --from-backup latest: %d %s", code, w.out.String())
		}
		if d, _ := state.Decode("x", "orders", w.raw().Data); string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "7" {
			t.Fatalf("restored %s", d.Checkpoint.Cursor.Tiebreaker)
		}
		if code := w.run("reset", "orders", "--from-backup", list[1].File, "--yes"); code != 0 {
			t.Fatalf("reset --from-backup NAME: %d %s", code, w.out.String())
		}
		if d, _ := state.Decode("x", "orders", w.raw().Data); string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "42" {
			t.Fatalf("restored %s", d.Checkpoint.Cursor.Tiebreaker)
		}
		if code := w.run("reset", "orders", "--from-backup", "nope.json", "--yes"); code != ctl.ExitUsage || !strings.Contains(w.out.String(), "pollerctl backups orders") {
			t.Fatalf("a missing backup: %d %s", code, w.out.String())
		}
	})
}

// TestAnnounce: every command says on Err which app, store and settings it reads, and when the
// app has no state but others do, names them (a mistyped POLLER_APP_NAME).
func TestAnnounce(t *testing.T) {
	clk := clock.NewFake(time.Now())
	st := memstore.New(clk)
	if _, err := st.Put(ctx, "state/prod-eu/orders.json", []byte(`{}`), store.IfNotExists()); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := ctl.Run(ctx, []string{"status", "--no-probe"}, ctl.Env{Store: st, StoreName: "memstore", Source: "the environment", App: "prod-ue",
		Getenv: func(k string) string { return settings[k] }, Pollers: []*pollerdef.Def{orders}, Out: &out, Err: &errOut, Clock: clk})
	if code != ctl.ExitUnhealthy {
		t.Fatalf("exit %d\n%s", code, out.String())
	}
	for _, want := range []string{`pollerctl: app "prod-ue" · state store memstore · settings from the environment`,
		"no state under state/prod-ue/; this container has state for apps: prod-eu (set POLLER_APP_NAME)"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	if strings.Contains(out.String(), "pollerctl: app") {
		t.Error("the announcement went to stdout")
	}
}
