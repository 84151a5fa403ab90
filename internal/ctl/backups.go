package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"path"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

// backupEntry is one backup as `backups` lists it.
type backupEntry struct {
	Name         string        `json:"name"`           // the blob's full name
	File         string        `json:"file"`           // its last path segment, which --from-backup takes
	Time         string        `json:"time,omitempty"` // when it was taken (RFC 3339 UTC, from its name)
	Cursor       *state.Cursor `json:"cursor,omitempty"`
	FencingToken int64         `json:"fencing_token"`
	Problem      string        `json:"problem,omitempty"` // it does not decode
}

// deadLetterBackup is the {what} of a discarded dead letter's backup: not a state document.
const deadLetterBackup = "deadletter-"

// backupTime returns when a backup was taken, from its name; false when the name has no stamp.
func backupTime(name string) (time.Time, bool) {
	base := strings.TrimSuffix(path.Base(name), ".json")
	if len(base) < len(blobpath.BackupStamp) {
		return time.Time{}, false
	}
	t, err := time.Parse(blobpath.BackupStamp, base[len(base)-len(blobpath.BackupStamp):])
	return t, err == nil
}

// listBackups returns a poller's state backups, newest first, and the number of its discarded
// dead letters' backups beside them (deadletter-{batch}-{utc}.json), which are not state documents.
// Names without a time stamp come last.
func listBackups(ctx context.Context, env Env, st store.Store, pollerName string) ([]string, int, error) {
	all, err := st.List(ctx, blobpath.Backups(env.App, pollerName))
	if err != nil {
		return nil, 0, fmt.Errorf("listing %s: %w", blobpath.Backups(env.App, pollerName), err)
	}
	var names []string
	letters := 0
	for _, n := range all {
		if strings.HasPrefix(path.Base(n), deadLetterBackup) {
			letters++
			continue
		}
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		ta, oka := backupTime(a)
		tb, okb := backupTime(b)
		switch {
		case oka && okb && !ta.Equal(tb):
			return tb.Compare(ta)
		case oka != okb:
			if oka {
				return -1
			}
			return 1
		}
		return strings.Compare(b, a)
	})
	return names, letters, nil
}

func backupsCmd(fs *flag.FlagSet) runner {
	asJSON := fs.Bool("json", false, "JSON instead of a table")
	return func(ctx context.Context, pos []string, env Env) error {
		name, err := env.knownPollerArg(ctx, "backups", pos)
		if err != nil {
			return err
		}
		st, err := env.store()
		if err != nil {
			return err
		}
		names, letters, err := listBackups(ctx, env, st, name)
		if err != nil {
			return err
		}
		if len(names) == 0 {
			if letters > 0 {
				return usagef("%s has no state backups under %s (only %d of discarded dead letters)", name, blobpath.Backups(env.App, name), letters)
			}
			return usagef("%s has no backups (none under %s)", name, blobpath.Backups(env.App, name))
		}
		entries := make([]backupEntry, 0, len(names))
		for _, n := range names {
			e := backupEntry{Name: n, File: path.Base(n)}
			if t, ok := backupTime(n); ok {
				e.Time = t.UTC().Format(time.RFC3339Nano)
			}
			b, err := st.Get(ctx, n)
			if err != nil {
				e.Problem = err.Error()
			} else if d, err := state.Decode(n, name, b.Data); err != nil {
				e.Problem = err.Error()
			} else {
				e.Cursor, e.FencingToken = d.Checkpoint.Cursor, d.Lease.FencingToken
			}
			entries = append(entries, e)
		}
		if *asJSON {
			enc := json.NewEncoder(env.Out)
			enc.SetIndent("", "  ")
			return enc.Encode(entries)
		}
		tw := tabwriter.NewWriter(env.Out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "BACKUP\tTIME\tCURSOR\tTOKEN")
		for _, e := range entries {
			if e.Problem != "" {
				fmt.Fprintf(tw, "%s\t%s\t(does not decode: %s)\t-\n", e.File, orDash(e.Time), truncate(e.Problem, 80))
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", e.File, orDash(e.Time), e.Cursor.Text(), e.FencingToken)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if letters > 0 {
			fmt.Fprintf(env.Out, "(and %d dead-letter backup(s) of discarded dead letters, %s%s*, not listed: they are not state documents)\n",
				letters, blobpath.Backups(env.App, name), deadLetterBackup)
		}
		fmt.Fprintf(env.Out, "restore one with: pollerctl reset %s --from-backup %s (or latest)\n", name, entries[0].File)
		return nil
	}
}

// readBackup resolves --from-backup's NAME (a file listed by `backups`, or the full blob name)
// or "latest" to a backup of the poller and reads it.
func readBackup(ctx context.Context, env Env, st store.Store, pollerName, which string) (string, []byte, error) {
	blob := which
	switch {
	case which == "latest":
		names, _, err := listBackups(ctx, env, st, pollerName)
		if err != nil {
			return "", nil, err
		}
		if len(names) == 0 {
			return "", nil, usagef("--from-backup latest: %s has no backups (none under %s)", pollerName, blobpath.Backups(env.App, pollerName))
		}
		blob = names[0]
	case !strings.Contains(which, "/"):
		blob = blobpath.Backups(env.App, pollerName) + which
		if !strings.HasSuffix(blob, ".json") {
			blob += ".json"
		}
	case !strings.HasPrefix(which, blobpath.Backups(env.App, pollerName)):
		return "", nil, usagef("--from-backup %s is not one of %s's backups (%s...)", which, pollerName, blobpath.Backups(env.App, pollerName))
	}
	b, err := st.Get(ctx, blob)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil, usagef("--from-backup: no backup %s (pollerctl backups %s lists them)", blob, pollerName)
	}
	if err != nil {
		return "", nil, err
	}
	return blob, b.Data, nil
}
