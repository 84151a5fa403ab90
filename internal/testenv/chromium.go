package testenv

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// Screenshot loads url in headless Chromium bin in a window of w by h pixels and returns its
// screenshot, decoded, and the PNG's bytes; a missing screenshot, or one of another size, fails
// the test.
func Screenshot(t testing.TB, bin, url string, w, h int) (image.Image, []byte) {
	t.Helper()
	shot := filepath.Join(t.TempDir(), "screenshot.png")
	RunChromium(t, bin, url, "--hide-scrollbars", fmt.Sprintf("--window-size=%d,%d", w, h), "--screenshot="+shot)
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("screenshot %v, want %dx%d", b, w, h)
	}
	return img, data
}

// Section is the <section> element of an HTML page whose id is id, from its id attribute to its
// end tag (a poller's card on the status page: id "poller-NAME"); none fails the test.
func Section(t testing.TB, page, id string) string {
	t.Helper()
	start := strings.Index(page, `id="`+id+`"`)
	if start < 0 {
		t.Fatalf("no section %s", id)
	}
	end := strings.Index(page[start:], "</section>")
	if end < 0 {
		t.Fatalf("the section %s does not end", id)
	}
	return page[start : start+end]
}
