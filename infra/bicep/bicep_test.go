// Package bicep holds no Go code: its tests check the Bicep templates' content, since no Bicep
// compiler runs here (scripts/check-bicep.mjs checks their syntax).
package bicep

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	bicepfile "github.com/pseudotrigger/pseudotrigger/internal/bicep"
	"github.com/pseudotrigger/pseudotrigger/internal/declared"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantIn fails t for each of wants that text (named name in the message) lacks.
func wantIn(t *testing.T, name, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q", name, want)
		}
	}
}

// readFile is read for tests whose own variables are named read.
var readFile = read

func allBicep(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, pattern := range []string{"*.bicep", "modules/*.bicep", "*.bicepparam"} {
		files, _ := filepath.Glob(pattern)
		for _, f := range files {
			out[f] = read(t, f)
		}
	}
	if len(out) < 6 {
		t.Fatalf("found only %d Bicep files", len(out))
	}
	return out
}

// roleAssignment is what a role assignment of a template is meant to have.
type roleAssignment struct{ scope, role, principal, principalType, condition string }

// checkAssignments checks every role assignment of a template (text, read from file): one of
// want, with its deterministic guid() name, scope, role, principal, principal type and
// condition ("" for none), and every one of want found; what lists them for the message.
func checkAssignments(t *testing.T, file, text string, want map[string]roleAssignment, what string) {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^resource (\w+) 'Microsoft\.Authorization/roleAssignments@2022-04-01' = (?:if \((.*)\) )?\{$`)
	masked := mask(text)
	n := 0
	for _, m := range decl.FindAllStringSubmatchIndex(text, -1) {
		name, cond := text[m[2]:m[3]], ""
		if m[4] >= 0 {
			cond = text[m[4]:m[5]]
		}
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: role assignment %s is not one this test knows: add it here with why it is needed", file, name)
			continue
		}
		n++
		s, e := block(masked, m[0])
		body := text[s:e]
		for _, line := range []string{"scope: " + w.scope + "\n", "roleDefinitions', " + w.role + ")", "principalId: " + w.principal + "\n",
			"principalType: " + w.principalType + "\n", "name: guid(" + w.scope + ".id, " + w.principal + ", " + w.role + ")\n"} {
			if !strings.Contains(body, line) {
				t.Errorf("%s: role assignment %s lacks %q:\n%s", file, name, line, body)
			}
		}
		if cond != w.condition {
			t.Errorf("%s: role assignment %s is created if (%s), want if (%s)", file, name, cond, w.condition)
		}
	}
	if n != len(want) || strings.Count(text, "'Microsoft.Authorization/roleAssignments@") != len(want) {
		t.Errorf("%s: found %d of the %d role assignments (%s)", file, n, len(want), what)
	}
}

// TestRoleIDs: every role definition id is the built-in role its name says.
func TestRoleIDs(t *testing.T) {
	want := map[string]string{
		"storageBlobDataOwner":        "b7e6dc6d-f1e8-4753-8033-0f276bb0955b",
		"storageBlobDataContributor":  "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
		"monitoringMetricsPublisher":  "3913510d-42f4-4e42-8a64-420c390055eb",
		"storageTableDataContributor": "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3",
	}
	roles := read(t, "modules/roles.bicep")
	decl := regexp.MustCompile(`var (\w+) = '([0-9a-f-]{36})'`)
	found := map[string]string{}
	for _, m := range decl.FindAllStringSubmatch(roles, -1) {
		found[m[1]] = m[2]
	}
	for name, id := range want {
		if found[name] != id {
			t.Errorf("%s is %q, want the built-in role %s", name, found[name], id)
		}
	}
	for name := range found {
		if _, ok := want[name]; !ok {
			t.Errorf("role %s is not a known built-in role id: add it to this test with its documented GUID", name)
		}
	}
	// Every assignment: a deterministic guid() name, a role from the list, and the scope, role,
	// principal and condition it is meant to have. The app's identity is a ServicePrincipal.
	wantAssign := map[string]roleAssignment{
		"hostBlobOwner":            {"hostStorage", "storageBlobDataOwner", "principalId", "'ServicePrincipal'", ""},
		"stateBlobContributor":     {"stateContainer", "storageBlobDataContributor", "principalId", "'ServicePrincipal'", ""},
		"insightsPublisher":        {"insights", "monitoringMetricsPublisher", "principalId", "'ServicePrincipal'", ""},
		"hostTableContributor":     {"hostStorage", "storageTableDataContributor", "principalId", "'ServicePrincipal'", "hostDiagnosticEvents"},
		"operatorStateContributor": {"stateContainer", "storageBlobDataContributor", "operatorPrincipalId", "operatorPrincipalType", "!empty(operatorPrincipalId)"},
	}
	checkAssignments(t, "modules/roles.bicep", roles, wantAssign,
		"host blob owner, state container contributor, metrics publisher, optional table contributor and operator")
	if !strings.Contains(roles, "resource stateContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@") {
		t.Error("the state roles must be scoped to the state container resource")
	}
	for _, p := range []string{"param operatorPrincipalId string = ''"} {
		if !strings.Contains(roles, p) || !strings.Contains(read(t, "main.bicep"), p) {
			t.Errorf("modules/roles.bicep and main.bicep must declare %s (optional, off by default)", p)
		}
	}
	// The host's diagnostic events: the table role by default, as Microsoft's Flex samples grant
	// it (azure-functions-flex-consumption-samples 9519a36 IaC/bicep/rbac.bicep) and as the host
	// expects (without it, DiagnosticEventTableStorageRepository logs that it cannot write: host
	// PR 10996); off, the host's feature flag DisableDiagnosticEventLogging (ScriptConstants.cs)
	// turns the logging off, so that no permission error is logged either way.
	main := read(t, "main.bicep")
	wantIn(t, "main.bicep", main, "param hostDiagnosticEvents bool = true\n", "}, hostDiagnosticEvents ? {} : {\n",
		"AzureWebJobsFeatureFlags: join(filter(concat(split(appSettings.?AzureWebJobsFeatureFlags ?? '', ','), ['DisableDiagnosticEventLogging']), f => !empty(f)), ',')\n")
	if !strings.Contains(roles, "param hostDiagnosticEvents bool\n") {
		t.Error("modules/roles.bicep must take hostDiagnosticEvents from main.bicep, without a default of its own")
	}
}

// TestNoSecrets: no key is read or written anywhere; storage refuses shared keys.
func TestNoSecrets(t *testing.T) {
	for file, text := range allBicep(t) {
		for _, bad := range []string{"listKeys(", "AccountKey=", "SharedAccessSignature", "listAccountSas(", "password"} {
			if strings.Contains(strings.ToLower(text), strings.ToLower(bad)) {
				t.Errorf("%s contains %q", file, bad)
			}
		}
	}
	storage := read(t, "modules/storage.bicep")
	for _, want := range []string{"allowSharedKeyAccess: false", "allowBlobPublicAccess: false", "minimumTlsVersion: 'TLS1_2'", "supportsHttpsTrafficOnly: true"} {
		if !strings.Contains(storage, want) {
			t.Errorf("modules/storage.bicep lacks %s", want)
		}
	}
	app := read(t, "modules/functionapp.bicep")
	for _, want := range []string{"httpsOnly: true", "name: 'FC1'", "name: 'custom'", "type: 'UserAssignedIdentity'",
		"keyVaultReferenceIdentity: identityId\n", "fedauth=ActiveDirectoryManagedIdentity"} {
		if !strings.Contains(app, want) {
			t.Errorf("modules/functionapp.bicep lacks %s", want)
		}
	}
	if !strings.Contains(read(t, "modules/monitoring.bicep"), "DisableLocalAuth: true") {
		t.Error("Application Insights must disable local authentication")
	}
	main := read(t, "main.bicep")
	for _, want := range []string{"AzureWebJobsStorage__credential: 'managedidentity'", "AzureWebJobsStorage__clientId", "StateStorage__blobServiceUri",
		"StateStorage__clientId", "APPLICATIONINSIGHTS_AUTHENTICATION_STRING", "POLLER_APP_NAME"} {
		if !strings.Contains(main, want) {
			t.Errorf("main.bicep lacks the app setting %s", want)
		}
	}
}

// TestEveryPollerHasSettings: each pollers/<name> folder, and each declared poller (a root folder
// <name>/ with poller.json), has a pollers entry in main.bicepparam; each of a declared poller's
// sinks (its sink, its tables' and its route's; webhooks aside) has a sinks entry with its
// connection and type.
func TestEveryPollerHasSettings(t *testing.T) {
	entries, err := os.ReadDir("../../pollers")
	if err != nil {
		t.Fatal(err)
	}
	params := read(t, "main.bicepparam")
	n := 0
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "all" {
			continue
		}
		n++
		if !strings.Contains(params, "name: '"+e.Name()+"'") {
			t.Errorf("main.bicepparam has no pollers entry for pollers/%s", e.Name())
		}
	}
	if n == 0 {
		t.Fatal("no pollers found")
	}
	declared, err := filepath.Glob("../../*/poller.json")
	if err != nil {
		t.Fatal(err)
	}
	sinks := sinkEntries(t, params)
	for _, f := range declared {
		name := filepath.Base(filepath.Dir(f))
		for _, problem := range checkDeclared(name, []byte(read(t, f)), params, sinks) {
			t.Error(problem)
		}
	}
	t.Logf("%d Go pollers, %d declared pollers", n, len(declared))
}

// checkDeclared returns what main.bicepparam lacks for the declared poller name/poller.json.
func checkDeclared(name string, pollerJSON []byte, params string, sinks []map[string]string) []string {
	var problems []string
	if !strings.Contains(params, "name: '"+name+"'") {
		problems = append(problems, fmt.Sprintf("main.bicepparam has no pollers entry for the declared poller %s/poller.json", name))
	}
	var p declared.Spec
	if err := json.Unmarshal(pollerJSON, &p); err != nil {
		return append(problems, fmt.Sprintf("%s/poller.json: %v", name, err))
	}
next:
	for _, ps := range p.Sinks() {
		if ps.Config.Type == "" || ps.Config.Type == "webhook" {
			continue
		}
		for _, s := range sinks {
			if s["connection"] == ps.Config.Connection && s["type"] == ps.Config.Type {
				continue next
			}
		}
		problems = append(problems, fmt.Sprintf("main.bicepparam has no sinks entry with connection '%s' and type '%s' for %s/poller.json's %s", ps.Config.Connection, ps.Config.Type, name, ps.Path))
	}
	return problems
}

// sinkEntries reads the string fields of each entry of a parameters file's sinks array.
func sinkEntries(t *testing.T, params string) []map[string]string {
	t.Helper()
	masked := mask(params)
	loc := regexp.MustCompile(`(?m)^param sinks\s*=\s*\[`).FindStringIndex(masked)
	if loc == nil {
		return nil
	}
	field := regexp.MustCompile(`(?m)^\s*(\w+):\s*'([^']*)'`)
	var out []map[string]string
	for i := loc[1]; ; {
		rest := masked[i:]
		close := strings.IndexByte(rest, ']')
		open := strings.IndexByte(rest, '{')
		if open < 0 || (close >= 0 && close < open) {
			break
		}
		s, e := block(masked, i+open)
		if s < 0 {
			t.Fatal("main.bicepparam: unbalanced sinks entry")
		}
		entry := map[string]string{}
		for _, m := range field.FindAllStringSubmatch(params[s:e], -1) {
			entry[m[1]] = m[2]
		}
		out = append(out, entry)
		i = e + 1
	}
	return out
}

