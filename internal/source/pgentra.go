package source

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
)

// Entra ID for PostgreSQL (Azure Database for PostgreSQL Flexible Server). The DSN asks for it
// the way a SQL Server DSN does, with fedauth:
//
//	host=srv.postgres.database.azure.com dbname=shop sslmode=require user=id-app fedauth=ActiveDirectoryManagedIdentity azure_client_id=<client id>
//	postgres://id-app@srv.postgres.database.azure.com/shop?sslmode=require&fedauth=ActiveDirectoryManagedIdentity
//	postgres://me%40contoso.com@srv.postgres.database.azure.com/shop?sslmode=require&fedauth=ActiveDirectoryDefault
//
// fedauth=ActiveDirectoryManagedIdentity (or its alias ActiveDirectoryMSI) signs in with the
// app's managed identity: the system-assigned one, or the user-assigned one whose client id
// azure_client_id gives. fedauth=ActiveDirectoryDefault uses DefaultAzureCredential (az login,
// environment variables, workload identity...), for local runs. user is the PostgreSQL role
// that pgaadauth_create_principal made: the managed identity's name, or the user's UPN or the
// group's display name. Unlike SQL Server, user cannot carry the client id: PostgreSQL matches
// the role name against the token.
//
// Both keys are this program's: they are taken out of the parsed configuration, never sent to
// the server (pgx would send an unknown key as a run-time parameter, which the server refuses).
// Every new connection asks the credential for a token (azidentity caches tokens and renews
// them before they expire) and sends it as the password, so a connection opened after a token
// expired carries a fresh one; any password in the DSN is replaced. The token goes only over
// TLS: sslmode=disable and allow are refused, and prefer's plaintext retry (prefer is pgx's
// default) is dropped. The fingerprint and the redacted DSN do not change: the token is never
// in the DSN.
const (
	// PostgresEntraScope is the scope of the access tokens Azure Database for PostgreSQL
	// accepts as passwords (Azure public cloud).
	PostgresEntraScope = "https://ossrdbms-aad.database.windows.net/.default"

	pgFedAuthKey  = "fedauth"
	pgClientIDKey = "azure_client_id"

	pgManagedIdentity = "ActiveDirectoryManagedIdentity"
	pgDefault         = "ActiveDirectoryDefault"
)

// pgTokenTimeout bounds one token request (IMDS retries included), so that a connection
// attempt whose context has no deadline cannot hang on the identity endpoint.
const pgTokenTimeout = 30 * time.Second

// pgEntra is how a PostgreSQL DSN authenticates with Entra ID; nil means it does not.
type pgEntra struct {
	fedauth  string          // the fedauth value as written, for messages
	identity azconn.Identity // ClientID set: a user-assigned identity; Credential "managedidentity": system-assigned; neither: DefaultAzureCredential
}

// pgOpenDeps are what openPostgres takes from outside; postgres.open passes the real ones.
type pgOpenDeps struct {
	// credential makes the token credential for e (default: azconn's rule).
	credential func(e *pgEntra) (azcore.TokenCredential, error)
	now        func() time.Time // default time.Now
	// plaintextOK lets a token go without TLS. Tests only: the local test server has no TLS.
	// postgres.open never sets it.
	plaintextOK bool
}

// openPostgres opens the pool for dsn: as pgx's database/sql driver does when dsn has no
// fedauth, otherwise with a hook that sets every new connection's password to a fresh token.
func openPostgres(dsn string, deps pgOpenDeps) (*sql.DB, error) {
	cfg, entra, err := parsePostgresEntra(dsn, deps.plaintextOK)
	if err != nil {
		return nil, err
	}
	if entra == nil {
		return sql.Open("pgx", dsn)
	}
	newCred := deps.credential
	if newCred == nil {
		newCred = func(e *pgEntra) (azcore.TokenCredential, error) {
			return e.identity.TokenCredential("the postgres connection string's " + pgFedAuthKey + "=" + e.fedauth)
		}
	}
	cred, err := newCred(entra)
	if err != nil {
		return nil, err
	}
	now := deps.now
	if now == nil {
		now = time.Now
	}
	hook := pgTokenHook(entra, cred, now)
	return stdlib.OpenDB(*cfg, stdlib.OptionBeforeConnect(hook)), nil
}

