package testenv

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// ChromiumVar names a Chromium (or Chrome) binary for the browser tests; without it they look
// for chromium, chromium-browser and google-chrome on PATH.
const ChromiumVar = "CHROMIUM"

// Chromium returns the headless browser to drive, or skips (fails under CI=true).
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(ChromiumVar); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s=%s: %v", ChromiumVar, p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const how = "no Chromium: set CHROMIUM to a Chromium or Chrome binary, or install Debian's (apt-get install chromium; scripts/test.sh does so as root)"
	if InCI() {
		t.Fatal(how + "; CI must run the browser test")
	}
	t.Skip(how)
	return ""
}

// RunChromium runs headless Chromium bin with args then url, isolated in a profile of its own and
// with nothing fetched but url, and returns its stdout.
func RunChromium(t testing.TB, bin, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
		"--no-default-browser-check", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--no-proxy-server", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, Tail(stderr.String(), 2000))
	}
	return stdout.Bytes()
}

// Tail is the last n bytes of s, marked as cut.
func Tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
