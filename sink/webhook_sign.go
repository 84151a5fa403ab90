package sink

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// The Standard Webhooks headers (https://www.standardwebhooks.com/, spec/standard-webhooks.md
// of github.com/standard-webhooks/standard-webhooks, version 1.0.0: "Webhook headers").
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// secretPrefix starts a symmetric signing secret as the specification serializes it, before its
// base64; a secret is 24 to 64 bytes ("At least 24 bytes (192 bits, 512 maximum)").
const (
	secretPrefix = "whsec_"
	secretMin    = 24
	secretMax    = 64
)

// signer signs requests with HMAC-SHA256 as the specification's "Signature scheme" says: over
// "{webhook-id}.{webhook-timestamp}.{body}", one "v1,<base64>" per secret, space separated.
type signer struct {
	keys [][]byte
	now  func() time.Time
}

// newSigner decodes value, the secrets the app setting named by ref (%NAME%) holds. Its errors
// name the setting and the secret's position, never a secret.
func newSigner(ref, value string, now func() time.Time) (*signer, error) {
	setting := strings.Trim(ref, "%")
	if strings.HasPrefix(value, "@Microsoft.KeyVault(") {
		return nil, fmt.Errorf("signing_secret: app setting %s is still the Key Vault reference, not its secret: the app has not resolved it (give the app's identity Key Vault Secrets User on the vault; docs/deploying.md, Key Vault references)", setting)
	}
	s := &signer{now: now}
	for i, secret := range strings.Fields(value) {
		key, err := decodeSecret(secret)
		if err != nil {
			return nil, fmt.Errorf("signing_secret: app setting %s, secret %d of %d: %w", setting, i+1, len(strings.Fields(value)), err)
		}
		s.keys = append(s.keys, key)
	}
	return s, nil
}

func decodeSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return nil, fmt.Errorf("does not start with %s: a Standard Webhooks secret is %s and the base64 of 24 to 64 random bytes (docs/webhooks.md says how to make one)", secretPrefix, secretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("what follows %s is not standard base64 (with = padding): make the secret again as docs/webhooks.md says", secretPrefix)
	}
	if len(key) < secretMin || len(key) > secretMax {
		return nil, fmt.Errorf("decodes to %d bytes, not the %d to %d the Standard Webhooks specification asks: make the secret again as docs/webhooks.md says", len(key), secretMin, secretMax)
	}
	return key, nil
}

// errDotInID: the specification forbids a "." in the signed id (it delimits the signed
// content), and the receiver's check would split the content differently.
var errDotInID = errors.New(`holds a ".", which Standard Webhooks does not allow in webhook-id: the message cannot be signed (give the events ids without ".", such as UUIDs)`)

// sign sets the three headers on h for a message with id and body, stamped now.
func (s *signer) sign(h http.Header, id string, body []byte) error {
	if strings.Contains(id, ".") {
		return fmt.Errorf("the message id %q %w", id, errDotInID)
	}
	ts := strconv.FormatInt(s.now().Unix(), 10)
	sigs := make([]byte, 0, len(s.keys)*48)
	for i, key := range s.keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(ts))
		mac.Write([]byte{'.'})
		mac.Write(body)
		if i > 0 {
			sigs = append(sigs, ' ')
		}
		sigs = append(sigs, "v1,"...)
		sigs = base64.StdEncoding.AppendEncode(sigs, mac.Sum(nil))
	}
	h[HeaderWebhookID] = []string{id}
	h[HeaderWebhookTimestamp] = []string{ts}
	h[HeaderWebhookSignature] = []string{string(sigs)}
	return nil
}

// tokenSource gets the Entra ID token a webhook's requests carry: a token for the audience's
// /.default scope from the identity the auth's connection picks (azconn's rule, as the other
// sinks). The credential caches its tokens and refreshes them before they expire (azidentity's
// in-memory cache), so a batch costs one GetToken call that rarely leaves the process.
type tokenSource struct {
	cred     azcore.TokenCredential
	audience string
	scope    string
	who      string // the identity, for messages
	timeout  time.Duration
}

// newTokenSource reads auth's identity settings; url, the webhook's, must be https (or http to
// 127.0.0.1 or localhost) so that the token never travels in clear. newCred nil: azconn's.
func newTokenSource(auth WebhookAuth, url string, getenv func(string) string,
	newCred func(azconn.Identity, string) (azcore.TokenCredential, error), timeout time.Duration) (*tokenSource, error) {
	if err := azconn.CheckServiceURL(redact.URL(url), "https://orders-hook.azurewebsites.net/api/changes"); err != nil { // redact: a ?code= is a secret
		return nil, fmt.Errorf("auth: the url %w", err)
	}
	id, err := azconn.ReadIdentity(getenv, auth.Connection)
	if err != nil {
		return nil, fmt.Errorf("auth.connection: %w", err)
	}
	if newCred == nil {
		newCred = func(id azconn.Identity, setting string) (azcore.TokenCredential, error) {
			return id.TokenCredential(setting)
		}
	}
	cred, err := newCred(id, "auth.connection "+auth.Connection)
	if err != nil {
		return nil, err
	}
	return &tokenSource{cred: cred, audience: auth.Audience, scope: auth.Audience + "/.default", who: id.String(), timeout: timeout}, nil
}

// bearer is the Authorization header's value: "Bearer " and a token valid now. Its errors name
// the audience and the identity, never a token.
func (t *tokenSource) bearer(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	tok, err := t.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{t.scope}})
	if err != nil {
		return "", fmt.Errorf("auth: cannot get an Entra ID token for audience %s (scope %s) as %s; nothing was sent: %w", t.audience, t.scope, t.who, err)
	}
	if tok.Token == "" {
		return "", fmt.Errorf("auth: the credential (%s) returned an empty token for audience %s; nothing was sent", t.who, t.audience)
	}
	return "Bearer " + tok.Token, nil
}
