// Package jsonenc appends JSON values to a byte slice as encoding/json renders them, without
// its reflection or allocations: the rows' and the sinks' messages are written with it.
package jsonenc

import (
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendString appends src as a JSON string exactly as encoding/json's Marshal renders a
// string (its appendString with HTML escaping, which this follows): <, > and & escaped, invalid
// UTF-8 as \ufffd, U+2028 and U+2029 escaped. FuzzAppendString holds it to Marshal.
func AppendString[Bytes []byte | string](dst []byte, src Bytes) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(src); {
		if b := src[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, src[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		n := min(len(src)-i, utf8.UTFMax)
		c, size := utf8.DecodeRuneInString(string(src[i : i+n]))
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, src[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, src[start:]...)
	return append(dst, '"')
}

// AppendTime appends t in UTC as a JSON string, RFC 3339 with its full fractional precision. A
// year before 0 (PostgreSQL's 1 BC is year 0) or after 9999, which RFC 3339 cannot write, is
// written in ISO 8601's expanded form, as ECMAScript's Date and java.time read it: a sign and at
// least six digits ("+010000-01-01T00:00:00Z", "-000044-03-15T00:00:00Z").
func AppendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	dst = append(dst, '"')
	if y := t.Year(); y < 0 || y > 9999 {
		sign := byte('+')
		if y < 0 {
			sign, y = '-', -y
		}
		dst = append(dst, sign)
		for d := 100000; d > 1 && y < d; d /= 10 {
			dst = append(dst, '0')
		}
		dst = strconv.AppendInt(dst, int64(y), 10)
		dst = t.AppendFormat(dst, "-01-02T15:04:05.999999999Z07:00")
		return append(dst, '"')
	}
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

// AppendFloat appends f as encoding/json's Marshal renders a float64 (bits 64) or a float32
// (bits 32: the shortest digits that read back as the same float32, "3.4028235e+38", not the
// float64 digits of its value), except that NaN, +Inf and -Inf, which JSON has no number for and
// Marshal refuses, are the strings "NaN", "Infinity" and "-Infinity": PostgreSQL's own text for
// them, which its float input, JavaScript's Number() and Python's float() read back.
func AppendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	// As encoding/json's floatEncoder: 'f' unless the exponent is small or large, then 'e' with
	// a two-digit exponent written without its leading zero (1e-07 as 1e-7).
	abs, format := math.Abs(f), byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// ParseTime reads a time as AppendTime writes it (without the quotes): RFC 3339, or ISO 8601's
// expanded year (a sign and six or more digits) before the rest of RFC 3339.
func ParseTime(s string) (time.Time, error) {
	if len(s) == 0 || s[0] != '+' && s[0] != '-' {
		return time.Parse(time.RFC3339Nano, s)
	}
	i := 1
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i-1 < 6 || i-1 > 9 {
		return time.Time{}, fmt.Errorf("parsing time %q: an expanded year has a sign and 6 to 9 digits", s)
	}
	year, _ := strconv.Atoi(s[1:i])
	if s[0] == '-' {
		year = -year
	}
	// The rest, read in a leap year (2000) so that February 29 reads, then moved to the year:
	// time.Date would roll a February 29 of a common year over to March 1, which is refused.
	t, err := time.Parse(time.RFC3339Nano, "2000"+s[i:])
	if err != nil {
		return time.Time{}, fmt.Errorf("parsing time %q: %w", s, err)
	}
	out := time.Date(year, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), t.Location())
	if out.Day() != t.Day() {
		return time.Time{}, fmt.Errorf("parsing time %q: day out of range", s)
	}
	return out, nil
}
