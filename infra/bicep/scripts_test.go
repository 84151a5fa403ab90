package bicep

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// scriptTree copies what the deploy scripts read into a temporary repository root: scripts/,
// host.json, poller.schema.json, azure.yaml, every <name>/function.json folder (with its
// poller.json), infra/bicep/main.bicepparam and pollers/. The scripts then build, stage and publish there, never in the checkout.
func scriptTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	copyFile := func(rel string) {
		b, err := os.ReadFile(filepath.Join("../..", rel))
		if err != nil {
			t.Fatal(err)
		}
		info, _ := os.Stat(filepath.Join("../..", rel))
		dst := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	for _, rel := range []string{"host.json", "poller.schema.json", "azure.yaml", "infra/bicep/main.bicepparam"} {
		copyFile(rel)
	}
	for _, pattern := range []string{"scripts/*.sh", "scripts/lib/*", "*/function.json", "pollers/*/*.go"} {
		files, _ := filepath.Glob(filepath.Join("../..", pattern))
		if len(files) == 0 {
			t.Fatalf("no %s in the checkout", pattern)
		}
		for _, f := range files {
			rel, _ := filepath.Rel("../..", f)
			copyFile(rel)
		}
	}
	// Declared pollers, when there are any: deploy.sh reads their tables.
	declared, _ := filepath.Glob("../../*/poller.json")
	for _, f := range declared {
		rel, _ := filepath.Rel("../..", f)
		copyFile(rel)
	}
	return root
}

// scriptResult is what runScript saw.
type scriptResult struct {
	stdout, stderr string
	code           int
	calls          string // the stubs' log, one call a line
	staged         string // the files func saw in its working directory, one a line, sorted
}