// TestDeclaredPollerCheck is TestEveryPollerHasSettings' negative control: a declared poller
// without a pollers entry, or one of whose sinks (its sink, a table's, a route's) has no sinks
// entry, is reported, and one with both is not.
func TestDeclaredPollerCheck(t *testing.T) {
	params := "param pollers = [\n  {\n    name: 'orders-queue'\n  }\n]\nparam sinks = [\n  {\n    connection: 'ChangesQueue'\n    type: 'storagequeue'\n  }\n  {\n    connection: 'Bus'\n    type: 'servicebus'\n  }\n]\n"
	sinks := sinkEntries(t, params)
	if len(sinks) != 2 || sinks[1]["connection"] != "Bus" || sinks[0]["type"] != "storagequeue" {
		t.Fatalf("sinkEntries: %v", sinks)
	}
	queue := []byte(`{"source":{"table":"orders"},"sink":{"type":"storagequeue","connection":"ChangesQueue","queue":"orders-changes"}}`)
	for _, c := range []struct {
		name string
		json []byte
		fail bool
	}{
		{"orders-queue", queue, false},
		{"refunds", queue, true}, // no pollers entry
		{"orders-queue", []byte(`{"sink":{"type":"eventhubs","connection":"ChangesQueue"}}`), true}, // no entry of that type
		{"orders-queue", []byte(`{"sink":{"type":"servicebus","connection":"Other"}}`), true},       // no entry of that connection
		{"orders-queue", []byte(`{"sink":{"type":"webhook","url":"https://example.net"}}`), false},
		// A route's sinks and a table's own, each checked: one of them without an entry is reported.
		{"orders-queue", []byte(`{"route":{"column":"kind","sinks":{"a":{"type":"storagequeue","connection":"ChangesQueue"},"b":{"type":"webhook","url":"https://example.net"}},"default":{"type":"servicebus","connection":"Bus"}}}`), false},
		{"orders-queue", []byte(`{"route":{"column":"kind","sinks":{"a":{"type":"storagequeue","connection":"ChangesQueue"}},"default":{"type":"servicebus","connection":"Other"}}}`), true},
		{"orders-queue", []byte(`{"source":{"tables":[{"table":"a"},{"table":"b","sink":{"type":"eventhubs","connection":"Hub"}}]},"sink":{"type":"storagequeue","connection":"ChangesQueue"}}`), true},
	} {
		if problems := checkDeclared(c.name, c.json, params, sinks); (len(problems) > 0) != c.fail {
			t.Errorf("%s %s: reported %q, want a report: %v", c.name, c.json, problems, c.fail)
		}
	}
}

// TestHostAndBuildAgree: host.json runs the binary scripts/build.sh writes.
func TestHostAndBuildAgree(t *testing.T) {
	var host struct {
		CustomHandler struct {
			Description struct {
				DefaultExecutablePath string `json:"defaultExecutablePath"`
			} `json:"description"`
		} `json:"customHandler"`
		FunctionTimeout string `json:"functionTimeout"`
	}
	if err := json.Unmarshal([]byte(read(t, "../../host.json")), &host); err != nil {
		t.Fatal(err)
	}
	exe := host.CustomHandler.Description.DefaultExecutablePath
	build := read(t, "../../scripts/build.sh")
	if exe != "bin/handler" || !strings.Contains(build, "dir=${BUILD_DIR:-bin}\n") || !strings.Contains(build, `out=(-o "$dir/handler")`) {
		t.Errorf("host.json runs %q, which scripts/build.sh does not build", exe)
	}
	if host.FunctionTimeout != "00:10:00" {
		t.Errorf("functionTimeout %q: keep it above the 4 min tick budget", host.FunctionTimeout)
	}
}

