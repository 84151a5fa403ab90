package row

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// TestFixedWidthIsParse: FixedWidth accepts exactly what time.Parse(state.TimeLayout, s)
// accepts with a digit wherever the layout has one, over every date of leap and common years
// (days 0-32), the edges of each clock field, and every one-byte change of valid stamps.
// (time.Parse alone also takes a sign in the fraction, "59.+99999Z", which sorts out of order.)
func TestFixedWidthIsParse(t *testing.T) {
	digits := regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$`)
	check := func(s string) {
		t.Helper()
		_, err := time.Parse(state.TimeLayout, s)
		if got, want := FixedWidth(s), err == nil && digits.MatchString(s); got != want {
			t.Fatalf("FixedWidth(%q) = %v, want %v (time.Parse: %v)", s, got, want, err)
		}
	}
	n := 0
	for _, year := range []int{0, 1900, 1999, 2000, 2023, 2024, 2100, 9999} {
		for month := 0; month <= 13; month++ {
			for day := 0; day <= 32; day++ {
				check(fmt.Sprintf("%04d-%02d-%02dT12:30:45.123456Z", year, month, day))
				n++
			}
		}
	}
	for _, clock := range []string{"00:00:00", "23:59:59", "24:00:00", "23:60:00", "23:59:60", "99:99:99", "19:05:07"} {
		check("2024-02-29T" + clock + ".000000Z")
		n++
	}
	bytes := []byte("0123456789-:.TZ tz+/ \x00\xff")
	for _, valid := range []string{"2024-02-29T23:59:59.999999Z", "2026-11-25T00:00:00.000000Z", "1999-12-31T19:05:07.500000Z"} {
		for i := range valid {
			for _, c := range bytes {
				s := []byte(valid)
				s[i] = c
				check(string(s))
				n++
			}
		}
		check(valid[:len(valid)-1])
		check(valid + "0")
	}
	if n < 4000 {
		t.Fatalf("only %d strings checked", n)
	}
}

func BenchmarkFixedWidth(b *testing.B) {
	for b.Loop() {
		if !FixedWidth("2026-11-25T21:30:45.123456Z") {
			b.Fatal("rejected")
		}
	}
}
