package blobstore

import (
	"strings"
	"testing"
)

// FuzzConnectionString: any StateStorage value either resolves or fails naming the setting, and
// neither the description nor the error ever shows the key it carries.
func FuzzConnectionString(f *testing.F) {
	f.Add("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=", "c2VjcmV0")
	f.Add("UseDevelopmentStorage=true;", "")
	f.Add("BlobEndpoint=https://a.blob.core.windows.net;SharedAccessSignature=", "sv=1&sig=abc")
	f.Add(";;==;", "x")
	f.Fuzz(func(t *testing.T, prefix, secret string) {
		if len(secret) < 4 || strings.ContainsAny(secret, ";=") {
			return // only distinctive secrets can be searched for
		}
		cs := prefix + secret
		s, err := SettingsFromEnv(func(k string) string {
			if k == "StateStorage" {
				return cs
			}
			return ""
		})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "StateStorage:") && !strings.HasPrefix(err.Error(), "no state storage") {
				t.Fatalf("an error that names no setting: %v", err)
			}
			if strings.Contains(err.Error(), secret) && !strings.Contains(prefix, secret) {
				t.Fatalf("the error shows the secret: %v", err)
			}
			return
		}
		if !strings.Contains(strings.ToLower(prefix), "accountkey=") && !strings.Contains(strings.ToLower(prefix), "sharedaccesssignature=") {
			return
		}
		if shown := s.String(); strings.Contains(shown, secret) {
			t.Fatalf("the description shows the secret: %s", shown)
		}
		if strings.Contains(Redact(cs), secret) {
			t.Fatalf("Redact shows the secret: %s", Redact(cs))
		}
	})
}
