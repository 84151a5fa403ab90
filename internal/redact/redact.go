// Package redact is the one place that decides what looks like a secret in text the product
// shows or logs: connection strings, DSNs, URLs, errors that quote them. Connection strings of
// the state store are shown by an allow-list of their keys instead (azconn.Redact).
package redact

import (
	"net/url"
	"regexp"
)

// Mark replaces every secret.
const Mark = "REDACTED"

var (
	urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)
	userInfo  = regexp.MustCompile(`(://[^:/@\s]*:)[^@\s]*@`)
	// secretKey is a key whose value is a secret: passwords, tokens, keys, signatures.
	secretKey = `password|pwd|passwd|secret|client[ _]?secret|token|access[ _]?token|sas[ _]?token|accountkey|` +
		`sharedaccesskey|sharedaccesssignature|sig|api[ _-]?key|x-functions-key|code|sslpassword`
	secretKV    = regexp.MustCompile(`(?i)\b(` + secretKey + `)(\s*=\s*)('[^']*'|"[^"]*"|\{[^}]*\}|[^;\s&"',]*)`)
	secretQuery = regexp.MustCompile(`(?i)^(` + secretKey + `)$`)
	bearer      = regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+`)
	// mysqlUser is go-sql-driver/mysql's user:password@tcp(host)/db (or @unix(...), @(...)): the
	// password runs to the last @ before the address, so it may hold an @ itself.
	mysqlUser = regexp.MustCompile(`([^\s:/"'()@]+):\S*@((?:tcp6?|unix)?\()`)
)

// Text returns s with what looks like a secret replaced by REDACTED: a URL's password and every
// query value (a SAS signature, a function key), the values of password-, key- and token-like
// key=value pairs (connection strings, DSNs), and bearer tokens. For free text: errors written by
// handlers, drivers and stores.
func Text(s string) string {
	if s == "" {
		return s
	}
	s = urlInText.ReplaceAllStringFunc(s, func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil {
			return userInfo.ReplaceAllString(raw, "${1}"+Mark+"@")
		}
		hidePassword(u)
		if u.RawQuery != "" {
			q := u.Query()
			for k := range q {
				q[k] = []string{Mark}
			}
			u.RawQuery = q.Encode()
		}
		return u.String()
	})
	s = mysqlUser.ReplaceAllString(s, "${1}:"+Mark+"@${2}")
	s = secretKV.ReplaceAllString(s, "${1}${2}"+Mark)
	return bearer.ReplaceAllString(s, "${1}"+Mark)
}

// DSN returns a database connection string fit for logs, keeping what locates the database: a
// URL's password and its secret query values are REDACTED (its other parameters, such as
// database=, stay); in a key=value DSN the secret values are.
func DSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" && u.Host != "" {
		hidePassword(u)
		q := u.Query()
		for k := range q {
			if secretQuery.MatchString(k) {
				q.Set(k, Mark)
			}
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	// Not a URL that parses: redact URL-style and MySQL-style user info and secret keys textually.
	dsn = userInfo.ReplaceAllString(dsn, "${1}"+Mark+"@")
	dsn = mysqlUser.ReplaceAllString(dsn, "${1}:"+Mark+"@${2}")
	return secretKV.ReplaceAllString(dsn, "${1}${2}"+Mark)
}

func hidePassword(u *url.URL) {
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Mark)
		}
	}
}