// runScript runs a script of the tree with stub az, func, go and azd first on PATH, each logging
// its arguments. go writes the file its -o names. func logs the folder it runs in and the files
// it sees there, and fails its first STUB_FUNC_FAILS calls. az answers deployment group show with
// the outputs main.bicep declares, and provider show for Microsoft.App with STUB_APP_PROVIDER
// (Registered; fail: an error), as -o tsv prints it on Windows too (\r\n). env adds variables.
func runScript(t *testing.T, root string, env []string, script string, args ...string) scriptResult {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "calls.log")
	stubs := map[string]string{
		"az": `echo "az $*" >>"$STUB_LOG"
case "$*" in
  *"deployment group show"*) printf 'func-app-x1\nid-func-app-x1\nstsx1\ndb-state\n' ;;
  "provider show --namespace Microsoft.App --query registrationState -o tsv")
    [ "${STUB_APP_PROVIDER:-Registered}" != fail ] || { echo "ERROR: AuthorizationFailed" >&2; exit 1; }
    printf '%s\r\n' "${STUB_APP_PROVIDER:-Registered}" ;;
esac`,
		"func": `echo "func $* (in $(basename "$PWD"))" >>"$STUB_LOG"
find . -type f | sort >"$STUB_DIR/staged"
n=$(cat "$STUB_DIR/func-calls" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" >"$STUB_DIR/func-calls"
if [ "$n" -le "${STUB_FUNC_FAILS:-0}" ]; then echo "Deployment was successful but the app appears to be unhealthy" >&2; exit 1; fi`,
		"go": `echo "go $* (GOOS=${GOOS:-} GOARCH=${GOARCH:-})" >>"$STUB_LOG"
while [ $# -gt 0 ]; do
  if [ "$1" = -o ]; then mkdir -p "$(dirname "$2")"; echo stub-handler >"$2"; fi
  shift
done`,
		"azd": `echo "azd $*" >>"$STUB_LOG"
case "$*" in
  "env get-value appName") [ -n "${STUB_AZD_APP:-}" ] && echo "$STUB_AZD_APP" || { echo "ERROR: key 'appName' not found" >&2; exit 1; } ;;
esac`,
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/bash\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Dir = root
	cmd.Env = append([]string{"PATH=" + dir + ":/usr/bin:/bin", "HOME=" + dir, "STUB_LOG=" + log, "STUB_DIR=" + dir}, env...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	var r scriptResult
	err := cmd.Run()
	if x, ok := err.(*exec.ExitError); ok {
		r.code = x.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(log)
	staged, _ := os.ReadFile(filepath.Join(dir, "staged"))
	r.stdout, r.stderr, r.calls, r.staged = o.String(), e.String(), string(b), string(staged)
	return r
}

// functionFolders lists the checkout's <name>/function.json files.
func functionFolders(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob("../../*/function.json")
	var out []string
	for _, f := range files {
		rel, _ := filepath.Rel("../..", f)
		out = append(out, rel)
	}
	if len(out) < 2 {
		t.Fatalf("function folders: %v", out)
	}
	return out
}

// published lists what the app runs, relative to the repository root: host.json, bin/handler,
// poller.schema.json, each <name>/function.json and each declared poller's <name>/poller.json
// (the example orders-queue has one, so the list cannot pass without a poller.json).
func published(t *testing.T) []string {
	t.Helper()
	out := append([]string{"bin/handler", "host.json", "poller.schema.json"}, functionFolders(t)...)
	declared, _ := filepath.Glob("../../*/poller.json")
	if len(declared) == 0 {
		t.Fatal("no <name>/poller.json in the checkout (the example orders-queue has one)")
	}
	for _, f := range declared {
		rel, _ := filepath.Rel("../..", f)
		if _, err := os.Stat(filepath.Join(filepath.Dir(f), "function.json")); err != nil {
			t.Fatalf("%s without function.json: %v", rel, err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	slices.Sort(out)
	return out
}

// TestPublishStagesAndCustom: scripts/publish.sh builds the handler for linux/amd64 straight into
// .dist/bin, stages exactly host.json, bin/handler, poller.schema.json, each <name>/function.json
// and each <name>/poller.json in .dist, and publishes from there with --custom (on a fresh clone
// there is no local.settings.json, and without --custom Core Tools stops with "Worker runtime
// cannot be 'None'"). The working tree's bin/handler, this machine's build that `func start`
// runs, is left as it was: a linux/amd64 one left there would be what a later `func start` on
// macOS or arm64 runs.
func TestPublishStagesAndCustom(t *testing.T) {
	root := scriptTree(t)
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	hostBuild := filepath.Join(root, "bin", "handler")
	if err := os.WriteFile(hostBuild, []byte("this machine's build\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := runScript(t, root, nil, "scripts/publish.sh", "func-app-x1")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The revision goes in with -X (internal/version): this tree is no git checkout, so it is empty.
	if !strings.Contains(r.calls, "go build -trimpath -ldflags -s -w -X github.com/pseudotrigger/pseudotrigger/internal/version.revision= ") ||
		!strings.Contains(r.calls, " -o .dist/bin/handler ./cmd/handler (GOOS=linux GOARCH=amd64)\n") {
		t.Errorf("the handler was not built for linux/amd64 into .dist/bin:\n%s", r.calls)
	}
	if b, err := os.ReadFile(hostBuild); err != nil || string(b) != "this machine's build\n" {
		t.Errorf("publish.sh changed the working tree's bin/handler: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(root, ".dist", "bin", "handler")); err != nil || string(b) != "stub-handler\n" {
		t.Errorf(".dist/bin/handler is not the build publish.sh made: %q %v", b, err)
	}
	if !strings.Contains(r.calls, "func azure functionapp publish func-app-x1 --custom (in .dist)\n") {
		t.Errorf("not published from .dist with --custom:\n%s", r.calls)
	}
	var want []string
	for _, f := range published(t) {
		want = append(want, "./"+f)
	}
	got := strings.Fields(r.staged)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("staged %v, want exactly %v", got, want)
	}
	if !strings.Contains(r.stdout, "staged .dist: host.json bin/handler poller.schema.json ") ||
		!strings.Contains(r.stdout, " orders-queue/function.json orders-queue/poller.json") {
		t.Errorf("the staged line does not name what was staged:\n%s", r.stdout)
	}
	// The stale .dist of an earlier run is replaced, not added to.
	if err := os.WriteFile(filepath.Join(root, ".dist", "stale.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runScript(t, root, nil, "scripts/publish.sh", "func-app-x1")
	if r.code != 0 || strings.Contains(r.staged, "stale.txt") {
		t.Errorf("a second run kept a stale file: exit %d\n%s", r.code, r.staged)
	}
}

// TestPublishRetries: a publish that fails while the new identity's roles apply is retried with
// a message saying why, and gives up after PUBLISH_ATTEMPTS with what to check.
func TestPublishRetries(t *testing.T) {
	root := scriptTree(t)
	r := runScript(t, root, []string{"STUB_FUNC_FAILS=2", "PUBLISH_RETRY_WAIT=0"}, "scripts/publish.sh", "func-app-x1")
	if r.code != 0 || strings.Count(r.calls, "func azure functionapp publish") != 3 {
		t.Fatalf("two failures then success: exit %d, calls\n%s\n%s", r.code, r.calls, r.stderr)
	}
	for _, want := range []string{"publish attempt 1 of 5 failed; a new app's role assignments can take up to 10 minutes to apply; retrying in 0 s",
		"publish attempt 2 of 5 failed"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	r = runScript(t, root, []string{"STUB_FUNC_FAILS=9", "PUBLISH_RETRY_WAIT=0", "PUBLISH_ATTEMPTS=3"}, "scripts/publish.sh", "func-app-x1")
	if r.code == 0 || strings.Count(r.calls, "func azure functionapp publish") != 3 ||
		!strings.Contains(r.stderr, "publishing to func-app-x1 failed 3 times") || !strings.Contains(r.stderr, "Storage Blob Data Owner") {
		t.Errorf("always failing: exit %d\ncalls:\n%s\nstderr:\n%s", r.code, r.calls, r.stderr)
	}
	// Usage errors name the problem and run nothing.
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, nil, "the function app's name is required"},
		{nil, []string{"a", "b"}, "one APP only"},
		{[]string{"PUBLISH_ATTEMPTS=0"}, []string{"a"}, "PUBLISH_ATTEMPTS=0 is not a whole number of at least 1"},
	} {
		r := runScript(t, root, c.env, "scripts/publish.sh", c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || r.calls != "" {
			t.Errorf("publish.sh %v %v: exit %d, want 2 and %q, calls %q\n%s", c.env, c.args, r.code, c.want, r.calls, r.stderr)
		}
	}
}

// TestPublishDryRun: the dry run prints the exact commands, --custom included, and runs none.
func TestPublishDryRun(t *testing.T) {
	r := runScript(t, scriptTree(t), nil, "scripts/publish.sh", "func-app-x1", "--dry-run")
	if r.code != 0 || r.calls != "" {
		t.Fatalf("exit %d, calls %q\n%s", r.code, r.calls, r.stderr)
	}
	for _, want := range []string{"+ rm -rf .dist\n+ mkdir -p .dist/bin\n+ env BUILD_DIR=.dist/bin GOOS=linux GOARCH=amd64 scripts/build.sh\n+ chmod 755 .dist/bin/handler\n+ cp host.json .dist/host.json\n",
		"+ mkdir -p .dist/orders\n+ cp orders/function.json .dist/orders/function.json\n",
		"+ cp poller.schema.json .dist/poller.schema.json\n",
		"+ mkdir -p .dist/orders-queue\n+ cp orders-queue/function.json .dist/orders-queue/function.json\n+ cp orders-queue/poller.json .dist/orders-queue/poller.json\n",
		"+ cd .dist\n+ func azure functionapp publish func-app-x1 --custom\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the dry run lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestDeployKeyVaultAndFirstTick: the next steps give the Key Vault Secrets User command for each
// vault a connection references (and none when no connection is a reference), say the operator
// step can be skipped when operatorPrincipalId is set, and end with how to see the first tick on
// the status page, with the command that gets its key (never a key).
func TestDeployKeyVaultAndFirstTick(t *testing.T) {
	out, errOut, code, _ := deployRun(t, "-g", "rg-test", "-p", editedParams(t))
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`az role assignment create --role "Key Vault Secrets User"`,
		`--assignee-object-id "$(az identity show -g rg-test -n id-func-app-x1 --query principalId -o tsv)" --assignee-principal-type ServicePrincipal`,
		`--scope "$(az keyvault show -n kv-x1 --query id -o tsv)"`,
		"3. Let yourself (each operator) run pollerctl against Azure: Storage Blob Data Contributor",
		"4. See the first tick: the status page",
		"https://func-app-x1.azurewebsites.net/api/status?code=<key>",
		"az functionapp function keys list -g rg-test -n func-app-x1 --function-name status --query default -o tsv",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the next steps lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "skip it: operatorPrincipalId") {
		t.Errorf("the operator step says skip without operatorPrincipalId:\n%s", out)
	}

	// No Key Vault reference: no vault step; operatorPrincipalId set: the operator step says so.
	p := filepath.Join(t.TempDir(), "plain.bicepparam")
	text := "using 'main.bicep'\nparam operatorPrincipalId = '11111111-2222-3333-4444-555555555555'\nparam pollers = [\n  {\n    name: 'orders'\n    driver: 'postgres'\n    // connection: '@Microsoft.KeyVault(SecretUri=https://kv-commented.vault.azure.net/secrets/x/)'\n    connection: 'postgres://pg.example.net/sales'\n    schedule: '0 * * * * *'\n    settings: {\n      ON_POISON: 'quarantine'\n    }\n  }\n]\n"
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code, _ = deployRun(t, "-g", "rg-test", "-p", p)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, "Key Vault Secrets User") || strings.Contains(out, "kv-commented") {
		t.Errorf("a Key Vault step without a Key Vault reference:\n%s", out)
	}
	for _, want := range []string{"2. Let yourself (each operator) run pollerctl against Azure (skip it: operatorPrincipalId in " + p + " grants it at deploy)",
		"scripts/sql-grants.sh id-func-app-x1 public.orders    # orders (postgres)", "3. See the first tick"} {
		if !strings.Contains(out, want) {
			t.Errorf("the next steps lack %q:\n%s", want, out)
		}
	}
}

// TestAzdHooks: azure.yaml has no azd service (azd's `language: custom` is alpha, needs dist and
// an azd-service-name tag) but a preprovision hook that refuses example parameters and a
// postdeploy hook that publishes to the app the appName output names, as Microsoft's Go Flex
// sample does; both hooks exist and are executable.
func TestAzdHooks(t *testing.T) {
	y := readFile(t, "../../azure.yaml")
	for _, bad := range []string{"services:", "language:", "dist:"} {
		if regexp.MustCompile(`(?m)^\s*` + bad).MatchString(y) {
			t.Errorf("azure.yaml has %s: azd would deploy a service (custom language: alpha)", bad)
		}
	}
	for _, want := range []string{"infra:\n  provider: bicep\n  path: infra/bicep\n  module: main\n",
		"  preprovision:\n    posix:\n      shell: sh\n      run: scripts/azd-preprovision.sh\n",
		"  postdeploy:\n    posix:\n      shell: sh\n      run: scripts/azd-postdeploy.sh\n"} {
		if !strings.Contains(y, want) {
			t.Errorf("azure.yaml lacks\n%s", want)
		}
	}
	for _, hook := range []string{"scripts/azd-preprovision.sh", "scripts/azd-postdeploy.sh"} {
		info, err := os.Stat(filepath.Join("../..", hook))
		if err != nil || info.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s is missing or not executable (azd runs it by path): %v", hook, err)
		}
	}
	root := scriptTree(t)
	// postdeploy: the app from the environment's appName, else azd env get-value.
	r := runScript(t, root, []string{"appName=func-app-x1", "PUBLISH_RETRY_WAIT=0"}, "scripts/azd-postdeploy.sh")
	if r.code != 0 || !strings.Contains(r.calls, "func azure functionapp publish func-app-x1 --custom (in .dist)") {
		t.Errorf("postdeploy with appName: exit %d\n%s%s", r.code, r.calls, r.stderr)
	}
	r = runScript(t, root, []string{"STUB_AZD_APP=func-app-y2"}, "scripts/azd-postdeploy.sh")
	if r.code != 0 || !strings.Contains(r.calls, "azd env get-value appName") || !strings.Contains(r.calls, "publish func-app-y2 --custom") {
		t.Errorf("postdeploy with azd env get-value: exit %d\n%s%s", r.code, r.calls, r.stderr)
	}
	r = runScript(t, root, nil, "scripts/azd-postdeploy.sh")
	if r.code == 0 || !strings.Contains(r.stderr, "no appName output") || strings.Contains(r.calls, "func ") {
		t.Errorf("postdeploy without an app name: exit %d\n%s%s", r.code, r.calls, r.stderr)
	}
	// preprovision: the shipped example values are refused unless ALLOW_EXAMPLE=1; an edited
	// parameters file passes.
	r = runScript(t, root, nil, "scripts/azd-preprovision.sh")
	if r.code != 2 || !strings.Contains(r.stderr, "contoso-sql.database.windows.net") || !strings.Contains(r.stderr, "ALLOW_EXAMPLE=1 azd up") {
		t.Errorf("preprovision with example values: exit %d\n%s", r.code, r.stderr)
	}
	if r := runScript(t, root, []string{"ALLOW_EXAMPLE=1"}, "scripts/azd-preprovision.sh"); r.code != 0 {
		t.Errorf("preprovision with ALLOW_EXAMPLE=1: exit %d\n%s", r.code, r.stderr)
	}
	b, err := os.ReadFile(editedParams(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "infra/bicep/main.bicepparam"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runScript(t, root, nil, "scripts/azd-preprovision.sh"); r.code != 0 || r.stderr != "" {
		t.Errorf("preprovision with an edited file: exit %d\n%s", r.code, r.stderr)
	}
}

// TestPublishNeedsFunc: without Core Tools on PATH a real publish stops before building, with
// exit 1 and where to install it; the dry run does not need it.
func TestPublishNeedsFunc(t *testing.T) {
	for _, p := range []string{"/usr/bin/func", "/bin/func"} {
		if _, err := os.Stat(p); err == nil {
			t.Skipf("func is installed at %s, on the PATH the test gives the script", p)
		}
	}
	root := scriptTree(t)
	r := runScript(t, root, []string{"PATH=/usr/bin:/bin"}, "scripts/publish.sh", "func-app-x1")
	if r.code != 1 || !strings.Contains(r.stderr, "Azure Functions Core Tools (func) is not installed") ||
		!strings.Contains(r.stderr, "https://learn.microsoft.com/azure/azure-functions/functions-run-local") {
		t.Errorf("publish without func: exit %d, want 1 and the install link\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(root, ".dist")); err == nil {
		t.Errorf("publish without func staged .dist anyway")
	}
	if r := runScript(t, root, []string{"PATH=/usr/bin:/bin"}, "scripts/publish.sh", "func-app-x1", "--dry-run"); r.code != 0 {
		t.Errorf("the dry run needs func: exit %d\n%s", r.code, r.stderr)
	}
}

// funcIgnore is Core Tools' .funcignore parser (src/Cli/func/Common/GitIgnoreParser.cs, a port of
// codemix/gitignore-parser): comment and blank lines dropped, a leading ! makes a pattern
// accepting and a leading / is dropped, each pattern anchored at the start of the path and ended
// by a word boundary, ** as (.+) and * as ([^/]+). accepts reports whether a publish from the
// repository root uploads the path (relative, with /).
func funcIgnore(text string) (accepts func(path string) bool) {
	var deny, allow []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		neg := strings.HasPrefix(line, "!")
		line = strings.TrimPrefix(strings.TrimPrefix(line, "!"), "/")
		quoted := regexp.MustCompile(`[\-\[\]/{}()+?.\\^$|]`).ReplaceAllString(line, `\$0`)
		pattern := strings.ReplaceAll(strings.ReplaceAll(quoted, "**", "(.+)"), "*", "([^\\/]+)")
		if neg {
			allow = append(allow, pattern)
		} else {
			deny = append(deny, pattern)
		}
	}
	compile := func(ps []string) *regexp.Regexp {
		if len(ps) == 0 {
			return regexp.MustCompile(`$^`)
		}
		return regexp.MustCompile(`^((` + strings.Join(ps, ")|(") + `))\b`)
	}
	d, a := compile(deny), compile(allow)
	return func(path string) bool { return a.MatchString(path) || !d.MatchString(path) }
}

// TestPublishFolderOnly: .funcignore lets a publish from the repository root upload what
// scripts/publish.sh stages in .dist (host.json, poller.schema.json, each <name>/function.json
// and <name>/poller.json) but bin/: the root's bin/handler is this machine's build (func start's),
// which must never ship. Judged by a port of Core Tools' own parser over every file of the
// checkout (node_modules, model/, the Go sources, ...); .dist itself is not committed.
func TestPublishFolderOnly(t *testing.T) {
	accepts := funcIgnore(readFile(t, "../../.funcignore"))
	// The parser port on the cases its source shows: anchored, * stops at /, \b after.
	for path, want := range map[string]bool{"host.json": true, "bin/handler": false, "orders/function.json": true,
		"pollers/orders/orders.go": false, "model/lease.pml": false, "bin/pollerctl": false, "go.mod": false,
		"node_modules/x/function.json": false, "a/b/function.json": false, "host.jsonx": false,
		"orders-queue/poller.json": true, "poller.schema.json": true, "a/b/poller.json": false, "poller.json": false,
		"sink/config.go": false, "poller.schema.jsonx": false} {
		if got := accepts(path); got != want {
			t.Errorf(".funcignore accepts %s: %v, want %v", path, got, want)
		}
	}
	want := slices.DeleteFunc(published(t), func(p string) bool { return p == "bin/handler" })
	var got []string
	root := "../.."
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			// Core Tools never descends into these; .dist is publish.sh's own copy.
			if rel == ".git" || rel == ".vscode" || rel == ".dist" {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Base(rel) {
		case ".funcignore", ".gitignore", "local.settings.json", "project.lock.json":
			return nil // never uploaded (FileSystemHelpers.GetLocalFiles)
		}
		if accepts(rel) {
			got = append(got, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("a publish from the repository root would upload %v, want exactly %v (what publish.sh stages, but the host's bin/handler)", got, want)
	}
	if !regexp.MustCompile(`(?m)^/\.dist/$`).MatchString(readFile(t, "../../.gitignore")) {
		t.Errorf(".gitignore does not ignore /.dist/")
	}
}

// TestCheckParams: scripts/check-params.sh, the rule deploy.sh and azd's preprovision hook share:
// example values exit 1 naming the line, comment lines (spaces or tabs before //) do not count, a
// missing file is a usage error.
func TestCheckParams(t *testing.T) {
	root := scriptTree(t)
	p := filepath.Join(t.TempDir(), "p.bicepparam")
	for _, c := range []struct {
		text string
		code int
		want string
	}{
		{"param pollers = [\n  {\n\tdatabase:\t'shop'\n  }\n]\n", 1, "line 3: database:\t'shop'"},
		{"param pollers = [\n  {\n    server: 'EDIT-ME.database.windows.net'\n  }\n]\n", 1, "line 3: server: 'EDIT-ME.database.windows.net'"},
		{"\t// server: 'contoso-sql.database.windows.net'\n  // database: 'shop'\nparam pollers = []\n", 0, ""},
	} {
		if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runScript(t, root, nil, "scripts/check-params.sh", p)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("check-params.sh on %q: exit %d, want %d and %q\n%s", c.text, r.code, c.code, c.want, r.stderr)
		}
	}
	if r := runScript(t, root, nil, "scripts/check-params.sh", p+".missing"); r.code != 2 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("check-params.sh on a missing file: exit %d\n%s", r.code, r.stderr)
	}
}

// TestDeployChecksMicrosoftApp: a parameters file with vnetEnabled makes deploy.sh check, before
// it deploys anything, that the subscription has the Microsoft.App resource provider registered
// (Flex Consumption's subnet delegation Microsoft.App/environments needs it: Microsoft's Flex
// Consumption plan page, Considerations, MicrosoftDocs/azure-docs
// articles/azure-functions/flex-consumption-plan.md); otherwise it stops (exit 1) with the state
// and the command that registers it. Registered, or without vnetEnabled (or with it only in a
// comment), it deploys as before; the dry run shows the check.
func TestDeployChecksMicrosoftApp(t *testing.T) {
	root := scriptTree(t)
	edited, err := os.ReadFile(editedParams(t))
	if err != nil {
		t.Fatal(err)
	}
	vnet := filepath.Join(t.TempDir(), "vnet.bicepparam")
	if err := os.WriteFile(vnet, append(edited, []byte("param vnetEnabled = true\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	const check = "az provider show --namespace Microsoft.App --query registrationState -o tsv"
	for _, c := range []struct{ state, want string }{
		{"NotRegistered", "its\n  registration state is NotRegistered."},
		{"Registering", "registration state is Registering."},
		{"fail", "registration state is unknown: az provider show --namespace Microsoft.App failed."},
	} {
		r := runScript(t, root, []string{"STUB_APP_PROVIDER=" + c.state}, "scripts/deploy.sh", "-g", "rg-test", "-p", vnet)
		if r.code != 1 || !strings.Contains(r.stderr, vnet+" sets vnetEnabled, which needs the Microsoft.App resource provider registered") ||
			!strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, "    az provider register --namespace Microsoft.App --wait\n") {
			t.Errorf("Microsoft.App %s: exit %d, want 1 and %q with the command that registers it\n%s", c.state, r.code, c.want, r.stderr)
		}
		if !strings.Contains(r.calls, check) || strings.Contains(r.calls, "deployment group") || strings.Contains(r.calls, "group create") || strings.Contains(r.calls, "func ") {
			t.Errorf("Microsoft.App %s: deployed anyway, or never checked:\n%s", c.state, r.calls)
		}
	}
	r := runScript(t, root, nil, "scripts/deploy.sh", "-g", "rg-test", "-l", "westeurope", "-p", vnet)
	if r.code != 0 || !strings.Contains(r.calls, check+"\naz group create") || !strings.Contains(r.calls, "deployment group create") {
		t.Errorf("Microsoft.App registered: exit %d, want the check first, then the deployment\n%s\n%s", r.code, r.calls, r.stderr)
	}
	commented := filepath.Join(t.TempDir(), "commented.bicepparam")
	if err := os.WriteFile(commented, append(edited, []byte("// param vnetEnabled = true\nparam vnetEnabled = false\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runScript(t, root, []string{"STUB_APP_PROVIDER=NotRegistered"}, "scripts/deploy.sh", "-g", "rg-test", "-p", commented)
	if r.code != 0 || strings.Contains(r.calls, "provider show") {
		t.Errorf("without vnetEnabled: exit %d, want no check\n%s\n%s", r.code, r.calls, r.stderr)
	}
	r = runScript(t, root, nil, "scripts/deploy.sh", "-g", "rg-test", "-p", vnet, "--dry-run")
	if r.code != 0 || r.calls != "" || !strings.Contains(r.stdout, "+ "+check+"\n") {
		t.Errorf("the dry run does not show the check: exit %d\n%s", r.code, r.stdout)
	}
}
