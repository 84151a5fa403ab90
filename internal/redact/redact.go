// Package redact is the one place that decides what of a secret the product shows or logs: every
// password, key, token or signature is replaced by one marker, Mark, and everything else (a host,
// a database, sslmode=disable, a SAS token's expiry) is shown as it is. Text covers free text
// (errors written by handlers, drivers and stores, which may quote a DSN or a URL) and every DSN
// form; ConnectionString covers the Azure connection strings the product is given, whose keys
// it knows, by an allow-list.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mark replaces every secret.
const Mark = "REDACTED"

var (
	urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)
	userInfo  = regexp.MustCompile(`(://[^:/@\s]*:)[^@\s]*@`)
	// secretKey is a key whose value is a secret: passwords, tokens, keys, signatures.
	secretKey = `password|pwd|passwd|secret|client[ _]?secret|token|access[ _]?token|sas[ _]?token|accountkey|` +
		`sharedaccesskey|accesskey|sig|api[ _-]?key|x-functions-key|code|sslpassword|sslkey`
	// A value already redacted (a URL's, by the URL rule) ends at its marker.
	secretKV = regexp.MustCompile(`(?i)\b(` + secretKey + `)(\s*=\s*)(` + Mark + `\b|'[^']*'|"[^"]*"|\{[^}]*\}|[^;\s&"',]*)`)
	// sas is a connection string's SharedAccessSignature: its value is a query string of its own
	// (sv=...&sig=...) that runs to the next ';'.
	sas = regexp.MustCompile(`(?i)\b(sharedaccesssignature)(\s*=\s*)([^;\s"']*)`)
	// secretQuery is a URL query parameter whose value is a secret (key= too: an API key).
	secretQuery = regexp.MustCompile(`(?i)^(` + secretKey + `|key)$`)
	bearer      = regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+`)
	// mysqlUser is go-sql-driver/mysql's user:password@tcp(host)/db (or @unix(...), @(...)): the
	// password runs to the last @ before the address, so it may hold an @ itself.
	mysqlUser = regexp.MustCompile(`([^\s:/"'()@]+):\S*@((?:tcp6?|unix)?\()`)
)

// Text returns s with every secret replaced by Mark and nothing else changed: a URL's password
// and its secret query values (sig=, code=, password=, key=, ...; sslmode=disable stays), a
// MySQL DSN's password (user:pass@tcp(...)), the values of password-, key-, signature- and
// token-like key=value pairs (key=value DSNs, ADO and Azure connection strings, SAS query
// strings), and bearer tokens. A password a driver already masked its own way (pgx's xxxxx) is
// Mark too.
func Text(s string) string {
	if s == "" {
		return s
	}
	s = urlInText.ReplaceAllStringFunc(s, redactURL)
	s = mysqlUser.ReplaceAllString(s, "${1}:"+Mark+"@${2}")
	s = sas.ReplaceAllString(s, "${1}${2}"+Mark)
	s = secretKV.ReplaceAllString(s, "${1}${2}"+Mark)
	return bearer.ReplaceAllString(s, "${1}"+Mark)
}

// URL returns raw's scheme, host and path alone, to name an endpoint whose user info or query may
// hold a key (a webhook's, an OTLP endpoint's); "the endpoint" when raw does not parse.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the endpoint"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

// DSN returns a database connection string fit for messages and logs: Text's rule, which keeps
// what locates the database (host, port, database, parameters such as sslmode) and hides its
// secrets, in every form the drivers take (URL, key=value, MySQL's, ADO).
func DSN(dsn string) string { return Text(dsn) }

// redactURL hides a URL's password and the values of its secret query parameters, keeping the
// rest of it as written (the order and the encoding of its parameters, the punctuation after it).
func redactURL(found string) string {
	raw := strings.TrimRight(found, ".,:;)")
	return redactParsed(raw) + found[len(raw):]
}

func redactParsed(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil && u.RawQuery == "" {
		return userInfo.ReplaceAllString(raw, "${1}"+Mark+"@")
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Mark)
		}
	}
	if u.RawQuery != "" {
		params := strings.Split(u.RawQuery, "&")
		for i, p := range params {
			k, _, ok := strings.Cut(p, "=")
			if name, err := url.QueryUnescape(k); ok && err == nil && secretQuery.MatchString(name) {
				params[i] = k + "=" + Mark
			}
		}
		u.RawQuery = strings.Join(params, "&")
	}
	return u.String()
}

// harmless are the connection string keys whose values ConnectionString shows: what locates the
// service.
var harmless = map[string]bool{
	"defaultendpointsprotocol": true, "accountname": true, "blobendpoint": true, "queueendpoint": true,
	"tableendpoint": true, "fileendpoint": true, "endpointsuffix": true, "usedevelopmentstorage": true,
	"developmentstorageproxyuri": true, "endpoint": true, "entitypath": true, "sharedaccesskeyname": true,
	"usedevelopmentemulator": true,
}

// ConnectionString returns an Azure connection string (Storage, Service Bus, Event Hubs, Event
// Grid) fit for messages: only the values of keys known to be harmless (protocol, account name,
// endpoints, entity path, key name, the development shorthands) are shown; every other value, a
// misspelt key's included, and every part without a key are Mark.
func ConnectionString(cs string) string {
	parts := strings.Split(cs, ";")
	for i, part := range parts {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, _, ok := strings.Cut(part, "=")
		if !ok {
			parts[i] = Mark
			continue
		}
		if !harmless[strings.ToLower(strings.TrimSpace(k))] {
			parts[i] = k + "=" + Mark
		}
	}
	return strings.Join(parts, ";")
}
