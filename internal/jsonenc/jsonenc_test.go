package jsonenc

import (
	"encoding/json"
	"testing"
)

// FuzzAppendString: AppendString renders every string as encoding/json's Marshal does,
// byte for byte (the seeds run as a test).
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `"quoted" \ back`, "<a href='x'>&amp;</a>", "\x00\x01\b\f\n\r\t\x1f\x7f",
		"emoji 😀 and é", "\u2028\u2029", "bad \xff\xfe utf-8 \xe2\x82", "\xf0\x9f\x98"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), []byte(s)); string(got) != "x"+string(want) {
			t.Fatalf("%q: got %s, want %s", s, got[1:], want)
		}
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("%q (string): got %s, want %s", s, got, want)
		}
	})
}
