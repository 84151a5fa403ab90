// Package bicep holds no Go code: its tests check the Bicep templates' content, since no Bicep
// compiler runs here (scripts/check-bicep.mjs checks their syntax).
package bicep

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

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

// TestRoleIDs: every role definition id is the built-in role its name says.
func TestRoleIDs(t *testing.T) {
	want := map[string]string{
		"storageBlobDataOwner":       "b7e6dc6d-f1e8-4753-8033-0f276bb0955b",
		"storageBlobDataContributor": "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
		"monitoringMetricsPublisher": "3913510d-42f4-4e42-8a64-420c390055eb",
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
	// Every assignment: a deterministic guid() name, a ServicePrincipal, a role from the list.
	assignments := strings.Split(roles, "'Microsoft.Authorization/roleAssignments@")[1:]
	if len(assignments) != 3 {
		t.Fatalf("%d role assignments, want 3 (host blob owner, state container contributor, metrics publisher)", len(assignments))
	}
	for _, a := range assignments {
		if !strings.Contains(a, "name: guid(") || !strings.Contains(a, "principalType: 'ServicePrincipal'") ||
			!regexp.MustCompile(`roleDefinitions', (storageBlobDataOwner|storageBlobDataContributor|monitoringMetricsPublisher)\)`).MatchString(a) {
			t.Errorf("a role assignment lacks a guid() name, principalType ServicePrincipal or a known role:\n%s", a[:min(len(a), 400)])
		}
	}
	// The state role is scoped to the container, not the account.
	state := assignments[1]
	if !strings.Contains(state, "scope: stateContainer") || !strings.Contains(roles, "resource stateContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@") {
		t.Errorf("Storage Blob Data Contributor must be scoped to the state container:\n%s", state)
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
	for _, want := range []string{"ftpsState: 'Disabled'", "httpsOnly: true", "name: 'FC1'", "name: 'custom'", "type: 'UserAssignedIdentity'"} {
		if !strings.Contains(app, want) {
			t.Errorf("modules/functionapp.bicep lacks %s", want)
		}
	}
	if !strings.Contains(read(t, "modules/monitoring.bicep"), "DisableLocalAuth: true") {
		t.Error("Application Insights must disable local authentication")
	}
	main := read(t, "main.bicep")
	for _, want := range []string{"AzureWebJobsStorage__credential: 'managedidentity'", "AzureWebJobsStorage__clientId", "StateStorage__blobServiceUri",
		"StateStorage__clientId", "APPLICATIONINSIGHTS_AUTHENTICATION_STRING", "POLLER_APP_NAME", "fedauth=ActiveDirectoryManagedIdentity"} {
		if !strings.Contains(main, want) {
			t.Errorf("main.bicep lacks the app setting %s", want)
		}
	}
}

// TestEveryPollerHasSettings: each pollers/<name> folder has an entry in main.bicepparam.
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
	if exe != "bin/handler" || !strings.Contains(read(t, "../../scripts/build.sh"), "-o "+exe) {
		t.Errorf("host.json runs %q, which scripts/build.sh does not build", exe)
	}
	if host.FunctionTimeout != "00:10:00" {
		t.Errorf("functionTimeout %q: keep it above the 4 min tick budget", host.FunctionTimeout)
	}
}

// TestDeployDryRun: scripts/deploy.sh --dry-run prints what it would run, without az or func.
func TestDeployDryRun(t *testing.T) {
	cmd := exec.Command("bash", "scripts/deploy.sh", "-g", "rg-test", "-l", "westeurope", "--dry-run")
	cmd.Dir = "../.."
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + os.TempDir()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("deploy.sh --dry-run: %v\n%s", err, out)
	}
	for _, want := range []string{"+ az group create --name rg-test", "+ az deployment group create", "main.bicepparam",
		"GOOS=linux GOARCH=amd64 scripts/build.sh", "+ func azure functionapp publish", "nothing was deployed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the dry run does not show %q:\n%s", want, out)
		}
	}
	// Without -g it refuses with a usage error.
	cmd = exec.Command("bash", "scripts/deploy.sh", "--dry-run")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "-g RESOURCE_GROUP") {
		t.Errorf("deploy.sh without -g: %v %s", err, out)
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
