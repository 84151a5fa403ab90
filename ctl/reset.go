package ctl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/lease"
	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/source"
	"github.com/pseudotrigger/pseudotrigger/state"
	"github.com/pseudotrigger/pseudotrigger/store"
)

type pkFlags []string

func (p *pkFlags) String() string     { return strings.Join(*p, ",") }
func (p *pkFlags) Set(v string) error { *p = append(*p, v); return nil }

func reset(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("reset", flag.ContinueOnError)
	toBeginning := fs.Bool("to-beginning", false, "start over from the first row")
	toCursor := fs.String("to-cursor", "", "the cursor value to resume after")
	var pks pkFlags
	fs.Var(&pks, "pk", "COLUMN=VALUE of the cursor's tiebreaker (repeat for a composite key)")
	fromFile := fs.String("from-file", "", "a state document saved earlier (e.g. a backup)")
	var yes yesFlag
	fs.Var(&yes, "yes", "write (default: dry run); --yes=POLLER confirms a production app without a terminal")
	wait := fs.Bool("wait", false, "wait for another owner's live lease to end")
	waitTimeout := fs.Duration("wait-timeout", 2*time.Minute, "how long --wait waits")
	production := fs.Bool("production", false, "treat the app as production")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("reset takes one poller name")
	}
	name := pos[0]
	modes := 0
	for _, set := range []bool{*toBeginning, *toCursor != "", *fromFile != ""} {
		if set {
			modes++
		}
	}
	if modes != 1 {
		return usagef("give exactly one of --to-beginning, --to-cursor VALUE, --from-file FILE")
	}
	if len(pks) > 0 && *toCursor == "" {
		return usagef("--pk goes with --to-cursor")
	}
	st, err := env.store()
	if err != nil {
		return err
	}
	blob := env.blob(name)
	d, registered := env.definition(name)
	if !registered && *fromFile == "" {
		return usagef("poller %q is not registered in this build: only --from-file can reset it", name)
	}

	// The new checkpoint and fingerprint.
	var (
		cp          state.Checkpoint
		fingerprint string
		fileDoc     *state.Doc
	)
	switch {
	case *fromFile != "":
		data, err := os.ReadFile(*fromFile)
		if err != nil {
			return usagef("--from-file: %v", err)
		}
		if fileDoc, err = state.Decode(*fromFile, name, data); err != nil {
			return usagef("--from-file: %v", err)
		}
		cp, fingerprint = fileDoc.Checkpoint, fileDoc.SourceFingerprint
		if registered {
			if want, err := env.fingerprint(d); err == nil && want != fingerprint {
				return refusedf("%s was saved for source %s, but the poller is now configured for %s: restoring it would read another source from a foreign cursor", *fromFile, fingerprint, want)
			}
		}
	default:
		if fingerprint, err = env.fingerprint(d); err != nil {
			return err
		}
		if *toCursor != "" {
			c, err := cursorFor(d, *toCursor, pks, strings.TrimSpace(env.Getenv(poller.Prefix(name)+"_DB_DRIVER")))
			if err != nil {
				return err
			}
			cp.Cursor = c
		}
	}

	// The current document, and the guardrails.
	old, oldDoc, derr, err := current(ctx, st, blob, name)
	if err != nil {
		return err
	}
	if derr != nil && fileDoc == nil {
		return refusedf("%v\nIt is not overwritten; to replace it, restore a document you trust with --from-file (backups are under backups/%s/%s/)", derr, env.App, name)
	}
	if old, oldDoc, derr, err = awaitFree(ctx, env, st, blob, name, "a reset", *wait, *waitTimeout, old, oldDoc, derr); err != nil {
		return err
	}

	now := env.Clock.Now()
	next := &state.Doc{Version: state.Version, PollerName: name}
	token := int64(0)
	switch {
	case oldDoc != nil:
		token = oldDoc.Lease.FencingToken
	case fileDoc != nil:
		token = fileDoc.Lease.FencingToken // the current blob is corrupt or gone: continue from the file's
	}
	if token >= state.MaxFencingToken {
		return refusedf("the fencing token is exhausted (%d): run this poller under a new name", token)
	}
	next.SourceFingerprint = fingerprint
	next.Checkpoint = cp
	next.Checkpoint.UpdatedAt = state.At(now)
	next.Lease = state.Lease{OwnerID: env.Actor, FencingToken: token + 1, AcquiredAt: state.At(now), HeartbeatAt: state.At(now),
		ExpiresAt: state.At(now), TTLSeconds: int64(lease.DefaultTTL / time.Second), ReleasedAt: state.At(now)}
	next.WriteID = writeID()

	var oldCP *state.Checkpoint
	if oldDoc != nil {
		oldCP = &oldDoc.Checkpoint
	}
	printPlan(env, name, blob, oldCP, derr, &next.Checkpoint, oldDoc, next)
	if !yes.given() {
		fmt.Fprintln(env.Out, "dry run: nothing written. Add --yes to write.")
		return nil
	}
	if err := confirm(env, name, string(yes), *production); err != nil {
		return err
	}
	data, err := state.Encode(next)
	if err != nil {
		return err
	}
	cond := store.IfNotExists()
	if old != nil {
		if _, err := backup(ctx, env, st, name, "", old.Data); err != nil {
			return err
		}
		cond = store.IfMatch(old.ETag)
	}
	if _, err := st.Put(ctx, blob, data, cond); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return refusedf("the state blob changed since it was read (a tick or another operator wrote it): nothing was overwritten; run the reset again")
		}
		return err
	}
	fmt.Fprintf(env.Out, "reset %s: fencing token %d; a holder of an older lease can no longer commit\n", name, next.Lease.FencingToken)
	return nil
}

