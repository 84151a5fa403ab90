package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
	"github.com/pseudotrigger/pseudotrigger/internal/source/entra"
	"github.com/pseudotrigger/pseudotrigger/internal/source/entra/entratest"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

const entraHost = "postgres://id-app:hunter2@srv.postgres.database.azure.com:5432/shop"

func TestEntraParseDSN(t *testing.T) {
	for _, c := range []struct {
		dsn  string
		want *azconn.Identity // nil: not Entra
	}{
		{entraHost + "?sslmode=require", nil},
		{entraHost + "?sslmode=require&fedauth=ActiveDirectoryManagedIdentity&azure_client_id=11111111-2222-3333-4444-555555555555",
			&azconn.Identity{Credential: "managedidentity", ClientID: "11111111-2222-3333-4444-555555555555"}},
		{entraHost + "?sslmode=verify-full&fedauth=ActiveDirectoryManagedIdentity", &azconn.Identity{Credential: "managedidentity"}},
		{"host=srv.postgres.database.azure.com dbname=shop user=id-app sslmode=require FedAuth=activedirectorymsi", &azconn.Identity{Credential: "managedidentity"}},
		{"host=srv.postgres.database.azure.com dbname=shop user=me@contoso.com sslmode=require fedauth=ActiveDirectoryDefault", &azconn.Identity{}},
		// prefer (pgx's default) keeps TLS and loses its plaintext retry: checked below.
		{entraHost + "?sslmode=prefer&fedauth=ActiveDirectoryDefault", &azconn.Identity{}},
		{entraHost + "?fedauth=ActiveDirectoryDefault", &azconn.Identity{}},
	} {
		cfg, e, err := parsePostgresEntra(c.dsn, false)
		if err != nil {
			t.Errorf("%s: %v", c.dsn, err)
			continue
		}
		if (e == nil) != (c.want == nil) || (e != nil && e.Identity != *c.want) {
			t.Errorf("%s: entra %+v, want %+v", c.dsn, e, c.want)
		}
		for k := range cfg.RuntimeParams {
			if strings.EqualFold(k, entra.FedAuthKey) || strings.EqualFold(k, entra.ClientIDKey) {
				t.Errorf("%s: %s would be sent to the server as a run-time parameter", c.dsn, k)
			}
		}
		if e == nil {
			continue
		}
		if cfg.TLSConfig == nil {
			t.Errorf("%s: the first attempt is plaintext", c.dsn)
		}
		for _, f := range cfg.Fallbacks {
			if f.TLSConfig == nil {
				t.Errorf("%s: a plaintext fallback to %s:%d is left", c.dsn, f.Host, f.Port)
			}
		}
	}
}

func TestEntraParseDSNErrors(t *testing.T) {
	for dsn, names := range map[string][]string{
		entraHost + "?sslmode=disable&fedauth=ActiveDirectoryManagedIdentity":                        {"sslmode", "fedauth=ActiveDirectoryManagedIdentity", "require"},
		entraHost + "?sslmode=allow&fedauth=ActiveDirectoryDefault":                                  {"sslmode", "fedauth=ActiveDirectoryDefault"},
		entraHost + "?sslmode=require&fedauth=ActiveDirectoryPassword":                               {`fedauth="ActiveDirectoryPassword"`, "ActiveDirectoryManagedIdentity", "ActiveDirectoryDefault"},
		entraHost + "?sslmode=require&azure_client_id=abc":                                           {"azure_client_id", "fedauth=ActiveDirectoryManagedIdentity"},
		entraHost + "?sslmode=require&fedauth=ActiveDirectoryDefault&azure_client_id=abc":            {"azure_client_id", "fedauth=ActiveDirectoryDefault"},
		entraHost + "?sslmode=require&fedauth=ActiveDirectoryManagedIdentity&azure_client_id=":       {"azure_client_id", "empty"},
		"host=srv dbname=shop password=hunter2 sslmode=require fedauth=x FEDAUTH=ActiveDirectoryMSI": {"fedauth", "twice"},
	} {
		_, _, err := parsePostgresEntra(dsn, false)
		if err == nil {
			t.Errorf("%s: accepted", dsn)
			continue
		}
		for _, n := range names {
			if !strings.Contains(err.Error(), n) {
				t.Errorf("%s: the error does not say %q: %v", dsn, n, err)
			}
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the password: %v", dsn, err)
		}
	}
	// The seam for the local test server lets plaintext through; nothing else does.
	if _, e, err := parsePostgresEntra(entraHost+"?sslmode=disable&fedauth=ActiveDirectoryDefault", true); err != nil || e == nil {
		t.Errorf("plaintextOK: %v %v", e, err)
	}
}

// The Entra keys change neither the fingerprint nor what redaction keeps, and a password in the
// DSN is still redacted.
func TestEntraFingerprintAndRedaction(t *testing.T) {
	entratest.SameSource(t, Driver{}, entraHost+"?sslmode=require")
}

func TestEntraTokenHook(t *testing.T) {
	entratest.TokenHook(t, "postgres", func(token func(context.Context) (string, error)) (string, error) {
		cc := pgx.ConnConfig{}
		cc.Password = "from-the-dsn"
		err := pgTokenHook(token)(context.Background(), &cc)
		return cc.Password, err
	})
}

// Open, the path every poller takes, refuses plaintext with Entra before connecting, naming
// sslmode; the password in the DSN stays hidden.
func TestEntraOpenRefusesPlaintext(t *testing.T) {
	entratest.RefusesPlaintext(t, Driver{}, "postgres://id-app:hunter2@127.0.0.1:1/shop?sslmode=disable&fedauth=ActiveDirectoryManagedIdentity", "sslmode")
}

