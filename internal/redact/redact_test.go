package redact_test

import (
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"":                          "",
		"handler: status code: 500": "handler: status code: 500",
		`Post "https://user:pw@hook.example/a?code=K&b=2": EOF`:                  `Post "https://user:REDACTED@hook.example/a?b=REDACTED&code=REDACTED": EOF`,
		"AccountName=a;AccountKey=abc+/==;EndpointSuffix=core.windows.net":       "AccountName=a;AccountKey=REDACTED;EndpointSuffix=core.windows.net",
		"server=db;user id=sa;password={p;w};database=x":                         "server=db;user id=sa;password=REDACTED;database=x",
		"SharedAccessSignature=sv=2024&sig=abc":                                  "SharedAccessSignature=REDACTED&sig=REDACTED",
		"Authorization: Bearer eyJ0eXAi.abc.def failed":                          "Authorization: Bearer REDACTED failed",
		"postgres://app:secret@db.example.com:5432/shop?sslmode=disable refused": "postgres://app:REDACTED@db.example.com:5432/shop?sslmode=REDACTED refused",
	} {
		if got := redact.Text(in); got != want {
			t.Errorf("Text(%q)\n got %q\nwant %q", in, got, want)
		}
	}
}

func TestDSN(t *testing.T) {
	for dsn, secret := range map[string]string{
		"postgres://app:hunter2@db:5432/shop":                                                    "hunter2",
		"host=db user=app password=hunter2 dbname=shop":                                          "hunter2",
		"host=db user=app password='hunter 2' dbname=shop":                                       "hunter 2",
		"sqlserver://app:hunter2@srv?database=shop":                                              "hunter2",
		"sqlserver://srv?database=shop&password=hunter2":                                         "hunter2",
		"server=srv;user id=app;Password=hunter2;database=shop":                                  "hunter2",
		"server=srv;user id=app;PWD={hun;ter2};database=shop":                                    "hun;ter2",
		"sqlserver://srv?database=shop&fedauth=ActiveDirectoryServicePrincipal&password=hunter2": "hunter2",
	} {
		got := redact.DSN(dsn)
		if strings.Contains(got, secret) || !strings.Contains(got, "REDACTED") {
			t.Errorf("DSN(%q) = %q", dsn, got)
		}
	}
	if got := redact.DSN("postgres://app@db/shop"); got != "postgres://app@db/shop" {
		t.Errorf("a DSN without secrets changed: %s", got)
	}
}

func TestMySQLDSN(t *testing.T) {
	for in, want := range map[string]string{
		"app:s3cret@tcp(db.example.com:3306)/shop?tls=true":  "app:REDACTED@tcp(db.example.com:3306)/shop?tls=true",
		"app:p@ss@word@tcp(127.0.0.1:3306)/shop":             "app:REDACTED@tcp(127.0.0.1:3306)/shop",
		"app:x@unix(/run/mysqld.sock)/shop":                  "app:REDACTED@unix(/run/mysqld.sock)/shop",
		"app@tcp(127.0.0.1:3306)/shop":                       "app@tcp(127.0.0.1:3306)/shop",
		"connect (app:s3cret@tcp(h:3306)/db): access denied": "connect (app:REDACTED@tcp(h:3306)/db): access denied",
	} {
		if got := redact.DSN(in); got != want {
			t.Errorf("DSN(%q) = %q, want %q", in, got, want)
		}
		if got := redact.Text(in); strings.Contains(got, "s3cret") || strings.Contains(got, "ss@word") || strings.Contains(got, ":x@") {
			t.Errorf("Text(%q) = %q", in, got)
		}
	}
}
