package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The fault matrix's counts: what each run measured, summed per scenario into the table
// TestFaultMatrix prints (and writes to VERIFY_REPORT), and carried across runs of the test in
// VERIFY_TALLY, as scripts/verify.sh --long makes them against a fresh Azurite each.

// result is what one run measured.
type result struct {
	rows, versions, deliveries, duplicates, lost, regressions, stale, unexplained, overlaps, staleRejected, faults, fenced int
}

type tally struct {
	runs int
	result
}

// fields lists a tally's counters, for VERIFY_TALLY.
func (tl *tally) fields() []*int {
	r := &tl.result
	return []*int{&tl.runs, &r.rows, &r.versions, &r.deliveries, &r.duplicates, &r.lost, &r.regressions, &r.stale, &r.unexplained,
		&r.overlaps, &r.staleRejected, &r.faults, &r.fenced}
}

// accumulate adds the tallies kept in the file VERIFY_TALLY names (by earlier runs of the test,
// as scripts/verify.sh --long makes them, each against a fresh Azurite) and saves the sum there.
func accumulate(t *testing.T, tallies map[string]*tally) map[string]*tally {
	f := os.Getenv("VERIFY_TALLY")
	if f == "" {
		return tallies
	}
	saved := map[string][]int{}
	if data, err := os.ReadFile(f); err == nil {
		if err := json.Unmarshal(data, &saved); err != nil {
			t.Errorf("VERIFY_TALLY %s: %v", f, err)
		}
	}
	sum := map[string]*tally{}
	for name, counts := range saved {
		tl := &tally{}
		for i, p := range tl.fields() {
			if i < len(counts) {
				*p = counts[i]
			}
		}
		sum[name] = tl
	}
	for name, tl := range tallies {
		if sum[name] == nil {
			sum[name] = &tally{}
		}
		dst := sum[name].fields()
		for i, p := range tl.fields() {
			*dst[i] += *p
		}
	}
	out := map[string][]int{}
	for name, tl := range sum {
		for _, p := range tl.fields() {
			out[name] = append(out[name], *p)
		}
	}
	data, _ := json.Marshal(out)
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Errorf("VERIFY_TALLY: %v", err)
	}
	return sum
}

func report(t *testing.T, scenarios []scenario, tallies map[string]*tally) {
	tallies = accumulate(t, tallies)
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-36s %5s %7s %8s %4s %6s %10s %6s %5s %8s %6s\n", "scenario", "runs", "rows", "versions", "lost", "dupes", "unexplained", "faults", "stale", "rejected", "overlap")
	var all tally
	for _, sc := range scenarios {
		tl := tallies[sc.name]
		if tl == nil {
			continue
		}
		fmt.Fprintf(&sb, "%-36s %5d %7d %8d %4d %6d %10d %6d %5d %8d %6d\n", sc.name, tl.runs, tl.rows, tl.versions, tl.lost, tl.duplicates,
			tl.unexplained, tl.faults, tl.stale+tl.regressions+tl.fenced, tl.staleRejected, tl.overlaps)
		all.runs += tl.runs
		all.rows += tl.rows
		all.versions += tl.versions
		all.lost += tl.lost
		all.duplicates += tl.duplicates
		all.unexplained += tl.unexplained
		all.faults += tl.faults
		all.stale += tl.stale + tl.regressions + tl.fenced
		all.staleRejected += tl.staleRejected
		all.overlaps += tl.overlaps
	}
	fmt.Fprintf(&sb, "%-36s %5d %7d %8d %4d %6d %10d %6d %5d %8d %6d\n", "all", all.runs, all.rows, all.versions, all.lost, all.duplicates,
		all.unexplained, all.faults, all.stale, all.staleRejected, all.overlaps)
	sb.WriteString("rows: rows written; versions: row versions committed (inserts and updates); lost: committed versions never\n" +
		"delivered; dupes: deliveries of a version already delivered; unexplained: dupes whose first batch its holder\n" +
		"committed; faults: faults that fired; stale: what a stale holder got through (commits landed with an old token,\n" +
		"checkpoint regressions, batches at the webhook older than one seen); rejected: ticks whose stale writes were\n" +
		"refused (by the service's ETag check or the holder's trust window); overlap: batches at the webhook while\n" +
		"another holder's batch was live.\n")
	t.Logf("fault matrix:\n%s", sb.String())
	if f := os.Getenv("VERIFY_REPORT"); f != "" {
		if err := os.WriteFile(f, []byte(sb.String()), 0o644); err != nil {
			t.Errorf("VERIFY_REPORT: %v", err)
		}
	}
}
