package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
)

type pkFlags []string

func (p *pkFlags) String() string     { return strings.Join(*p, ",") }
func (p *pkFlags) Set(v string) error { *p = append(*p, v); return nil }

// reset is `pollerctl reset`: it builds the new checkpoint from the flag given, checks it against
// the source, reads the state document, plans the operator's takeover (package lease bumps the
// fencing token), shows the plan and, with --yes, backs the old document up and writes the new one.
func reset(fs *flag.FlagSet) runner {
	f := resetFlagSet(fs)
	return func(ctx context.Context, pos []string, env Env) error {
		var err error
		if f.name, err = pollerArg("reset", pos); err != nil {
			return err
		}
		if err := f.check(); err != nil {
			return err
		}
		return f.run(ctx, env)
	}
}

// run is the reset f asks for.
func (f resetFlags) run(ctx context.Context, env Env) error {
	st, err := env.store()
	if err != nil {
		return err
	}
	d, registered := env.definition(f.name)
	if !registered && !f.restores() {
		if err := env.knownPoller(ctx, f.name); err != nil {
			return err
		}
		return usagef("poller %q is not registered in this build: only --from-file or --from-backup can reset it", f.name)
	}
	to, err := f.target(ctx, env, st, d, registered)
	if err != nil {
		return err
	}
	if registered && !f.keepCursor {
		if err := env.checkStreamReset(ctx, d, to.cp.Cursor, to.what); err != nil {
			return err
		}
	}
	op := env.operator(st, f.name)
	cur, err := f.read(ctx, env, op, to)
	if err != nil {
		return err
	}
	unknown := env.refuseUnknown(f.name, "Restoring its state", *f.force, cur.Doc)
	if f.keepCursor {
		var done bool
		if to, done, err = env.keepCursor(ctx, op.Blob, d, cur, to); err != nil || done {
			return err
		}
	}
	plan, err := op.Takeover(cur, to.saved, to.apply)
	if err != nil {
		return refusedf("%v", err) // the fencing token is exhausted
	}
	printPlan(env, f.name, op.Blob, cur, plan.Doc())
	for _, n := range to.notes {
		fmt.Fprintln(env.Out, n)
	}
	if done, err := env.dryRun(f.yes.given(), unknown, nothingWritten); done {
		return err
	}
	if err := confirm(env, f.name, string(*f.yes), *f.production); err != nil {
		return err
	}
	next, err := writeReset(ctx, op, plan)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "reset %s: fencing token %d; a holder of an older lease can no longer commit\n", f.name, next.Lease.FencingToken)
	return nil
}

// resetFlags is what a reset was asked to do: exactly one of the four ways to say where the
// poller goes, and the guardrails.
type resetFlags struct {
	name        string
	toBeginning bool
	keepCursor  bool
	toCursor    string
	pks         pkFlags
	fromFile    string
	fromBackup  string
	guards
}

// resetFlagSet declares a reset's flags on fs.
func resetFlagSet(fs *flag.FlagSet) *resetFlags {
	f := &resetFlags{}
	fs.BoolVar(&f.toBeginning, "to-beginning", false, "start over from the first row")
	fs.BoolVar(&f.keepCursor, "keep-cursor", false, "accept the configured source definition and go on from the saved cursor")
	fs.StringVar(&f.toCursor, "to-cursor", "", "the cursor `VALUE` to resume after")
	fs.Var(&f.pks, "pk", "`COLUMN=VALUE` of the cursor's tiebreaker (repeat for a composite key)")
	fs.StringVar(&f.fromFile, "from-file", "", "a state document saved earlier (e.g. a backup), in `FILE`")
	fs.StringVar(&f.fromBackup, "from-backup", "", "a backup in the state container: a `NAME` that pollerctl backups lists, or latest")
	f.guards = guardFlags(fs, "write")
	return f
}

// check says whether exactly one way to say where the poller goes was given.
func (f resetFlags) check() error {
	modes := 0
	for _, set := range []bool{f.toBeginning, f.keepCursor, f.toCursor != "", f.fromFile != "", f.fromBackup != ""} {
		if set {
			modes++
		}
	}
	if modes != 1 {
		return usagef("give exactly one of --to-beginning, --keep-cursor, --to-cursor VALUE, --from-file FILE, --from-backup NAME|latest")
	}
	if len(f.pks) > 0 && f.toCursor == "" {
		return usagef("--pk goes with --to-cursor")
	}
	return nil
}

