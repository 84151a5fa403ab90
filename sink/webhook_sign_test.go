package sink

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
)

// newSecret is a fresh Standard Webhooks secret: whsec_ and the base64 of 32 random bytes.
func newSecret(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// signedSink is a webhook sink to url signing with the secrets in HOOK_SECRETS, set up.
func signedSink(t *testing.T, url, secrets string, now func() time.Time) *Sink {
	t.Helper()
	s := MustNew(Config{Type: Webhook, URL: url, SigningSecret: "%HOOK_SECRETS%"})
	if now != nil {
		s.now = now
	}
	if err := s.Setup(func(k string) string { return map[string]string{"HOOK_SECRETS": secrets}[k] }); err != nil {
		t.Fatal(err)
	}
	return s
}

// someMessages are messages as Messages makes them: hex ids, JSON bodies (one with non-ASCII
// text, whose bytes are what is signed).
func someMessages() []Message {
	return []Message{
		{ID: "72a68517e55e936786772be8be485d06", Body: []byte(`{"id":1,"name":"ada"}`), keyJSON: []byte(`{"id":1}`)},
		{ID: "b3982d05f7c7241e8515f16f8a420721", Body: []byte(`{"id":2,"name":"Zoë 🚀 \"quoted\""}`), keyJSON: []byte(`{"id":2}`)},
		{ID: "batch_0123456789abcdef01234567", Body: []byte(`{"changes":[]}`), about: "batch batch_0123456789abcdef01234567"},
	}
}

// verifyWithLibrary runs the cases through the official Standard Webhooks library for
// JavaScript (testdata/standardwebhooks-verify.cjs) and returns name -> "ok" or its error.
func verifyWithLibrary(t *testing.T, cases []libraryCase) map[string]string {
	t.Helper()
	if _, err := os.Stat("../node_modules/standardwebhooks/package.json"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node_modules lacks standardwebhooks: scripts/test.sh installs it (npm ci)")
		}
		t.Skip("run npm ci (scripts/test.sh does) to verify the signatures with the Standard Webhooks library")
	}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "testdata/standardwebhooks-verify.cjs")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node testdata/standardwebhooks-verify.cjs: %v\n%s", err, stderr.String())
	}
	got := map[string]string{}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the verifier's output %q: %v", out, err)
	}
	return got
}

