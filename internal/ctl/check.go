package ctl

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
)

// problems is check's answer when a poller's set-up has a problem: exit ExitRefused (1).
type problems struct{ n, pollers int }

func (p problems) Error() string {
	return fmt.Sprintf("check: %d problem(s) in %d poller(s) (see above: each with its fix)", p.n, p.pollers)
}

// checkCmd is `pollerctl check [POLLER] [--fix [--offers] [--yes]]`: it checks each poller's
// source set-up on its own database, with the poller's settings (source.CheckSetup), and prints
// one line per check, each problem followed by the SQL that fixes it, each offer (an optional
// change, such as before images) by its SQL. --fix prints the fixes as one script, the offers'
// too with --offers; with --yes it runs them (in one transaction where the database allows DDL
// in one), prints each statement it ran, and checks again.
func checkCmd(fs *flag.FlagSet) runner {
	fix := fs.Bool("fix", false, "print the fixes as one script (with --yes: run them)")
	offers := fs.Bool("offers", false, "with --fix: take the offers too (such as REPLICA IDENTITY FULL for before images)")
	var yes yesFlag
	fs.Var(&yes, "yes", "with --fix: run the fixes (default: dry run)")
	return func(ctx context.Context, pos []string, env Env) error {
		if len(pos) > 1 {
			return usagef("check takes at most one poller name")
		}
		if yes.given() && !*fix {
			return usagef("check: --yes runs the fixes, with --fix")
		}
		if *offers && !*fix {
			return usagef("check: --offers takes the offers, with --fix")
		}
		defs := env.Pollers
		if len(pos) == 1 {
			d, ok := env.definition(pos[0])
			if !ok {
				return usagef("poller %q is not registered in this build", pos[0])
			}
			defs = []*pollerdef.Def{d}
		} else if *fix {
			return usagef("check --fix takes one poller name: pollerctl check POLLER --fix")
		}
		var total, bad int
		for _, d := range defs {
			n, err := env.checkOne(ctx, d, *fix, *offers, yes.given())
			if err != nil {
				return err
			}
			if n > 0 {
				total, bad = total+n, bad+1
			}
		}
		if total > 0 {
			return problems{total, bad}
		}
		return nil
	}
}

// checkOne checks one poller (and fixes it, when asked), returning how many problems are left.
func (env Env) checkOne(ctx context.Context, d *pollerdef.Def, fix, offers, yes bool) (int, error) {
	name := d.Name()
	if err := d.Err(); err != nil {
		fmt.Fprintf(env.Out, "check %s\n", name)
		printFinding(env, setup.Finding{Check: "definition", Verdict: setup.VerdictProblem, Detail: err.Error()}, "", name)
		return 1, nil
	}
	s, err := appsettings.Load(d, env.Getenv)
	if err != nil && (s.Driver == "" || s.DSN == "") {
		fmt.Fprintf(env.Out, "check %s\n", name)
		printFinding(env, setup.Finding{Check: "settings", Verdict: setup.VerdictProblem, Detail: fmt.Sprintf("%v (pollerctl's environment: the shell, or local.settings.json in this folder)", err)}, "", name)
		return 1, nil
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	su, err := drivers.CheckSetup(octx, s.Config(d))
	if err != nil {
		fmt.Fprintf(env.Out, "check %s\n", name)
		printFinding(env, setup.Finding{Check: "connect", Verdict: setup.VerdictProblem, Detail: err.Error()}, "", name)
		return 1, nil
	}
	defer su.Close()
	su.Offers = offers
	printFindings(env, name, su)
	n := setup.Problems(su.Findings)
	if !fix {
		return n, nil
	}
	script := su.Script()
	if script == "" {
		if n > 0 {
			fmt.Fprintf(env.Out, "fix %s: none of the problems above has a fix in SQL: do what each says\n", name)
		} else {
			fmt.Fprintf(env.Out, "fix %s: nothing to fix\n", name)
		}
		return n, nil
	}
	how := "in one transaction"
	if !su.InTransaction() {
		how = "one by one: this database commits each DDL statement by itself, so a failure stops there, with what ran kept"
	}
	fmt.Fprintf(env.Out, "fix %s (%s):\n%s", name, how, script)
	if !yes {
		fmt.Fprintln(env.Out, "dry run: nothing was changed. Add --yes to run it.")
		return n, nil
	}
	ran, err := su.Apply(ctx)
	for _, q := range ran {
		fmt.Fprintf(env.Out, "ran: %s\n", oneLine(q))
	}
	if err != nil {
		fmt.Fprintf(env.Out, "failed: %v\n", err)
		if !su.InTransaction() && len(ran) > 0 {
			fmt.Fprintf(env.Out, "the %d statement(s) above ran and stay; the rest did not run\n", len(ran))
		}
		return n, refusedf("check %s --fix: %v", name, err)
	}
	if err := su.Check(ctx); err != nil {
		return n, err
	}
	fmt.Fprintln(env.Out, "checked again:")
	printFindings(env, name, su)
	return setup.Problems(su.Findings), nil
}

func printFindings(env Env, name string, su *source.Setup) {
	fmt.Fprintf(env.Out, "check %s (%s)\n", name, su)
	for _, f := range su.Findings {
		printFinding(env, f, su.ScriptOf(f), name)
	}
}

// printFinding prints one check's line of poller name; a problem's fix or an offer's statement
// (script, as the database's client runs it) follows, indented.
func printFinding(env Env, f setup.Finding, script, name string) {
	line := fmt.Sprintf("  %-12s %s", f.Verdict, f.Check)
	if f.Detail != "" {
		line += ": " + f.Detail
	}
	fmt.Fprintln(env.Out, line)
	if f.Verdict != setup.VerdictProblem && f.Verdict != setup.VerdictOffer || script == "" {
		return
	}
	if f.Verdict == setup.VerdictOffer {
		fmt.Fprintf(env.Out, "               to take it (pollerctl check %s --fix --offers --yes runs it):\n", name)
	} else {
		fmt.Fprintln(env.Out, "               fix:")
	}
	for l := range strings.SplitSeq(strings.TrimSuffix(script, "\n"), "\n") {
		fmt.Fprintf(env.Out, "                 %s\n", l)
	}
}

// oneLine is a statement on one line, for the list of what ran.
func oneLine(q string) string { return strings.Join(strings.Fields(q), " ") }
