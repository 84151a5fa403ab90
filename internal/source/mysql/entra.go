package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/source/entra"
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
// (AllowCleartextPasswords), and only over TLS that checks the server's certificate: a DSN
// without tls (or tls=false) is refused, and so are tls=skip-verify and tls=preferred, which
// go-sql-driver v1.10 maps to a tls.Config with InsecureSkipVerify (dsn.go, Config.normalize;
// preferred also falls back to plaintext): any server on the path could take the token, whose
// audience every Azure Database for MySQL and PostgreSQL server shares. Microsoft's setting for
// Go is tls=true (its Go quickstart, https://learn.microsoft.com/en-us/azure/mysql/flexible-server/connect-go).
// allowFallbackToPlaintext loses its plaintext fallback. The fingerprint and the redacted DSN do
// not change: the token is never in the DSN.
// openMySQL opens the pool for dsn with the settings mysqlConfig makes; when dsn asks for Entra
// ID, with a hook that sets every new connection's password to a fresh token.
func openMySQL(dsn string, deps entra.Deps) (*sql.DB, error) {
	cfg, err := mysqlConfig(dsn)
	if err != nil {
		return nil, err
	}
	auth, err := takeMySQLEntra(cfg, deps.PlaintextOK)
	if err != nil {
		return nil, err
	}
	if auth != nil {
		token, err := deps.Tokens(auth)
		if err != nil {
			return nil, err
		}
		cfg.AllowCleartextPasswords = true // the server's Entra plugin asks for mysql_clear_password
		if err := cfg.Apply(gomysql.BeforeConnect(mysqlTokenHook(token))); err != nil {
			return nil, err
		}
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("the mysql connection string is not usable (%s): %v", redact.DSN(dsn), err)
	}
	return sql.OpenDB(conn), nil
}

// takeMySQLEntra takes this program's keys (fedauth, azure_client_id, in any case) out of the
// parameters go-sql-driver collected, and with fedauth checks the user and TLS. It returns nil
// when the DSN does not ask for Entra ID. Errors name the key at fault and never quote a
// password.
func takeMySQLEntra(cfg *gomysql.Config, plaintextOK bool) (*entra.Auth, error) {
	e, err := entra.Take("mysql", cfg.Params)
	if err != nil || e == nil {
		return nil, err
	}
	if strings.TrimSpace(cfg.User) == "" {
		return nil, fmt.Errorf("the mysql connection string has no user, and %s=%s signs in as one: put the MySQL user that CREATE AADUSER made for the identity before the @ (id-app@tcp(host:3306)/db)",
			entra.FedAuthKey, e.FedAuth)
	}
	if !plaintextOK {
		// ParseDSN has resolved tls= into cfg.TLS: nil means the connection would be plaintext.
		if cfg.TLS == nil {
			return nil, fmt.Errorf("the mysql connection string has no TLS (tls=%q), and %s=%s sends an access token as the password in clear text: add tls=true (Azure Database for MySQL's certificate chains to a root the system trusts)",
				cfg.TLSConfig, entra.FedAuthKey, e.FedAuth)
		}
		if cfg.TLS.InsecureSkipVerify {
			return nil, fmt.Errorf("the mysql connection string's TLS does not check the server's certificate (tls=%q), and %s=%s sends an access token, valid for every Azure Database for MySQL and PostgreSQL server, to whichever server answers: use tls=true (Azure Database for MySQL's certificate chains to a root the system trusts)",
				cfg.TLSConfig, entra.FedAuthKey, e.FedAuth)
		}
		cfg.AllowFallbackToPlaintext = false // allowFallbackToPlaintext=true
	}
	return e, nil
}

// mysqlTokenHook returns the BeforeConnect hook: it makes a fresh token (entraAuth.tokens) the
// connection's password.
func mysqlTokenHook(token func(context.Context) (string, error)) func(context.Context, *gomysql.Config) error {
	return func(ctx context.Context, cfg *gomysql.Config) error {
		tok, err := token(ctx)
		cfg.Passwd = tok
		return err
	}
}
