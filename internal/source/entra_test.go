package source

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
)

// entraServer is a local server a test signs in to with tokens as passwords: a user of the
// test's own whose password is set to the token the fake credential hands out.
type entraServer struct {
	open          func(dsn string, deps entraDeps) (*sql.DB, error) // openPostgres or openMySQL
	dsn           string                                            // the user's, with fedauth and azure_client_id, no TLS
	preferTLS     string                                            // the same, with TLS preferred
	preferTLSWhat string                                            // how preferTLS asks for it, for messages
	refused       string                                            // the server's error for a wrong password
	whoami        func(ctx context.Context, c *sql.Conn) error      // checks a session is the user's
	setPassword   func(pw string)                                   // the password the server takes from now on
}

// testEntraSignIn: a wrong token is refused without showing it; new connections sign in with
// the credential's token, the cached one while it lasts and a fresh one after it expired, and a
// session signed in before stays usable; with TLS preferred, the token never goes in clear
// (these servers have no TLS, so the connection fails); a credential failure fails the
// connection, naming fedauth and not a token.
func testEntraSignIn(t *testing.T, ctx context.Context, s entraServer) {
	t.Helper()
	clk := &fakeClock{t: time.Now()}
	open := func(cred *fakeCredential) *sql.DB {
		t.Helper()
		db, err := s.open(s.dsn, entraDeps{
			credential: func(e *entraAuth) (azcore.TokenCredential, error) {
				if e.identity.ClientID != "11111111-2222-3333-4444-555555555555" {
					t.Errorf("identity %+v", e.identity)
				}
				return cred, nil
			},
			now:         clk.now,
			plaintextOK: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	wrong := open(&fakeCredential{now: clk.now, tokens: []string{"tok-wrong-secret"}, life: time.Hour})
	err := wrong.PingContext(ctx)
	if err == nil || !strings.Contains(err.Error(), s.refused) {
		t.Fatalf("a wrong token was let in: %v", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("the connection error shows the token: %v", err)
	}

	cred := &fakeCredential{now: clk.now, tokens: []string{"tok-A-secret", "tok-B-secret"}, life: time.Hour}
	db := open(cred)
	conn := func() *sql.Conn {
		t.Helper()
		c, err := db.Conn(ctx) // a new connection: the ones before are held
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		if err := s.whoami(ctx, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := conn()
	conn() // token A still valid: the credential's cache hands it out again
	if calls, minted := cred.counts(); calls != 2 || minted != 1 {
		t.Fatalf("two connections: %d token calls, %d minted; want 2, 1", calls, minted)
	}

	// Token A expires; the server takes only B from now on. A new connection gets B.
	s.setPassword("tok-B-secret")
	clk.add(61 * time.Minute)
	conn()
	if calls, minted := cred.counts(); calls != 3 || minted != 2 {
		t.Fatalf("after expiry: %d token calls, %d minted; want 3, 2", calls, minted)
	}
	// A session signed in with A stays usable: the server checks the token at sign-in only.
	var one int
	if err := first.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Errorf("the first session after its token expired: %v", err)
	}

	// Without the test seam, TLS preferred keeps TLS and drops its plaintext fallback: the
	// connection fails where the plain driver would have gone on in clear with the token.
	tlsOnly, err := s.open(s.preferTLS, entraDeps{
		credential: func(*entraAuth) (azcore.TokenCredential, error) { return cred, nil },
		now:        clk.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tlsOnly.Close()
	if err := tlsOnly.PingContext(ctx); err == nil || !strings.Contains(err.Error(), "TLS") || strings.Contains(err.Error(), "secret") {
		t.Errorf("%s with fedauth against a server without TLS: %v", s.preferTLSWhat, err)
	}

	// A credential failure fails the connection, naming fedauth and not a token.
	failing := open(&fakeCredential{now: clk.now, err: errors.New("IMDS unreachable")})
	err = failing.PingContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "fedauth=ActiveDirectoryManagedIdentity") || strings.Contains(err.Error(), "secret") {
		t.Errorf("credential failure: %v", err)
	}
}

// testTokenHook: a driver's BeforeConnect hook sets each new connection's password to a token
// from the credential, for the right scope and within entraTokenTimeout: the cached one while it
// lasts, a fresh one after it expired. A credential that fails, or returns a dead token: the
// error names the driver, fedauth and the identity, never a token, and no password is set.
// connect applies the hook, with the tokens given, to a configuration whose password is the
// DSN's, and returns the password it leaves.
func testTokenHook(t *testing.T, driver string, connect func(token func(context.Context) (string, error)) (string, error)) {
	clk := &fakeClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	cred := &fakeCredential{now: clk.now, tokens: []string{"tok-A-secret", "tok-B-secret"}, life: time.Hour}
	e := &entraAuth{driver: driver, fedauth: fedAuthManagedIdentity, identity: azconn.Identity{Credential: "managedidentity", ClientID: "cid-1"}}

	if pw, err := connect(e.tokens(cred, clk.now)); err != nil || pw != "tok-A-secret" {
		t.Fatalf("first connection: password %q, %v", pw, err)
	}
	for _, scope := range []string{PostgresEntraScope, MySQLEntraScope} {
		if len(cred.scopes) != 1 || cred.scopes[0] != scope || scope != "https://ossrdbms-aad.database.windows.net/.default" {
			t.Errorf("scopes %v", cred.scopes)
		}
	}
	if cred.deadline.IsZero() || time.Until(cred.deadline) > entraTokenTimeout {
		t.Errorf("the token request is not bounded: deadline %v", cred.deadline)
	}
	clk.add(59 * time.Minute)
	if pw, err := connect(e.tokens(cred, clk.now)); err != nil || pw != "tok-A-secret" {
		t.Fatalf("second connection, token still valid: %q, %v", pw, err)
	}
	clk.add(2 * time.Minute) // tok-A has expired
	if pw, err := connect(e.tokens(cred, clk.now)); err != nil || pw != "tok-B-secret" {
		t.Fatalf("connection after expiry: %q, %v", pw, err)
	}
	if calls, minted := cred.counts(); calls != 3 || minted != 2 {
		t.Errorf("every connection asks the credential: %d calls, %d tokens minted; want 3, 2", calls, minted)
	}

	broken := &fakeCredential{now: clk.now, tokens: []string{"tok-C-secret"}, life: time.Hour, expired: true}
	pw, expired := connect(e.tokens(broken, clk.now))
	if !errors.Is(expired, errExpiredToken) || pw != "" {
		t.Fatalf("expired token: %v (password %q)", expired, pw)
	}
	failing := &fakeCredential{now: clk.now, err: errors.New("ManagedIdentityCredential: no identity endpoint")}
	_, err := connect(e.tokens(failing, clk.now))
	if err == nil || !strings.Contains(err.Error(), "no identity endpoint") {
		t.Fatalf("credential failure: %v", err)
	}
	for _, err := range []error{err, expired} {
		msg := err.Error()
		if strings.Contains(msg, "secret") || !strings.Contains(msg, driver) ||
			!strings.Contains(msg, "fedauth=ActiveDirectoryManagedIdentity") || !strings.Contains(msg, "cid-1") {
			t.Errorf("error: %s", msg)
		}
	}
}
