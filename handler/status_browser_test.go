package handler_test

import (
	"os"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestStatusPageInChromium loads the status page in headless Chromium, as a browser asks for it
// (Accept: text/html...), and checks the DOM it built: each poller's card, the cursor, the BLOCKED
// badge with its unblock hint, the dead letter, and a sparkline with a point per tick. A
// screenshot must render the page (STATUS_SCREENSHOT=file.png keeps a copy).
func TestStatusPageInChromium(t *testing.T) {
	bin := testenv.Chromium(t)
	srv := statusServer(t)
	url := srv.URL + handler.StatusRoute + "?code=FUNCTIONKEY"

	dom := string(testenv.RunChromium(t, bin, url, "--dump-dom"))
	if !strings.Contains(dom, `<h1>pseudotrigger · <span id="app">`+statusApp+`</span></h1>`) {
		t.Fatalf("Chromium did not get the page (it asks for text/html):\n%s", testenv.Tail(dom, 3000))
	}
	checkPage(t, dom)

	img, data := testenv.Screenshot(t, bin, url, 1280, 1400)
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
