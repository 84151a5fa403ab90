package blobstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

const realCS = "DefaultEndpointsProtocol=https;AccountName=acct1;AccountKey=c2VjcmV0LWtleQ==;EndpointSuffix=core.windows.net"

func TestSettingsFromEnv(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		setting string
		url     string
		cs      string
		client  string
	}{
		{"development shorthand", map[string]string{"StateStorage": "UseDevelopmentStorage=true"}, "StateStorage", "", DevelopmentConnectionString, ""},
		{"development shorthand, any case", map[string]string{"StateStorage": " usedevelopmentstorage=TRUE; "}, "StateStorage", "", DevelopmentConnectionString, ""},
		{"connection string", map[string]string{"StateStorage": realCS}, "StateStorage", "", realCS, ""},
		{"identity", map[string]string{"StateStorage__blobServiceUri": "https://acct1.blob.core.windows.net/", "StateStorage__clientId": "cid"}, "StateStorage__blobServiceUri", "https://acct1.blob.core.windows.net", "", "cid"},
		{"account name", map[string]string{"StateStorage__accountName": "acct1"}, "StateStorage__accountName", "https://acct1.blob.core.windows.net", "", ""},
		{"StateStorage wins over the host storage", map[string]string{"StateStorage": realCS, "AzureWebJobsStorage": "UseDevelopmentStorage=true"}, "StateStorage", "", realCS, ""},
		{"fallback connection string", map[string]string{"AzureWebJobsStorage": "UseDevelopmentStorage=true"}, "AzureWebJobsStorage", "", DevelopmentConnectionString, ""},
		{"fallback identity", map[string]string{"AzureWebJobsStorage__blobServiceUri": "https://h.blob.core.windows.net", "AzureWebJobsStorage__clientId": "c2"}, "AzureWebJobsStorage__blobServiceUri", "https://h.blob.core.windows.net", "", "c2"},
		{"fallback account name", map[string]string{"AzureWebJobsStorage__accountName": "host1"}, "AzureWebJobsStorage__accountName", "https://host1.blob.core.windows.net", "", ""},
		{"local emulator over http", map[string]string{"StateStorage__blobServiceUri": "http://127.0.0.1:10000/devstoreaccount1"}, "StateStorage__blobServiceUri", "http://127.0.0.1:10000/devstoreaccount1", "", ""},
	}
	for _, c := range cases {
		s, err := SettingsFromEnv(env(c.env))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if s.Setting != c.setting || s.ServiceURL != c.url || s.ConnectionString != c.cs || s.ClientID != c.client || s.Container != "db-state" {
			t.Errorf("%s: got %+v", c.name, s)
		}
	}
}

func TestSettingsErrorsNameTheSetting(t *testing.T) {
	cases := []struct {
		env     map[string]string
		setting string
	}{
		{map[string]string{"StateStorage": "UseDevelopmentStorage=true", "STATE_CONTAINER": "DB_State"}, "STATE_CONTAINER"},
		{map[string]string{"StateStorage": "UseDevelopmentStorage=true", "STATE_CONTAINER": "ab"}, "STATE_CONTAINER"},
		{map[string]string{"StateStorage": "garbage"}, "StateStorage"},
		{map[string]string{"StateStorage": "AccountName=acct1AccountKey=c2VjcmV0LWtleQ=="}, "StateStorage"},
		{map[string]string{"StateStorage": "BlobEndpoint=https://acct1.blob.core.windows.netSharedAccessSignature=sig"}, "StateStorage"},
		{map[string]string{"StateStorage__blobServiceUri": "not a url"}, "StateStorage__blobServiceUri"},
		{map[string]string{"StateStorage__blobServiceUri": "http://acct1.blob.core.windows.net"}, "StateStorage__blobServiceUri"},
		{map[string]string{"StateStorage__blobServiceUri": "https://a.blob.core.windows.net", "StateStorage__credential": "password"}, "StateStorage__credential"},
		{map[string]string{"AzureWebJobsStorage__accountName": "Bad_Name"}, "AzureWebJobsStorage__accountName"},
	}
	for _, c := range cases {
		_, err := SettingsFromEnv(env(c.env))
		if err == nil || !strings.HasPrefix(err.Error(), c.setting+":") {
			t.Errorf("%v: got %v, want an error starting with %s", c.env, err, c.setting)
		}
		if err != nil && (strings.Contains(err.Error(), "c2VjcmV0") || strings.Contains(err.Error(), "sig")) {
			t.Errorf("%v: the error quotes the value: %v", c.env, err)
		}
	}
	if _, err := SettingsFromEnv(env(nil)); !errors.Is(err, ErrNotConfigured) || !strings.Contains(err.Error(), "StateStorage") {
		t.Errorf("nothing set: %v", err)
	}
}

func TestSecretsNeverShown(t *testing.T) {
	sas := "BlobEndpoint=https://acct1.blob.core.windows.net;SharedAccessSignature=sv=2024-01-01&sig=c2VjcmV0LXNpZw%3D%3D"
	for _, cs := range []string{realCS, sas, DevelopmentConnectionString} {
		s := Settings{Setting: "StateStorage", ConnectionString: cs, Container: "db-state"}
		for _, shown := range []string{s.String(), redact.ConnectionString(cs)} {
			for _, secret := range []string{"c2VjcmV0LWtleQ==", "c2VjcmV0LXNpZw", "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq"} {
				if strings.Contains(shown, secret) {
					t.Errorf("a secret is shown: %s", shown)
				}
			}
		}
	}
	if got := (Settings{Setting: "StateStorage", ConnectionString: realCS, Container: "db-state"}).String(); !strings.Contains(got, "https://acct1.blob.core.windows.net") {
		t.Errorf("description lacks the endpoint: %s", got)
	}
	// Only harmless values survive Redact: misspelt keys and bare parts are redacted too.
	if got := redact.ConnectionString("AccountName=a1b;0AccountKey=c2VjcmV0LWtleQ==;bare-secret;BlobEndpoint=https://a1b.blob.core.windows.net"); got !=
		"AccountName=a1b;0AccountKey=REDACTED;REDACTED;BlobEndpoint=https://a1b.blob.core.windows.net" {
		t.Errorf("Redact: %s", got)
	}
	// A malformed connection string is reported redacted.
	_, err := New(Settings{Setting: "StateStorage", ConnectionString: "AccountName=x;AccountKey=c2VjcmV0LWtleQ==;Nonsense", Container: "db-state"}, nil)
	if err != nil && strings.Contains(err.Error(), "c2VjcmV0LWtleQ==") {
		t.Errorf("the error shows the key: %v", err)
	}
}
