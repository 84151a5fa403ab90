package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	gomysql "github.com/go-sql-driver/mysql"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/source/entra"
	"github.com/pseudotrigger/pseudotrigger/internal/source/entra/entratest"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

const mysqlEntraHost = "id-app:hunter2@tcp(srv.mysql.database.azure.com:3306)/shop"

func TestMySQLEntraParseDSN(t *testing.T) {
	for _, c := range []struct {
		dsn  string
		want *azconn.Identity // nil: not Entra
	}{
		{mysqlEntraHost + "?tls=true", nil},
		{mysqlEntraHost, nil},
		{mysqlEntraHost + "?tls=true&fedauth=ActiveDirectoryManagedIdentity&azure_client_id=11111111-2222-3333-4444-555555555555",
			&azconn.Identity{Credential: "managedidentity", ClientID: "11111111-2222-3333-4444-555555555555"}},
		{mysqlEntraHost + "?tls=TRUE&FedAuth=activedirectorymsi", &azconn.Identity{Credential: "managedidentity"}},
		{"me@contoso.com@tcp(srv.mysql.database.azure.com)/shop?tls=true&fedauth=ActiveDirectoryDefault", &azconn.Identity{}},
		// allowFallbackToPlaintext loses its plaintext fallback: checked below.
		{mysqlEntraHost + "?tls=true&allowFallbackToPlaintext=true&fedauth=ActiveDirectoryDefault", &azconn.Identity{}},
		// Without fedauth, the modes that do not check the certificate stay the user's choice.
		{mysqlEntraHost + "?tls=skip-verify", nil},
		{mysqlEntraHost + "?tls=preferred", nil},
	} {
		cfg, err := mysqlConfig(c.dsn)
		if err != nil {
			t.Fatalf("%s: %v", c.dsn, err)
		}
		e, err := takeMySQLEntra(cfg, false)
		if err != nil {
			t.Errorf("%s: %v", c.dsn, err)
			continue
		}
		if (e == nil) != (c.want == nil) || (e != nil && e.Identity != *c.want) {
			t.Errorf("%s: entra %+v, want %+v", c.dsn, e, c.want)
		}
		for k := range cfg.Params {
			if strings.EqualFold(k, entra.FedAuthKey) || strings.EqualFold(k, entra.ClientIDKey) {
				t.Errorf("%s: %s would be sent to the server as SET %s", c.dsn, k, k)
			}
		}
		if cfg.Params["time_zone"] != "'+00:00'" || cfg.ParseTime || !cfg.InterpolateParams {
			t.Errorf("%s: the Driver's settings are lost: %+v", c.dsn, cfg)
		}
		if e == nil {
			continue
		}
		if cfg.TLS == nil || cfg.AllowFallbackToPlaintext || cfg.TLS.InsecureSkipVerify || cfg.TLS.ServerName != "srv.mysql.database.azure.com" {
			t.Errorf("%s: the token could go in clear or to another server: TLS %+v, fallback %v", c.dsn, cfg.TLS, cfg.AllowFallbackToPlaintext)
		}
		if cfg.User == "" || strings.Contains(cfg.User, "tcp") {
			t.Errorf("%s: user %q", c.dsn, cfg.User)
		}
	}
}