// TestSyntaxCheckerCatchesErrors: scripts/check-bicep.mjs passes the templates and fails a
// broken file (it runs in scripts/test.sh; this is its negative control).
func TestSyntaxCheckerCatchesErrors(t *testing.T) {
	if _, err := os.Stat("../../node_modules/tree-sitter-bicep/tree-sitter-bicep.wasm"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node_modules lacks tree-sitter-bicep: scripts/test.sh installs it")
		}
		t.Skip("run npm ci (scripts/test.sh does) to check the Bicep syntax")
	}
	broken := filepath.Join(t.TempDir(), "broken.bicep")
	if err := os.WriteFile(broken, []byte("resource sa 'Microsoft.Storage/storageAccounts@2023-05-01' = {\n  name: \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		cmd := exec.Command("node", append([]string{"scripts/check-bicep.mjs"}, args...)...)
		cmd.Dir = "../.."
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(); err != nil {
		t.Fatalf("the templates do not parse:\n%s", out)
	}
	if out, err := run(broken); err == nil || !strings.Contains(out, "broken.bicep:") {
		t.Fatalf("a broken file passed the check:\n%s", out)
	}
}

// mask blanks out the contents of strings and comments (internal/bicep.Mask).
var mask = bicepfile.Mask

// block returns the {...} starting at the first '{' at or after from in the masked text, and its
// inner offsets; -1s if there is none or it is not closed.
func block(masked string, from int) (start, end int) {
	open := strings.IndexByte(masked[from:], '{')
	if open < 0 {
		return -1, -1
	}
	open += from
	depth := 0
	for i := open; i < len(masked); i++ {
		switch masked[i] {
		case '{', '[', '(':
			depth++
		case '}', ']', ')':
			depth--
			if depth == 0 {
				return open + 1, i
			}
		}
	}
	return -1, -1
}

// topLevelKeys lists the keys of an object literal's body (masked text).
func topLevelKeys(body string) []string {
	key := regexp.MustCompile(`^\s*(\w+)\s*:`)
	var keys []string
	depth := 0
	for _, line := range strings.Split(body, "\n") {
		if depth == 0 {
			if m := key.FindStringSubmatch(line); m != nil {
				keys = append(keys, m[1])
			}
		}
		for _, c := range line {
			switch c {
			case '{', '[', '(':
				depth++
			case '}', ']', ')':
				depth--
			}
		}
	}
	return keys
}

// params maps each `param NAME TYPE` of a template to whether it has a default.
func params(text string) map[string]bool {
	out := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^param (\w+) [\w.]+(\s*=)?`)
	for _, m := range decl.FindAllStringSubmatch(mask(text), -1) {
		out[m[1]] = m[2] != ""
	}
	return out
}

// TestModuleParams stands in for the compiler's check of every module call in main.bicep: each
// parameter passed is declared by the module, and each one without a default is passed. The
// example parameters file sets only parameters main.bicep declares, and every one it must.
func TestModuleParams(t *testing.T) {
	main := read(t, "main.bicep")
	masked := mask(main)
	mod := regexp.MustCompile(`(?m)^module (\w+) '([^']+)' = (if \([^)]*\) |\[for [^\n]*?: )?\{`)
	found := map[string]bool{}
	for _, m := range mod.FindAllStringSubmatchIndex(main, -1) {
		name, path := main[m[2]:m[3]], main[m[4]:m[5]]
		found[path] = true
		s, e := block(masked, m[0])
		if s < 0 {
			t.Fatalf("module %s: unbalanced braces", name)
		}
		body := masked[s:e]
		p := strings.Index(body, "params:")
		if p < 0 {
			t.Errorf("module %s passes no params", name)
			continue
		}
		ps, pe := block(body, p)
		passed := topLevelKeys(body[ps:pe])
		declared := params(read(t, path))
		if len(declared) == 0 {
			t.Errorf("module %s: %s declares no parameters", name, path)
		}
		got := map[string]bool{}
		for _, k := range passed {
			got[k] = true
			if _, ok := declared[k]; !ok {
				t.Errorf("module %s passes %s, which %s does not declare", name, k, path)
			}
		}
		for k, hasDefault := range declared {
			if !hasDefault && !got[k] {
				t.Errorf("module %s does not pass %s, which %s requires", name, k, path)
			}
		}
	}
	for _, path := range []string{"modules/identity.bicep", "modules/storage.bicep", "modules/monitoring.bicep",
		"modules/roles.bicep", "modules/functionapp.bicep", "modules/alerts.bicep", "modules/sink.bicep",
		"modules/network.bicep", "modules/privateendpoint.bicep", "modules/workbook.bicep"} {
		if !found[path] {
			t.Errorf("main.bicep does not use %s", path)
		}
	}

	declared := params(main)
	set := regexp.MustCompile(`(?m)^param (\w+)\s*=`)
	setHere := map[string]bool{}
	for _, m := range set.FindAllStringSubmatch(mask(read(t, "main.bicepparam")), -1) {
		setHere[m[1]] = true
		if _, ok := declared[m[1]]; !ok {
			t.Errorf("main.bicepparam sets %s, which main.bicep does not declare", m[1])
		}
	}
	for k, hasDefault := range declared {
		if !hasDefault && !setHere[k] {
			t.Errorf("main.bicepparam does not set %s, which main.bicep requires", k)
		}
	}
}

// alertQueries returns the six queries in modules/alerts.bicep (multi-line strings, some with
// placeholders a replace() fills) by variable name.
func alertQueries(t *testing.T, alerts string) map[string]string {
	t.Helper()
	q := regexp.MustCompile(`(?s)var (\w+Query) = (?:replace\()*'''(.*?)'''`)
	out := map[string]string{}
	for _, m := range q.FindAllStringSubmatch(alerts, -1) {
		out[m[1]] = m[2]
	}
	if len(out) != 6 {
		t.Fatalf("modules/alerts.bicep has %d queries, want 6 (failedTicksQuery, lagQuery, blockedQuery, slotRetainedQuery, deadLettersQuery, stoppedQuery)", len(out))
	}
	return out
}

// alertRules returns the body of each scheduledQueryRules resource of modules/alerts.bicep by its
// symbolic name, failing t for a rule on another API version than the stable 2023-12-01 (the REST
// spec's stable/2023-12-01; later ones are previews).
func alertRules(t *testing.T, alerts string) map[string]string {
	t.Helper()
	rule := regexp.MustCompile(`(?m)^resource (\w+) 'Microsoft\.Insights/scheduledQueryRules@([^']+)' = \{`)
	masked := mask(alerts)
	rules := map[string]string{}
	for _, m := range rule.FindAllStringSubmatchIndex(alerts, -1) {
		name, version := alerts[m[2]:m[3]], alerts[m[4]:m[5]]
		if version != "2023-12-01" {
			t.Errorf("rule %s uses scheduledQueryRules@%s, want the stable 2023-12-01", name, version)
		}
		s, e := block(masked, m[0])
		if s < 0 {
			t.Fatalf("rule %s: unbalanced braces", name)
		}
		rules[name] = alerts[s:e]
	}
	return rules
}

