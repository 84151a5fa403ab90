package redact_test

import (
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// TestRule: one rule for every form a secret reaches a message in: each secret becomes the one
// marker, everything else is shown exactly as written (sslmode=disable, a SAS token's expiry, the
// order and encoding of a URL's parameters). Text and DSN are the same rule.
func TestRule(t *testing.T) {
	for _, c := range []struct{ form, in, want string }{
		{"empty", "", ""},
		{"no secret", "handler: status code: 500", "handler: status code: 500"},
		{"URL", "postgres://app:secret@db.example.com:5432/shop?sslmode=disable refused",
			"postgres://app:REDACTED@db.example.com:5432/shop?sslmode=disable refused"},
		{"URL, secret parameter", "postgres://app@db/shop?sslmode=require&password=hunter2&application_name=pt",
			"postgres://app@db/shop?sslmode=require&password=REDACTED&application_name=pt"},
		{"URL, pgx's own mask", `cannot parse "postgres://app:xxxxx@db/shop": failed`, `cannot parse "postgres://app:REDACTED@db/shop": failed`},
		{"webhook URL", `Post "https://user:pw@hook.example/a?code=K&b=2": EOF`, `Post "https://user:REDACTED@hook.example/a?code=REDACTED&b=2": EOF`},
		{"URL, api key", "https://api.example/v1?key=abc123&region=eu", "https://api.example/v1?key=REDACTED&region=eu"},
		{"key=value", "host=db user=app password=hunter2 dbname=shop sslmode=disable",
			"host=db user=app password=REDACTED dbname=shop sslmode=disable"},
		{"key=value, quoted", "host=db password='hunter 2' sslmode=disable", "host=db password=REDACTED sslmode=disable"},
		{"key=value, pgx's own mask", "cannot parse `host=db password=xxxxx sslmode=disable`", "cannot parse `host=db password=REDACTED sslmode=disable`"},
		{"MySQL", "app:s3cret@tcp(db.example.com:3306)/shop?tls=true", "app:REDACTED@tcp(db.example.com:3306)/shop?tls=true"},
		{"MySQL, @ in the password", "app:p@ss@word@tcp(127.0.0.1:3306)/shop", "app:REDACTED@tcp(127.0.0.1:3306)/shop"},
		{"MySQL, socket", "app:x@unix(/run/mysqld.sock)/shop", "app:REDACTED@unix(/run/mysqld.sock)/shop"},
		{"MySQL, no password", "app@tcp(127.0.0.1:3306)/shop", "app@tcp(127.0.0.1:3306)/shop"},
		{"MySQL in an error", "connect (app:s3cret@tcp(h:3306)/db): access denied", "connect (app:REDACTED@tcp(h:3306)/db): access denied"},
		{"SQL Server URL", "sqlserver://app:hunter2@srv:1433?database=shop&encrypt=true", "sqlserver://app:REDACTED@srv:1433?database=shop&encrypt=true"},
		{"SQL Server URL, password parameter", "sqlserver://srv?database=shop&fedauth=ActiveDirectoryServicePrincipal&password=hunter2",
			"sqlserver://srv?database=shop&fedauth=ActiveDirectoryServicePrincipal&password=REDACTED"},
		{"ADO", "Server=srv;User Id=app;Password=hunter2;Database=shop;Encrypt=true", "Server=srv;User Id=app;Password=REDACTED;Database=shop;Encrypt=true"},
		{"ADO, braces", "server=db;user id=sa;pwd={p;w};database=x", "server=db;user id=sa;pwd=REDACTED;database=x"},
		{"Azure Storage", "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc+/==;EndpointSuffix=core.windows.net",
			"DefaultEndpointsProtocol=https;AccountName=a;AccountKey=REDACTED;EndpointSuffix=core.windows.net"},
		{"Azure Storage SAS", "BlobEndpoint=https://a.blob.core.windows.net;SharedAccessSignature=sv=2024-11-04&ss=b&sig=abc%2B",
			"BlobEndpoint=https://a.blob.core.windows.net;SharedAccessSignature=REDACTED"},
		{"Service Bus", "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=k3y=",
			"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=REDACTED"},
		{"Event Grid", "Endpoint=https://t.westeurope-1.eventgrid.azure.net/api/events;AccessKey=k3y=",
			"Endpoint=https://t.westeurope-1.eventgrid.azure.net/api/events;AccessKey=REDACTED"},
		{"SAS URL", "GET https://a.blob.core.windows.net/c/b.json?sv=2024-11-04&se=2026-12-01T00%3A00%3A00Z&sp=r&sig=abc%2Bdef%3D: 403",
			"GET https://a.blob.core.windows.net/c/b.json?sv=2024-11-04&se=2026-12-01T00%3A00%3A00Z&sp=r&sig=REDACTED: 403"},
		{"SAS query string", "token sv=2024-11-04&sp=r&sig=abc%2Bdef rejected", "token sv=2024-11-04&sp=r&sig=REDACTED rejected"},
		{"bearer", "Authorization: Bearer eyJ0eXAi.abc.def failed", "Authorization: Bearer REDACTED failed"},
	} {
		if got := redact.Text(c.in); got != c.want {
			t.Errorf("%s: Text(%q)\n got %q\nwant %q", c.form, c.in, got, c.want)
		}
		if got := redact.DSN(c.in); got != c.want {
			t.Errorf("%s: DSN(%q)\n got %q\nwant %q", c.form, c.in, got, c.want)
		}
	}
}

// TestConnectionString: an Azure connection string shows only what locates the service; every
// other value, a misspelt key's too, is the one marker.
func TestConnectionString(t *testing.T) {
	for in, want := range map[string]string{
		"DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc==;EndpointSuffix=core.windows.net": "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=REDACTED;EndpointSuffix=core.windows.net",
		"AccountName=a;AcountKey=abc==":                                                 "AccountName=a;AcountKey=REDACTED",
		"BlobEndpoint=https://a.blob.core.windows.net;bare-secret":                      "BlobEndpoint=https://a.blob.core.windows.net;REDACTED",
		"BlobEndpoint=https://a.blob.core.windows.net;SharedAccessSignature=sv=1&sig=x": "BlobEndpoint=https://a.blob.core.windows.net;SharedAccessSignature=REDACTED",
		"UseDevelopmentStorage=true":                                                    "UseDevelopmentStorage=true",
	} {
		got := redact.ConnectionString(in)
		if got != want {
			t.Errorf("ConnectionString(%q)\n got %q\nwant %q", in, got, want)
		}
		if strings.Contains(got, "abc") || strings.Contains(got, "sig=x") {
			t.Errorf("ConnectionString(%q) shows a secret: %s", in, got)
		}
	}
}

// TestURL: an endpoint is named by its scheme, host and path; its user info and query (which may
// hold a key) are left out.
func TestURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://user:pw@hooks.example.com/orders?code=k1&x=1": "https://hooks.example.com/orders",
		"http://127.0.0.1:4318/v1/traces":                      "http://127.0.0.1:4318/v1/traces",
		"http://[::1]:namedport":                               "the endpoint",
	} {
		if got := redact.URL(raw); got != want {
			t.Errorf("URL(%q) = %q, want %q", raw, got, want)
		}
	}
}
