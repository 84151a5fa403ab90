package bicep

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

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
		"GOOS=linux GOARCH=amd64 scripts/build.sh", "+ cd .dist\n+ func azure functionapp publish '<appName output>' --custom\n", "nothing was deployed"} {
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

// deployRun runs scripts/deploy.sh in a copy of the files it reads (scriptTree) with stub az,
// func and go first on PATH (stubs). The stubs log their arguments to the returned log; az
// answers account show, and deployment group show with the outputs main.bicep declares (one
// value a line, as -o tsv prints a multiselect list).
func deployRun(t *testing.T, args ...string) (stdout, stderr string, code int, azLog string) {
	t.Helper()
	r := runScript(t, scriptTree(t), nil, "scripts/deploy.sh", args...)
	return r.stdout, r.stderr, r.code, r.calls
}

// editedParams writes a parameters file without example values: the orders poller (which has
// a folder) and one whose folder does not exist.
func editedParams(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "edited.bicepparam")
	text := `using 'main.bicep'
param appName = 'func-app-x1'
// server: 'contoso-sql.database.windows.net' in a comment is not a value
param pollers = [
  {
    name: 'orders'
    driver: 'sqlserver'
    server: 'sql-prod-7.database.windows.net'
    database: 'sales'
    schedule: '*/30 * * * * *'
  }
  {
    name: 'zz-no-folder'
    driver: 'postgres'
    connection: '@Microsoft.KeyVault(SecretUri=https://kv-x1.vault.azure.net/secrets/pg/)'
    schedule: '0 * * * * *'
  }
]
`
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDeployHelp: --help prints the usage, not the script's shell lines or comment markers.
func TestDeployHelp(t *testing.T) {
	out, errOut, code, _ := deployRun(t, "--help")
	if code != 0 || !strings.Contains(out, "deploy.sh -g RESOURCE_GROUP") || !strings.Contains(out, "--dry-run") {
		t.Fatalf("--help: exit %d\n%s%s", code, out, errOut)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") || strings.Contains(line, "set -euo") || strings.Contains(line, "dirname") {
			t.Errorf("--help prints a script line: %q", line)
		}
	}
}

// TestDeployMissingValue: an option that takes a value, given without one, is a usage error
// naming the option (not bash's "$2: unbound variable").
func TestDeployMissingValue(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--dry-run", "-g"}, "deploy.sh: -g needs a value (the resource group)"},
		{[]string{"-g", "--dry-run"}, "deploy.sh: -g needs a value (the resource group)"},
		{[]string{"--dry-run", "-g", "rg", "-l"}, "deploy.sh: -l needs a value (the location"},
		{[]string{"--dry-run", "-g", "rg", "-p"}, "deploy.sh: -p needs a value (the parameters file"},
	} {
		out, errOut, code, _ := deployRun(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "unbound") {
			t.Errorf("deploy.sh %v: exit %d, want 2 and %q\n%s%s", c.args, code, c.want, out, errOut)
		}
	}
}

