package blobstore

import (
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// FuzzConnectionString: a StateStorage connection string carrying a key, among arbitrary other
// parts, either resolves or fails naming the setting; and the key shows in none of the error, the
// description, or Redact. The key is placed in the AccountKey slot and always contains '!', which
// nothing harmless in those outputs can contain, so any occurrence of it is a leak.
func FuzzConnectionString(f *testing.F) {
	f.Add("DefaultEndpointsProtocol=https;AccountName=acct1", "c2VjcmV0", "EndpointSuffix=core.windows.net")
	f.Add("AccountName=", "x", "")
	f.Add("AccountName=000", "000.", "")
	f.Add("BlobEndpoint=https://a.blob.core.windows.net", "sig", "SharedAccessSignature=")
	f.Add("UseDevelopmentStorage=true", "k", "")
	f.Fuzz(func(t *testing.T, prefix, key, suffix string) {
		key = "!" + strings.NewReplacer(";", "", "=", "").Replace(key)
		if strings.Contains(prefix, key) || strings.Contains(suffix, key) {
			return
		}
		cs := prefix + ";AccountKey=" + key + ";" + suffix
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
			if strings.Contains(err.Error(), key) {
				t.Fatalf("the error shows the key: %v", err)
			}
		} else if shown := s.String(); strings.Contains(shown, key) {
			t.Fatalf("the description shows the key: %s", shown)
		}
		if r := redact.ConnectionString(cs); strings.Contains(r, key) {
			t.Fatalf("Redact shows the key: %s", r)
		}
	})
}
