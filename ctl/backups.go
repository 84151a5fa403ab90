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

	"github.com/pseudotrigger/pseudotrigger/state"
	"github.com/pseudotrigger/pseudotrigger/store"
)

// backupPrefix is where a poller's backups are: backups/{app}/{poller}/.
func (env Env) backupPrefix(pollerName string) string {
	return "backups/" + env.App + "/" + pollerName + "/"
}

// backupEntry is one backup as `backups` lists it.
type backupEntry struct {
	Name         string        `json:"name"` // the blob's full name
	File         string        `json:"file"` // its last path segment, which --from-backup takes
	Cursor       *state.Cursor `json:"cursor,omitempty"`
	FencingToken int64         `json:"fencing_token"`
	Problem      string        `json:"problem,omitempty"` // it does not decode
}

// listBackups returns a poller's backups, newest first (their names are UTC timestamps).
func listBackups(ctx context.Context, env Env, st store.Store, pollerName string) ([]string, error) {
	names, err := st.List(ctx, env.backupPrefix(pollerName))
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", env.backupPrefix(pollerName), err)
	}
	slices.SortFunc(names, func(a, b string) int { return strings.Compare(path.Base(b), path.Base(a)) })
	return names, nil
}

func backupsCmd(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("backups", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "JSON instead of a table")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("backups takes one poller name")
	}
	st, err := env.store()
	if err != nil {
		return err
	}
	name := pos[0]
	names, err := listBackups(ctx, env, st, name)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return usagef("%s has no backups (none under %s)", name, env.backupPrefix(name))
	}
	entries := make([]backupEntry, 0, len(names))
	for _, n := range names {
		e := backupEntry{Name: n, File: path.Base(n)}
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
	fmt.Fprintln(tw, "BACKUP\tCURSOR\tTOKEN")
	for _, e := range entries {
		if e.Problem != "" {
			fmt.Fprintf(tw, "%s\t(does not decode: %s)\t-\n", e.File, truncate(e.Problem, 80))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\n", e.File, cursorText(e.Cursor), e.FencingToken)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "restore one with: pollerctl reset %s --from-backup %s (or latest)\n", name, entries[0].File)
	return nil
}

// readBackup resolves --from-backup's NAME (a file listed by `backups`, or the full blob name)
// or "latest" to a backup of the poller and reads it.
func readBackup(ctx context.Context, env Env, st store.Store, pollerName, which string) (string, []byte, error) {
	blob := which
	switch {
	case which == "latest":
		names, err := listBackups(ctx, env, st, pollerName)
		if err != nil {
			return "", nil, err
		}
		if len(names) == 0 {
			return "", nil, usagef("--from-backup latest: %s has no backups (none under %s)", pollerName, env.backupPrefix(pollerName))
		}
		blob = names[0]
	case !strings.Contains(which, "/"):
		blob = env.backupPrefix(pollerName) + which
	case !strings.HasPrefix(which, env.backupPrefix(pollerName)):
		return "", nil, usagef("--from-backup %s is not one of %s's backups (%s...)", which, pollerName, env.backupPrefix(pollerName))
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