// restores reports whether the reset restores a saved document (--from-file, --from-backup).
func (f resetFlags) restores() bool { return f.fromFile != "" || f.fromBackup != "" }

// target is where a reset puts the poller.
type target struct {
	cp          state.Checkpoint
	fingerprint string           // of the source the checkpoint was taken on
	source      *state.SourceDef // that source's parts; nil when unknown (a document restored from before they were recorded)
	saved       *state.Doc       // the document restored (--from-file, --from-backup), else nil
	what        string           // how messages name it: --to-beginning, --keep-cursor, --to-cursor VALUE, or the file or backup
	notes       []string         // said after the plan (what --keep-cursor accepts)
}

// apply is the reset's change to the new document: the checkpoint and the fingerprint, and the
// reset recorded in the tick history, which goes on across it, so that the status page's
// sparkline and "last commit" tell what happened.
func (t target) apply(d *state.Doc, now time.Time) {
	d.SourceFingerprint, d.Source = t.fingerprint, t.source
	d.Checkpoint = t.cp
	d.Checkpoint.UpdatedAt = state.At(now)
	d.AddHistory(state.Tick{At: state.At(now), Outcome: "reset", RowsWaiting: -1})
}

// target builds the new checkpoint from the flag given, each value read as its column's type in
// the source, and the fingerprint of the configured source.
func (f resetFlags) target(ctx context.Context, env Env, st store.Store, d *pollerdef.Def, registered bool) (target, error) {
	if f.restores() {
		return f.restore(ctx, env, st, d, registered)
	}
	id, err := env.identity(d)
	if err != nil {
		return target{}, err
	}
	to := target{fingerprint: id.Fingerprint(), source: &id, what: "--to-beginning"}
	if f.keepCursor { // the checkpoint is the document's: env.keepCursor, once it is read
		to.what = "--keep-cursor"
		return to, nil
	}
	if f.toCursor != "" {
		if to.cp.Cursor, err = env.cursorFromText(ctx, d, f.toCursor, f.pks); err != nil {
			return target{}, err
		}
		to.what = "--to-cursor " + f.toCursor
	}
	return to, nil
}

// restore reads the document of --from-file or --from-backup. For a poller of this build, it
// must have been saved for the configured source, and its cursor must fit the source's table.
func (f resetFlags) restore(ctx context.Context, env Env, st store.Store, d *pollerdef.Def, registered bool) (target, error) {
	origin, data, err := f.readSaved(ctx, env, st)
	if err != nil {
		return target{}, err
	}
	saved, err := state.Decode(origin, f.name, data)
	if err != nil {
		return target{}, usagef("%s: %v", origin, err)
	}
	to := target{cp: saved.Checkpoint, fingerprint: saved.SourceFingerprint, source: saved.Source, saved: saved, what: origin}
	if !registered {
		return to, nil
	}
	if want, err := env.identity(d); err == nil {
		if _, err := state.CheckSource(origin, saved, want); err != nil {
			return target{}, refusedf("%s was saved for another source definition, so restoring it would read from a foreign cursor: %v", origin, err)
		}
		to.fingerprint, to.source = want.Fingerprint(), &want // an accepted older form moves on
	}
	if err := env.checkCursor(ctx, d, to.cp.Cursor, "--from-file "+origin); err != nil {
		return target{}, err
	}
	return to, nil
}

