package source

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/go-sql-driver/mysql"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// Entra ID for MySQL (Azure Database for MySQL Flexible Server), asked for with the same keys as
// PostgreSQL's, as parameters of go-sql-driver's DSN:
//
//	id-app@tcp(srv.mysql.database.azure.com:3306)/shop?tls=true&fedauth=ActiveDirectoryManagedIdentity&azure_client_id=<client id>
//	func-app@tcp(srv.mysql.database.azure.com:3306)/shop?tls=true&fedauth=ActiveDirectoryManagedIdentity
//	me@contoso.com@tcp(srv.mysql.database.azure.com:3306)/shop?tls=true&fedauth=ActiveDirectoryDefault
//
// fedauth=ActiveDirectoryManagedIdentity (or ActiveDirectoryMSI) signs in with the app's managed
// identity: the system-assigned one, or the user-assigned one whose client id azure_client_id
// gives. fedauth=ActiveDirectoryDefault uses DefaultAzureCredential (az login, environment
// variables, workload identity...), for local runs. The user is the MySQL user that CREATE
// AADUSER made for the principal (its name as given there), a user's UPN, or a group's name.
//
// Both keys are this program's: they are taken out of the parsed configuration, never sent to
// the server (go-sql-driver sends every parameter it does not know as SET key=value, which the
// server refuses). Every new connection asks the credential for a token (scope
// MySQLEntraScope; azidentity caches tokens and renews them before they expire) and sends it as
// the password, so a connection opened after a token expired carries a fresh one; any password
// in the DSN is replaced. The server asks for the token in clear text (the mysql_clear_password
// plugin), which the driver then sends only because this package allows it
// (AllowCleartextPasswords), and only over TLS: a DSN without tls (or tls=false) is refused,
// and tls=preferred or allowFallbackToPlaintext lose their plaintext fallback. The fingerprint and
// the redacted DSN do not change: the token is never in the DSN.
const (
	// MySQLEntraScope is the scope of the access tokens Azure Database for MySQL accepts as
	// passwords (Azure public cloud): the same resource as PostgreSQL's.
	MySQLEntraScope = "https://ossrdbms-aad.database.windows.net/.default"
)

// mysqlEntra is how a MySQL DSN authenticates with Entra ID; nil means it does not.
type mysqlEntra struct {
	fedauth  string          // the fedauth value as written, for messages
	identity azconn.Identity // ClientID set: a user-assigned identity; Credential "managedidentity": system-assigned; neither: DefaultAzureCredential
}

// mysqlOpenDeps are what openMySQL takes from outside; mysqlDialect.open passes the real ones.
type mysqlOpenDeps struct {
	// credential makes the token credential for e (default: azconn's rule).
	credential func(e *mysqlEntra) (azcore.TokenCredential, error)
	now        func() time.Time // default time.Now
	// plaintextOK lets a token go without TLS. Tests only: the local test server has no TLS.
	// mysqlDialect.open never sets it.
	plaintextOK bool
}

