package source

import (
	"strconv"
	"strings"
	"testing"
)

func TestFormatScaled(t *testing.T) {
	fs := []float64{0, 12.5, -12.5, 0.05, -0.05, 1e-9, 123456789.125, 99999.995, 1e15, 1e20, -3, 0.1 + 0.2, 1.005, 2.675}
	for i := range 20000 {
		fs = append(fs, float64(i)/100, float64(i)/1000+0.0005, -float64(i)*1.37/100)
	}
	for _, f := range fs {
		for scale := -1; scale <= 10; scale++ {
			want := strconv.FormatFloat(f, 'f', scale, 64)
			if strings.Trim(want, "-0.") == "" {
				want = strings.TrimPrefix(want, "-") // a decimal has no negative zero
			}
			if got := formatScaled(f, scale); got != want {
				t.Errorf("formatScaled(%v, %d) = %s, strconv says %s", f, scale, got, want)
			}
		}
	}
}