// keepCursor is the target of --keep-cursor: the document's own checkpoint under the configured
// source (to's), refused where the saved cursor would mean nothing there, as
// state.SourceDef.Diff rules: another table, cursor column or kind, a key its tiebreaker holds,
// another slot. The saved cursor is then checked against the table, as a tick would, and so is a
// change stream's position. done: the document is already for the configured source; nothing to do.
func (env Env) keepCursor(ctx context.Context, blob string, d *pollerdef.Def, cur lease.Current, to target) (_ target, done bool, _ error) {
	name := d.Name()
	doc := cur.Doc
	if doc == nil {
		return to, false, refusedf("%s has no state (%s does not exist): there is no place to keep; its first tick starts at the beginning", name, blob)
	}
	if _, err := state.CheckSource(blob, doc, *to.source); err == nil {
		fmt.Fprintf(env.Out, "%s's state is already for the configured source: nothing to accept, nothing written (a payload column added or removed needs no reset)\n", name)
		return to, true, nil
	}
	if doc.Source == nil {
		to.notes = append(to.notes, "The document does not record what its source was (it was written before that was recorded), so what changed cannot be named. "+
			"The saved cursor's kind and key columns were checked against the table; if the table, the database or the cursor column changed, it means nothing there: "+
			"run pollerctl reset "+name+" --to-beginning instead.")
	} else {
		var refused []string
		for _, c := range doc.Source.Diff(*to.source) {
			if !c.KeepsCursor {
				refused = append(refused, fmt.Sprintf("  %s: %s", c, c.Why))
				continue
			}
			to.notes = append(to.notes, fmt.Sprintf("accepted: %s: %s", c, c.Why))
		}
		if len(refused) > 0 {
			return to, false, refusedf("--keep-cursor refused: the saved cursor would mean nothing under the configured definition:\n%s\n"+
				"Start over instead: pollerctl reset %s --to-beginning --yes (or set the position yourself: --to-cursor VALUE)", strings.Join(refused, "\n"), name)
		}
	}
	if err := env.checkCursor(ctx, d, doc.Checkpoint.Cursor, "--keep-cursor"); err != nil {
		return to, false, err
	}
	to.cp = doc.Checkpoint
	return to, false, env.checkStreamReset(ctx, d, to.cp.Cursor, to.what)
}

// readSaved reads the file of --from-file or the backup of --from-backup, and says which it read.
func (f resetFlags) readSaved(ctx context.Context, env Env, st store.Store) (origin string, data []byte, err error) {
	if f.fromBackup != "" {
		return readBackup(ctx, env, st, f.name, f.fromBackup)
	}
	if data, err = os.ReadFile(f.fromFile); err != nil {
		return "", nil, usagef("--from-file: %v", err)
	}
	return f.fromFile, data, nil
}

// read reads the state document and applies the guardrails: a document that does not decode is
// replaced only by a restore, and another owner's live lease refuses the reset (--wait waits for
// it to end).
func (f resetFlags) read(ctx context.Context, env Env, op lease.Operator, to target) (lease.Current, error) {
	cur, err := op.Read(ctx)
	if err != nil {
		return cur, err
	}
	if cur.Problem != nil && to.saved == nil {
		return cur, refusedf("%v\nIt is not overwritten; to replace it, restore a document you trust: pollerctl backups %s lists the backups, pollerctl reset %s --from-backup latest restores the newest (or --from-file FILE)", cur.Problem, f.name, f.name)
	}
	return awaitFree(ctx, env, op, cur, "a reset", *f.wait, *f.waitTimeout)
}

// writeReset backs the old document up and writes the new one over the version read.
func writeReset(ctx context.Context, op lease.Operator, plan lease.Plan) (state.Doc, error) {
	next, err := op.Write(ctx, plan)
	if errors.Is(err, store.ErrConflict) {
		return next, refusedf("the state blob changed since it was read (a tick or another operator wrote it): nothing was overwritten; run the reset again")
	}
	return next, err
}

