package blobstore

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/azconn"
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
	id, err := azconn.ReadIdentity(getenv, prefix)
	if err != nil {
		return Settings{}, false, err
	}
	s := Settings{ClientID: id.ClientID, Credential: id.Credential}
	if u := strings.TrimSpace(getenv(prefix + "__blobServiceUri")); u != "" {
		name := prefix + "__blobServiceUri"
		if err := azconn.CheckServiceURL(u, "https://ACCOUNT.blob.core.windows.net"); err != nil {
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

// mapConnectionString maps the development shorthand and checks the rest has an account.
func mapConnectionString(cs string) (string, error) {
	parts := azconn.ParseConnectionString(cs)
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

// String describes the settings for logs and messages, with every secret left out.
func (s Settings) String() string {
	if s.ConnectionString != "" {
		p := azconn.ParseConnectionString(s.ConnectionString)
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
	auth := azconn.Identity{ClientID: s.ClientID, Credential: s.Credential}
	return fmt.Sprintf("%s: %s with %s, container %s", s.Setting, s.ServiceURL, auth, s.Container)
}

// account is the storage account's name: the connection string's AccountName, else the first
// label of the service URL's host (ACCOUNT.blob.core.windows.net); "" when neither says.
func (s Settings) account() string {
	if s.ConnectionString != "" {
		return azconn.ParseConnectionString(s.ConnectionString)["accountname"]
	}
	if u, err := url.Parse(s.ServiceURL); err == nil {
		if name, _, ok := strings.Cut(u.Hostname(), "."); ok {
			return name
		}
	}
	return ""
}
