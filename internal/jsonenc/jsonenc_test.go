package jsonenc

import (
	"encoding/json"
	"math"
	"testing"
	"time"
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

// FuzzAppendFloat: a finite float renders as encoding/json's Marshal renders it, as a float64
// and as a float32; NaN and the infinities as PostgreSQL's text for them.
func FuzzAppendFloat(f *testing.F) {
	for _, x := range []float64{0, math.Copysign(0, -1), 1, -1.5, 1e-7, 1e21, 123456789.125, math.MaxFloat64, math.SmallestNonzeroFloat64,
		math.MaxFloat32, math.SmallestNonzeroFloat32, 0.1, 1e20, 1e-6} {
		f.Add(x)
	}
	f.Fuzz(func(t *testing.T, x float64) {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return
		}
		want, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendFloat([]byte("x"), x, 64); string(got) != "x"+string(want) {
			t.Fatalf("%v: got %s, want %s", x, got[1:], want)
		}
		if math.Abs(x) > math.MaxFloat32 {
			return
		}
		x32 := float32(x)
		want, err = json.Marshal(x32)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendFloat(nil, float64(x32), 32); string(got) != string(want) {
			t.Fatalf("float32 %v: got %s, want %s", x32, got, want)
		}
	})
}

func TestAppendFloatNonFinite(t *testing.T) {
	for x, want := range map[float64]string{math.NaN(): `"NaN"`, math.Inf(1): `"Infinity"`, math.Inf(-1): `"-Infinity"`} {
		if got := string(AppendFloat(nil, x, 64)); got != want {
			t.Errorf("%v: %s, want %s", x, got, want)
		}
	}
	if got := string(AppendFloat(nil, float64(float32(math.MaxFloat32)), 32)); got != "3.4028235e+38" {
		t.Errorf("float4's largest: %s", got)
	}
}

// TestAppendTimeYears: RFC 3339 for the years it has, ISO 8601's expanded years outside them.
func TestAppendTimeYears(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want string
	}{
		{time.Date(2026, 4, 7, 1, 2, 3, 500000000, time.UTC), `"2026-04-07T01:02:03.5Z"`},
		{time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), `"0000-01-01T00:00:00Z"`},
		{time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), `"9999-12-31T23:59:59.999999Z"`},
		{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), `"+010000-01-01T00:00:00Z"`},
		{time.Date(294276, 12, 31, 23, 59, 59, 999999000, time.UTC), `"+294276-12-31T23:59:59.999999Z"`},
		{time.Date(5874897, 12, 31, 0, 0, 0, 0, time.UTC), `"+5874897-12-31T00:00:00Z"`},
		{time.Date(-43, 3, 15, 0, 0, 0, 0, time.UTC), `"-000043-03-15T00:00:00Z"`},
		{time.Date(-4713, 11, 24, 0, 0, 0, 0, time.FixedZone("x", 3600)), `"-004713-11-23T23:00:00Z"`},
	} {
		if got := string(AppendTime(nil, c.t)); got != c.want {
			t.Errorf("%v: %s, want %s", c.t, got, c.want)
		}
		if back, err := ParseTime(c.want[1 : len(c.want)-1]); err != nil || !back.Equal(c.t) {
			t.Errorf("ParseTime(%s) = %v, %v; want %v", c.want, back, err, c.t)
		}
	}
}

// TestParseTimeRefuses: what is not a time AppendTime writes.
func TestParseTimeRefuses(t *testing.T) {
	for _, s := range []string{"", "+10000-01-01T00:00:00Z", "+0010000", "-000001-02-29T00:00:00Z", "+010000-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "+0000001234-01-01T00:00:00Z"} {
		if got, err := ParseTime(s); err == nil {
			t.Errorf("ParseTime(%q) = %v, want an error", s, got)
		}
	}
	if got, err := ParseTime("-000004-02-29T00:00:00Z"); err != nil || got.Year() != -4 || got.Day() != 29 {
		t.Errorf("February 29 of year -4 (a leap year): %v, %v", got, err)
	}
}