// parsePostgresEntra parses dsn and takes this program's keys (fedauth, azure_client_id) out of
// the run-time parameters pgx collected. entra is nil when dsn does not ask for Entra ID.
// Errors name the key at fault and never quote a password.
func parsePostgresEntra(dsn string, plaintextOK bool) (*pgx.ConnConfig, *pgEntra, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx redacts the password in its parse errors; location reports the same DSN first.
		return nil, nil, fmt.Errorf("the postgres connection string is not valid: %w", err)
	}
	fedauth, hasFedauth, err := takeParam(cfg.RuntimeParams, pgFedAuthKey)
	if err != nil {
		return nil, nil, err
	}
	clientID, hasClientID, err := takeParam(cfg.RuntimeParams, pgClientIDKey)
	if err != nil {
		return nil, nil, err
	}
	if !hasFedauth {
		if hasClientID {
			return nil, nil, fmt.Errorf("the postgres connection string has %s but no %s: add %s=%s to sign in with that managed identity",
				pgClientIDKey, pgFedAuthKey, pgFedAuthKey, pgManagedIdentity)
		}
		return cfg, nil, nil
	}
	e := &pgEntra{fedauth: fedauth}
	switch strings.ToLower(strings.TrimSpace(fedauth)) {
	case "activedirectorymanagedidentity", "activedirectorymsi":
		e.identity = azconn.Identity{Credential: "managedidentity", ClientID: strings.TrimSpace(clientID)}
		if hasClientID && e.identity.ClientID == "" {
			return nil, nil, fmt.Errorf("the postgres connection string's %s is empty: give the user-assigned identity's client id, or leave the key out for the system-assigned identity", pgClientIDKey)
		}
	case "activedirectorydefault":
		if hasClientID {
			return nil, nil, fmt.Errorf("the postgres connection string's %s picks a managed identity, which %s=%s does not use: use %s=%s with it, or drop it",
				pgClientIDKey, pgFedAuthKey, fedauth, pgFedAuthKey, pgManagedIdentity)
		}
	default:
		return nil, nil, fmt.Errorf("the postgres connection string's %s=%q is not supported: use %s (the app's managed identity; %s=<client id> for a user-assigned one) or %s (DefaultAzureCredential, for local runs)",
			pgFedAuthKey, fedauth, pgManagedIdentity, pgClientIDKey, pgDefault)
	}
	if !plaintextOK {
		if err := requireTLS(cfg, fedauth); err != nil {
			return nil, nil, err
		}
	}
	return cfg, e, nil
}

// takeParam removes key (in any case) from params and returns its value. Two spellings of the
// key with different values are an error.
func takeParam(params map[string]string, key string) (string, bool, error) {
	var (
		val   string
		found bool
	)
	for k, v := range params {
		if !strings.EqualFold(k, key) {
			continue
		}
		if found && v != val {
			return "", false, fmt.Errorf("the postgres connection string sets %s twice, differently", key)
		}
		val, found = v, true
		delete(params, k)
	}
	return val, found, nil
}

// requireTLS refuses a configuration whose first attempt is plaintext (sslmode=disable, allow)
// and drops plaintext fallbacks (sslmode=prefer, pgx's default), so a token never goes in clear.
func requireTLS(cfg *pgx.ConnConfig, fedauth string) error {
	if cfg.TLSConfig == nil {
		return fmt.Errorf("the postgres connection string's sslmode sends the password without TLS, and %s=%s sends an access token as the password: use sslmode=require (or verify-full)",
			pgFedAuthKey, fedauth)
	}
	fallbacks := cfg.Fallbacks[:0]
	for _, f := range cfg.Fallbacks {
		if f.TLSConfig != nil {
			fallbacks = append(fallbacks, f)
		}
	}
	cfg.Fallbacks = fallbacks
	return nil
}

// pgTokenHook returns the BeforeConnect hook: it asks cred for a token (scope
// PostgresEntraScope) and makes it the connection's password (see entraToken).
func pgTokenHook(e *pgEntra, cred azcore.TokenCredential, now func() time.Time) func(context.Context, *pgx.ConnConfig) error {
	who := e.identity.String()
	return func(ctx context.Context, cc *pgx.ConnConfig) error {
		tok, err := entraToken(ctx, cred, "postgres", e.fedauth, who, PostgresEntraScope, now)
		cc.Password = tok
		return err
	}
}

// entraToken gets an access token for scope from cred, for a new connection of driver's, within
// pgTokenTimeout. A failure, an empty token and one already expired are errors that name the
// connection string's fedauth and the identity, never the token.
func entraToken(ctx context.Context, cred azcore.TokenCredential, driver, fedauth, who, scope string, now func() time.Time) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, pgTokenTimeout)
	defer cancel()
	tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{scope}})
	if err != nil {
		return "", fmt.Errorf("the %s connection string's %s=%s (%s): cannot get an access token for %s: %w",
			driver, pgFedAuthKey, fedauth, who, scope, err)
	}
	if tok.Token == "" {
		return "", fmt.Errorf("the %s connection string's %s=%s (%s): the credential returned an empty access token", driver, pgFedAuthKey, fedauth, who)
	}
	if !tok.ExpiresOn.IsZero() && !tok.ExpiresOn.After(now()) {
		return "", fmt.Errorf("the %s connection string's %s=%s (%s): %w (expired at %s)",
			driver, pgFedAuthKey, fedauth, who, errExpiredToken, tok.ExpiresOn.UTC().Format(time.RFC3339))
	}
	return tok.Token, nil
}

// errExpiredToken: the credential returned a token already past its expiry; the server would
// refuse it, so the connection is not attempted.
var errExpiredToken = errors.New("the credential returned an access token that has expired")