// openSource opens a poller's source read-only with pollerctl's settings, to check values
// against its column types. A source that cannot be opened refuses the command (exit 2): a value
// is never written unchecked.
func (env Env) openSource(ctx context.Context, d *pollerdef.Def, what string) (*source.Source, error) {
	s, err := appsettings.Load(d, env.Getenv)
	if err != nil && (s.Driver == "" || s.DSN == "") {
		return nil, usagef("%s is checked against the source's column types, which needs its settings: %v", what, err)
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cfg := s.Config(d)
	cfg.MaxOpenConns = 1
	src, err := drivers.Open(octx, cfg)
	if err != nil {
		return nil, usagef("%s is checked against the source's column types, but the source cannot be opened: %v; nothing written", what, err)
	}
	return src, nil
}

// cursorFromText builds the cursor of --to-cursor and --pk, each value read as its column's type
// in the poller's table (an integer key takes digits, a timestamp RFC 3339, ...).
func (env Env) cursorFromText(ctx context.Context, d *pollerdef.Def, value string, pks []string) (*state.Cursor, error) {
	keys := map[string]string{}
	for _, pk := range pks {
		col, v, ok := strings.Cut(pk, "=")
		if !ok || col == "" {
			return nil, usagef("--pk %q: give COLUMN=VALUE", pk)
		}
		if _, dup := keys[col]; dup {
			return nil, usagef("--pk %s is given twice", col)
		}
		keys[col] = v
	}
	src, err := env.openSource(ctx, d, "--to-cursor")
	if err != nil {
		return nil, err
	}
	defer src.Close()
	c, err := src.CursorFromText(value, keys)
	if err != nil {
		return nil, usagef("--to-cursor/--pk: %v; nothing written", err)
	}
	return c, nil
}

// checkCursor refuses a cursor the poller's source cannot hold (exit 2).
func (env Env) checkCursor(ctx context.Context, d *pollerdef.Def, c *state.Cursor, what string) error {
	if c == nil {
		return nil
	}
	src, err := env.openSource(ctx, d, what)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := src.CheckCursor(c); err != nil {
		return usagef("%s: %v; nothing written", what, err)
	}
	return nil
}

// printPlan shows the reset planned: the current document's checkpoint, token, source and
// fingerprint beside the new one's, in aligned columns.
func printPlan(env Env, name, blob string, cur lease.Current, next state.Doc) {
	fmt.Fprintf(env.Out, "reset %s (%s)\n", name, blob)
	oldCursor, oldBatch, oldToken, oldSource, oldFP := "(no state yet)", "-", "-", "-", "-"
	if cur.Problem != nil {
		oldCursor = "(corrupt: replaced from the file)"
	}
	if old := cur.Doc; old != nil {
		oldCursor, oldBatch = old.Checkpoint.Cursor.Text(), orDash(old.Checkpoint.LastSuccessfulBatchID)
		oldToken, oldSource, oldFP = strconv.FormatInt(old.Lease.FencingToken, 10), sourceText(old.Source), shortFingerprint(old.SourceFingerprint)
	}
	tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
	for _, row := range [][3]string{
		{"", "OLD", "NEW"},
		{"cursor", oldCursor, next.Checkpoint.Cursor.Text()},
		{"last batch", oldBatch, orDash(next.Checkpoint.LastSuccessfulBatchID)},
		{"fencing token", oldToken, strconv.FormatInt(next.Lease.FencingToken, 10)},
		{"source", oldSource, sourceText(next.Source)},
		{"fingerprint", oldFP, shortFingerprint(next.SourceFingerprint)},
	} {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", row[0], row[1], row[2])
	}
	tw.Flush()
}

// sourceText names a recorded source in one line: driver, server/database, table, cursor, key,
// filter, slot. "-" when none is recorded.
func sourceText(s *state.SourceDef) string {
	if s == nil {
		return "-"
	}
	table := s.Table
	if s.Schema != "" {
		table = s.Schema + "." + table
	}
	for _, t := range s.Tables {
		table += ", " + t.String()
	}
	where := s.Database
	if s.Server != "" {
		where = s.Server + "/" + where
	}
	t := fmt.Sprintf("%s %s %s cursor %s", s.Driver, where, table, s.CursorKind)
	if s.CursorColumn != "" {
		t += " " + s.CursorColumn
	}
	t += " key " + strings.Join(s.Key, ",")
	if s.Filter != "" {
		t += " where " + s.Filter
	}
	if s.Slot != "" {
		t += " slot " + s.Slot
	}
	return t
}

// shortFingerprint is a fingerprint's first 12 hex digits, enough to tell two apart.
func shortFingerprint(fp string) string {
	if len(fp) > len("sha256:")+12 {
		return fp[:len("sha256:")+12]
	}
	return orDash(fp)
}
