package pollerstatus

import (
	"net/url"
	"regexp"
)

var (
	urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)
	userInfo  = regexp.MustCompile(`(://[^:/@\s]*:)[^@\s]*@`)
	secretKV  = regexp.MustCompile(`(?i)\b(password|pwd|passwd|secret|client[ _]?secret|token|access[ _]?token|sas[ _]?token|accountkey|` +
		`sharedaccesskey|sharedaccesssignature|sig|api[ _-]?key|x-functions-key|code|sslpassword)(\s*=\s*)('[^']*'|"[^"]*"|\{[^}]*\}|[^;\s&"',]*)`)
	bearer = regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+`)
)

// Redact returns s with what looks like a secret replaced by REDACTED: a URL's password and
// query values (a SAS signature, a function key), password-, key- and token-like key=value pairs
// (connection strings), and bearer tokens. It is applied to every free text a Row carries (errors
// written by handlers and stores), so that the status never shows a secret someone quoted.
func Redact(s string) string {
	if s == "" {
		return s
	}
	s = urlInText.ReplaceAllStringFunc(s, func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil {
			return userInfo.ReplaceAllString(raw, "${1}REDACTED@")
		}
		if u.User != nil {
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), "REDACTED")
			}
		}
		if u.RawQuery != "" {
			q := u.Query()
			for k := range q {
				q[k] = []string{"REDACTED"}
			}
			u.RawQuery = q.Encode()
		}
		return u.String()
	})
	s = secretKV.ReplaceAllString(s, "${1}${2}REDACTED")
	return bearer.ReplaceAllString(s, "${1}REDACTED")
}
