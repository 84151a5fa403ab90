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

// problems is check's answer when a poller's set-up has a problem: exit ExitRefused (1). fixed
// counts the problems printed with their fix.
type problems struct{ n, pollers, fixed int }

func (p problems) Error() string {
	see := "each with its fix"
	switch {
	case p.fixed == 0 && p.n == 1:
		see = "it has no fix in SQL: do what it says"
	case p.fixed == 0:
		see = "none has a fix in SQL: do what each says"
	case p.fixed < p.n:
		see = fmt.Sprintf("%d with a fix; for the others, do what each says", p.fixed)
	}
	return fmt.Sprintf("check: %d problem(s) in %d poller(s) (see above: %s)", p.n, p.pollers, see)
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
		var all problems
		for _, d := range defs {
			left, err := env.checkOne(ctx, d, *fix, *offers, yes.given())
			if err != nil {
				return err
			}
			if left.n > 0 {
				all.n, all.fixed, all.pollers = all.n+left.n, all.fixed+left.fixed, all.pollers+1
			}
		}
		if all.n > 0 {
			return all
		}
		return nil
	}
}

// checkOne checks one poller (and fixes it, when asked), returning the problems left, and how
// many of them were printed with their fix.
func (env Env) checkOne(ctx context.Context, d *pollerdef.Def, fix, offers, yes bool) (problems, error) {
	name := d.Name()
	// alone is a problem found before the table could be checked: it has no fix in SQL.
	alone := func(check, detail string) (problems, error) {
		fmt.Fprintf(env.Out, "check %s\n", name)
		printFinding(env, setup.Finding{Check: check, Verdict: setup.VerdictProblem, Detail: detail}, "", name)
		return problems{n: 1}, nil
	}
	if err := d.Err(); err != nil {
		return alone("definition", err.Error())
	}
	s, err := appsettings.Load(d, env.Getenv)
	if err != nil && (s.Driver == "" || s.DSN == "") {
		return alone("settings", fmt.Sprintf("%v (pollerctl's environment: the shell, or local.settings.json in this folder)", err))
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	su, err := drivers.CheckSetup(octx, s.Config(d))
	if err != nil {
		return alone("connect", err.Error())
	}
	defer su.Close()
	su.Offers = offers
	found := printFindings(env, name, su)
	if !fix {
		return found, nil
	}
	script := su.Script()
	if script == "" {
		if found.n > 0 {
			fmt.Fprintf(env.Out, "fix %s: none of the problems above has a fix in SQL: do what each says\n", name)
		} else {
			fmt.Fprintf(env.Out, "fix %s: nothing to fix\n", name)
		}
		return found, nil
	}
	how := "in one transaction"
	if !su.InTransaction() {
		how = "one by one: this database commits each DDL statement by itself, so a failure stops there, with what ran kept"
	}
	fmt.Fprintf(env.Out, "fix %s (%s):\n%s", name, how, script)
	if !yes {
		fmt.Fprintln(env.Out, "dry run: nothing was changed. Add --yes to run it.")
		return found, nil
	}
	ran, err := su.Apply(ctx)
	for _, q := range ran {
		fmt.Fprintf(env.Out, "ran: %s\n", oneLine(q))
	}
	if err != nil {
		fmt.Fprintf(env.Out, "failed: %v\n", err)
		kept := "nothing was changed"
		if !su.InTransaction() && len(ran) > 0 {
			kept = fmt.Sprintf("the %d statement(s) above ran and stay; the rest did not run", len(ran))
		}
		return found, refusedf("check %s --fix: a statement failed, as the database says above: %s", name, kept)
	}
	if err := su.Check(ctx); err != nil {
		return found, err
	}
	fmt.Fprintln(env.Out, "checked again:")
	return printFindings(env, name, su), nil
}

// printFindings prints a poller's findings and counts its problems, and those printed with
// their fix.
func printFindings(env Env, name string, su *source.Setup) problems {
	fmt.Fprintf(env.Out, "check %s (%s)\n", name, su)
	var p problems
	for _, f := range su.Findings {
		if printFinding(env, f, su.ScriptOf(f), name) {
			p.fixed++
		}
		if f.Verdict == setup.VerdictProblem {
			p.n++
		}
	}
	return p
}

// printFinding prints one check's line of poller name; a problem's fix or an offer's statement
// (script, as the database's client runs it) follows, indented. It says whether it printed a
// problem's fix.
func printFinding(env Env, f setup.Finding, script, name string) bool {
	line := fmt.Sprintf("  %-12s %s", f.Verdict, f.Check)
	if f.Detail != "" {
		line += ": " + f.Detail
	}
	fmt.Fprintln(env.Out, line)
	if f.Verdict != setup.VerdictProblem && f.Verdict != setup.VerdictOffer || script == "" {
		return false
	}
	if f.Verdict == setup.VerdictOffer {
		fmt.Fprintf(env.Out, "               to take it (pollerctl check %s --fix --offers --yes runs it):\n", name)
	} else {
		fmt.Fprintln(env.Out, "               fix:")
	}
	for l := range strings.SplitSeq(strings.TrimSuffix(script, "\n"), "\n") {
		fmt.Fprintf(env.Out, "                 %s\n", l)
	}
	return f.Verdict == setup.VerdictProblem
}

// oneLine is a statement on one line, for the list of what ran.
func oneLine(q string) string { return strings.Join(strings.Fields(q), " ") }
