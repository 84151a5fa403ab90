package bicep

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
)

// periodBound is main.bicep's pollerPeriods rule, in Go: a schedule's period in seconds at most.
// Of the second, minute and hour fields, the most significant one that is not * gives it: k of
// its units for */k or 0/k, else its whole unit above; all three *: 1; a schedule naming days,
// months or days of the week has none: 0.
func periodBound(schedule string) int {
	fields := append(strings.Fields(schedule), "*", "*", "*", "*", "*", "*")
	for _, f := range fields[3:6] {
		if f != "*" {
			return 0
		}
	}
	seconds, whole := []int{1, 60, 3600}, []int{60, 60, 24}
	for i := 2; i >= 0; i-- {
		f := fields[i]
		if f == "*" {
			continue
		}
		if strings.HasPrefix(f, "*/") || strings.HasPrefix(f, "0/") {
			k, _ := strconv.Atoi(f[2:])
			return seconds[i] * k
		}
		return seconds[i] * whole[i]
	}
	return 1
}

// TestPollerPeriods: the period main.bicep gives each poller (the stopped rules' unit) is never
// below the real longest gap between two firings, the handler's own SchedulePeriod (the status
// page's), and equals it for the usual forms; main.bicep says it the way periodBound does.
func TestPollerPeriods(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 17, 3, 0, time.UTC) // a Monday
	exact := []string{"*/30 * * * * *", "*/5 * * * * *", "0 * * * * *", "0 */5 * * * *", "0 0 * * * *",
		"0 0 */2 * * *", "0 30 9 * * *", "30 */15 * * * *", "0/20 * * * * *", "0 0/10 * * * *", "* * * * * *"}
	bound := []string{"5-7 * * * * *", "0,30 * * * * *", "0 0 9-17 * * *", "*/15 */2 * * * *", "0 */15 9-17 * * *",
		"*/7 * * * * *", "0 */7 * * * *", "0 0 */5 * * *", "10/15 * * * * *", "0 30 9 * * 1-5", "0 0 0 1 * *", "0 30 9 * Jan Mon", "*/90 * * * * *"}
	for _, s := range append(exact, bound...) {
		want := appsettings.SchedulePeriod(s, at)
		if want == 0 {
			t.Fatalf("%q does not parse", s)
		}
		got := time.Duration(periodBound(s)) * time.Second
		if got == 0 && strings.Join(strings.Fields(s)[3:], " ") != "* * *" {
			continue // a schedule naming days: no period, never watched
		}
		if got < want {
			t.Errorf("%q: period %v, below the real %v: the stopped rules would fire on a running poller", s, got, want)
		}
		for _, e := range exact {
			if e == s && got != want {
				t.Errorf("%q: period %v, want exactly %v", s, got, want)
			}
		}
	}
	main := read(t, "main.bicep")
	wantIn(t, "main.bicep", main,
		"var scheduleFields = [for p in pollers: concat(filter(split(trim(p.schedule), ' '), f => !empty(f)), ['*', '*', '*', '*', '*', '*'])]\n",
		"var restrictedField = [for f in scheduleFields: lastIndexOf(map(take(f, 3), x => x != '*'), true)]\n",
		"var fieldSeconds = [1, 60, 3600]\n", "var fieldWhole = [60, 60, 24]\n",
		"  name: p.name\n  periodSeconds: length(filter(skip(take(scheduleFields[i], 6), 3), x => x != '*')) > 0 ? 0 : restrictedField[i] < 0 ? 1 : "+
			"fieldSeconds[restrictedField[i]] * (startsWith(scheduleFields[i][restrictedField[i]], '*/') || startsWith(scheduleFields[i][restrictedField[i]], '0/') ? "+
			"int(substring(scheduleFields[i][restrictedField[i]], 2)) : fieldWhole[restrictedField[i]])\n",
		"    pollerPeriods: pollerPeriods\n    tags: tags\n",                               // the workbook's
		"    pollerPeriods: pollerPeriods\n    stoppedAfterPeriods: stoppedAfterPeriods\n", // the alerts'
	)
	// The example pollers' schedules read as the handler reads them.
	for _, m := range regexp.MustCompile(`schedule: '([^']+)'`).FindAllStringSubmatch(read(t, "main.bicepparam"), -1) {
		if got, want := periodBound(m[1]), int(appsettings.SchedulePeriod(m[1], at)/time.Second); got != want {
			t.Errorf("main.bicepparam's schedule %q: period %d s, want %d", m[1], got, want)
		}
	}
}

// stoppedQuery is modules/alerts.bicep's stoppedQuery as a rule runs it, its placeholders filled
// as the template fills them from expected (name -> period in seconds, in order), N 3, 900 s and
// a deployment time.
func stoppedQuery(t *testing.T, expected [][2]string) string {
	t.Helper()
	var rows []string
	for _, e := range expected {
		rows = append(rows, `"`+e[0]+`", `+e[1])
	}
	q := alertQueries(t, read(t, "modules/alerts.bicep"))["stoppedQuery"]
	return strings.NewReplacer("EXPECTED_POLLERS", strings.Join(rows, ", "), "N_PERIODS", "3", "MIN_SECONDS", "900",
		"DEPLOYED_AT", "2026-11-23T10:00:00.0000000Z").Replace(q)
}

