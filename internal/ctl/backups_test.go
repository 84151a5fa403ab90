package ctl_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/deadletter"
)

// TestBackupsBesideDeadLetterBackups: a discarded dead letter is backed up beside the state
// backups (backups/{app}/{poller}/deadletter-{batch}-{utc}.json). It is not a state document:
// `backups` lists the state backups newest first with their time, and --from-backup latest
// restores the newest state backup. Before, the dead letter's backup sorted first ("d" > "2")
// and latest picked it, so the restore failed to decode it.
func TestBackupsBesideDeadLetterBackups(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		l := w.acquire("worker-1")
		if err := l.CommitAndRelease(ctx, cp("2026-04-07T01:23:45.123456Z", 42)); err != nil {
			t.Fatal(err)
		}
		if code := w.run("reset", "orders", "--to-cursor", "2026-04-07T01:23:45Z", "--pk", "id=7", "--yes"); code != 0 {
			t.Fatalf("reset: %d %s", code, w.out.String())
		}
		if _, err := deadletter.Write(ctx, w.st, w.app, &deadletter.Letter{Poller: "orders", BatchID: "batch_dead"}); err != nil {
			t.Fatal(err)
		}
		if code := w.run("deadletter", "discard", "orders", "batch_dead", "--yes"); code != 0 {
			t.Fatalf("discard: %d %s", code, w.out.String())
		}

		if code := w.run("backups", "orders", "--json"); code != 0 {
			t.Fatalf("backups: %d %s", code, w.out.String())
		}
		var list []struct {
			File, Time, Problem string
			FencingToken        int64 `json:"fencing_token"`
		}
		if err := json.Unmarshal(w.out.Bytes(), &list); err != nil || len(list) != 1 {
			t.Fatalf("backups --json: want the one state backup: %v\n%s", err, w.out.String())
		}
		if e := list[0]; e.Problem != "" || e.FencingToken != 1 || strings.HasPrefix(e.File, "deadletter-") {
			t.Fatalf("backups --json: %+v", e)
		}
		if at, err := time.Parse(time.RFC3339Nano, list[0].Time); err != nil || time.Since(at) > time.Hour || time.Since(at) < -time.Hour {
			t.Fatalf("backup time %q: %v", list[0].Time, err)
		}
		if code := w.run("backups", "orders"); code != 0 || !strings.Contains(w.out.String(), "TIME") ||
			!strings.Contains(w.out.String(), "1 dead-letter backup") {
			t.Fatalf("backups: %d %s", code, w.out.String())
		}

		if code := w.run("reset", "orders", "--from-backup", "latest", "--yes"); code != 0 {
			t.Fatalf("reset --from-backup latest: %d %s", code, w.out.String())
		}
		if d := w.doc(); string(d.Checkpoint.Cursor.Tiebreaker["id"]) != "42" {
			t.Fatalf("restored %s", d.Checkpoint.Cursor.Tiebreaker)
		}
		// A name without .json is the backup of that name.
		name := strings.TrimSuffix(list[0].File, ".json")
		if code := w.run("reset", "orders", "--from-backup", name, "--yes"); code != 0 {
			t.Fatalf("reset --from-backup %s: %d %s", name, code, w.out.String())
		}
	})
}
