package bicep

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// kqlResult is what scripts/check-kql.mjs says of one query.
type kqlResult struct {
	Name        string `json:"name"`
	Diagnostics []struct {
		Severity string `json:"severity"`
		Start    int    `json:"start"`
		Message  string `json:"message"`
	} `json:"diagnostics"`
	Columns []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"columns"`
}

// column returns the type of the result's column name, "" when it has none.
func (r kqlResult) column(name string) string {
	for _, c := range r.Columns {
		if c.Name == name {
			return c.Type
		}
	}
	return ""
}

// analyzeKQL runs scripts/check-kql.mjs (Microsoft's Kusto language service, against the
// Application Insights traces table) over queries, name -> text, and returns its results by name.
func analyzeKQL(t *testing.T, queries map[string]string) map[string]kqlResult {
	t.Helper()
	if _, err := os.Stat("../../node_modules/@kusto/language-service-next/Kusto.Language.Bridge.min.js"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node_modules lacks @kusto/language-service-next: scripts/test.sh installs it (npm ci)")
		}
		t.Skip("run npm ci (scripts/test.sh does) to check the KQL queries")
	}
	type in struct {
		Name  string `json:"name"`
		Query string `json:"query"`
	}
	var list []in
	for name, q := range queries {
		list = append(list, in{name, q})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	body, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "scripts/check-kql.mjs")
	cmd.Dir = "../.."
	cmd.Stdin = bytes.NewReader(body)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	var results []kqlResult
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatalf("scripts/check-kql.mjs: %v\n%s%s", err, out, stderr.String())
	}
	byName := map[string]kqlResult{}
	for _, r := range results {
		byName[r.Name] = r
	}
	return byName
}

// exampleExpected is the datatable rows the templates make for main.bicepparam's pollers.
func exampleExpected(t *testing.T) (rows [][2]string, quoted string) {
	t.Helper()
	params := read(t, "main.bicepparam")
	names := regexp.MustCompile(`(?m)^    name: '([^']+)'`).FindAllStringSubmatch(params, -1)
	schedules := regexp.MustCompile(`(?m)^    schedule: '([^']+)'`).FindAllStringSubmatch(params, -1)
	if len(names) < 2 || len(names) != len(schedules) {
		t.Fatalf("main.bicepparam: pollers %v, schedules %v", names, schedules)
	}
	var q []string
	for i, n := range names {
		rows = append(rows, [2]string{n[1], strconv.Itoa(periodBound(schedules[i][1]))})
		q = append(q, `"`+n[1]+`"`)
	}
	return rows, strings.Join(q, ", ")
}

// TestQueriesAnalyze: every query of the alert rules, of the workbook and of docs/operations.md
// parses and binds in Microsoft's Kusto language service against Application Insights' traces
// (no unknown column, function or operator, no type error), with the rules' and the workbook's
// placeholders filled as the templates fill them. Each rule's query returns the columns the rule
// reads: its dimensions as strings, its measure as a number. The stopped rules' query returns a
// row per expected poller with `stopped`, and no datetime column (the service would bin rows by
// it). A query that names a column the join does not make is reported (the negative control).
func TestQueriesAnalyze(t *testing.T) {
	rows, quoted := exampleExpected(t)
	queries := map[string]string{}
	alerts := read(t, "modules/alerts.bicep")
	for name, q := range alertQueries(t, alerts) {
		queries["alerts/"+name] = strings.ReplaceAll(q, "N_IN_A_ROW", "3")
	}
	queries["alerts/stoppedQuery"] = stoppedQuery(t, rows)
	var cells []string
	for _, r := range rows {
		cells = append(cells, `"`+r[0]+`", `+r[1])
	}
	fill := strings.NewReplacer("{TimeRange:grain}", "1h", "{TimeRange}", "> ago(1d)", "{Poller}", quoted, "EXPECTED_POLLERS", strings.Join(cells, ", "))
	for _, m := range regexp.MustCompile(`(?s)var (\w+Query) = (?:replace\()?'''(.*?)'''`).FindAllStringSubmatch(read(t, "modules/workbook.bicep"), -1) {
		queries["workbook/"+m[1]] = fill.Replace(m[2])
	}
	for i, b := range regexp.MustCompile("(?s)```kusto[^\n]*\n(.*?)```").FindAllStringSubmatch(read(t, "../../docs/operations.md"), -1) {
		queries["docs/operations.md#"+strconv.Itoa(i+1)] = b[1]
	}
	if len(queries) < 6+8+4 {
		t.Fatalf("only %d queries found", len(queries))
	}
	bad := strings.Replace(queries["alerts/stoppedQuery"], "poller = poller1", "poller = poller2", 1)
	queries["negative control"] = bad

	results := analyzeKQL(t, queries)
	for name := range queries {
		r, ok := results[name]
		if !ok {
			t.Errorf("%s: not analyzed", name)
			continue
		}
		var errs []string
		for _, d := range r.Diagnostics {
			if d.Severity == "Error" {
				errs = append(errs, d.Message+" (at "+strconv.Itoa(d.Start)+")")
			}
		}
		if name == "negative control" {
			if len(errs) == 0 || !strings.Contains(strings.Join(errs, "\n"), "poller2") {
				t.Errorf("the analyzer took a column the join does not make: %v", errs)
			}
			continue
		}
		if len(errs) > 0 {
			t.Errorf("%s:\n  %s\n%s", name, strings.Join(errs, "\n  "), queries[name])
		}
	}
	// What each rule reads from its query's result.
	for rule, body := range alertRules(t, alerts) {
		q := regexp.MustCompile(`query: (\w+)\n`).FindStringSubmatch(body)
		if q == nil {
			t.Errorf("rule %s names no query", rule)
			continue
		}
		r := results["alerts/"+q[1]]
		for _, d := range regexp.MustCompile(`name: '(\w+)'\s*operator: 'Include'`).FindAllStringSubmatch(body, -1) {
			if got := r.column(d[1]); got != "string" {
				t.Errorf("rule %s splits by %s, which %s returns as %q, want a string", rule, d[1], q[1], got)
			}
		}
		if m := regexp.MustCompile(`metricMeasureColumn: '(\w+)'`).FindStringSubmatch(body); m != nil {
			if got := r.column(m[1]); got != "long" && got != "real" && got != "int" {
				t.Errorf("rule %s measures %s, which %s returns as %q, want a number", rule, m[1], q[1], got)
			}
		}
	}
	stopped := results["alerts/stoppedQuery"]
	for _, c := range stopped.Columns {
		if c.Type == "datetime" {
			t.Errorf("stoppedQuery returns the datetime column %s: the service would bin the rows by it", c.Name)
		}
	}
	if got := stopped.column("silent_seconds"); got != "long" {
		t.Errorf("stoppedQuery's silent_seconds is %q, want long", got)
	}
	last := results["workbook/lastTickQuery"]
	for col, want := range map[string]string{"poller": "string", "last_tick": "datetime", "since_last_tick_seconds": "long", "periods_since_last_tick": "real", "period_seconds": "long"} {
		if got := last.column(col); got != want {
			t.Errorf("lastTickQuery's %s is %q, want %s", col, got, want)
		}
	}
}
