package soak

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// listed is how many missed rows the report names per scenario.
const listed = 8

func (m missedRow) String() string {
	cursor := ""
	if m.cursor != "" {
		cursor = m.cursor + ", "
	}
	return fmt.Sprintf("id=%d v%d (writer %d, %scommitted %v after its write)",
		m.id, m.version, m.writer, cursor, m.held.Round(time.Millisecond))
}

// describe names the first n missed rows.
func describe(missed []missedRow, n int) string {
	parts := make([]string, 0, n+1)
	for _, m := range first(missed, n) {
		parts = append(parts, m.String())
	}
	if len(missed) > n {
		parts = append(parts, fmt.Sprintf("and %d more", len(missed)-n))
	}
	return strings.Join(parts, ", ")
}

// lagText says which settle lag the scenario configured, and whether the source applies it.
func lagText(s scenario) string {
	switch {
	case s.kind == state.KindXID:
		return "n/a"
	case s.kind == state.KindTimestampPK && s.lag == sourcedef.NoSettleLag:
		return "none"
	case s.kind == state.KindTimestampPK:
		return s.effectiveLag().String()
	}
	return s.lag.String() + " (unused)"
}

// renderReport renders the scenarios' results as a plain-text table, then the missed rows.
func renderReport(d database, w workload, scs []scenario, results []*result, errs []error, took time.Duration) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "late-commit soak on %s, %s: %v of writing, transactions held up to %v, %.0f%% rolled back, batch size %d, %v in all\n",
		d, time.Now().UTC().Format(time.RFC3339), w.writing, w.maxTxn, 100*w.rollback, w.batchSize, took.Round(100*time.Millisecond))
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tcursor kind\tsettle lag\tbound\tlongest txn\twriters\tcommitted\trolled back\tupdates\tdelivered\tmissed\tduplicates\texpect\t")
	for i, s := range scs {
		r := results[i]
		if errs[i] != nil || r == nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\terror\t\t\t\t\t\t\t\t%s\t\n", s.name, s.kind, lagText(s), s.bound, s.expect)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", s.name, s.kind, lagText(s), s.bound,
			r.longestTxn.Round(time.Millisecond), w.writers, r.committed, r.rolledBack, r.updates, r.delivered,
			len(r.missed), r.duplicates, s.expect)
	}
	tw.Flush()
	sb.WriteString("committed: rows in the table at the end; updates: committed updates (each makes a new version of its row);\n" +
		"delivered: row versions handed to the handler; missed: rows whose last committed version was never delivered;\n" +
		"longest txn: the longest committed transaction, begin to commit, as its writer measured it;\n" +
		"bound: what the source keeps its reads behind (on MySQL, the open transactions need the poller's role to have PROCESS)\n")
	for i, s := range scs {
		if r := results[i]; r != nil && r.openTrxOK {
			fmt.Fprintf(&sb, "%s: %d of %d ticks read with the open-transaction bound; the last: %s\n", s.name, r.openTrxActive, r.openTrxReads, r.openTrx)
		}
	}
	for i, s := range scs {
		switch r := results[i]; {
		case errs[i] != nil:
			fmt.Fprintf(&sb, "%s: failed: %v\n", s.name, errs[i])
		case len(r.missed) > 0:
			fmt.Fprintf(&sb, "%s missed %d; the first %d:\n", s.name, len(r.missed), min(listed, len(r.missed)))
			for _, m := range first(r.missed, listed) {
				fmt.Fprintf(&sb, "  %s\n", m)
			}
		}
		if r := results[i]; r != nil && len(r.phantoms) > 0 {
			fmt.Fprintf(&sb, "%s delivered %d row versions that never committed; the first %d:\n", s.name, len(r.phantoms), min(listed, len(r.phantoms)))
			for _, p := range first(r.phantoms, listed) {
				fmt.Fprintf(&sb, "  %s\n", p)
			}
		}
	}
	return sb.String()
}

// appendReport appends the report and a blank line to the file at path.
func appendReport(path, report string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("appending the soak report: %w", err)
	}
	if _, err := f.WriteString(report + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("appending the soak report to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("appending the soak report to %s: %w", path, err)
	}
	return nil
}
