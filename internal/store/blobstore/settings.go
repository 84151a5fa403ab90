package blobstore

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// DevelopmentConnectionString is Azurite's public, well-known account on its default port. azblob
// rejects the shorthand UseDevelopmentStorage=true, so it is mapped to this. The endpoint is an IP
// address, which makes the SDK use path-style URLs as Azurite needs.
const DevelopmentConnectionString = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;" +
	"AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;" +
	"BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"

// DefaultContainer is the state container unless STATE_CONTAINER says otherwise.
const DefaultContainer = "db-state"

// Settings says where the state store is and how to authenticate. Exactly one of
// ConnectionString and ServiceURL is set.
type Settings struct {
	// Setting names the app setting the account came from (for messages), e.g. "StateStorage".
	Setting string
	// ConnectionString is an account connection string (UseDevelopmentStorage=true already mapped).
	ConnectionString string
	// ServiceURL is the blob endpoint for identity-based access.
	ServiceURL string
	// ClientID picks a user-assigned managed identity.
	ClientID string
	// Credential is the __credential setting: "managedidentity" forces managed identity.
	Credential string
	// Container is the state container.
	Container string
}

// ErrNotConfigured: no setting names a state account.
var ErrNotConfigured = errors.New("no state storage configured: set StateStorage (a connection string, " +
	"or UseDevelopmentStorage=true for Azurite) or StateStorage__blobServiceUri (identity-based), " +
	"or AzureWebJobsStorage / AzureWebJobsStorage__blobServiceUri / AzureWebJobsStorage__accountName")

// SettingsFromEnv resolves the state account from app settings, in this order: StateStorage,
// StateStorage__blobServiceUri, StateStorage__accountName, then the same three under
// AzureWebJobsStorage. STATE_CONTAINER names the container (default db-state). Errors name the
// setting at fault.
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	container := strings.TrimSpace(getenv("STATE_CONTAINER"))
	if container == "" {
		container = DefaultContainer
	}
	if err := validContainer(container); err != nil {
		return Settings{}, fmt.Errorf("STATE_CONTAINER: %w", err)
	}
	for _, prefix := range []string{"StateStorage", "AzureWebJobsStorage"} {
		s, ok, err := fromPrefix(getenv, prefix)
		if err != nil {
			return Settings{}, err
		}
		if ok {
			s.Container = container
			return s, nil
		}
	}
	return Settings{}, ErrNotConfigured
}

func fromPrefix(getenv func(string) string, prefix string) (Settings, bool, error) {
	if cs := strings.TrimSpace(getenv(prefix)); cs != "" {
		mapped, err := mapConnectionString(cs)
		if err != nil {
			return Settings{}, false, fmt.Errorf("%s: %w", prefix, err)
		}
		return Settings{Setting: prefix, ConnectionString: mapped}, true, nil
	}
	s := Settings{
		ClientID:   strings.TrimSpace(getenv(prefix + "__clientId")),
		Credential: strings.ToLower(strings.TrimSpace(getenv(prefix + "__credential"))),
	}
	if s.Credential != "" && s.Credential != "managedidentity" {
		return Settings{}, false, fmt.Errorf("%s__credential: %q is not supported (use managedidentity, or leave it unset)", prefix, s.Credential)
	}
	if u := strings.TrimSpace(getenv(prefix + "__blobServiceUri")); u != "" {
		name := prefix + "__blobServiceUri"
		if err := validServiceURL(u); err != nil {
			return Settings{}, false, fmt.Errorf("%s: %w", name, err)
		}
		s.Setting, s.ServiceURL = name, strings.TrimRight(u, "/")
		return s, true, nil
	}
	if a := strings.TrimSpace(getenv(prefix + "__accountName")); a != "" {
		name := prefix + "__accountName"
		if !accountName.MatchString(a) {
			return Settings{}, false, fmt.Errorf("%s: %q is not a storage account name (3-24 lower-case letters and digits)", name, a)
		}
		s.Setting, s.ServiceURL = name, "https://"+a+".blob.core.windows.net"
		return s, true, nil
	}
	return Settings{}, false, nil
}

