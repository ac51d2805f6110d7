package feed

import (
	"strconv"
	"testing"
)

func TestParseCursor(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "0": 0, "17": 17, "00042": 42, "9223372036854775807": 9223372036854775807} {
		if got, err := ParseCursor(in); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"-1", "x1", "1.5", " 1", "99999999999999999999", "123456789012345678901"} {
		if _, err := ParseCursor(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "0", "42", "-1", "x", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseCursor(s)
		if err != nil {
			return
		}
		if n < 0 || (s != "" && strconv.FormatInt(n, 10) != trimZeros(s)) {
			t.Fatalf("%q parsed as %d", s, n)
		}
	})
}

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}
