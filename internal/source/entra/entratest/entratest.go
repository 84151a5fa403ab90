// Package entratest holds the Entra ID sign-in scenarios that the PostgreSQL and MySQL drivers'
// tests run against their own servers and hooks (package entra), and the fake credential and
// clock they run with.
package entratest

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/entra"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Credential is an azcore.TokenCredential that behaves like azidentity's: it returns its
// cached token while that token is valid on its clock, and mints the next one (tokens[i],
// valid for life) once the cached one has expired. err, when set, fails every call.
type Credential struct {
	mu     sync.Mutex
	Now    func() time.Time
	Tokens []string
	Life   time.Duration
	Err    error

	calls    int // GetToken calls
	minted   int // tokens handed out fresh
	cached   azcore.AccessToken
	scopes   []string  // of the last call
	deadline time.Time // of the last call's context
	// Expired, when set, makes every token already expired (a broken credential).
	Expired bool
}

func (f *Credential) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.scopes = o.Scopes
	f.deadline, _ = ctx.Deadline()
	if f.Err != nil {
		return azcore.AccessToken{}, f.Err
	}
	now := f.Now()
	if f.cached.Token != "" && f.cached.ExpiresOn.After(now) {
		return f.cached, nil
	}
	if f.minted == len(f.Tokens) {
		return azcore.AccessToken{}, errors.New("fake credential: no more tokens")
	}
	exp := now.Add(f.Life)
	if f.Expired {
		exp = now.Add(-time.Second)
	}
	f.cached = azcore.AccessToken{Token: f.Tokens[f.minted], ExpiresOn: exp}
	f.minted++
	return f.cached, nil
}

// Counts says how often GetToken was called, and how many tokens it minted.
func (f *Credential) Counts() (calls, minted int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.minted
}

// Clock is a settable clock.
type Clock struct {
	mu sync.Mutex
	T  time.Time
}

// Now is the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.T }

// Add moves the clock on.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.T = c.T.Add(d)
}

// Server is a local server a test signs in to with tokens as passwords: a user of the test's
// own whose password is set to the token the fake credential hands out.
type Server struct {
	Open          func(dsn string, deps entra.Deps) (*sql.DB, error) // the driver's sign-in
	DSN           string                                             // the user's, with fedauth and azure_client_id, no TLS
	PreferTLS     string                                             // the same, with TLS preferred
	PreferTLSWhat string                                             // how PreferTLS asks for it, for messages
	Refused       string                                             // the server's error for a wrong password
	Whoami        func(ctx context.Context, c *sql.Conn) error       // checks a session is the user's
	SetPassword   func(pw string)                                    // the password the server takes from now on
}