// TestEntraPostgresServer signs in to the real local PostgreSQL with tokens as passwords: a role
// of its own with a scram-sha-256 line in pg_hba.conf (the cluster otherwise trusts every local
// connection), whose password is set to the token the fake credential hands out.
func TestEntraPostgresServer(t *testing.T) {
	adminDSN := testenv.Postgres(t)
	dir := os.Getenv("PG_DIR")
	if dir == "" {
		t.Skip("PG_DIR is not set (scripts/lib/services.sh start_postgres sets it): the test needs to add a pg_hba.conf line")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := sql.Open("pgx", adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })

	role := fmt.Sprintf("pt_entra_%d", time.Now().UnixNano()%1_000_000_000)
	hbaLine := "host all " + role + " 127.0.0.1/32 scram-sha-256 # " + t.Name() + "\n"
	hba := filepath.Join(dir, "data", "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Skipf("cannot read %s (%v): the test needs a password rule for a role of its own", hba, err)
	}
	if err := os.WriteFile(hba, append([]byte(hbaLine), old...), 0); err != nil {
		t.Skipf("cannot change %s (%v): the test needs a password rule for a role of its own", hba, err)
	}
	reload := func() {
		if _, err := admin.ExecContext(ctx, "SELECT pg_reload_conf()"); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() {
		// Take out our line only, whatever else changed the file meanwhile.
		if cur, err := os.ReadFile(hba); err == nil {
			os.WriteFile(hba, []byte(strings.Replace(string(cur), hbaLine, "", 1)), 0)
		}
		admin.Exec("SELECT pg_reload_conf()")
		admin.Exec("DROP ROLE IF EXISTS " + role)
	})
	if _, err := admin.ExecContext(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD 'tok-A-secret'"); err != nil {
		t.Fatal(err)
	}
	reload()

	u, err := url.Parse(adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	q := u.Query()
	q.Set("fedauth", entra.ManagedIdentity)
	q.Set("azure_client_id", "11111111-2222-3333-4444-555555555555")
	q.Set("connect_timeout", "10")
	u.RawQuery = q.Encode()
	dsn := u.String() // sslmode=disable: the local server has no TLS

	// Without taking them out, pgx would send the Entra keys to the server, which refuses them.
	withPassword := *u
	withPassword.User = url.UserPassword(role, "tok-A-secret")
	if raw, err := sql.Open("pgx", withPassword.String()); err == nil {
		err = raw.PingContext(ctx)
		raw.Close()
		if err == nil || !(strings.Contains(err.Error(), `unrecognized configuration parameter "fedauth"`) ||
			strings.Contains(err.Error(), `unrecognized configuration parameter "azure_client_id"`)) {
			t.Errorf("the server took fedauth as a parameter: %v", err)
		}
	}

	pu := *u
	pq := pu.Query()
	pq.Set("sslmode", "prefer")
	pu.RawQuery = pq.Encode()
	// The rule is in force: trust no longer lets the role in without the right password.
	entratest.SignIn(t, ctx, entratest.Server{
		Open: openPostgres, DSN: dsn, PreferTLS: pu.String(), PreferTLSWhat: "sslmode=prefer",
		Refused: "password authentication failed", // if not, is the pg_hba.conf line in force?
		Whoami: func(ctx context.Context, c *sql.Conn) error {
			var who string
			if err := c.QueryRowContext(ctx, "SELECT current_user").Scan(&who); err != nil || who != role {
				return fmt.Errorf("current_user %q, %v", who, err)
			}
			return nil
		},
		SetPassword: func(pw string) {
			t.Helper()
			if _, err := admin.ExecContext(ctx, "ALTER ROLE "+role+" PASSWORD '"+pw+"'"); err != nil {
				t.Fatal(err)
			}
		},
	})

	// The replication connection a following logical tick opens (stream.go) signs in as the
	// pool's connections do: a fresh token as its password.
	if _, err := admin.ExecContext(ctx, "ALTER ROLE "+role+" REPLICATION PASSWORD 'tok-R-secret'"); err != nil {
		t.Fatal(err)
	}
	cred := &entratest.Credential{Now: time.Now, Tokens: []string{"tok-R-secret"}, Life: time.Hour}
	db, err := openPostgres(dsn, entra.Deps{PlaintextOK: true, Credential: func(*entra.Auth) (azcore.TokenCredential, error) { return cred, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, ok := replConfigOf(db)
	if !ok {
		t.Fatal("no replication configuration for an Entra ID pool")
	}
	cfg, err := f(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("a replication connection with the token: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "IDENTIFY_SYSTEM").ReadAll(); err != nil {
		t.Fatalf("IDENTIFY_SYSTEM on the replication connection: %v", err)
	}
	if calls, _ := cred.Counts(); calls == 0 {
		t.Fatal("the replication connection did not ask the credential for a token")
	}
}

// TestReplConfigGoesWithItsPool: the replication configuration noted for a pool openPostgres
// opened is there while the pool is, and goes once the pool is closed and dropped.
func TestReplConfigGoesWithItsPool(t *testing.T) {
	db, err := openPostgres("postgres://u@127.0.0.1:1/shop?sslmode=disable", entra.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := replConfigOf(db); !ok {
		t.Fatal("no replication configuration for the pool")
	}
	key := weak.Make(db)
	db.Close()
	db = nil
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		if _, ok := replConfigs.Load(key); !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the replication configuration outlived its pool")
		}
		time.Sleep(10 * time.Millisecond) // polling, with a deadline: cleanups run after a collection
	}
}