// TestDeployExampleValues: the shipped main.bicepparam holds example values (contoso-sql, shop;
// pollerctl new writes EDIT-ME): the dry run warns on stderr, a real run refuses unless
// --allow-example, and an edited file (example values only in comments) passes.
func TestDeployExampleValues(t *testing.T) {
	if p := read(t, "main.bicepparam"); !strings.Contains(p, "contoso-sql.database.windows.net") {
		t.Skip("main.bicepparam no longer holds the example server")
	}
	out, errOut, code, _ := deployRun(t, "-g", "rg-test", "--dry-run")
	if code != 0 || !strings.Contains(errOut, "main.bicepparam") || !strings.Contains(errOut, "contoso-sql.database.windows.net") ||
		!strings.Contains(errOut, "shop") || !strings.Contains(errOut, "example") {
		t.Errorf("the dry run does not warn about the example values: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	out, errOut, code, calls := deployRun(t, "-g", "rg-test")
	if code != 2 || !strings.Contains(errOut, "infra/bicep/main.bicepparam") || !strings.Contains(errOut, "contoso-sql.database.windows.net") ||
		!strings.Contains(errOut, "--allow-example") {
		t.Errorf("a real run with example values: exit %d, want 2 and a refusal naming the file, the values and --allow-example\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if strings.Contains(calls, "deployment group create") || strings.Contains(calls, "func ") {
		t.Errorf("the refused run deployed anyway:\n%s", calls)
	}

	_, errOut, code, calls = deployRun(t, "-g", "rg-test", "--allow-example")
	if code != 0 || !strings.Contains(calls, "deployment group create") || !strings.Contains(errOut, "contoso-sql.database.windows.net") {
		t.Errorf("--allow-example: exit %d, it should deploy and still warn\nstderr:\n%s\ncalls:\n%s", code, errOut, calls)
	}

	// pollerctl new's placeholders count too.
	edit := filepath.Join(t.TempDir(), "new.bicepparam")
	text := "using 'main.bicep'\nparam pollers = [\n  {\n    name: 'refunds'\n    // EDIT-ME (added by pollerctl new): the source database.\n    driver: 'sqlserver'\n    server: 'EDIT-ME.database.windows.net'\n    database: 'EDIT-ME'\n  }\n]\n"
	if err := os.WriteFile(edit, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code, _ = deployRun(t, "-g", "rg-test", "-p", edit)
	if code != 2 || !strings.Contains(errOut, "EDIT-ME.database.windows.net") || !strings.Contains(errOut, edit) {
		t.Errorf("a real run with EDIT-ME placeholders: exit %d\n%s", code, errOut)
	}

	_, errOut, code, _ = deployRun(t, "-g", "rg-test", "-p", editedParams(t))
	if code != 0 || strings.Contains(errOut, "example") {
		t.Errorf("an edited parameters file: exit %d\n%s", code, errOut)
	}
}

// TestDeployNextSteps: a real run reads the deployment's outputs (main.bicep's output names)
// and prints the app, the state account, the identity, the operator's role on the state
// container, and sql-grants.sh lines for the pollers of the parameters file; the dry run shows
// the commands that would read them.
func TestDeployNextSteps(t *testing.T) {
	bicep := read(t, "main.bicep")
	for _, o := range []string{"appName", "identityName", "stateAccount", "stateContainer"} {
		if !strings.Contains(bicep, "output "+o+" ") {
			t.Fatalf("main.bicep has no output %s, which deploy.sh reads", o)
		}
	}
	out, errOut, code, calls := deployRun(t, "-g", "rg-test", "-p", editedParams(t))
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if !regexp.MustCompile(`az deployment group show .*-g rg-test -n pseudotrigger .*properties\.outputs`).MatchString(calls) {
		t.Errorf("the outputs are not read with az deployment group show:\n%s", calls)
	}
	if !strings.Contains(calls, "func azure functionapp publish func-app-x1 --custom (in .dist)") {
		t.Errorf("not published to the app named by the outputs:\n%s", calls)
	}
	for _, want := range []string{
		"func-app-x1", "id-func-app-x1", "stsx1", "db-state",
		"Storage Blob Data Contributor", "/blobServices/default/containers/db-state",
		"StateStorage__blobServiceUri=https://stsx1.blob.core.windows.net", "POLLER_APP_NAME=func-app-x1",
		"scripts/sql-grants.sh id-func-app-x1 dbo.orders", "pollers/orders/",
		"scripts/sql-grants.sh id-func-app-x1 <schema.table of pollers/zz-no-folder>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the next steps do not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "<appName output>") {
		t.Errorf("a real run prints placeholders:\n%s", out)
	}

	out, _, code, calls = deployRun(t, "-g", "rg-test", "--dry-run")
	if code != 0 || calls != "" {
		t.Fatalf("dry run: exit %d, calls %q\n%s", code, calls, out)
	}
	for _, want := range []string{"+ az deployment group show -g rg-test -n pseudotrigger", "properties.outputs",
		"Storage Blob Data Contributor", "scripts/sql-grants.sh", "pollers/orders/"} {
		if !strings.Contains(out, want) {
			t.Errorf("the dry run's next steps do not show %q:\n%s", want, out)
		}
	}
}

// TestDeployDeclaredPoller: a declared poller's table (and schema) comes from NAME/poller.json's
// .source, not from a "table" elsewhere in the file; without a schema the driver's default one.
func TestDeployDeclaredPoller(t *testing.T) {
	root := scriptTree(t)
	for name, text := range map[string]string{
		"orders-queue": `{
  "sink": {"type": "storagequeue", "connection": "ChangesQueue", "queue": "orders-changes", "table": "not-this"},
  "source": {
    "columns": ["table", "id"],
    "cursor": {"kind": "timestamp+pk", "column": "updated_at", "table": "nor-this"},
    "table": "orders", "schema": "sales",
    "key": ["id"], "filter": "status <> \"draft\""
  }
}`,
		"refunds-bus": `{"source":{"table":"refunds","key":["id"],"cursor":{"kind":"rowversion","column":"rv"}},"sink":{"type":"servicebus","connection":"Bus","topic":"refunds"}}`,
	} {
		if err := os.MkdirAll(filepath.Join(root, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name, "poller.json"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(t.TempDir(), "declared.bicepparam")
	text := `using 'main.bicep'
param appName = 'func-app-x1'
param pollers = [
  {
    name: 'orders-queue'
    driver: 'sqlserver'
    server: 'sql-prod-7.database.windows.net'
    database: 'sales'
    schedule: '*/30 * * * * *'
  }
  {
    name: 'refunds-bus'
    driver: 'postgres'
    connection: 'postgres://pg-prod/sales'
    schedule: '0 * * * * *'
  }
  {
    name: 'missing'
    driver: 'sqlserver'
    server: 'sql-prod-7.database.windows.net'
    database: 'sales'
    schedule: '0 * * * * *'
  }
]
`
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runScript(t, root, nil, "scripts/deploy.sh", "-g", "rg-test", "-p", p)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"scripts/sql-grants.sh id-func-app-x1 sales.orders    # orders-queue (sqlserver): the table from orders-queue/poller.json\n",
		"scripts/sql-grants.sh id-func-app-x1 public.refunds    # refunds-bus (postgres): the table from refunds-bus/poller.json",
		"scripts/sql-grants.sh id-func-app-x1 <schema.table of pollers/missing>    # missing (sqlserver): no pollers/missing folder or missing/poller.json",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the next steps do not show %q:\n%s", want, r.stdout)
		}
	}
	for _, bad := range []string{"not-this", "nor-this"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("the table was read from outside .source (%s):\n%s", bad, r.stdout)
		}
	}
}

// TestKeyVaultDocsNetworkRestriction: where the docs recommend Key Vault references they say
// that Flex Consumption does not resolve them when the vault is network-restricted, even with
// virtual network integration (Microsoft's Flex Consumption plan page, Considerations, "Key Vault
// and App Configuration References": MicrosoftDocs/azure-docs
// articles/azure-functions/flex-consumption-plan.md), and give the alternative: connections
// signed in with the app's identity.
func TestKeyVaultDocsNetworkRestriction(t *testing.T) {
	const page = "https://learn.microsoft.com/azure/azure-functions/flex-consumption-plan#considerations"
	deploying := readFile(t, "../../docs/deploying.md")
	kv := deploying[strings.Index(deploying, "## Key Vault references"):]
	kv = kv[:strings.Index(kv, "\n## Roles")]
	networking := readFile(t, "../../docs/networking.md")
	for name, text := range map[string]string{"docs/deploying.md's Key Vault references": kv, "docs/networking.md": networking} {
		wantIn(t, name, strings.Join(strings.Fields(text), " "), "network-restricted", "even with virtual network integration",
			"fedauth=ActiveDirectoryManagedIdentity", "`server` and `database`")
	}
	wantIn(t, "docs/deploying.md", kv, page)
	wantIn(t, "docs/networking.md", networking, "## Key Vault references\n", "(deploying.md#key-vault-references)", page)
}
