package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"sync"
	"weak"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pseudotrigger/pseudotrigger/internal/source/entra"
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
// openPostgres opens the pool for dsn: as pgx's database/sql driver does when dsn has no
// fedauth, otherwise with a hook that sets every new connection's password to a fresh token.
func openPostgres(dsn string, deps entra.Deps) (*sql.DB, error) {
	cfg, auth, err := parsePostgresEntra(dsn, deps.PlaintextOK)
	if err != nil {
		return nil, err
	}
	if auth == nil {
		db, err := sql.Open("pgx", dsn)
		if err == nil {
			keepReplConfig(db, func(context.Context) (*pgconn.Config, error) { return cfg.Config.Copy(), nil })
		}
		return db, err
	}
	token, err := deps.Tokens(auth)
	if err != nil {
		return nil, err
	}
	hook := pgTokenHook(token)
	db := stdlib.OpenDB(*cfg, stdlib.OptionBeforeConnect(hook))
	keepReplConfig(db, func(ctx context.Context) (*pgconn.Config, error) {
		c := cfg.Copy()
		if err := hook(ctx, c); err != nil {
			return nil, err
		}
		return c.Config.Copy(), nil
	})
	return db, nil
}

// replConfigFunc makes the configuration of a new connection to a pool's database, as the pool
// makes its own (a fresh access token for Entra ID): the logical cursor's replication
// connection (stream.go) is one.
type replConfigFunc func(ctx context.Context) (*pgconn.Config, error)

// replConfigs holds each pool openPostgres opened (a weak pointer to its *sql.DB, so that a pool
// closed and dropped is collected) with its replConfigFunc; the entry goes with the pool.
var replConfigs sync.Map

// keepReplConfig notes db's replConfigFunc.
func keepReplConfig(db *sql.DB, f replConfigFunc) {
	key := weak.Make(db)
	replConfigs.Store(key, f)
	runtime.AddCleanup(db, func(key weak.Pointer[sql.DB]) { replConfigs.Delete(key) }, key)
}

// replConfigOf is db's replConfigFunc, if openPostgres opened it.
func replConfigOf(db *sql.DB) (replConfigFunc, bool) {
	f, ok := replConfigs.Load(weak.Make(db))
	if !ok {
		return nil, false
	}
	return f.(replConfigFunc), true
}

// parsePostgresEntra parses dsn and takes this program's keys (fedauth, azure_client_id) out of
// the run-time parameters pgx collected. entra is nil when dsn does not ask for Entra ID.
// Errors name the key at fault and never quote a password.
func parsePostgresEntra(dsn string, plaintextOK bool) (*pgx.ConnConfig, *entra.Auth, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx redacts the password in its parse errors; location reports the same DSN first.
		return nil, nil, fmt.Errorf("the postgres connection string is not valid: %w", err)
	}
	e, err := entra.Take("postgres", cfg.RuntimeParams)
	if err != nil {
		return nil, nil, err
	}
	if e == nil {
		return cfg, nil, nil
	}
	if !plaintextOK {
		if err := requireTLS(cfg, e.FedAuth); err != nil {
			return nil, nil, err
		}
	}
	return cfg, e, nil
}

// requireTLS refuses a configuration whose first attempt is plaintext (sslmode=disable, allow)
// and drops plaintext fallbacks (sslmode=prefer, pgx's default), so a token never goes in clear.
func requireTLS(cfg *pgx.ConnConfig, fedauth string) error {
	if cfg.TLSConfig == nil {
		return fmt.Errorf("the postgres connection string's sslmode sends the password without TLS, and %s=%s sends an access token as the password: use sslmode=require (or verify-full)",
			entra.FedAuthKey, fedauth)
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

// pgTokenHook returns the BeforeConnect hook: it makes a fresh token (entraAuth.tokens) the
// connection's password.
func pgTokenHook(token func(context.Context) (string, error)) func(context.Context, *pgx.ConnConfig) error {
	return func(ctx context.Context, cc *pgx.ConnConfig) error {
		tok, err := token(ctx)
		cc.Password = tok
		return err
	}
}
