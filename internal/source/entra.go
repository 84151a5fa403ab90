package source

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
)

// Entra ID for Azure Database for PostgreSQL and for MySQL: the same keys in both drivers' DSNs
// (pgentra.go, mysqlentra.go), the same identities, and an access token as the password of
// every new connection. What each driver does its own way (where the keys are, TLS, the user)
// stays in its file.
const (
	// PostgresEntraScope and MySQLEntraScope are the scope of the access tokens Azure Database
	// for PostgreSQL and for MySQL accept as passwords (Azure public cloud): one resource.
	PostgresEntraScope = entraScope
	MySQLEntraScope    = entraScope
	entraScope         = "https://ossrdbms-aad.database.windows.net/.default"

	fedAuthKey  = "fedauth"
	clientIDKey = "azure_client_id"

	fedAuthManagedIdentity = "ActiveDirectoryManagedIdentity"
	fedAuthDefault         = "ActiveDirectoryDefault"
)

// entraTokenTimeout bounds one token request (IMDS retries included), so that a connection
// attempt whose context has no deadline cannot hang on the identity endpoint.
const entraTokenTimeout = 30 * time.Second

// entraAuth is how a DSN authenticates with Entra ID; nil means it does not.
type entraAuth struct {
	driver   string          // postgres or mysql, for messages
	fedauth  string          // the fedauth value as written, for messages
	identity azconn.Identity // ClientID set: a user-assigned identity; Credential "managedidentity": system-assigned; neither: DefaultAzureCredential
}

// entraDeps are what openPostgres and openMySQL take from outside; the dialects pass the zero
// value, the real ones.
type entraDeps struct {
	// credential makes the token credential for e (default: azconn's rule).
	credential func(e *entraAuth) (azcore.TokenCredential, error)
	now        func() time.Time // default time.Now
	// plaintextOK lets a token go without TLS. Tests only: the local test servers have no TLS.
	// The dialects never set it.
	plaintextOK bool
}

// tokens returns what gets each new connection of e's its password: d's credential for e and
// its clock, through entraToken.
func (d entraDeps) tokens(e *entraAuth) (func(context.Context) (string, error), error) {
	newCred := d.credential
	if newCred == nil {
		newCred = func(e *entraAuth) (azcore.TokenCredential, error) {
			return e.identity.TokenCredential("the " + e.driver + " connection string's " + fedAuthKey + "=" + e.fedauth)
		}
	}
	cred, err := newCred(e)
	if err != nil {
		return nil, err
	}
	now := d.now
	if now == nil {
		now = time.Now
	}
	return e.tokens(cred, now), nil
}

// tokens gets a token from cred for each new connection (see entraToken).
func (e *entraAuth) tokens(cred azcore.TokenCredential, now func() time.Time) func(context.Context) (string, error) {
	who := e.identity.String()
	return func(ctx context.Context) (string, error) {
		return entraToken(ctx, cred, e.driver, e.fedauth, who, entraScope, now)
	}
}

// takeEntra takes this program's keys (fedauth, azure_client_id, in any case) out of params, the
// parameters a driver parsed from driver's DSN, and checks them. It returns nil when the DSN
// does not ask for Entra ID. Errors name the key at fault and never quote a password.
func takeEntra(driver string, params map[string]string) (*entraAuth, error) {
	fedauth, hasFedauth, err := takeParam(driver, params, fedAuthKey)
	if err != nil {
		return nil, err
	}
	clientID, hasClientID, err := takeParam(driver, params, clientIDKey)
	if err != nil {
		return nil, err
	}
	if !hasFedauth {
		if hasClientID {
			return nil, fmt.Errorf("the %s connection string has %s but no %s: add %s=%s to sign in with that managed identity",
				driver, clientIDKey, fedAuthKey, fedAuthKey, fedAuthManagedIdentity)
		}
		return nil, nil
	}
	e := &entraAuth{driver: driver, fedauth: fedauth}
	switch strings.ToLower(strings.TrimSpace(fedauth)) {
	case "activedirectorymanagedidentity", "activedirectorymsi":
		e.identity = azconn.Identity{Credential: "managedidentity", ClientID: strings.TrimSpace(clientID)}
		if hasClientID && e.identity.ClientID == "" {
			return nil, fmt.Errorf("the %s connection string's %s is empty: give the user-assigned identity's client id, or leave the key out for the system-assigned identity", driver, clientIDKey)
		}
	case "activedirectorydefault":
		if hasClientID {
			return nil, fmt.Errorf("the %s connection string's %s picks a managed identity, which %s=%s does not use: use %s=%s with it, or drop it",
				driver, clientIDKey, fedAuthKey, fedauth, fedAuthKey, fedAuthManagedIdentity)
		}
	default:
		return nil, fmt.Errorf("the %s connection string's %s=%q is not supported: use %s (the app's managed identity; %s=<client id> for a user-assigned one) or %s (DefaultAzureCredential, for local runs)",
			driver, fedAuthKey, fedauth, fedAuthManagedIdentity, clientIDKey, fedAuthDefault)
	}
	return e, nil
}

// takeParam removes key (in any case) from params and returns its value. Two spellings of the
// key with different values are an error.
func takeParam(driver string, params map[string]string, key string) (string, bool, error) {
	var (
		val   string
		found bool
	)
	for k, v := range params {
		if !strings.EqualFold(k, key) {
			continue
		}
		if found && v != val {
			return "", false, fmt.Errorf("the %s connection string sets %s twice, differently", driver, key)
		}
		val, found = v, true
		delete(params, k)
	}
	return val, found, nil
}

// entraToken gets an access token for scope from cred, for a new connection of driver's, within
// entraTokenTimeout. A failure, an empty token and one already expired are errors that name the
// connection string's fedauth and the identity, never the token.
func entraToken(ctx context.Context, cred azcore.TokenCredential, driver, fedauth, who, scope string, now func() time.Time) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, entraTokenTimeout)
	defer cancel()
	tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{scope}})
	if err != nil {
		return "", fmt.Errorf("the %s connection string's %s=%s (%s): cannot get an access token for %s: %w",
			driver, fedAuthKey, fedauth, who, scope, err)
	}
	if tok.Token == "" {
		return "", fmt.Errorf("the %s connection string's %s=%s (%s): the credential returned an empty access token", driver, fedAuthKey, fedauth, who)
	}
	if !tok.ExpiresOn.IsZero() && !tok.ExpiresOn.After(now()) {
		return "", fmt.Errorf("the %s connection string's %s=%s (%s): %w (expired at %s)",
			driver, fedAuthKey, fedauth, who, errExpiredToken, tok.ExpiresOn.UTC().Format(time.RFC3339))
	}
	return tok.Token, nil
}

// errExpiredToken: the credential returned a token already past its expiry; the server would
// refuse it, so the connection is not attempted.
var errExpiredToken = errors.New("the credential returned an access token that has expired")