// openMySQL opens the pool for dsn with the settings mysqlConfig makes; when dsn asks for Entra
// ID, with a hook that sets every new connection's password to a fresh token.
func openMySQL(dsn string, deps mysqlOpenDeps) (*sql.DB, error) {
	cfg, err := mysqlConfig(dsn)
	if err != nil {
		return nil, err
	}
	entra, err := takeMySQLEntra(cfg, deps.plaintextOK)
	if err != nil {
		return nil, err
	}
	if entra != nil {
		newCred := deps.credential
		if newCred == nil {
			newCred = func(e *mysqlEntra) (azcore.TokenCredential, error) {
				return e.identity.TokenCredential("the mysql connection string's " + pgFedAuthKey + "=" + e.fedauth)
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
		cfg.AllowCleartextPasswords = true // the server's Entra plugin asks for mysql_clear_password
		if err := cfg.Apply(mysql.BeforeConnect(mysqlTokenHook(entra, cred, now))); err != nil {
			return nil, err
		}
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("the mysql connection string is not usable (%s): %v", redact.DSN(dsn), err)
	}
	return sql.OpenDB(conn), nil
}

// takeMySQLEntra takes this program's keys (fedauth, azure_client_id, in any case) out of the
// parameters go-sql-driver collected, and with fedauth checks the user and TLS. It returns nil
// when the DSN does not ask for Entra ID. Errors name the key at fault and never quote a
// password.
func takeMySQLEntra(cfg *mysql.Config, plaintextOK bool) (*mysqlEntra, error) {
	fedauth, hasFedauth, err := takeMySQLParam(cfg.Params, pgFedAuthKey)
	if err != nil {
		return nil, err
	}
	clientID, hasClientID, err := takeMySQLParam(cfg.Params, pgClientIDKey)
	if err != nil {
		return nil, err
	}
	if !hasFedauth {
		if hasClientID {
			return nil, fmt.Errorf("the mysql connection string has %s but no %s: add %s=%s to sign in with that managed identity",
				pgClientIDKey, pgFedAuthKey, pgFedAuthKey, pgManagedIdentity)
		}
		return nil, nil
	}
	e := &mysqlEntra{fedauth: fedauth}
	switch strings.ToLower(strings.TrimSpace(fedauth)) {
	case "activedirectorymanagedidentity", "activedirectorymsi":
		e.identity = azconn.Identity{Credential: "managedidentity", ClientID: strings.TrimSpace(clientID)}
		if hasClientID && e.identity.ClientID == "" {
			return nil, fmt.Errorf("the mysql connection string's %s is empty: give the user-assigned identity's client id, or leave the key out for the system-assigned identity", pgClientIDKey)
		}
	case "activedirectorydefault":
		if hasClientID {
			return nil, fmt.Errorf("the mysql connection string's %s picks a managed identity, which %s=%s does not use: use %s=%s with it, or drop it",
				pgClientIDKey, pgFedAuthKey, fedauth, pgFedAuthKey, pgManagedIdentity)
		}
	default:
		return nil, fmt.Errorf("the mysql connection string's %s=%q is not supported: use %s (the app's managed identity; %s=<client id> for a user-assigned one) or %s (DefaultAzureCredential, for local runs)",
			pgFedAuthKey, fedauth, pgManagedIdentity, pgClientIDKey, pgDefault)
	}
	if strings.TrimSpace(cfg.User) == "" {
		return nil, fmt.Errorf("the mysql connection string has no user, and %s=%s signs in as one: put the MySQL user that CREATE AADUSER made for the identity before the @ (id-app@tcp(host:3306)/db)",
			pgFedAuthKey, fedauth)
	}
	if !plaintextOK {
		// ParseDSN has resolved tls= into cfg.TLS: nil means the connection would be plaintext.
		if cfg.TLS == nil {
			return nil, fmt.Errorf("the mysql connection string has no TLS (tls=%q), and %s=%s sends an access token as the password in clear text: add tls=true (Azure Database for MySQL's certificate chains to a root the system trusts)",
				cfg.TLSConfig, pgFedAuthKey, fedauth)
		}
		cfg.AllowFallbackToPlaintext = false // tls=preferred's, or allowFallbackToPlaintext=true
	}
	return e, nil
}

// takeMySQLParam removes key (in any case) from params and returns its value. Two spellings of
// the key with different values are an error.
func takeMySQLParam(params map[string]string, key string) (string, bool, error) {
	var (
		val   string
		found bool
	)
	for k, v := range params {
		if !strings.EqualFold(k, key) {
			continue
		}
		if found && v != val {
			return "", false, fmt.Errorf("the mysql connection string sets %s twice, differently", key)
		}
		val, found = v, true
		delete(params, k)
	}
	return val, found, nil
}

// mysqlTokenHook returns the BeforeConnect hook: it asks cred for a token (scope
// MySQLEntraScope) and makes it the connection's password (see entraToken).
func mysqlTokenHook(e *mysqlEntra, cred azcore.TokenCredential, now func() time.Time) func(context.Context, *mysql.Config) error {
	who := e.identity.String()
	return func(ctx context.Context, cfg *mysql.Config) error {
		tok, err := entraToken(ctx, cred, "mysql", e.fedauth, who, MySQLEntraScope, now)
		cfg.Passwd = tok
		return err
	}
}