// awaitFree refuses while another owner's lease on the poller is live, or with wait, waits for it
// to end; it returns the document as last read.
func awaitFree(ctx context.Context, env Env, st store.Store, blob, name, what string, wait bool, timeout time.Duration,
	old *store.Blob, oldDoc *state.Doc, derr error) (*store.Blob, *state.Doc, error, error) {
	deadline := env.Clock.Now().Add(timeout)
	for oldDoc != nil {
		owner, live := lease.Live(oldDoc.Lease, old.LastModified, old.Date, env.Margin)
		if !live {
			break
		}
		if !wait {
			return old, oldDoc, derr, refusedf("%s holds a live lease on %s: %s now could race its tick; run again with --wait to wait for it to end", owner, name, what)
		}
		if !env.Clock.Now().Before(deadline) {
			return old, oldDoc, derr, refusedf("%s still holds a live lease on %s after %v", owner, name, timeout)
		}
		fmt.Fprintf(env.Out, "waiting for %s's lease on %s to end ...\n", owner, name)
		<-env.Clock.After(2 * time.Second)
		var err error
		if old, oldDoc, derr, err = current(ctx, st, blob, name); err != nil {
			return old, oldDoc, derr, err
		}
	}
	return old, oldDoc, derr, nil
}

// backup saves a blob's bytes under backups/{app}/{poller}/{what}{utc}.json before a change.
func backup(ctx context.Context, env Env, st store.Store, name, what string, data []byte) (string, error) {
	b := fmt.Sprintf("backups/%s/%s/%s%s.json", env.App, name, what, env.Clock.Now().UTC().Format("20060102T150405.000000000Z"))
	if _, err := st.Put(ctx, b, data, store.IfNotExists()); err != nil {
		return b, fmt.Errorf("backing up to %s: %w (nothing was changed)", b, err)
	}
	fmt.Fprintf(env.Out, "backed up to %s\n", b)
	return b, nil
}

