package row

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFormatScaled: a REAL renders with at least its column's scale of decimals and never loses
// a digit of its own shortest text: it reads back as the same float.
func TestFormatScaled(t *testing.T) {
	fs := []float64{0, 12.5, -12.5, 0.05, -0.05, 1e-9, 123456789.125, 99999.995, 1e15, 1e20, -3, 0.1 + 0.2, 1.005, 2.675, 12.345, 1e300, 5e-324}
	for i := range 20000 {
		fs = append(fs, float64(i)/100, float64(i)/1000+0.0005, -float64(i)*1.37/100)
	}
	for _, f := range fs {
		for scale := -1; scale <= 10; scale++ {
			got := formatScaled(f, scale)
			if math.IsInf(f, 0) {
				continue
			}
			back, err := strconv.ParseFloat(got, 64)
			if err != nil || back != f {
				t.Fatalf("formatScaled(%v, %d) = %s: reads back as %v (%v)", f, scale, got, back, err)
			}
			dot := strings.IndexByte(got, '.')
			if scale > 0 && (dot < 0 || len(got)-dot-1 < scale) {
				t.Fatalf("formatScaled(%v, %d) = %s: fewer than %d decimals", f, scale, got, scale)
			}
			if strings.HasPrefix(got, "-") && strings.Trim(got, "-0.") == "" {
				t.Fatalf("formatScaled(%v, %d) = %s: a decimal has no negative zero", f, scale, got)
			}
		}
	}
	for f, want := range map[float64]string{math.Inf(1): "Infinity", math.Inf(-1): "-Infinity", 12.5: "12.50", 12.345: "12.345", 0.30000000000000004: "0.30000000000000004", 3: "3.00", -0.05: "-0.05"} {
		if got := formatScaled(f, 2); got != want {
			t.Errorf("formatScaled(%v, 2) = %s, want %s", f, got, want)
		}
	}
}

// TestTimeCodecYears: a time cursor or key value of any year PostgreSQL holds goes into the
// cursor and back (its Encode wrote "294276-..." and "-4712-...", which its Decode refused).
func TestTimeCodecYears(t *testing.T) {
	for _, tm := range []time.Time{time.Date(294276, 12, 31, 23, 59, 59, 999999000, time.UTC), time.Date(-4712, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 4, 7, 1, 2, 3, 4000, time.UTC), time.Date(0, 2, 29, 0, 0, 0, 0, time.UTC)} {
		raw, err := TimeCodec.Encode(tm)
		if err != nil {
			t.Fatal(err)
		}
		back, err := TimeCodec.Decode(raw)
		if err != nil || !back.(time.Time).Equal(tm) {
			t.Fatalf("%v: encoded %s, decoded %v, %v", tm, raw, back, err)
		}
	}
}
