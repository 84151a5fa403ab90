package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/pseudotrigger/pseudotrigger/internal/suggest"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// A runner runs a command with its positional arguments, its flags parsed.
type runner func(ctx context.Context, pos []string, env Env) error

// storeUse is what a command needs of the state store.
type storeUse int

const (
	storeNeeded   storeUse = iota // it reads or writes state: it refuses to start without it
	storeOptional                 // it reads the databases only: without it, it says so and goes on
	storeNone                     // it never touches it, nor says which it is (new)
)

// A command is one of pollerctl's commands, with everything its help says: the help of a
// command, of a group and pollerctl's own are made from here and from the flags the command
// declares, never written out elsewhere.
type command struct {
	name string
	// usage are the synopsis lines after "pollerctl NAME " (for a group: none); one that starts
	// with a space goes on the line before it.
	usage []string
	about string // what it does, a sentence or two
	// example is a command line a user would type (run by TestHelp's parse, so it stays valid).
	example string
	// flags declares the command's flags on fs and returns what runs with them parsed; nil for a
	// group.
	flags func(fs *flag.FlagSet) runner
	subs  []command // a group's subcommands
	store storeUse
}

// commands are pollerctl's commands, in the order its help and its usage error list them.
var commands = []command{
	{name: "status", usage: []string{"[POLLER] [--json] [--no-probe]"}, flags: status,
		about:   "Shows each poller's health, last tick, lag, rows waiting, cursor, lease and failures, one row each; exit 3 when a poller is not ok.",
		example: "pollerctl status orders --json"},
	{name: "reset", flags: reset, usage: []string{
		"POLLER (--to-beginning | --keep-cursor | --to-cursor VALUE [--pk COLUMN=VALUE ...] | --from-file FILE | --from-backup NAME|latest)",
		"  [--yes | --yes=POLLER] [--wait [--wait-timeout 2m]] [--production] [--force]"},
		about: "Moves a poller's checkpoint on purpose, backing the old state document up first and bumping the fencing token. " +
			"--keep-cursor accepts a changed source definition and goes on from the saved cursor, refused where it would mean nothing there; " +
			"a logical poller's VALUE is a position like 0/16D3290, never before its slot's, and its --to-beginning is where the slot is.",
		example: "pollerctl reset orders --to-cursor 2026-04-07T01:23:45.123456Z --pk id=12093"},
	{name: "clone", usage: []string{"POLLER --to NEW [--yes] [--force] [--from-slot-start]"}, flags: clone,
		about: "Starts a new poller at an existing poller's checkpoint (a backfill under its own name, say). " +
			"A logical poller's clone reads its own slot: run pollerctl cdc enable NEW --yes first.",
		example: "pollerctl clone orders --to orders-replay --yes"},
	{name: "delete", usage: []string{"POLLER [--yes | --yes=POLLER] [--wait [--wait-timeout 2m]] [--production] [--force]"}, flags: deleteCmd,
		about:   "Removes a poller's state, backed up first, and its liveness mark; refused while it has dead letters.",
		example: "pollerctl delete orders-replay --yes"},
	{name: "backups", usage: []string{"POLLER [--json]"}, flags: backupsCmd,
		about:   "Lists a poller's state backups, newest first, with cursor and fencing token.",
		example: "pollerctl backups orders"},
	{name: "new", usage: []string{"NAME [--sink " + strings.Join(sink.Types, "|") + "]"}, flags: newCmd, store: storeNone,
		about:   "Writes a new poller into the repository: a Go poller (pollers/NAME/, NAME/function.json), or with --sink a declared one (NAME/function.json and NAME/poller.json, no Go).",
		example: "pollerctl new invoices --sink webhook"},
	{name: "deadletter", about: "A poller's dead letters: the rows a quarantine set aside, each batch's in a letter.", subs: []command{
		{name: "list", usage: []string{"POLLER [--json]"}, flags: deadLetterList,
			about: "Lists a poller's dead letters.", example: "pollerctl deadletter list orders"},
		{name: "show", usage: []string{"POLLER BATCH_ID"}, flags: deadLetterShow,
			about: "Prints one dead letter as stored.", example: "pollerctl deadletter show orders batch_44046a99546e5d2059e79ecb"},
		{name: "replay", usage: []string{"POLLER BATCH_ID [--yes]"}, flags: deadLetterReplay,
			about:   "Reads the letter's rows again from the source by key and hands them to the handler under the poller's lease; the letter is deleted once they went through.",
			example: "pollerctl deadletter replay orders batch_44046a99546e5d2059e79ecb --yes"},
		{name: "discard", usage: []string{"POLLER BATCH_ID [--yes]"}, flags: deadLetterDiscard,
			about:   "Deletes a dead letter, backed up first: its rows are not delivered.",
			example: "pollerctl deadletter discard orders batch_44046a99546e5d2059e79ecb --yes"},
	}},
	{name: "quarantine", usage: []string{"POLLER [--yes] [--wait [--wait-timeout 2m]]"}, flags: quarantineCmd,
		about:   "Unblocks a poller stuck on a failing batch: its next tick hands the batch's halves to the handler, down to single rows, and dead-letters the rows that fail alone.",
		example: "pollerctl quarantine orders --yes"},
	{name: "backfill", usage: []string{"POLLER [--where SQL] [--chunk N] [--yes] [--wait] [--detach]", "POLLER --cancel [--yes] [--wait]"}, flags: backfillCmd,
		about: "Sends the table's current rows again (or those --where selects), as reads, a chunk after each live batch, and follows its progress unless --detach. " +
			"--cancel ends the backfill at the poller's next tick.",
		example: "pollerctl backfill orders --chunk 1000 --yes"},
	{name: "cdc", about: "A change-stream poller's set-up made on purpose (a logical poller's publication and replication slot), with the poller's own settings.", subs: []command{
		{name: "enable", usage: []string{"POLLER [--yes]"}, flags: cdcEnable,
			about: "Creates what the poller's change stream reads: a logical poller's publication and replication slot.", example: "pollerctl cdc enable customers --yes"},
		{name: "disable", usage: []string{"POLLER [--yes | --yes=POLLER] [--wait [--wait-timeout 2m]] [--production]"}, flags: cdcDisable,
			about:   "Drops them: the slot's unread changes are lost, and PostgreSQL frees the WAL it kept.",
			example: "pollerctl cdc disable customers --yes"},
	}},
	{name: "check", usage: []string{"[POLLER] [--fix [--offers] [--yes]]"}, flags: checkCmd, store: storeOptional,
		about: "Checks each poller's table on its own database: columns, unique key, cursor stamped on INSERT and UPDATE, keyset index, privileges; exit 1 when a set-up has a problem. " +
			"--fix prints the SQL that fixes the problems, --yes runs it. It needs no state store: without one it says so and checks all the same.",
		example: "pollerctl check orders --fix"},
}