// TestStoppedRules: the dead man's switch. A stopped timer writes no line, so the rule's query
// must make a row for each poller the deployment declares whether a line of it is in the range
// or not (a query that returns no row never fires): it starts from the tick lines (Azure Monitor
// asks a log alert query to start from a table: alerts-log-query.md, MicrosoftDocs/azure-monitor-docs
// 30958b9) and right-outer-joins them to the datatable of the expected pollers, so a poller with
// no tick line at all keeps its row, with a null last tick. Its silence counts from the later of
// its last tick and the deployment: Kusto's max_of gives non-null values precedence over null
// (max-of-function.md), so no tick line at all counts from the deployment. `stopped` is 1 past N
// periods and the floor; the per-poller rule fires on its maximum split by poller, the app rule on
// its minimum over every row (Aggregation type: alerts-create-log-alert-rule.md,
// azure-monitor-docs 1293fdb). The query looks back two days (overrideQueryTimeRange, the API's
// property: Azure/bicep-types-az generated/monitor/microsoft.insights/2023-12-01/types.md; two days
// is the most a log alert queries: alerts-create-log-alert-rule.md), and its result has no
// datetime column: Azure Monitor bins a log alert's rows by one ("the query should include a
// 'datetime' column" for the number of violations, ibid.), and a stopped poller's last tick is
// older than any bin. kql_test.go checks the query with the Kusto language service.
func TestStoppedRules(t *testing.T) {
	alerts := read(t, "modules/alerts.bicep")
	wantIn(t, "modules/alerts.bicep", alerts,
		"param pollerPeriods array\n", "param stoppedAfterPeriods int = 3\n", "param stoppedAfterMinSeconds int = 900\n",
		"param deployedAt string\n", "param stoppedSeverity int = 1\n", "param appStoppedSeverity int = 0\n",
		"var stoppedRange = 'P2D'\nvar stoppedRangeSeconds = 172800\n",
		"var watchedPollers = filter(pollerPeriods, p => p.periodSeconds > 0 && max(stoppedAfterPeriods * p.periodSeconds, stoppedAfterMinSeconds) <= stoppedRangeSeconds)\n",
		"''', 'EXPECTED_POLLERS', join(map(watchedPollers, p => '\"${p.name}\", ${p.periodSeconds}'), ', ')), 'N_PERIODS', string(stoppedAfterPeriods)), "+
			"'MIN_SECONDS', string(stoppedAfterMinSeconds)), 'DEPLOYED_AT', deployedAt)\n",
		"output watched array = map(watchedPollers, p => p.name)\n",
	)
	q := alertQueries(t, alerts)["stoppedQuery"]
	lines := strings.Split(strings.TrimSpace(q), "\n")
	want := []string{
		"let expected = datatable(poller: string, period_seconds: long) [EXPECTED_POLLERS];",
		"let n = N_PERIODS;",
		"let min_seconds = MIN_SECONDS;",
		"let deployed = datetime(DEPLOYED_AT);",
		"traces",
		`| where message has "tick"`,
		"| extend line = parse_json(message)",
		`| where tostring(line.msg) == "tick"`,
		"| extend poller = tostring(line.poller)",
		"| where isnotempty(poller)",
		"| summarize last_tick = max(timestamp) by poller",
		"| join kind=rightouter expected on poller",
		"| project poller = poller1, period_seconds, last_tick",
		"| extend stopped_after_seconds = max_of(n * period_seconds, min_seconds)",
		"| extend silent_seconds = tolong((now() - max_of(last_tick, deployed)) / 1s)",
		"| extend stopped = iff(silent_seconds > stopped_after_seconds, 1, 0), last_tick = tostring(last_tick)",
		"| project poller, stopped, silent_seconds, stopped_after_seconds, period_seconds, last_tick",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("stoppedQuery is\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	rules := alertRules(t, alerts)
	for name, w := range map[string]struct{ display, aggregation, dims string }{
		"stopped":    {"'alert-${name}-poller-stopped'", "timeAggregation: 'Maximum'", "dimensions: [\n            {\n              name: 'poller'\n"},
		"appStopped": {"'alert-${name}-all-pollers-stopped'", "timeAggregation: 'Minimum'", "dimensions: []\n"},
	} {
		wantIn(t, "rule "+name, rules[name], "name: "+w.display+"\n", w.aggregation+"\n", w.dims,
			"metricMeasureColumn: 'stopped'\n", "query: stoppedQuery\n",
			"windowSize: evaluationFrequency\n    overrideQueryTimeRange: stoppedRange\n",
			"numberOfEvaluationPeriods: 1\n", "minFailingPeriodsToAlert: 1\n")
	}
	// Which pollers are watched (watchedPollers, with N 3 and the floor 900 s): the example
	// pollers, every 30 s, with the floor; every 16 hours, just (48 h); every 17 hours or on
	// weekdays, not (their three periods exceed the two days, or they have none).
	for s, watched := range map[string]bool{"*/30 * * * * *": true, "0 0 */16 * * *": true, "0 0 */17 * * *": false, "0 30 9 * * 1-5": false} {
		p := periodBound(s)
		if got := p > 0 && max(3*p, 900) <= 172800; got != watched {
			t.Errorf("%q watched: %v, want %v", s, got, watched)
		}
	}
	main := read(t, "main.bicep")
	wantIn(t, "main.bicep", main, "param stoppedAfterPeriods int = 3\n", "param stoppedAfterMinSeconds int = 900\n",
		"param stoppedSeverity int = 1\n", "param appStoppedSeverity int = 0\n", "param deployedAt string = utcNow('o')\n",
		"    stoppedAfterMinSeconds: stoppedAfterMinSeconds\n    stoppedSeverity: stoppedSeverity\n    appStoppedSeverity: appStoppedSeverity\n    deployedAt: deployedAt\n")
}
