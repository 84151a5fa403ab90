package version

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBinariesSayTheirVersion builds each binary and runs --version: the module version and a
// revision (the build info's inside this checkout), the same line for all three.
func TestBinariesSayTheirVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three binaries")
	}
	dir := t.TempDir()
	want := regexp.MustCompile(`^\S+ rev ([0-9a-f]{12}|unknown)( \S+)?( dirty)?$`)
	var first string
	for _, cmd := range []string{"handler", "pollerctl", "devhost"} {
		bin := filepath.Join(dir, cmd)
		if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/"+cmd).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", cmd, err, out)
		}
		out, err := exec.Command(bin, "--version").Output()
		if err != nil {
			t.Fatalf("%s --version: %v", cmd, err)
		}
		line := strings.TrimSpace(string(out))
		name, v, ok := strings.Cut(line, " ")
		if !ok || name != cmd || !want.MatchString(v) {
			t.Fatalf("%s --version printed %q, want %q then a version", cmd, line, cmd)
		}
		if first == "" {
			first = v
		} else if v != first {
			t.Errorf("%s says %q, handler %q: one build, one version", cmd, v, first)
		}
	}
}

// TestLinkerValues: without VCS data in the build info, the -X values of scripts/build.sh speak.
func TestLinkerValues(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pollerctl")
	x := "-X github.com/pseudotrigger/pseudotrigger/internal/version."
	ld := x + "revision=abcdef0123456789 " + x + "time=2026-11-25T17:00:00Z " + x + "modified=true"
	if out, err := exec.Command("go", "build", "-buildvcs=false", "-ldflags", ld, "-o", bin, "../../cmd/pollerctl").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); !strings.HasSuffix(got, " rev abcdef012345 2026-11-25T17:00:00Z dirty") {
		t.Fatalf("pollerctl --version printed %q", got)
	}
}