// SignIn: a wrong token is refused without showing it; new connections sign in with
// the credential's token, the cached one while it lasts and a fresh one after it expired, and a
// session signed in before stays usable; with TLS preferred, the token never goes in clear
// (these servers have no TLS, so the connection fails); a credential failure fails the
// connection, naming fedauth and not a token.
func SignIn(t *testing.T, ctx context.Context, s Server) {
	t.Helper()
	clk := &Clock{T: time.Now()}
	open := func(cred *Credential) *sql.DB {
		t.Helper()
		db, err := s.Open(s.DSN, entra.Deps{
			Credential: func(e *entra.Auth) (azcore.TokenCredential, error) {
				if e.Identity.ClientID != "11111111-2222-3333-4444-555555555555" {
					t.Errorf("identity %+v", e.Identity)
				}
				return cred, nil
			},
			Now:         clk.Now,
			PlaintextOK: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	wrong := open(&Credential{Now: clk.Now, Tokens: []string{"tok-wrong-secret"}, Life: time.Hour})
	err := wrong.PingContext(ctx)
	if err == nil || !strings.Contains(err.Error(), s.Refused) {
		t.Fatalf("a wrong token was let in: %v", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("the connection error shows the token: %v", err)
	}

	cred := &Credential{Now: clk.Now, Tokens: []string{"tok-A-secret", "tok-B-secret"}, Life: time.Hour}
	db := open(cred)
	conn := func() *sql.Conn {
		t.Helper()
		c, err := db.Conn(ctx) // a new connection: the ones before are held
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		if err := s.Whoami(ctx, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := conn()
	conn() // token A still valid: the credential's cache hands it out again
	if calls, minted := cred.Counts(); calls != 2 || minted != 1 {
		t.Fatalf("two connections: %d token calls, %d minted; want 2, 1", calls, minted)
	}

	// Token A expires; the server takes only B from now on. A new connection gets B.
	s.SetPassword("tok-B-secret")
	clk.Add(61 * time.Minute)
	conn()
	if calls, minted := cred.Counts(); calls != 3 || minted != 2 {
		t.Fatalf("after expiry: %d token calls, %d minted; want 3, 2", calls, minted)
	}
	// A session signed in with A stays usable: the server checks the token at sign-in only.
	var one int
	if err := first.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Errorf("the first session after its token expired: %v", err)
	}

	// Without the test seam, TLS preferred keeps TLS and drops its plaintext fallback: the
	// connection fails where the plain driver would have gone on in clear with the token.
	tlsOnly, err := s.Open(s.PreferTLS, entra.Deps{
		Credential: func(*entra.Auth) (azcore.TokenCredential, error) { return cred, nil },
		Now:        clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tlsOnly.Close()
	if err := tlsOnly.PingContext(ctx); err == nil || !strings.Contains(err.Error(), "TLS") || strings.Contains(err.Error(), "secret") {
		t.Errorf("%s with fedauth against a server without TLS: %v", s.PreferTLSWhat, err)
	}

	// A credential failure fails the connection, naming fedauth and not a token.
	failing := open(&Credential{Now: clk.Now, Err: errors.New("IMDS unreachable")})
	err = failing.PingContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "fedauth=ActiveDirectoryManagedIdentity") || strings.Contains(err.Error(), "secret") {
		t.Errorf("credential failure: %v", err)
	}
}

// TokenHook: a driver's BeforeConnect hook sets each new connection's password to a token from
// the credential, for the right scope and within entra.TokenTimeout: the cached one while it
// lasts, a fresh one after it expired. A credential that fails, or returns a dead token: the
// error names the driver, fedauth and the identity, never a token, and no password is set.
// connect applies the hook, with the tokens given, to a configuration whose password is the
// DSN's, and returns the password it leaves.
func TokenHook(t *testing.T, driver string, connect func(token func(context.Context) (string, error)) (string, error)) {
	clk := &Clock{T: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	cred := &Credential{Now: clk.Now, Tokens: []string{"tok-A-secret", "tok-B-secret"}, Life: time.Hour}
	e := &entra.Auth{Driver: driver, FedAuth: entra.ManagedIdentity, Identity: azconn.Identity{Credential: "managedidentity", ClientID: "cid-1"}}

	if pw, err := connect(e.Tokens(cred, clk.Now)); err != nil || pw != "tok-A-secret" {
		t.Fatalf("first connection: password %q, %v", pw, err)
	}
	if len(cred.scopes) != 1 || cred.scopes[0] != entra.Scope || entra.Scope != "https://ossrdbms-aad.database.windows.net/.default" {
		t.Errorf("scopes %v", cred.scopes)
	}
	if cred.deadline.IsZero() || time.Until(cred.deadline) > entra.TokenTimeout {
		t.Errorf("the token request is not bounded: deadline %v", cred.deadline)
	}
	clk.Add(59 * time.Minute)
	if pw, err := connect(e.Tokens(cred, clk.Now)); err != nil || pw != "tok-A-secret" {
		t.Fatalf("second connection, token still valid: %q, %v", pw, err)
	}
	clk.Add(2 * time.Minute) // tok-A has expired
	if pw, err := connect(e.Tokens(cred, clk.Now)); err != nil || pw != "tok-B-secret" {
		t.Fatalf("connection after expiry: %q, %v", pw, err)
	}
	if calls, minted := cred.Counts(); calls != 3 || minted != 2 {
		t.Errorf("every connection asks the credential: %d calls, %d tokens minted; want 3, 2", calls, minted)
	}

	broken := &Credential{Now: clk.Now, Tokens: []string{"tok-C-secret"}, Life: time.Hour, Expired: true}
	pw, expired := connect(e.Tokens(broken, clk.Now))
	if !errors.Is(expired, entra.ErrExpiredToken) || pw != "" {
		t.Fatalf("expired token: %v (password %q)", expired, pw)
	}
	failing := &Credential{Now: clk.Now, Err: errors.New("ManagedIdentityCredential: no identity endpoint")}
	_, err := connect(e.Tokens(failing, clk.Now))
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

// SameSource: a DSN with the Entra keys (plain, whose password is hunter2, and then
// fedauth=ActiveDirectoryManagedIdentity and azure_client_id as further parameters) has the same
// location and fingerprint as without them, and redaction hides the password but keeps the keys.
func SameSource(t *testing.T, drv driver.Driver, plain string) {
	t.Helper()
	def := sourcedef.Definition{Table: sourcedef.Table{Name: "orders"}, Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "id"}, PK: []string{"id"}}
	withEntra := plain + "&fedauth=ActiveDirectoryManagedIdentity&azure_client_id=11111111-2222-3333-4444-555555555555"
	a, err := drv.Location(plain)
	if err != nil {
		t.Fatal(err)
	}
	b, err := drv.Location(withEntra)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || source.Fingerprint(drv.Name(), a, def) != source.Fingerprint(drv.Name(), b, def) {
		t.Errorf("fedauth changed the location or the fingerprint: %+v vs %+v", a, b)
	}
	got := redact.DSN(withEntra)
	host, _, _ := strings.Cut(a.Server, ":")
	if strings.Contains(got, "hunter2") || !strings.Contains(got, "fedauth=ActiveDirectoryManagedIdentity") ||
		!strings.Contains(got, "azure_client_id=11111111-2222-3333-4444-555555555555") || !strings.Contains(got, host) {
		t.Errorf("redacted: %s", got)
	}
}

// RefusesPlaintext: Open, the path every poller takes, refuses a DSN with fedauth whose
// connection would go without TLS, before connecting, naming what says so (mentions) and the
// poller, and keeping the DSN's password (hunter2) hidden.
func RefusesPlaintext(t *testing.T, drv driver.Driver, dsn, mentions string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := source.Open(ctx, driver.Drivers{drv}, source.Config{Poller: "orders", Driver: drv.Name(), DSN: dsn,
		Definition: sourcedef.Definition{Table: sourcedef.Table{Name: "orders"}, Cursor: sourcedef.Cursor{Kind: state.KindInteger, Column: "id"}, PK: []string{"id"}}})
	if !errors.Is(err, source.ErrConnect) || !strings.Contains(err.Error(), mentions) || !strings.Contains(err.Error(), `poller "orders"`) ||
		strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Open: %v", err)
	}
}