func TestMySQLEntraParseDSNErrors(t *testing.T) {
	for dsn, names := range map[string][]string{
		mysqlEntraHost + "?fedauth=ActiveDirectoryManagedIdentity":   {"TLS", "fedauth=ActiveDirectoryManagedIdentity", "tls=true"},
		mysqlEntraHost + "?tls=false&fedauth=ActiveDirectoryDefault": {"TLS", `tls="false"`, "fedauth=ActiveDirectoryDefault"},
		// go-sql-driver maps both to InsecureSkipVerify: the token would go to any server.
		mysqlEntraHost + "?tls=skip-verify&fedauth=ActiveDirectoryManagedIdentity":           {"certificate", `tls="skip-verify"`, "fedauth=ActiveDirectoryManagedIdentity", "use tls=true"},
		mysqlEntraHost + "?tls=Preferred&fedauth=ActiveDirectoryDefault":                     {"certificate", `tls="preferred"`, "fedauth=ActiveDirectoryDefault", "use tls=true"},
		mysqlEntraHost + "?tls=true&fedauth=ActiveDirectoryPassword":                         {`fedauth="ActiveDirectoryPassword"`, "ActiveDirectoryManagedIdentity", "ActiveDirectoryDefault"},
		mysqlEntraHost + "?tls=true&azure_client_id=abc":                                     {"azure_client_id", "fedauth=ActiveDirectoryManagedIdentity"},
		mysqlEntraHost + "?tls=true&fedauth=ActiveDirectoryDefault&azure_client_id=abc":      {"azure_client_id", "fedauth=ActiveDirectoryDefault"},
		mysqlEntraHost + "?tls=true&fedauth=ActiveDirectoryManagedIdentity&azure_client_id=": {"azure_client_id", "empty"},
		mysqlEntraHost + "?tls=true&fedauth=x&FEDAUTH=ActiveDirectoryMSI":                    {"fedauth", "twice"},
		"tcp(srv.mysql.database.azure.com:3306)/shop?tls=true&fedauth=ActiveDirectoryMSI":    {"no user", "CREATE AADUSER"},
	} {
		cfg, err := mysqlConfig(dsn)
		if err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		_, err = takeMySQLEntra(cfg, false)
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
	cfg, _ := mysqlConfig(mysqlEntraHost + "?fedauth=ActiveDirectoryDefault")
	if e, err := takeMySQLEntra(cfg, true); err != nil || e == nil {
		t.Errorf("plaintextOK: %v %v", e, err)
	}
}

// The Entra keys change neither the fingerprint nor what redaction keeps; a password in the DSN
// is still redacted.
func TestMySQLEntraFingerprintAndRedaction(t *testing.T) {
	entratest.SameSource(t, Driver{}, mysqlEntraHost+"?tls=true")
	// A UPN as the user, with a password that holds an @: the password goes, the user stays.
	got := redact.DSN("me@contoso.com:p@ss:w0rd@tcp(srv.mysql.database.azure.com:3306)/shop?tls=true&fedauth=ActiveDirectoryDefault")
	if strings.Contains(got, "p@ss") || strings.Contains(got, "w0rd") || !strings.Contains(got, "me@contoso.com") {
		t.Errorf("redacted: %s", got)
	}
}

func TestMySQLEntraTokenHook(t *testing.T) {
	entratest.TokenHook(t, "mysql", func(token func(context.Context) (string, error)) (string, error) {
		cfg := gomysql.NewConfig()
		cfg.Passwd = "from-the-dsn"
		err := mysqlTokenHook(token)(context.Background(), cfg)
		return cfg.Passwd, err
	})
}

// Open, the path every poller takes, refuses plaintext with Entra before connecting, naming
// TLS; the password in the DSN stays hidden.
func TestMySQLEntraOpenRefusesPlaintext(t *testing.T) {
	entratest.RefusesPlaintext(t, Driver{}, "id-app:hunter2@tcp(127.0.0.1:1)/shop?fedauth=ActiveDirectoryManagedIdentity", "tls=true")
}

// TestMySQLEntraServer signs in to the real local MariaDB (or MySQL) with tokens as passwords: a
// user of its own whose password is set to the token the fake credential hands out. The local
// server has no TLS and its users sign in with mysql_native_password, so the test seam lets the
// token through in the clear; Azure's plugin asks for mysql_clear_password over TLS instead.
func TestMySQLEntraServer(t *testing.T) {
	adminDSN := testenv.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := sql.Open("mysql", adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	acfg, err := gomysql.ParseDSN(adminDSN)
	if err != nil {
		t.Fatal(err)
	}

	user := fmt.Sprintf("pt_entra_%d", time.Now().UnixNano()%1_000_000_000)
	account := "'" + user + "'@'%'"
	setPassword := func(pw string) {
		t.Helper()
		if _, err := admin.ExecContext(ctx, "ALTER USER "+account+" IDENTIFIED BY '"+pw+"'"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.ExecContext(ctx, "CREATE USER "+account+" IDENTIFIED BY 'tok-A-secret'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec("DROP USER IF EXISTS " + account) })
	if _, err := admin.ExecContext(ctx, "GRANT SELECT ON `"+acfg.DBName+"`.* TO "+account); err != nil {
		t.Fatal(err)
	}

	ucfg := acfg.Clone()
	ucfg.User, ucfg.Passwd = user, ""
	ucfg.Params = map[string]string{"fedauth": entra.ManagedIdentity, "azure_client_id": "11111111-2222-3333-4444-555555555555"}
	ucfg.Timeout = 10 * time.Second
	dsn := ucfg.FormatDSN() // no tls: the local server has none

	// Without taking them out, the driver would send the Entra keys to the server as SET
	// statements, which it refuses.
	withPassword := ucfg.Clone()
	withPassword.Passwd = "tok-A-secret"
	if raw, err := sql.Open("mysql", withPassword.FormatDSN()); err == nil {
		err = raw.PingContext(ctx)
		raw.Close()
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "unknown system variable") {
			t.Errorf("the server took fedauth as a variable: %v", err)
		}
	}

	// tls=preferred is refused with fedauth (it does not check the certificate); tls=true against
	// this server without TLS fails the connection, never sending the token in clear.
	tls := ucfg.Clone()
	tls.TLSConfig = "true"
	entratest.SignIn(t, ctx, entratest.Server{
		Open: openMySQL, DSN: dsn, PreferTLS: tls.FormatDSN(), PreferTLSWhat: "tls=true", Refused: "Access denied",
		Whoami: func(ctx context.Context, c *sql.Conn) error {
			var who, tz string
			if err := c.QueryRowContext(ctx, "SELECT SUBSTRING_INDEX(CURRENT_USER(), '@', 1), @@session.time_zone").Scan(&who, &tz); err != nil || who != user || tz != "+00:00" {
				return fmt.Errorf("current_user %q, time_zone %q, %v", who, tz, err)
			}
			return nil
		},
		SetPassword: setPassword,
	})
}

// TestMySQLEntraClearTextTLS runs the path Azure Database for MySQL takes, against a server set up
// for it by hand: MYSQL_ENTRA_TEST_DSN names a user whose server plugin asks for the password in
// clear text (mysql_clear_password, as Azure's Entra plugin does; on MariaDB, a user IDENTIFIED
// VIA pam with pam_use_cleartext_plugin=ON) on a server with TLS, with fedauth and tls in the DSN;
// MYSQL_ENTRA_TEST_TOKEN is the password that server takes, handed out by a fake credential. The
// token goes over TLS, in clear text, which the plain driver refuses without
// allowCleartextPasswords. Skipped unless both are set.
func TestMySQLEntraClearTextTLS(t *testing.T) {
	dsn, token := os.Getenv("MYSQL_ENTRA_TEST_DSN"), os.Getenv("MYSQL_ENTRA_TEST_TOKEN")
	if dsn == "" || token == "" {
		t.Skip("MYSQL_ENTRA_TEST_DSN and MYSQL_ENTRA_TEST_TOKEN are not set: this test needs a server with TLS and a clear-text password user")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clk := &entratest.Clock{T: time.Now()}
	cred := &entratest.Credential{Now: clk.Now, Tokens: []string{token}, Life: time.Hour}
	db, err := openMySQL(dsn, entra.Deps{
		Credential: func(*entra.Auth) (azcore.TokenCredential, error) { return cred, nil },
		Now:        clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatalf("signing in with the token: %v", err)
	}
	defer c.Close()
	var who, name, tlsVersion string
	if err := c.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&who); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_version'").Scan(&name, &tlsVersion); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tlsVersion, "TLS") {
		t.Errorf("signed in as %s without TLS (Ssl_version %q)", who, tlsVersion)
	}
	if calls, _ := cred.Counts(); calls == 0 {
		t.Error("the credential was not asked")
	}

	// The plain driver, with the token as the password and no allowCleartextPasswords, refuses
	// the server's clear-text request: the reason openMySQL allows it for fedauth DSNs.
	cfg, err := mysqlConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	delete(cfg.Params, entra.FedAuthKey)
	delete(cfg.Params, entra.ClientIDKey)
	cfg.Passwd = token
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	plain := sql.OpenDB(conn)
	defer plain.Close()
	if err := plain.PingContext(ctx); !errors.Is(err, gomysql.ErrCleartextPassword) {
		t.Errorf("the plain driver against a clear-text user: %v, want %v", err, gomysql.ErrCleartextPassword)
	}
}
