// Package entra is the one Entra ID sign-in that the PostgreSQL and MySQL drivers share: the
// same keys in both drivers' DSNs (fedauth, azure_client_id), the same identities, and an access
// token as the password of every new connection. What each driver does its own way (where the
// keys are, TLS, the user) stays in its package.
package entra

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

const (
	// Scope is the scope of the access tokens Azure Database for PostgreSQL and for MySQL accept
	// as passwords (Azure public cloud): one resource.
	Scope = "https://ossrdbms-aad.database.windows.net/.default"

	// FedAuthKey and ClientIDKey are this program's keys in a DSN; Take takes them out.
	FedAuthKey  = "fedauth"
	ClientIDKey = "azure_client_id"

	// ManagedIdentity and Default are the fedauth values Take accepts (and ActiveDirectoryMSI,
	// ManagedIdentity's alias).
	ManagedIdentity = "ActiveDirectoryManagedIdentity"
	Default         = "ActiveDirectoryDefault"
)

// TokenTimeout bounds one token request (IMDS retries included), so that a connection attempt
// whose context has no deadline cannot hang on the identity endpoint.
const TokenTimeout = 30 * time.Second

// Auth is how a DSN authenticates with Entra ID (Take); nil means it does not.
type Auth struct {
	Driver   string          // postgres or mysql, for messages
	FedAuth  string          // the fedauth value as written, for messages
	Identity azconn.Identity // ClientID set: a user-assigned identity; Credential "managedidentity": system-assigned; neither: DefaultAzureCredential
}

// Deps are what a driver's sign-in takes from outside; the drivers pass the zero value, the real
// ones.
type Deps struct {
	// Credential makes the token credential for a (default: azconn's rule).
	Credential func(a *Auth) (azcore.TokenCredential, error)
	Now        func() time.Time // default time.Now
	// PlaintextOK lets a token go without TLS. Tests only: the local test servers have no TLS.
	// The drivers never set it.
	PlaintextOK bool
}

// Tokens returns what gets each new connection of a's its password: d's credential for a and
// its clock, through Auth.Tokens.
func (d Deps) Tokens(a *Auth) (func(context.Context) (string, error), error) {
	newCred := d.Credential
	if newCred == nil {
		newCred = func(a *Auth) (azcore.TokenCredential, error) {
			return a.Identity.TokenCredential("the " + a.Driver + " connection string's " + FedAuthKey + "=" + a.FedAuth)
		}
	}
	cred, err := newCred(a)
	if err != nil {
		return nil, err
	}
	now := d.Now
	if now == nil {
		now = time.Now
	}
	return a.Tokens(cred, now), nil
}

// Tokens gets a token from cred for each new connection (see token).
func (a *Auth) Tokens(cred azcore.TokenCredential, now func() time.Time) func(context.Context) (string, error) {
	who := a.Identity.String()
	return func(ctx context.Context) (string, error) {
		return token(ctx, cred, a.Driver, a.FedAuth, who, Scope, now)
	}
}

// Take takes this program's keys (fedauth, azure_client_id, in any case) out of params, the
// parameters a driver parsed from driver's DSN, and checks them. It returns nil when the DSN
// does not ask for Entra ID. Errors name the key at fault and never quote a password.
func Take(driver string, params map[string]string) (*Auth, error) {
	fedauth, hasFedauth, err := takeParam(driver, params, FedAuthKey)
	if err != nil {
		return nil, err
	}
	clientID, hasClientID, err := takeParam(driver, params, ClientIDKey)
	if err != nil {
		return nil, err
	}
	if !hasFedauth {
		if hasClientID {
			return nil, fmt.Errorf("the %s connection string has %s but no %s: add %s=%s to sign in with that managed identity",
				driver, ClientIDKey, FedAuthKey, FedAuthKey, ManagedIdentity)
		}
		return nil, nil
	}
	e := &Auth{Driver: driver, FedAuth: fedauth}
	switch strings.ToLower(strings.TrimSpace(fedauth)) {
	case "activedirectorymanagedidentity", "activedirectorymsi":
		e.Identity = azconn.Identity{Credential: "managedidentity", ClientID: strings.TrimSpace(clientID)}
		if hasClientID && e.Identity.ClientID == "" {
			return nil, fmt.Errorf("the %s connection string's %s is empty: give the user-assigned identity's client id, or leave the key out for the system-assigned identity", driver, ClientIDKey)
		}
	case "activedirectorydefault":
		if hasClientID {
			return nil, fmt.Errorf("the %s connection string's %s picks a managed identity, which %s=%s does not use: use %s=%s with it, or drop it",
				driver, ClientIDKey, FedAuthKey, fedauth, FedAuthKey, ManagedIdentity)
		}
	default:
		return nil, fmt.Errorf("the %s connection string's %s=%q is not supported: use %s (the app's managed identity; %s=<client id> for a user-assigned one) or %s (DefaultAzureCredential, for local runs)",
			driver, FedAuthKey, fedauth, ManagedIdentity, ClientIDKey, Default)
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

// token gets an access token for scope from cred, for a new connection of driver's, within
// TokenTimeout. A failure, an empty token and one already expired are errors that name the
// connection string's fedauth and the identity, never the token.
func token(ctx context.Context, cred azcore.TokenCredential, driver, fedauth, who, scope string, now func() time.Time) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, TokenTimeout)
	defer cancel()
	tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{scope}})
	if err != nil {
		return "", fmt.Errorf("the %s connection string's %s=%s (%s): cannot get an access token for %s: %w",
			driver, FedAuthKey, fedauth, who, scope, err)
	}
	if tok.Token == "" {
		return "", fmt.Errorf("the %s connection string's %s=%s (%s): the credential returned an empty access token", driver, FedAuthKey, fedauth, who)
	}
	if !tok.ExpiresOn.IsZero() && !tok.ExpiresOn.After(now()) {
		return "", fmt.Errorf("the %s connection string's %s=%s (%s): %w (expired at %s)",
			driver, FedAuthKey, fedauth, who, ErrExpiredToken, tok.ExpiresOn.UTC().Format(time.RFC3339))
	}
	return tok.Token, nil
}

// ErrExpiredToken: the credential returned a token already past its expiry; the server would
// refuse it, so the connection is not attempted.
var ErrExpiredToken = errors.New("the credential returned an access token that has expired")