// commandNames are the names of cs, in order.
func commandNames(cs []command) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.name
	}
	return out
}

// find walks args down the command table: the command they name, its path ("cdc enable") and
// the arguments left for it. It stops at a group when nothing or a -h/--help follows it. A name
// that is none of the commands (or of a group's) is a usage error listing them, with the one
// meant when one is near.
func find(args []string) (command, string, []string, error) {
	cs, path := commands, ""
	for {
		i := indexOf(cs, args[0])
		if i < 0 {
			what, help := "command", "pollerctl --help"
			if path != "" {
				what, help = path+" subcommand", "pollerctl help "+path
			}
			return command{}, path, nil, usagef("unknown %s %q (%s; see %s)%s", what, args[0], strings.Join(commandNames(cs), ", "), help,
				suggest.DidYouMean(args[0], commandNames(cs), strconv.Quote))
		}
		c := cs[i]
		path = strings.TrimSpace(path + " " + c.name)
		args = args[1:]
		if c.subs == nil || len(args) == 0 || isHelp(args[0]) {
			return c, path, args, nil
		}
		cs = c.subs
	}
}

func indexOf(cs []command, name string) int {
	for i, c := range cs {
		if c.name == name {
			return i
		}
	}
	return -1
}

// isHelp says whether arg asks for help.
func isHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "-help" }