// cursorFor builds a cursor of the poller's kind from --to-cursor and --pk, validating both.
// On SQLite a timestamp cursor is compared as text, so it is written in the table's fixed-width
// layout (YYYY-MM-DDTHH:MM:SS.ffffffZ), whatever RFC 3339 form the operator typed.
func cursorFor(d poller.Definition, value string, pks []string, driver string) (*state.Cursor, error) {
	kind := d.Source.Cursor.Kind
	c := &state.Cursor{Kind: kind}
	switch kind {
	case state.KindTimestampPK:
		t, err := time.Parse(time.RFC3339Nano, value)
		if err != nil {
			return nil, usagef("--to-cursor: %q is not an RFC 3339 timestamp (the poller's cursor is timestamp+pk on %s)", value, d.Source.Cursor.Column)
		}
		if driver == source.SQLite {
			c.Value, _ = json.Marshal(t.UTC().Format(state.TimeLayout))
		} else {
			c.Value, _ = json.Marshal(t.UTC().Format(time.RFC3339Nano))
		}
	case state.KindInteger, state.KindXID:
		if _, err := strconv.ParseUint(strings.TrimPrefix(value, "-"), 10, 64); err != nil {
			return nil, usagef("--to-cursor: %q is not an integer (the poller's cursor is %s on %s)", value, kind, d.Source.Cursor.Column)
		}
		c.Value = json.RawMessage(value)
	case state.KindRowversion:
		if _, err := hex.DecodeString(strings.TrimPrefix(value, "0x")); err != nil || !strings.HasPrefix(value, "0x") || len(value) != 18 {
			return nil, usagef("--to-cursor: %q is not a rowversion like 0x00000000000007D1", value)
		}
		c.Value, _ = json.Marshal("0x" + strings.ToUpper(value[2:]))
	default:
		return nil, usagef("the poller's cursor kind %q cannot be set from the command line", kind)
	}
	var want []string
	for _, k := range d.Source.PK {
		if k != d.Source.Cursor.Column {
			want = append(want, k)
		}
	}
	got := map[string]json.RawMessage{}
	for _, pk := range pks {
		col, v, ok := strings.Cut(pk, "=")
		if !ok || !slices.Contains(want, col) {
			return nil, usagef("--pk %q: give COLUMN=VALUE for each of the poller's key columns %v", pk, want)
		}
		if _, err := strconv.ParseInt(v, 10, 64); err == nil {
			got[col] = json.RawMessage(v)
		} else {
			got[col], _ = json.Marshal(v)
		}
	}
	if len(got) != len(want) {
		return nil, usagef("--to-cursor needs --pk COLUMN=VALUE for each key column %v", want)
	}
	if len(got) > 0 {
		c.Tiebreaker = got
	}
	return c, c.Validate()
}

func printPlan(env Env, name, blob string, oldCP *state.Checkpoint, derr error, newCP *state.Checkpoint, oldDoc, next *state.Doc) {
	fmt.Fprintf(env.Out, "reset %s (%s)\n", name, blob)
	oldCursor, oldBatch, oldToken, oldFP := "(no state yet)", "-", "-", "-"
	if derr != nil {
		oldCursor = "(corrupt: replaced from the file)"
	}
	if oldCP != nil {
		oldCursor, oldBatch = cursorText(oldCP.Cursor), orDash(oldCP.LastSuccessfulBatchID)
		oldToken, oldFP = strconv.FormatInt(oldDoc.Lease.FencingToken, 10), oldDoc.SourceFingerprint
	}
	fmt.Fprintf(env.Out, "  %-14s %-48s %s\n", "", "OLD", "NEW")
	fmt.Fprintf(env.Out, "  %-14s %-48s %s\n", "cursor", oldCursor, cursorText(newCP.Cursor))
	fmt.Fprintf(env.Out, "  %-14s %-48s %s\n", "last batch", oldBatch, orDash(newCP.LastSuccessfulBatchID))
	fmt.Fprintf(env.Out, "  %-14s %-48s %d\n", "fencing token", oldToken, next.Lease.FencingToken)
	fmt.Fprintf(env.Out, "  %-14s %-48s %s\n", "fingerprint", truncate(oldFP, 46), next.SourceFingerprint)
}

func writeID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