var (
	accountName   = regexp.MustCompile(`^[a-z0-9]{3,24}$`)
	containerName = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9]|-[a-z0-9]){2,62}$`)
	endpointHost  = regexp.MustCompile(`^[A-Za-z0-9.-]+(:[0-9]+)?$`)
)

func validContainer(name string) error {
	if len(name) > 63 || !containerName.MatchString(name) {
		return fmt.Errorf("%q is not a valid container name (3-63 lower-case letters, digits and single hyphens, starting and ending with a letter or digit)", name)
	}
	return nil
}

func validServiceURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL like https://ACCOUNT.blob.core.windows.net", raw)
	}
	local := u.Hostname() == "127.0.0.1" || u.Hostname() == "localhost"
	if u.Scheme != "https" && !(u.Scheme == "http" && local) {
		return fmt.Errorf("%q must use https (tokens are never sent over plain http except to a local emulator)", raw)
	}
	return nil
}

// mapConnectionString maps the development shorthand and checks the rest has an account.
func mapConnectionString(cs string) (string, error) {
	parts := parseConnectionString(cs)
	if strings.EqualFold(parts["usedevelopmentstorage"], "true") {
		return DevelopmentConnectionString, nil
	}
	if parts["accountname"] == "" && parts["blobendpoint"] == "" {
		return "", errors.New("the connection string names no AccountName or BlobEndpoint")
	}
	// Values are checked, never quoted: a missing ';' can put a key inside another value.
	if n := parts["accountname"]; n != "" && !accountName.MatchString(n) {
		return "", errors.New("the connection string's AccountName is not a storage account name (3-24 lower-case letters and digits; is a ';' missing?)")
	}
	if e := parts["blobendpoint"]; e != "" {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || !endpointHost.MatchString(u.Host) {
			return "", errors.New("the connection string's BlobEndpoint is not an http(s) URL (is a ';' missing?)")
		}
	}
	return cs, nil
}

func parseConnectionString(cs string) map[string]string {
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

// String describes the settings for logs and messages, with every secret left out.
func (s Settings) String() string {
	if s.ConnectionString != "" {
		p := parseConnectionString(s.ConnectionString)
		endpoint := p["blobendpoint"]
		if endpoint == "" {
			suffix := p["endpointsuffix"]
			if suffix == "" {
				suffix = "core.windows.net"
			}
			proto := p["defaultendpointsprotocol"]
			if proto == "" {
				proto = "https"
			}
			endpoint = proto + "://" + p["accountname"] + ".blob." + suffix
		}
		auth := "account key"
		if p["sharedaccesssignature"] != "" {
			auth = "SAS"
		}
		return fmt.Sprintf("%s: connection string to %s (%s redacted), container %s", s.Setting, endpoint, auth, s.Container)
	}
	auth := "DefaultAzureCredential"
	switch {
	case s.ClientID != "":
		auth = "managed identity " + s.ClientID
	case s.Credential == "managedidentity":
		auth = "system-assigned managed identity"
	}
	return fmt.Sprintf("%s: %s with %s, container %s", s.Setting, s.ServiceURL, auth, s.Container)
}

// Redact returns a connection string fit for messages: only the values of keys known to be
// harmless (protocol, account name, endpoints, suffix, the development shorthand) are shown;
// every other value, a misspelt key's included, and every part without a key are REDACTED.
func Redact(cs string) string {
	parts := strings.Split(cs, ";")
	for i, part := range parts {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, _, ok := strings.Cut(part, "=")
		if !ok {
			parts[i] = "REDACTED"
			continue
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "defaultendpointsprotocol", "accountname", "blobendpoint", "queueendpoint", "tableendpoint",
			"fileendpoint", "endpointsuffix", "usedevelopmentstorage", "developmentstorageproxyuri":
		default:
			parts[i] = k + "=REDACTED"
		}
	}
	return strings.Join(parts, ";")
}
