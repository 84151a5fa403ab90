package source

import (
	"encoding/json"
	"testing"
)

// FuzzAppendJSONString: appendJSONString renders every string as encoding/json's Marshal does,
// byte for byte (the seeds run as a test).
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `"quoted" \ back`, "<a href='x'>&amp;</a>", "\x00\x01\b\f\n\r\t\x1f\x7f",
		"emoji 😀 and é", "\u2028\u2029", "bad \xff\xfe utf-8 \xe2\x82", "\xf0\x9f\x98"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString([]byte("x"), []byte(s)); string(got) != "x"+string(want) {
			t.Fatalf("%q: got %s, want %s", s, got[1:], want)
		}
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("%q (string): got %s, want %s", s, got, want)
		}
	})
}