// writeHelp prints the help of command c at path: its usage, what it does, its flags (from the
// flag set it declares) and an example; for a group, its subcommands'.
func writeHelp(w io.Writer, c command, path string) {
	if c.subs != nil {
		fmt.Fprintf(w, "Usage: pollerctl %s SUBCOMMAND ...\n\n%s\n\nSubcommands:\n", path, wrap(c.about, "", 100))
		for _, s := range c.subs {
			writeUsage(w, "  ", path+" "+s.name, s.usage)
			fmt.Fprintf(w, "%s\n", wrap(s.about, "      ", 100))
		}
		fmt.Fprintln(w, "\nExamples:")
		for _, s := range c.subs {
			fmt.Fprintf(w, "  %s\n", s.example)
		}
		fmt.Fprintf(w, "\npollerctl %s SUBCOMMAND --help (or pollerctl help %s SUBCOMMAND) shows a subcommand's flags.\n", path, path)
		return
	}
	writeUsage(w, "Usage: ", path, c.usage)
	fmt.Fprintf(w, "\n%s\n", wrap(c.about, "", 100))
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	c.flags(fs)
	if n := countFlags(fs); n > 0 {
		fmt.Fprintln(w, "\nFlags:")
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fs.VisitAll(func(f *flag.Flag) {
			name, usage := flag.UnquoteUsage(f)
			if isBool(f) {
				name = ""
			}
			line := "  --" + f.Name
			if name != "" {
				line += " " + name
			}
			if shownDefault(f) {
				usage += fmt.Sprintf(" (default %s)", f.DefValue)
			}
			fmt.Fprintf(tw, "%s\t%s\n", line, usage)
		})
		tw.Flush()
	}
	fmt.Fprintf(w, "\nExample:\n  %s\n", c.example)
}

// writeUsage prints a command's synopsis lines, the first after lead, the others under it; a
// line that goes on the one before it is indented under that one's arguments.
func writeUsage(w io.Writer, lead, path string, usage []string) {
	pad := strings.Repeat(" ", len(lead))
	for i, u := range usage {
		cmd := "pollerctl " + path + " "
		if strings.HasPrefix(u, " ") {
			cmd, u = strings.Repeat(" ", len(cmd)), strings.TrimSpace(u)
		}
		if i > 0 {
			lead = pad
		}
		fmt.Fprintf(w, "%s%s%s\n", lead, cmd, u)
	}
}

func countFlags(fs *flag.FlagSet) int {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n
}

// isBool says whether f is a flag that takes no value (a bool, or --yes).
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// shownDefault says whether f's default is worth saying: not a zero value.
func shownDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "false", "0", "0s":
		return false
	}
	return true
}

// writeTopHelp prints pollerctl's help: every command's usage and what it does, then what holds
// for all of them.
func writeTopHelp(w io.Writer) {
	fmt.Fprintln(w, "pollerctl: see every poller's state and move one on purpose.")
	fmt.Fprintln(w)
	var walk func(cs []command, path string)
	walk = func(cs []command, path string) {
		for _, c := range cs {
			p := strings.TrimSpace(path + " " + c.name)
			if c.subs != nil {
				walk(c.subs, p)
				continue
			}
			writeUsage(w, "  ", p, c.usage)
			fmt.Fprintf(w, "%s\n", wrap(c.about, "      ", 100))
		}
	}
	walk(commands, "")
	fmt.Fprint(w, helpTail)
}

// wrap breaks text into lines of at most width characters (a longer word stands alone), each
// after indent.
func wrap(text, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	b.WriteString(line)
	return b.String()
}
