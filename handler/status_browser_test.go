package handler_test

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// ChromiumVar names a Chromium (or Chrome) binary for the browser test; without it the test
// looks for chromium, chromium-browser and google-chrome on PATH.
const ChromiumVar = "CHROMIUM"

// chromium returns the headless browser to drive, or skips (fails under CI=true, like testenv).
func chromium(t *testing.T) string {
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
	if testenv.InCI() {
		t.Fatal(how + "; CI must run the browser test")
	}
	t.Skip(how)
	return ""
}

// runChromium runs headless Chromium with args then url, isolated in a profile of its own and
// with nothing fetched but url, and returns its stdout.
func runChromium(t *testing.T, bin, url string, args ...string) []byte {
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
		t.Fatalf("%s %v: %v\n%s", bin, args, err, tail(stderr.String(), 2000))
	}
	return stdout.Bytes()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// TestStatusPageInChromium loads the status page in headless Chromium, as a browser asks for it
// (Accept: text/html...), and checks the DOM it built: each poller's card, the cursor, the BLOCKED
// badge with its unblock hint, the dead letter, and a sparkline with a point per tick. A
// screenshot must render the page (STATUS_SCREENSHOT=file.png keeps a copy).
func TestStatusPageInChromium(t *testing.T) {
	bin := chromium(t)
	srv := statusServer(t)
	url := srv.URL + handler.StatusRoute + "?code=FUNCTIONKEY"

	dom := string(runChromium(t, bin, url, "--dump-dom"))
	if !strings.Contains(dom, `<h1>pseudotrigger · <span id="app">`+statusApp+`</span></h1>`) {
		t.Fatalf("Chromium did not get the page (it asks for text/html):\n%s", tail(dom, 3000))
	}
	checkPage(t, dom)

	shot := filepath.Join(t.TempDir(), "status.png")
	runChromium(t, bin, url, "--hide-scrollbars", "--window-size=1280,1400", "--screenshot="+shot)
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 1400 {
		t.Fatalf("screenshot %v", b)
	}
	// The BLOCKED badge is solid red (--bad, light or dark scheme): the page was laid out and painted.
	red := 0
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			r, g, b = r>>8, g>>8, b>>8
			if (near(r, 0xcf) && near(g, 0x22) && near(b, 0x2e)) || (near(r, 0xf8) && near(g, 0x51) && near(b, 0x49)) {
				red++
			}
		}
	}
	if red < 200 {
		t.Errorf("the screenshot shows %d pixels of the BLOCKED badge's red, want at least 200", red)
	}
	if keep := os.Getenv("STATUS_SCREENSHOT"); keep != "" {
		if err := os.WriteFile(keep, data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", keep)
	}
}

func near(v, want uint32) bool { return v+8 >= want && v <= want+8 }