type libraryCase struct {
	Name    string            `json:"name"`
	Secret  string            `json:"secret"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

func caseOf(name, secret string, r received) libraryCase {
	h := map[string]string{}
	for k := range r.Header {
		h[k] = r.Header.Get(k)
	}
	return libraryCase{Name: name, Secret: secret, Headers: h, Body: string(r.Body)}
}

// TestWebhookSignaturesVerifiedByStandardWebhooksLibrary: requests the sink sent to a real
// server, signed during a rotation (two secrets), pass the official Standard Webhooks library's
// check with either secret; the library refuses them with a third secret, with a body or a
// webhook-id changed by one byte, and when they were stamped more than its 5 minutes ago.
func TestWebhookSignaturesVerifiedByStandardWebhooksLibrary(t *testing.T) {
	hook := newRecorder(t, false, nil)
	oldSecret, newSecret_, other := newSecret(t), newSecret(t), newSecret(t)
	s := signedSink(t, hook.srv.URL+"/in", oldSecret+" "+newSecret_, nil)
	if err := s.t.send(context.Background(), someMessages()); err != nil {
		t.Fatal(err)
	}
	stale := signedSink(t, hook.srv.URL+"/in", newSecret_, func() time.Time { return time.Now().Add(-10 * time.Minute) })
	reqs := hook.read(t)
	if err := stale.t.send(context.Background(), someMessages()[:1]); err != nil {
		t.Fatal(err)
	}
	staleReq := hook.read(t)
	if len(reqs) != 3 || len(staleReq) != 1 {
		t.Fatalf("the server got %d and %d requests; want 3 and 1", len(reqs), len(staleReq))
	}
	var cases []libraryCase
	want := map[string]string{}
	add := func(c libraryCase, verdict string) {
		cases = append(cases, c)
		want[c.Name] = verdict
	}
	for i, r := range reqs {
		n := strconv.Itoa(i)
		add(caseOf(n+" old secret", oldSecret, r), "ok")
		add(caseOf(n+" new secret", newSecret_, r), "ok")
		add(caseOf(n+" another secret", other, r), "No matching signature found")
		tampered := caseOf(n+" tampered body", newSecret_, r)
		tampered.Body = tampered.Body[:len(tampered.Body)-1] + " }" // still JSON, one byte more
		add(tampered, "No matching signature found")
		otherID := caseOf(n+" another id", newSecret_, r)
		otherID.Headers["Webhook-Id"] = otherID.Headers["Webhook-Id"] + "0"
		add(otherID, "No matching signature found")
	}
	add(caseOf("stamped 10 minutes ago", newSecret_, staleReq[0]), "Message timestamp too old")
	got := verifyWithLibrary(t, cases)
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: the library says %q; want %q", name, got[name], w)
		}
	}
}

// TestWebhookSigningHeaders: each request carries webhook-id (the message id, as
// Idempotency-Key), webhook-timestamp (the sink's clock, in unix seconds) and one v1 signature
// per secret; sent again later, the same message keeps its id and gets a fresh timestamp. An id
// holding a "." cannot be signed: the batch fails, naming the row, and nothing is sent.
func TestWebhookSigningHeaders(t *testing.T) {
	hook := newRecorder(t, false, nil)
	clock := time.Unix(1_700_000_000, 0)
	s := signedSink(t, hook.srv.URL, newSecret(t)+"  "+newSecret(t), func() time.Time { return clock })
	msgs := someMessages()[:1]
	if err := s.t.send(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(90 * time.Second)
	if err := s.t.send(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	got := hook.read(t)
	if len(got) != 2 {
		t.Fatalf("%d requests; want 2", len(got))
	}
	for i, r := range got {
		if id := r.Header.Get("webhook-id"); id != msgs[0].ID || r.Header.Get("Idempotency-Key") != id {
			t.Errorf("request %d: webhook-id %q, Idempotency-Key %q; want both %q", i, id, r.Header.Get("Idempotency-Key"), msgs[0].ID)
		}
		if ts, want := r.Header.Get("webhook-timestamp"), strconv.Itoa(1_700_000_000+90*i); ts != want {
			t.Errorf("request %d: webhook-timestamp %q; want %q (the sink's clock)", i, ts, want)
		}
		sigs := strings.Split(r.Header.Get("webhook-signature"), " ")
		if len(sigs) != 2 || !strings.HasPrefix(sigs[0], "v1,") || !strings.HasPrefix(sigs[1], "v1,") || sigs[0] == sigs[1] {
			t.Errorf("request %d: webhook-signature %q; want two different v1 signatures", i, r.Header.Get("webhook-signature"))
		}
	}
	if got[0].Header.Get("webhook-signature") == got[1].Header.Get("webhook-signature") {
		t.Error("the second send has the first one's signatures: its timestamp is not signed")
	}

	dotted := []Message{{ID: "order.42", Body: []byte(`{}`), keyJSON: []byte(`{"id":42}`)}}
	err := s.t.send(context.Background(), dotted)
	if !errors.Is(err, errDotInID) || !strings.Contains(err.Error(), `the row with key {"id":42}`) || !strings.Contains(err.Error(), `"order.42"`) {
		t.Errorf("an id with a dot: %v; want the row, the id and why", err)
	}
	if n := len(hook.read(t)); n != 0 {
		t.Errorf("an id with a dot: %d requests sent; want none", n)
	}
}

// TestWebhookSigningSecretErrors: a setting whose secrets do not decode fails Setup, naming the
// setting, which secret and the fix, never showing a secret; a secret written in poller.json
// instead of a setting is refused by New.
func TestWebhookSigningSecretErrors(t *testing.T) {
	good := newSecret(t)
	short := "whsec_" + base64.StdEncoding.EncodeToString([]byte("sixteen bytes!!!"))
	for value, want := range map[string]string{
		"c2VjcmV0LXZhbHVlLXRoYXQtaXMtbG9uZy1lbm91Z2g=": "secret 1 of 1: does not start with whsec_",
		good + " whsec_not*base64":                     "secret 2 of 2: what follows whsec_ is not standard base64",
		short:                                          "secret 1 of 1: decodes to 16 bytes, not the 24 to 64",
		"@Microsoft.KeyVault(SecretUri=https://kv-sales.vault.azure.net/secrets/orders-hook-secrets/)": "still the Key Vault reference",
	} {
		s := MustNew(Config{Type: Webhook, URL: "https://hooks.example.com/in", SigningSecret: "%HOOK_SECRETS%"})
		err := s.Setup(func(k string) string { return map[string]string{"HOOK_SECRETS": value}[k] })
		if err == nil || !strings.Contains(err.Error(), "app setting HOOK_SECRETS") || !strings.Contains(err.Error(), want) {
			t.Errorf("HOOK_SECRETS=<%d characters>: %v; want %q", len(value), err, want)
			continue
		}
		for _, secret := range strings.Fields(value) {
			if strings.Contains(err.Error(), strings.TrimPrefix(secret, "whsec_")) {
				t.Errorf("the error shows a secret: %v", err)
			}
		}
	}
	s := MustNew(Config{Type: Webhook, URL: "https://hooks.example.com/in", SigningSecret: "%HOOK_SECRETS%"})
	if err := s.Setup(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "app setting HOOK_SECRETS is not set") {
		t.Errorf("an unset setting: %v", err)
	}
}

// fakeCredential records the scopes it is asked for and hands out token (or fails with err).
type fakeCredential struct {
	mu     sync.Mutex
	token  string
	err    error
	scopes [][]string
}

func (f *fakeCredential) GetToken(_ context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scopes = append(f.scopes, o.Scopes)
	if f.err != nil {
		return azcore.AccessToken{}, f.err
	}
	return azcore.AccessToken{Token: f.token, ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// authSink is a webhook sink to url with auth for api://orders-hook through HOOKID's identity
// settings in env, its credential cred; id receives the identity the credential was made for.
func authSink(t *testing.T, cfg Config, env map[string]string, cred azcore.TokenCredential, id *azconn.Identity) (shown string, err error) {
	t.Helper()
	s := MustNew(cfg)
	s.cred = func(got azconn.Identity, _ string) (azcore.TokenCredential, error) { *id = got; return cred, nil }
	if err := s.Setup(func(k string) string { return env[k] }); err != nil {
		return "", err
	}
	return s.String(), s.t.send(context.Background(), someMessages())
}

// TestWebhookEntraToken: with auth, every request carries Authorization: Bearer and the token the
// identity's credential gives for the audience's /.default scope, asked once per batch, with
// the signature too when both are on; a credential that fails fails the batch naming the
// audience and the identity, and nothing is sent; a token is never sent over plain http but to
// the local host.
func TestWebhookEntraToken(t *testing.T) {
	hook := newRecorder(t, false, nil)
	auth := &WebhookAuth{Audience: "api://orders-hook", Connection: "HOOKID"}
	env := map[string]string{"HOOKID__clientId": "11111111-2222-3333-4444-555555555555", "HOOK_SECRETS": newSecret(t)}
	cred := &fakeCredential{token: "eyJ.token.1"}
	var id azconn.Identity
	shown, err := authSink(t, Config{Type: Webhook, URL: hook.srv.URL, Auth: auth, SigningSecret: "%HOOK_SECRETS%"}, env, cred, &id)
	if err != nil {
		t.Fatal(err)
	}
	if want := ", signed with 1 secret(s), Entra ID token for api://orders-hook as managed identity 11111111-2222-3333-4444-555555555555"; !strings.HasSuffix(shown, want) {
		t.Errorf("the sink says %q; want it to end %q", shown, want)
	}
	if id.ClientID != env["HOOKID__clientId"] {
		t.Errorf("the credential is for %+v; want the user-assigned identity HOOKID__clientId names", id)
	}
	if want := [][]string{{"api://orders-hook/.default"}}; !slices.EqualFunc(cred.scopes, want, slices.Equal) {
		t.Errorf("scopes asked: %v; want %v (once per batch)", cred.scopes, want)
	}
	got := hook.read(t)
	if len(got) != 3 {
		t.Fatalf("%d requests; want 3", len(got))
	}
	for _, r := range got {
		if a := r.Header.Get("Authorization"); a != "Bearer eyJ.token.1" {
			t.Errorf("Authorization: %q; want the token", a)
		}
		if r.Header.Get("webhook-signature") == "" {
			t.Error("signing and auth both on: no webhook-signature")
		}
	}

	failing := &fakeCredential{err: errors.New("ManagedIdentityCredential: no identity with that client id")}
	_, err = authSink(t, Config{Type: Webhook, URL: hook.srv.URL, Auth: auth}, env, failing, &id)
	for _, want := range []string{"audience api://orders-hook", "managed identity 11111111-2222-3333-4444-555555555555", "nothing was sent", "no identity with that client id"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a failing credential: %v; want it to say %q", err, want)
		}
	}
	if n := len(hook.read(t)); n != 0 {
		t.Errorf("a failing credential: %d requests sent; want none", n)
	}

	_, err = authSink(t, Config{Type: Webhook, URL: "http://hooks.example.com/in", Auth: auth}, env, cred, &id)
	if err == nil || !strings.Contains(err.Error(), "must use https") {
		t.Errorf("auth to a plain http URL: %v; want it refused", err)
	}
}
