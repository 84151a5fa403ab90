// Package azconn resolves an Azure service connection from app settings the way Azure Functions
// bindings do. A connection name X is either the setting X (a connection string) or, identity
// based, X__<endpoint setting> (X__blobServiceUri, X__queueServiceUri,
// X__fullyQualifiedNamespace, X__topicEndpointUri...) with X__credential=managedidentity and
// X__clientId picking the managed identity. The state store and every sink use it, so the rule
// is written once.
//
// Nothing here logs; String shows a connection without its secrets (redact.ConnectionString).
package azconn

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// Retry bounds an Azure SDK client's retries (zero fields take these defaults: 3 retries, 200 ms
// to 2 s apart, each try at most tryTimeout), so that a service that is down fails the operation
// within the tick instead of holding the lease for minutes.
func Retry(r policy.RetryOptions, tryTimeout time.Duration) policy.RetryOptions {
	if r.MaxRetries == 0 {
		r.MaxRetries = 3
	}
	if r.TryTimeout == 0 {
		r.TryTimeout = tryTimeout
	}
	if r.RetryDelay == 0 {
		r.RetryDelay = 200 * time.Millisecond
	}
	if r.MaxRetryDelay == 0 {
		r.MaxRetryDelay = 2 * time.Second
	}
	return r
}

// ErrNotSet: neither the connection string nor the endpoint setting is set.
var ErrNotSet = errors.New("connection not set")

// Identity is how an identity-based connection authenticates: X__clientId picks a user-assigned
// managed identity, X__credential=managedidentity the system-assigned one, neither
// DefaultAzureCredential (a developer's az login, environment variables...).
type Identity struct {
	ClientID   string
	Credential string // "" or "managedidentity"
}

// ReadIdentity reads X__clientId and X__credential. An unknown credential is an error naming
// the setting.
func ReadIdentity(getenv func(string) string, prefix string) (Identity, error) {
	id := Identity{
		ClientID:   strings.TrimSpace(getenv(prefix + "__clientId")),
		Credential: strings.ToLower(strings.TrimSpace(getenv(prefix + "__credential"))),
	}
	if id.Credential != "" && id.Credential != "managedidentity" {
		return Identity{}, fmt.Errorf("%s__credential: %q is not supported (use managedidentity, or leave it unset)", prefix, id.Credential)
	}
	return id, nil
}

// TokenCredential creates the credential; setting names the connection in its error.
func (id Identity) TokenCredential(setting string) (azcore.TokenCredential, error) {
	var (
		cred azcore.TokenCredential
		err  error
	)
	switch {
	case id.ClientID != "":
		cred, err = azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{
			ID: azidentity.ClientID(id.ClientID),
		})
	case id.Credential == "managedidentity":
		cred, err = azidentity.NewManagedIdentityCredential(nil)
	default:
		cred, err = azidentity.NewDefaultAzureCredential(nil)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: cannot create a credential: %w", setting, err)
	}
	return cred, nil
}

// String says how the identity authenticates, for logs.
func (id Identity) String() string {
	switch {
	case id.ClientID != "":
		return "managed identity " + id.ClientID
	case id.Credential == "managedidentity":
		return "system-assigned managed identity"
	}
	return "DefaultAzureCredential"
}

// Conn is a resolved connection: exactly one of ConnectionString and Endpoint is set.
type Conn struct {
	// Setting is the app setting it came from (X or X__<endpoint setting>), for messages.
	Setting          string
	ConnectionString string
	Endpoint         string // identity based: the endpoint setting's value
	Identity         Identity
}

// Resolve reads the connection named prefix: the setting prefix (a connection string), else
// prefix__<endpointSetting> with its identity settings. example shows a valid endpoint in the
// error when neither is set. An endpoint must be an https URL (or, for a local emulator,
// http://127.0.0.1 or localhost), or, when host is true, a host name such as
// ns.servicebus.windows.net.
func Resolve(getenv func(string) string, prefix, endpointSetting, example string, host bool) (Conn, error) {
	if prefix == "" {
		return Conn{}, errors.New("no connection name")
	}
	if cs := strings.TrimSpace(getenv(prefix)); cs != "" {
		return Conn{Setting: prefix, ConnectionString: cs}, nil
	}
	name := prefix + "__" + endpointSetting
	e := strings.TrimSpace(getenv(name))
	if e == "" {
		return Conn{}, fmt.Errorf("%w: set %s (a connection string) or %s (identity based, e.g. %s)", ErrNotSet, prefix, name, example)
	}
	id, err := ReadIdentity(getenv, prefix)
	if err != nil {
		return Conn{}, err
	}
	if host {
		if u, err := url.Parse(e); err == nil && u.Host != "" { // a URL given where a host is asked
			e = u.Host
		}
		if strings.ContainsAny(e, "/:;= ") {
			return Conn{}, fmt.Errorf("%s: %q is not a host name like %s", name, e, example)
		}
	} else if err := CheckServiceURL(e, example); err != nil {
		return Conn{}, fmt.Errorf("%s: %w", name, err)
	} else {
		e = strings.TrimRight(e, "/")
	}
	return Conn{Setting: name, Endpoint: e, Identity: id}, nil
}

// CheckServiceURL says why raw is not an endpoint tokens may be sent to: it must be an absolute
// https URL, or http to a local emulator (127.0.0.1, localhost).
func CheckServiceURL(raw, example string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL like %s", raw, example)
	}
	local := u.Hostname() == "127.0.0.1" || u.Hostname() == "localhost"
	if u.Scheme != "https" && !(u.Scheme == "http" && local) {
		return fmt.Errorf("%q must use https (tokens are never sent over plain http except to a local emulator)", raw)
	}
	return nil
}

// String describes the connection without its secrets.
func (c Conn) String() string {
	if c.ConnectionString != "" {
		return c.Setting + ": connection string " + redact.ConnectionString(c.ConnectionString)
	}
	return c.Setting + ": " + c.Endpoint + " with " + c.Identity.String()
}

// ParseConnectionString splits key=value;... into a map of lower-case keys.
func ParseConnectionString(cs string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(cs, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		out[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	return out
}