// TestAlertRules: seven log search alert rules on a stable API version, scoped to Application
// Insights, each notifying the action group parameter, split by poller (but the all-pollers one),
// with thresholds, severities, frequency and window from parameters, and queries over the
// handler's JSON lines.
func TestAlertRules(t *testing.T) {
	alerts := read(t, "modules/alerts.bicep")
	decl := params(alerts)
	for _, p := range []string{"insightsId", "actionGroupId", "failedTicksInARow", "lagThresholdSeconds", "evaluationFrequency",
		"windowSize", "failedTicksWindowSize", "failedTicksSeverity", "lagSeverity", "blockedSeverity", "slotRetainedThresholdBytes", "slotRetainedSeverity", "deadLettersSeverity"} {
		if _, ok := decl[p]; !ok {
			t.Errorf("modules/alerts.bicep lacks the parameter %s", p)
		}
	}
	for _, want := range []string{"param failedTicksInARow int = 3", "param lagThresholdSeconds int = 300", "param actionGroupId string = ''",
		"param slotRetainedThresholdBytes int = 1073741824",
		"var actionGroups = empty(actionGroupId) ? [] : [actionGroupId]"} {
		if !strings.Contains(alerts, want) {
			t.Errorf("modules/alerts.bicep lacks %s", want)
		}
	}

	rules := alertRules(t, alerts)
	if len(rules) != 7 {
		t.Fatalf("modules/alerts.bicep has %d scheduledQueryRules, want 7", len(rules))
	}
	type want struct {
		query, severity, window, threshold string
		dimensions                         []string
	}
	wants := map[string]want{
		"failedTicks":  {"failedTicksQuery", "failedTicksSeverity", "failedTicksWindowSize", "0", []string{"poller"}},
		"lag":          {"lagQuery", "lagSeverity", "windowSize", "lagThresholdSeconds", []string{"poller"}},
		"blocked":      {"blockedQuery", "blockedSeverity", "windowSize", "0", []string{"poller", "batch_id"}},
		"slotRetained": {"slotRetainedQuery", "slotRetainedSeverity", "windowSize", "slotRetainedThresholdBytes", []string{"poller"}},
		"deadLetters":  {"deadLettersQuery", "deadLettersSeverity", "windowSize", "0", []string{"poller"}},
		"stopped":      {"stoppedQuery", "stoppedSeverity", "evaluationFrequency", "0", []string{"poller"}},
		"appStopped":   {"stoppedQuery", "appStoppedSeverity", "evaluationFrequency", "0", nil},
	}
	queries := alertQueries(t, alerts)
	for name, w := range wants {
		body, ok := rules[name]
		if !ok {
			t.Errorf("modules/alerts.bicep has no rule %s", name)
			continue
		}
		wantIn(t, "rule "+name, body, "kind: 'LogAlert'", "enabled: true", "autoMitigate: true",
			"scopes: [\n      insightsId\n    ]", "actions: {\n      actionGroups: actionGroups\n    }",
			"query: "+w.query+"\n", "severity: "+w.severity+"\n", "evaluationFrequency: evaluationFrequency\n",
			"windowSize: "+w.window+"\n", "threshold: "+w.threshold+"\n", "operator: 'GreaterThan'")
		dims := regexp.MustCompile(`name: '(\w+)'\s*operator: 'Include'\s*values: \[\s*'\*'\s*\]`).FindAllStringSubmatch(body, -1)
		var got []string
		for _, d := range dims {
			got = append(got, d[1])
		}
		if strings.Join(got, ",") != strings.Join(w.dimensions, ",") {
			t.Errorf("rule %s splits by %v, want %v", name, got, w.dimensions)
		}
		// Each dimension (and the measured column) is a column the query returns.
		q := queries[w.query]
		last := q[strings.LastIndex(q, "| summarize"):]
		for _, d := range w.dimensions {
			if !regexp.MustCompile(`by .*\b` + d + `\b`).MatchString(last) {
				t.Errorf("rule %s splits by %s, which its query's last summarize does not group by:\n%s", name, d, last)
			}
		}
		if m := regexp.MustCompile(`metricMeasureColumn: '(\w+)'`).FindStringSubmatch(body); m != nil && !regexp.MustCompile(`\b`+m[1]+`\b`).MatchString(last) {
			t.Errorf("rule %s measures %s, which its query does not return", name, m[1])
		}
	}
	if !strings.Contains(rules["lag"], "metricMeasureColumn: 'lag_seconds'") || !strings.Contains(rules["lag"], "timeAggregation: 'Maximum'") {
		t.Error("the lag rule must compare the maximum of lag_seconds with lagThresholdSeconds")
	}
	if !strings.Contains(rules["slotRetained"], "metricMeasureColumn: 'slot_retained_bytes'") || !strings.Contains(rules["slotRetained"], "timeAggregation: 'Maximum'") {
		t.Error("the slot rule must compare the maximum of slot_retained_bytes with slotRetainedThresholdBytes")
	}

	if !strings.Contains(rules["deadLetters"], "metricMeasureColumn: 'dead_letters'") || !strings.Contains(rules["deadLetters"], "timeAggregation: 'Maximum'") {
		t.Error("the dead-letters rule must compare the maximum of dead_letters (the latest line's count) with 0")
	}

	// The queries: the handler's JSON lines in traces.message, by their own fields.
	for name, q := range queries {
		wantIn(t, name, q, "\ntraces\n", "| extend line = parse_json(message)", "poller = tostring(line.poller)", "where isnotempty(poller)")
		// Not allowed in log search alert queries, or would break the template.
		for _, bad := range []string{"AggregatedValue", "bag_unpack", "pivot(", "narrow(", "'", "${", "ago("} {
			if strings.Contains(q, bad) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
		if strings.Count(q, "(") != strings.Count(q, ")") || strings.Count(q, `"`)%2 != 0 {
			t.Errorf("%s has unbalanced parentheses or quotes:\n%s", name, q)
		}
	}
	for name, s := range map[string][]string{
		"failedTicksQuery": {`where tostring(line.msg) == "tick"`, `outcome in ("failed", "blocked")`, "let n = N_IN_A_ROW;",
			"order by poller asc, timestamp desc", "row_number(1, prev(poller) != poller)", "where nth <= n", "where ticks == n and failed == n"},
		"lagQuery":     {`where tostring(line.msg) == "tick"`, "lag_seconds = todouble(line.lag_seconds)", "arg_max(timestamp, lag_seconds, rows_waiting) by poller"},
		"blockedQuery": {`where tostring(line.msg) == "poller blocked"`, "batch_id = tostring(line.batch_id)"},
		"slotRetainedQuery": {`where tostring(line.msg) == "tick"`, "slot_retained_bytes = tolong(line.slot_retained_bytes)",
			"isnotnull(slot_retained_bytes)", "arg_max(timestamp, slot_retained_bytes) by poller"},
		// The latest line wins: a count 0 line after the letters were resolved ends the alert.
		"deadLettersQuery": {`where tostring(line.msg) == "dead letters"`, "dead_letters = tolong(line.count)",
			"arg_max(timestamp, dead_letters, oldest_age_seconds) by poller"},
	} {
		wantIn(t, name, queries[name], s...)
	}
	// N is the parameter, substituted into the query; no other number stands in for it.
	if !strings.Contains(alerts, "''', 'N_IN_A_ROW', string(failedTicksInARow))") {
		t.Error("failedTicksQuery must replace N_IN_A_ROW with string(failedTicksInARow)")
	}
	if regexp.MustCompile(`threshold: [1-9]`).MatchString(alerts) {
		t.Error("a literal threshold: thresholds are parameters")
	}
}

// TestAlertsWiring: main.bicep creates the rules on the Application Insights component with the
// action group and thresholds as parameters; the alerts grant no role and create no identity.
func TestAlertsWiring(t *testing.T) {
	main := read(t, "main.bicep")
	for _, want := range []string{"param actionGroupId string = ''", "param alertsEnabled bool = true",
		"param failedTicksInARow int = 3", "param lagThresholdSeconds int = 300",
		"module alerts 'modules/alerts.bicep' = if (alertsEnabled) {", "insightsId: monitoring.outputs.id",
		"actionGroupId: actionGroupId", "failedTicksInARow: failedTicksInARow", "lagThresholdSeconds: lagThresholdSeconds",
		"param slotRetainedThresholdBytes int = 1073741824", "slotRetainedThresholdBytes: slotRetainedThresholdBytes",
		"evaluationFrequency: alertEvaluationFrequency", "windowSize: alertWindowSize"} {
		if !strings.Contains(main, want) {
			t.Errorf("main.bicep lacks %s", want)
		}
	}
	if !strings.Contains(read(t, "main.bicepparam"), "param actionGroupId = ''") {
		t.Error("main.bicepparam should show actionGroupId")
	}
	if !strings.Contains(read(t, "modules/monitoring.bicep"), "output id string = insights.id") {
		t.Error("modules/monitoring.bicep must output the component's id: the rules are scoped to it")
	}
	// Least privilege: role assignments only in roles.bicep (TestRoleIDs counts them there); the
	// alerts module takes an existing action group and has no identity of its own.
	for file, text := range allBicep(t) {
		if file != filepath.Join("modules", "roles.bicep") && file != filepath.Join("modules", "sink.bicep") && strings.Contains(text, "Microsoft.Authorization/roleAssignments") {
			t.Errorf("%s assigns a role: keep every role assignment in modules/roles.bicep (or a sink's in modules/sink.bicep)", file)
		}
	}
	alerts := read(t, "modules/alerts.bicep")
	for _, bad := range []string{"identity:", "Microsoft.Insights/actionGroups@", "emailReceivers", "webhookReceivers"} {
		if strings.Contains(mask(alerts), bad) {
			t.Errorf("modules/alerts.bicep contains %q: it uses the given action group and needs no identity", bad)
		}
	}
}

// TestMaskAndBlock: the helpers the tests above read the templates with.
func TestMaskAndBlock(t *testing.T) {
	text := "x = {\n  a: '}{'\n  b: '''\n{\n''' // {\n  c: { d: [1, 2] } }\ny"
	m := mask(text)
	if len(m) != len(text) || strings.Count(m, "\n") != strings.Count(text, "\n") {
		t.Fatalf("mask changed the length or the lines: %q", m)
	}
	s, e := block(m, 0)
	if s < 0 || text[e] != '}' || text[e+1] != '\n' {
		t.Fatalf("block: %d %d in %q", s, e, m)
	}
	if got := strings.Join(topLevelKeys(m[s:e]), ","); got != "a,b,c" {
		t.Errorf("top-level keys %q, want a,b,c", got)
	}
	if got := params("param a string\nparam b int = 3\n// param c string\nparam d object = {}\n"); len(got) != 3 || got["a"] || !got["b"] || !got["d"] {
		t.Errorf("params: %v", got)
	}
}

// TestFlexSite: what Flex Consumption accepts and needs, as Microsoft's current Flex samples
// have it. No siteConfig.ftpsState (Flex has no FTP; Azure rejects it on Flex sites, error
// 51021) and no FUNCTIONS_WORKER_RUNTIME (the runtime is functionAppConfig.runtime); 512 MB
// instances allowed and the default; a scale-out limit of 40 to 1000 that is at least one
// instance per poller plus the status function's; Key Vault references resolved with the
// user-assigned identity.
func TestFlexSite(t *testing.T) {
	for file, text := range allBicep(t) {
		for _, bad := range []string{"ftpsState", "FUNCTIONS_WORKER_RUNTIME", "WEBSITE_RUN_FROM_PACKAGE", "FunctionAppScaleLimit", "alwaysOn: true"} {
			if strings.Contains(mask(text), bad) {
				t.Errorf("%s sets %s, which Flex Consumption rejects or ignores", file, bad)
			}
		}
	}
	app := read(t, "modules/functionapp.bicep")
	masked := mask(app)
	wantIn(t, "modules/functionapp.bicep", masked,
		"keyVaultReferenceIdentity: identityId\n",
		"maximumInstanceCount: max(maximumInstanceCount, length(pollers) + 1)\n",
		"instanceMemoryMB: instanceMemoryMB\n",
	)
	// keyVaultReferenceIdentity is a site property, beside serverFarmId, not inside siteConfig.
	site := app[strings.Index(app, "resource app 'Microsoft.Web/sites@"):]
	s, e := block(mask(site), 0)
	ps, pe := block(mask(site[s:e]), strings.Index(site[s:e], "properties:"))
	keys := strings.Join(topLevelKeys(mask(site[s:e])[ps:pe]), ",")
	if keys != "serverFarmId,httpsOnly,keyVaultReferenceIdentity,virtualNetworkSubnetId,siteConfig,functionAppConfig" {
		t.Errorf("the site's properties are %s", keys)
	}
	main := read(t, "main.bicep")
	for _, want := range []string{"@minValue(40)\n@maxValue(1000)\nparam maximumInstanceCount int = 40\n",
		"@allowed([\n  512\n  2048\n  4096\n])\nparam instanceMemoryMB int = 512\n"} {
		if !strings.Contains(main, want) {
			t.Errorf("main.bicep lacks\n%s", want)
		}
	}
}

// TestAppSettingsOwned: the deployment replaces every app setting (sites/config appsettings), so
// every setting a user needs has a place in the parameters: each pollers entry's optional
// settings object ({P}_ prefixed, as appsettings.Prefix does) and appSettings for the rest. The
// settings the app itself needs win over both, and a poller's driver, connection and schedule
// over its settings object. The settings are built in the module, where the identity's client
// id is a parameter.
func TestAppSettingsOwned(t *testing.T) {
	app := read(t, "modules/functionapp.bicep")
	for _, want := range []string{
		"param pollers array\n", "param appSettings object = {}\n", "param baseSettings object\n", "param identityClientId string\n",
		"var pollerSettings = reduce(pollers, {}, (acc, p) => union(acc, toObject(items(p.?settings ?? {}), s => '${toUpper(replace(p.name, '-', '_'))}_${s.key}', s => string(s.value)), {\n",
		"  '${toUpper(replace(p.name, '-', '_'))}_DB_DRIVER': p.driver\n",
		"  '${toUpper(replace(p.name, '-', '_'))}_DB_CONNECTION': !contains(p, 'connection') ? 'sqlserver://${p.server}?database=${p.database}&${sqlServerDsn}' : p.connection\n",
		"  '${toUpper(replace(p.name, '-', '_'))}_SCHEDULE': p.schedule\n",
		"var sinkConnections = reduce(sinkSettings, {}, (acc, s) => union(acc, s))\n",
		"var settings = union(toObject(items(appSettings), s => s.key, s => string(s.value)), pollerSettings, sinkConnections, baseSettings)\n",
		"  name: 'appsettings'\n  properties: settings\n",
		"user+id=${identityClientId}",
	} {
		if !strings.Contains(app, want) {
			t.Errorf("modules/functionapp.bicep lacks\n%s", want)
		}
	}
	// The template's {P} is Go's: upper case, - as _.
	if got := appsettings.Prefix("big-orders"); got != "BIG_ORDERS" {
		t.Errorf("appsettings.Prefix(big-orders) = %s: the template's toUpper(replace(name, '-', '_')) no longer matches", got)
	}
	main := read(t, "main.bicep")
	wantIn(t, "main.bicep", main, "    baseSettings: baseSettings\n    appSettings: appSettings\n    pollers: pollers\n", "param appSettings object = {}\n")
	if strings.Contains(mask(main), "reduce(") {
		t.Error("main.bicep builds settings: that belongs in modules/functionapp.bicep")
	}
}

// TestParamsSettingsKnown: every key of a settings object in main.bicepparam is a setting the
// poller reads ({P}_ + key), other than the three the entry gives itself.
func TestParamsSettingsKnown(t *testing.T) {
	read := map[string]bool{}
	for _, s := range appsettings.Table {
		read[s.Suffix] = true
	}
	params := mask(readFile(t, "main.bicepparam"))
	text := readFile(t, "main.bicepparam")
	n := 0
	for _, m := range regexp.MustCompile(`settings: \{`).FindAllStringIndex(params, -1) {
		s, e := block(params, m[0])
		for _, k := range topLevelKeys(params[s:e]) {
			n++
			if !read[k] || k == "DB_DRIVER" || k == "DB_CONNECTION" || k == "SCHEDULE" {
				t.Errorf("main.bicepparam sets %s in a poller's settings: not a poller setting it may set there (%s)", k, text[s:e])
			}
		}
	}
	if n == 0 {
		t.Error("main.bicepparam shows no poller settings object")
	}
}

// TestAppNameDefault: the example parameters leave appName to its default, unique to the
// resource group (a fixed name collides in global DNS for everyone after the first deployer),
// and the parameter says never to change it (it names the accounts and the state blobs).
func TestAppNameDefault(t *testing.T) {
	if regexp.MustCompile(`(?m)^\s*param appName\b`).MatchString(mask(readFile(t, "main.bicepparam"))) {
		t.Error("main.bicepparam sets appName: leave the unique default")
	}
	main := read(t, "main.bicep")
	if !strings.Contains(main, "param appName string = 'pt-${uniqueString(resourceGroup().id)}'\n") ||
		!strings.Contains(main, "never change it after the first deploy") {
		t.Error("main.bicep's appName must default to a name unique to the resource group and say never to change it")
	}
}

// TestStateDataProtection: the account holding the state container has blob and container soft
// delete, versioning with a lifecycle rule that trims old versions of that container, a
// CanNotDelete lock, and its blob writes and deletes logged to the workspace (who moved a
// checkpoint); the workspace has a daily cap.
func TestStateDataProtection(t *testing.T) {
	st := read(t, "modules/storage.bicep")
	for _, want := range []string{
		"deleteRetentionPolicy: {\n    enabled: true\n    days: softDeleteDays\n",
		"containerDeleteRetentionPolicy: {\n    enabled: true\n    days: softDeleteDays\n",
		"isVersioningEnabled: true\n",
		"properties: dataProtection ? protection : {}\n",
		"resource versionTrim 'Microsoft.Storage/storageAccounts/managementPolicies@2023-05-01' = if (dataProtection) {\n  parent: account\n  name: 'default'\n",
		"version: {\n                delete: {\n                  daysAfterCreationGreaterThan: versionRetentionDays\n",
		"prefixMatch: [\n                '${protectedContainer}/'\n",
		"resource lock 'Microsoft.Authorization/locks@2020-05-01' = if (deleteLock) {",
		"scope: account\n  properties: {\n    level: 'CanNotDelete'\n",
		"resource blobDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = if (!empty(workspaceId)) {",
		"scope: blobService\n", "category: 'StorageWrite'", "category: 'StorageDelete'",
	} {
		if !strings.Contains(st, want) {
			t.Errorf("modules/storage.bicep lacks\n%s", want)
		}
	}
	main := read(t, "main.bicep")
	for _, want := range []string{
		// The separate state account (the default) is protected...
		"param separateStateAccount bool = true\n", "param stateLock bool = true\n", "param stateSoftDeleteDays int = 7\n", "param stateVersionRetentionDays int = 7\n",
		"    containers: [stateContainerName]\n    dataProtection: true\n",
		"    deleteLock: stateLock\n    workspaceId: monitoring.outputs.workspaceId\n",
		// ...and so is the host account when it holds the state container.
		"    dataProtection: !separateStateAccount\n", "    deleteLock: !separateStateAccount && stateLock\n",
		"    workspaceId: separateStateAccount ? '' : monitoring.outputs.workspaceId\n",
		"    protectedContainer: stateContainerName\n",
		"    dailyCapGb: logDailyCapGb\n", "param logDailyCapGb int = 1\n",
	} {
		if !strings.Contains(main, want) {
			t.Errorf("main.bicep lacks\n%s", want)
		}
	}
	if strings.Count(main, "    protectedContainer: stateContainerName\n") != 2 {
		t.Error("both storage modules must name the state container as the one whose versions are trimmed")
	}
	if !strings.Contains(read(t, "modules/monitoring.bicep"), "workspaceCapping: {\n      dailyQuotaGb: dailyCapGb\n") {
		t.Error("modules/monitoring.bicep lacks the workspace's daily cap")
	}
}

// TestWorkflowCompiles: the GitHub workflow compiles and lints every template with a pinned
// Bicep CLI, failing on warnings, builds the parameters file, and runs a what-if when the Azure
// secrets are set (and says why not when they are not).
func TestWorkflowCompiles(t *testing.T) {
	ci := readFile(t, "../../.github/workflows/ci.yml")
	for _, want := range []string{
		"BICEP_VERSION: v0.", "releases/download/$BICEP_VERSION/bicep-linux-x64",
		"for f in infra/bicep/main.bicep infra/bicep/modules/*.bicep; do",
		`bicep build "$f"`, `bicep lint "$f"`, `grep -E ': (Warning|Error) '`,
		"bicep build-params infra/bicep/main.bicepparam", "bicep build-params infra/bicep/vnet.bicepparam", "exit $status",
		"uses: azure/login@v2", "id-token: write",
		"az deployment group what-if --resource-group \"$AZURE_WHATIF_GROUP\"",
		"--template-file infra/bicep/main.bicep --parameters infra/bicep/main.bicepparam",
		"what-if skipped: set the secrets AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_SUBSCRIPTION_ID",
	} {
		if !strings.Contains(ci, want) {
			t.Errorf(".github/workflows/ci.yml lacks %s", want)
		}
	}
	// Every module is a file the loop covers.
	mods, _ := filepath.Glob("modules/*.bicep")
	if len(mods) < 7 {
		t.Errorf("only %d modules", len(mods))
	}
}

// TestSinkRoles: modules/sink.bicep gives the app's identity the built-in sender role of each
// sink type, scoped to the target resource itself (not its account or namespace), with a
// deterministic guid() name, once per entry; the targets are existing resources.
func TestSinkRoles(t *testing.T) {
	sink := read(t, "modules/sink.bicep")
	want := map[string]string{
		"storageQueueDataMessageSender": "c6a89b2d-59bc-44d0-9896-0f6e12d7b80a", // Storage Queue Data Message Sender
		"serviceBusDataSender":          "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39", // Azure Service Bus Data Sender
		"eventHubsDataSender":           "2b629674-e913-4c01-ae53-ef4638d8f975", // Azure Event Hubs Data Sender
		"eventGridDataSender":           "d5a91429-5739-47e2-a06b-3470a27159e7", // EventGrid Data Sender
	}
	found := map[string]string{}
	for _, m := range regexp.MustCompile(`var (\w+) = '([0-9a-f-]{36})'`).FindAllStringSubmatch(sink, -1) {
		found[m[1]] = m[2]
	}
	if len(found) != len(want) {
		t.Errorf("modules/sink.bicep declares the role ids %v, want %v", found, want)
	}
	for name, id := range want {
		if found[name] != id {
			t.Errorf("%s is %q, want the built-in role %s", name, found[name], id)
		}
	}
	// The targets: existing resources, each the child the role is scoped to.
	targets := map[string]string{
		"storageQueue":    "Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01",
		"serviceBusQueue": "Microsoft.ServiceBus/namespaces/queues@2024-01-01",
		"serviceBusTopic": "Microsoft.ServiceBus/namespaces/topics@2024-01-01",
		"eventHub":        "Microsoft.EventHub/namespaces/eventhubs@2024-01-01",
		"eventGridTopic":  "Microsoft.EventGrid/topics@2025-02-15",
	}
	for name, typ := range targets {
		if !strings.Contains(sink, "resource "+name+" '"+typ+"' existing = {\n") {
			t.Errorf("modules/sink.bicep lacks the existing target resource %s '%s'", name, typ)
		}
	}
	if regexp.MustCompile(`(?m)^resource \w+ 'Microsoft\.(Storage|ServiceBus|EventHub|EventGrid)[^']*' = `).MatchString(sink) {
		t.Error("modules/sink.bicep creates a target: the targets are existing resources")
	}
	sender := func(scope, role, condition string) roleAssignment {
		return roleAssignment{scope, role, "principalId", "'ServicePrincipal'", condition}
	}
	checkAssignments(t, "modules/sink.bicep", sink, map[string]roleAssignment{
		"queueSender":           sender("storageQueue", "storageQueueDataMessageSender", "type == 'storagequeue'"),
		"serviceBusQueueSender": sender("serviceBusQueue", "serviceBusDataSender", "serviceBusToQueue"),
		"serviceBusTopicSender": sender("serviceBusTopic", "serviceBusDataSender", "type == 'servicebus' && !serviceBusToQueue"),
		"eventHubSender":        sender("eventHub", "eventHubsDataSender", "type == 'eventhubs'"),
		"eventGridSender":       sender("eventGridTopic", "eventGridDataSender", "type == 'eventgrid'"),
	}, "one per target kind, each conditional on the type")
	if !strings.Contains(sink, "var serviceBusToQueue = type == 'servicebus' && contains(sink, 'queueName')\n") {
		t.Error("a servicebus entry's role goes to its queue when it names one, else to its topic")
	}
	// main.bicep: one module per entry, in the target's resource group, with the app's identity.
	main := read(t, "main.bicep")
	wantIn(t, "main.bicep", main,
		"param sinks array = []\n",
		"module sinkAccess 'modules/sink.bicep' = [for s in sinks: {\n",
		"  scope: resourceGroup(s.?resourceGroupName ?? resourceGroup().name)\n",
		"    sink: s\n    principalId: identity.outputs.principalId\n    clientId: identity.outputs.clientId\n",
		"    sinkSettings: [for i in range(0, length(sinks)): sinkAccess[i].outputs.settings]\n",
	)
	if !regexp.MustCompile(`@description\('[^\n]+'\)\nparam sinks array = \[\]\n`).MatchString(main) {
		t.Error("main.bicep's sinks parameter has no @description")
	}
}

// TestSinkSettings: each sink type's app setting suffix is the one a Functions binding connection
// (and the sink package) reads, and an entry sets X__<endpoint>, X__credential = managedidentity
// and X__clientId, with the endpoint built from the target, never a key or connection string.
func TestSinkSettings(t *testing.T) {
	sink := read(t, "modules/sink.bicep")
	want := map[string]string{
		"storagequeue": "queueServiceUri",
		"servicebus":   "fullyQualifiedNamespace",
		"eventhubs":    "fullyQualifiedNamespace",
		"eventgrid":    "topicEndpointUri",
	}
	m := regexp.MustCompile(`(?s)var endpointSetting = \{\n(.*?)\n\}\[type\]\n`).FindStringSubmatch(sink)
	if m == nil {
		t.Fatal("modules/sink.bicep lacks var endpointSetting = { <type>: '<suffix>' ... }[type]")
	}
	got := map[string]string{}
	for _, f := range regexp.MustCompile(`(?m)^\s*(\w+): '(\w+)'$`).FindAllStringSubmatch(m[1], -1) {
		got[f[1]] = f[2]
	}
	if len(got) != len(want) {
		t.Errorf("endpointSetting maps %v, want %v", got, want)
	}
	for typ, suffix := range want {
		if got[typ] != suffix {
			t.Errorf("a %s sink's setting is X__%s, want X__%s", typ, got[typ], suffix)
		}
	}
	for _, line := range []string{
		"output settings object = {\n  '${sink.connection}__${endpointSetting}': endpoint\n  '${sink.connection}__credential': 'managedidentity'\n  '${sink.connection}__clientId': clientId\n}\n",
		"type == 'storagequeue' ? 'https://${storageAccountName}.queue.${environment().suffixes.storage}'",
		"type == 'eventgrid' ? eventGridTopic.properties.endpoint : '${namespaceName}.servicebus.windows.net'",
	} {
		if !strings.Contains(sink, line) {
			t.Errorf("modules/sink.bicep lacks\n%s", line)
		}
	}
	for _, bad := range []string{"listKeys", "SharedAccessKey", "connectionString", "AccountKey", "authorizationRules"} {
		if strings.Contains(strings.ToLower(mask(sink)), strings.ToLower(bad)) {
			t.Errorf("modules/sink.bicep uses %s: sinks connect by identity only", bad)
		}
	}
	// The example: the declared poller orders-queue's storage queue.
	params := read(t, "main.bicepparam")
	entries := sinkEntries(t, params)
	if len(entries) == 0 {
		t.Fatal("main.bicepparam shows no sinks entry")
	}
	for _, e := range entries {
		if _, ok := want[e["type"]]; !ok || e["connection"] == "" {
			t.Errorf("main.bicepparam's sinks entry %v: want a connection and a type of %v", e, want)
		}
	}
	if e := entries[0]; e["connection"] != "ChangesQueue" || e["type"] != "storagequeue" || e["queueName"] != "orders-changes" || e["storageAccountName"] == "" {
		t.Errorf("main.bicepparam's first sinks entry is %v, want the orders-queue example (ChangesQueue, storagequeue, orders-changes)", e)
	}
	if !strings.Contains(params, "name: 'orders-queue'") {
		t.Error("main.bicepparam has no pollers entry for the example declared poller orders-queue")
	}
}

// TestPrivateNetworking: vnetEnabled (off by default) gives the app a subnet delegated to
// Microsoft.App/environments (site property virtualNetworkSubnetId, as Microsoft's Flex
// Consumption templates set it: Azure-Samples/functions-quickstart-dotnet-azd fe74255
// infra/app/api.bicep and vnet.bicep, functions-e2e-sb-vnet fe57ef2 infra/app/vnet.bicep and
// storage-PrivateEndpoint.bicep), or an existing subnet; the storage accounts private endpoints
// (host blob and queue, its table with hostDiagnosticEvents, state blob) registered in private
// DNS zones made and linked once, and their public network access off; a sink marked
// privateEndpoint a private endpoint of its service. vnet.bicepparam sets it on, for the
// workflow's build.
func TestPrivateNetworking(t *testing.T) {
	main := read(t, "main.bicep")
	wantIn(t, "main.bicep", main,
		"param vnetEnabled bool = false\n", "param existingAppSubnetId string = ''\n", "param existingPrivateEndpointSubnetId string = ''\n",
		"module network 'modules/network.bicep' = if (vnetEnabled) {", "publicNetworkAccess: !vnetEnabled\n",
		"subnetId: vnetEnabled ? network!.outputs.appSubnetId : ''\n",
		"'privatelink.blob.${environment().suffixes.storage}'", "'privatelink.queue.${environment().suffixes.storage}'",
		"hostDiagnosticEvents ? ['privatelink.table.${environment().suffixes.storage}'] : []",
		"module storageEndpoint 'modules/privateendpoint.bicep' = [for e in (vnetEnabled ? storageEndpoints : []): {",
		"var privateSinks = vnetEnabled ? filter(sinks, s => s.?privateEndpoint ?? false) : []",
		"servicebus: 'privatelink.servicebus.windows.net'", "eventgrid: 'privatelink.eventgrid.azure.net'",
		"servicebus: 'namespace'", "eventhubs: 'namespace'", "eventgrid: 'topic'", "storagequeue: 'queue'",
	)
	// Each storage service's endpoint: the host's blob and queue always, its table with the
	// diagnostic events, the state account's blob when it is its own.
	for _, want := range []string{"account: hostStorageName\n    groupId: 'blob'", "account: hostStorageName\n    groupId: 'queue'",
		"hostDiagnosticEvents ? [\n  {\n    account: hostStorageName\n    groupId: 'table'", "separateStateAccount ? [\n  {\n    account: stateStorageName\n    groupId: 'blob'"} {
		if !strings.Contains(main, want) {
			t.Errorf("main.bicep's storage endpoints lack\n%s", want)
		}
	}
	network := read(t, "modules/network.bicep")
	wantIn(t, "modules/network.bicep", network,
		"serviceName: 'Microsoft.App/environments'", "privateEndpointNetworkPolicies: 'Disabled'",
		"resource vnet 'Microsoft.Network/virtualNetworks@2024-01-01' = if (made) {",
		"resource zones 'Microsoft.Network/privateDnsZones@2020-06-01' = [for z in zoneNames: {\n  name: z\n  location: 'global'",
		"registrationEnabled: false", "join(take(split(existingAppSubnetId, '/'), 9), '/')",
	)
	// A zone and its link are made once, in the network module: two accounts' blob endpoints
	// share the blob zone, and a second link of one network to one zone is refused.
	for file, text := range allBicep(t) {
		if file != "modules/network.bicep" && strings.Contains(mask(text), "Microsoft.Network/privateDnsZones@") {
			t.Errorf("%s makes a private DNS zone: only modules/network.bicep does", file)
		}
	}
	pe := read(t, "modules/privateendpoint.bicep")
	wantIn(t, "modules/privateendpoint.bicep", pe, "'Microsoft.Network/privateEndpoints@2024-01-01'", "groupIds: [\n            groupId\n          ]",
		"'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-01-01'", "privateDnsZoneId: zoneId")
	storage := read(t, "modules/storage.bicep")
	wantIn(t, "modules/storage.bicep", storage, "publicNetworkAccess: publicNetworkAccess ? 'Enabled' : 'Disabled'\n",
		"} : {\n      defaultAction: 'Deny'\n      bypass: 'None'\n    }")
	if app := read(t, "modules/functionapp.bicep"); !strings.Contains(app, "virtualNetworkSubnetId: empty(subnetId) ? null : subnetId\n") {
		t.Error("modules/functionapp.bicep does not join the app to the subnet")
	}
	vnet := read(t, "vnet.bicepparam")
	wantIn(t, "vnet.bicepparam", vnet, "using 'main.bicep'\n", "param vnetEnabled = true\n", "privateEndpoint: true")
}

// TestZoneRedundancy: zoneRedundant (off by default) sets the Flex plan's zoneRedundant
// (Microsoft.Web/serverfarms@2024-04-01 properties, MicrosoftDocs/azure-docs 39969ec
// functions-zone-redundancy.md) and makes the storage accounts Standard_ZRS, which Microsoft
// requires of the host account of a zone-redundant app (MicrosoftDocs/reliability-docs c5ebb1e
// reliability-functions.md).
func TestZoneRedundancy(t *testing.T) {
	main := read(t, "main.bicep")
	if !strings.Contains(main, "param zoneRedundant bool = false\n") || strings.Count(main, "    zoneRedundant: zoneRedundant\n") != 3 {
		t.Error("main.bicep must declare zoneRedundant (off) and pass it to both storage accounts and the app")
	}
	if app := read(t, "modules/functionapp.bicep"); !strings.Contains(app, "  properties: {\n    reserved: true\n    zoneRedundant: zoneRedundant\n  }") {
		t.Error("modules/functionapp.bicep: the plan's zoneRedundant is not the parameter")
	}
	if st := read(t, "modules/storage.bicep"); !strings.Contains(st, "name: zoneRedundant ? 'Standard_ZRS' : 'Standard_LRS'\n") {
		t.Error("modules/storage.bicep: a zone-redundant app's accounts are not Standard_ZRS")
	}
}

// TestWorkbook: modules/workbook.bicep makes a shared Azure Monitor workbook on the Application
// Insights component (Microsoft.Insights/workbooks@2023-06-01, as Microsoft's Resource Manager
// samples for workbooks make one: kind shared, category workbook, sourceId, serializedData), with a
// time range and a pollers parameter, and a time chart per measure, each binned by the range's
// grain and split by poller. Each query reads only fields that docs/contract.md's log lines
// document for the line it filters on. main.bicep sets STATUS_WORKBOOK_URL to it, in the
// cloud's portal.
func TestWorkbook(t *testing.T) {
	wb := read(t, "modules/workbook.bicep")
	wantIn(t, "modules/workbook.bicep", wb,
		"resource book 'Microsoft.Insights/workbooks@2023-06-01' = {", "kind: 'shared'", "category: 'workbook'",
		"sourceId: insightsId", "serializedData: string(workbook)", "name: guid(resourceGroup().id, name, 'pollers-workbook')",
		"version: 'Notebook/1.0'", "name: 'TimeRange'", "name: 'Poller'", "multiSelect: true", "query: pollersQuery",
		"visualization: 'timechart'", "resourceType: 'microsoft.insights/components'",
	)
	queries := map[string]string{}
	for _, m := range regexp.MustCompile(`(?s)var (\w+Query) = (?:replace\()?'''(.*?)'''`).FindAllStringSubmatch(wb, -1) {
		queries[m[1]] = m[2]
	}
	charts := []string{"lagQuery", "rowsQuery", "durationQuery", "failuresQuery", "deadLettersQuery", "slotQuery"}
	for _, c := range charts {
		if !strings.Contains(wb, "query: "+c+"\n") {
			t.Errorf("no chart shows %s", c)
		}
	}
	// The documented fields of each line (docs/contract.md, Log lines: "- `msg`: `field`, ...").
	contract := read(t, "../../docs/contract.md")
	logs := contract[strings.Index(contract, "## Log lines"):]
	logs = logs[:strings.Index(logs[3:], "\n## ")+3]
	documented := map[string][]string{}
	var items []string // each "- `msg`...: fields" bullet, its continuation lines joined
	for _, line := range strings.Split(logs, "\n") {
		switch {
		case strings.HasPrefix(line, "- `"):
			items = append(items, line)
		case strings.HasPrefix(line, "  ") && len(items) > 0:
			items[len(items)-1] += line
		}
	}
	for _, item := range items {
		head, fields, _ := strings.Cut(item, ":")
		msg := strings.Trim(strings.TrimPrefix(head, "- "), "`")
		msg, _, _ = strings.Cut(msg, "` ")
		for _, f := range regexp.MustCompile("`"+`(\w+)`+"`").FindAllStringSubmatch(fields, -1) {
			documented[msg] = append(documented[msg], f[1])
		}
	}
	if len(documented["tick"]) < 10 || len(documented["dead letters"]) < 3 {
		t.Fatalf("docs/contract.md's log lines read as %v", documented)
	}
	for _, name := range append(charts, "pollersQuery", "lastTickQuery") {
		q, ok := queries[name]
		if !ok {
			t.Errorf("modules/workbook.bicep has no %s", name)
			continue
		}
		msg := regexp.MustCompile(`where tostring\(line\.msg\) == "([^"]+)"`).FindStringSubmatch(q)
		if msg == nil {
			t.Errorf("%s filters on no line", name)
			continue
		}
		for _, f := range regexp.MustCompile(`line\.(\w+)`).FindAllStringSubmatch(q, -1) {
			if f[1] != "msg" && !slices.Contains(documented[msg[1]], f[1]) {
				t.Errorf("%s reads %s of the %q line, which docs/contract.md does not document (it has %v)", name, f[1], msg[1], documented[msg[1]])
			}
		}
		wantIn(t, name, q, "\ntraces\n", "| where timestamp {TimeRange}\n", "| extend line = parse_json(message)\n", "where isnotempty(poller)")
		if name != "pollersQuery" && name != "lastTickQuery" && (!strings.Contains(q, "poller in ({Poller})") || !strings.Contains(q, "by poller, bin(timestamp, {TimeRange:grain})")) {
			t.Errorf("%s is not one series per chosen poller, binned by the range's grain", name)
		}
		if strings.Count(q, "(") != strings.Count(q, ")") || strings.Count(q, `"`)%2 != 0 || strings.Contains(q, "'") {
			t.Errorf("%s has unbalanced parentheses or quotes, or a quote the template would end:\n%s", name, q)
		}
	}
	// The time since each poller's last tick line, first: a row for every poller the deployment
	// declares (the datatable of pollerPeriods, full-outer-joined: one with no line in the range
	// keeps its row) and any other that logged one, the silent ones first.
	wantIn(t, "modules/workbook.bicep", wb, "param pollerPeriods array\n",
		"''', 'EXPECTED_POLLERS', join(map(pollerPeriods, p => '\"${p.name}\", ${p.periodSeconds}'), ', '))\n",
		"name: 'last-tick'\n", "query: lastTickQuery\n", "visualization: 'table'\n")
	if strings.Index(wb, "name: 'last-tick'") > strings.Index(wb, "map(charts, c => {") {
		t.Error("the last-tick table is not the workbook's first item after its parameters")
	}
	wantIn(t, "lastTickQuery", queries["lastTickQuery"],
		"let expected = datatable(poller: string, period_seconds: long) [EXPECTED_POLLERS];\ntraces\n",
		"| summarize arg_max(timestamp, outcome) by poller\n| join kind=fullouter expected on poller\n",
		"| project poller = coalesce(poller, poller1), period_seconds, last_tick = timestamp, last_outcome = outcome\n",
		"since_last_tick_seconds = tolong((now() - last_tick) / 1s)", "periods_since_last_tick = iff(period_seconds > 0,",
		"| order by since_last_tick_seconds desc nulls first, poller asc\n")
	main := read(t, "main.bicep")
	wantIn(t, "main.bicep", main, "module workbook 'modules/workbook.bicep' = {", "STATUS_WORKBOOK_URL: '${environment().portal}/#resource${workbook.outputs.id}'\n")
}
