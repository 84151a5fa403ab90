package docs

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/pollers/orders"
	"github.com/pseudotrigger/pseudotrigger/pollertest"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// receiverCase is one request for a receiver snippet to verify: the secrets it checks with, the
// headers and body as received (Body is base64 in JSON), its clock in unix seconds.
type receiverCase struct {
	Name    string            `json:"name"`
	Secrets string            `json:"secrets"`
	Headers map[string]string `json:"headers"`
	Body    []byte            `json:"body"`
	Now     int64             `json:"now"`
}

// receiverHarness runs the Go snippet (package receiver, func Verify) over the cases in $CASES
// and writes name -> "ok" or its error to $RESULTS.
const receiverHarness = `package receiver

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"
)

func TestHarness(t *testing.T) {
	data, err := os.ReadFile(os.Getenv("CASES"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name, Secrets string
		Headers       map[string]string
		Body          []byte
		Now           int64
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range cases {
		h := http.Header{}
		for k, v := range c.Headers {
			h.Set(k, v)
		}
		out[c.Name] = "ok"
		if err := Verify(c.Secrets, h, c.Body, time.Unix(c.Now, 0)); err != nil {
			out[c.Name] = err.Error()
		}
	}
	b, _ := json.Marshal(out)
	if err := os.WriteFile(os.Getenv("RESULTS"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
`

// pythonHarness runs the Python snippet (argv[1], def verify) over the cases in argv[2] and
// prints name -> "ok" or its error as JSON.
const pythonHarness = `
import base64, json, sys
exec(open(sys.argv[1]).read())
out = {}
for c in json.load(open(sys.argv[2])):
    try:
        verify(c["secrets"], {k.lower(): v for k, v in c["headers"].items()}, base64.b64decode(c["body"]), now=c["now"])
        out[c["name"]] = "ok"
    except ValueError as e:
        out[c["name"]] = str(e)
print(json.dumps(out))
`

// TestWebhookReceivers: the receiver's checks docs/webhooks.md shows in Go and Python verify
// requests that a webhook sink signed during a rotation (with either secret, or both), and
// refuse them with a wrong secret, with the body changed by one byte and 10 minutes later. The
// page's C# snippet cannot run here (no .NET on the project's machines or in CI): it was checked
// by review against the specification's signature scheme (spec/standard-webhooks.md of
// github.com/standard-webhooks/standard-webhooks), line for line with the Go one.
func TestWebhookReceivers(t *testing.T) {
	var goBlock, pyBlock block
	for _, b := range blocks(t) {
		switch {
		case b.page == "docs/webhooks.md" && b.lang == "go" && b.class() == "receiver":
			goBlock = b
		case b.page == "docs/webhooks.md" && b.lang == "python" && b.class() == "receiver":
			pyBlock = b
		}
	}
	if goBlock.body == "" || pyBlock.body == "" {
		t.Fatal("docs/webhooks.md has no ```go receiver or ```python receiver block")
	}

	var (
		mu   sync.Mutex
		reqs []receiverCase
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h := map[string]string{}
		for k := range r.Header {
			h[k] = r.Header.Get(k)
		}
		mu.Lock()
		reqs = append(reqs, receiverCase{Headers: h, Body: body})
		mu.Unlock()
	}))
	defer hook.Close()
	oldSecret, newSecret, otherSecret := secret(t), secret(t), secret(t)
	s := sink.MustNew(sink.Config{Type: sink.Webhook, URL: "%ORDERS_HOOK_URL%", SigningSecret: "%ORDERS_HOOK_SECRETS%"})
	p := poller.New("orders-hook", "orders", poller.TimestampPK, sink.Handler[orders.Order](s), poller.WithSetup(s.Setup))
	h := pollertest.New(t, p, "ORDERS_HOOK_URL="+hook.URL, "ORDERS_HOOK_SECRETS="+oldSecret+" "+newSecret)
	h.Insert(
		orders.Order{ID: 1, Customer: "ada", Amount: "9.50", UpdatedAt: time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)},
		orders.Order{ID: 2, Customer: "Zoë", Amount: "1.00", UpdatedAt: time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)},
	)
	h.Tick()
	if len(reqs) != 2 {
		t.Fatalf("the webhook got %d requests; want 2", len(reqs))
	}

	var cases []receiverCase
	want := map[string]string{}
	add := func(c receiverCase, name, secrets, verdict string, now int64) {
		c.Name, c.Secrets, c.Now = name, secrets, now
		cases = append(cases, c)
		want[name] = verdict
	}
	for i, r := range reqs {
		n := strconv.Itoa(i) + " "
		ts, err := strconv.ParseInt(r.Headers["Webhook-Timestamp"], 10, 64)
		if err != nil {
			t.Fatalf("request %d: webhook-timestamp %q", i, r.Headers["Webhook-Timestamp"])
		}
		add(r, n+"old secret", oldSecret, "ok", ts+1)
		add(r, n+"new secret", newSecret, "ok", ts+1)
		add(r, n+"both secrets", oldSecret+" "+newSecret, "ok", ts+1)
		add(r, n+"another secret", otherSecret, "no valid signature", ts+1)
		tampered := r
		tampered.Body = append(append([]byte{}, r.Body[:len(r.Body)-1]...), ' ', '}')
		add(tampered, n+"tampered body", newSecret, "no valid signature", ts+1)
		add(r, n+"10 minutes later", newSecret, "webhook-timestamp is more than 5 minutes away", ts+600)
	}
	dir := t.TempDir()
	casesFile := filepath.Join(dir, "cases.json")
	data, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(casesFile, data, 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("go", func(t *testing.T) {
		mod := filepath.Join(dir, "go")
		for name, text := range map[string]string{"go.mod": "module receiver\n\ngo 1.22\n", "receiver.go": goBlock.body, "harness_test.go": receiverHarness} {
			if err := os.MkdirAll(mod, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(mod, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		results := filepath.Join(dir, "go-results.json")
		cmd := command(t, "go", "test", "-count=1", ".")
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CASES="+casesFile, "RESULTS="+results)
		if stdout, stderr, code := run(cmd); code != 0 {
			t.Fatalf("%s: go test: %s%s", goBlock, stdout, stderr)
		}
		out, err := os.ReadFile(results)
		if err != nil {
			t.Fatal(err)
		}
		checkVerdicts(t, goBlock, out, want)
	})
	t.Run("python", func(t *testing.T) {
		if _, err := exec.LookPath("python3"); err != nil {
			t.Fatal("python3 is not installed: the Python receiver cannot be checked")
		}
		snippet := filepath.Join(dir, "receiver.py")
		if err := os.WriteFile(snippet, []byte(pyBlock.body), 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := run(command(t, "python3", "-c", pythonHarness, snippet, casesFile))
		if code != 0 {
			t.Fatalf("%s: python3: %s", pyBlock, stderr)
		}
		checkVerdicts(t, pyBlock, []byte(stdout), want)
	})
}

func checkVerdicts(t *testing.T, b block, out []byte, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: the harness printed %q: %v", b, out, err)
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %s: %q; want %q", b, name, got[name], w)
		}
	}
}

// secret is a fresh Standard Webhooks secret.
func secret(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}
