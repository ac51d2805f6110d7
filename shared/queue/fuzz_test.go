package queue

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCheckSend feeds outside bodies and attributes (a webhook's raw body and headers become
// both) through the validation that stands in for SQS's.
func FuzzCheckSend(f *testing.F) {
	f.Add([]byte(`{"id":"evt_1"}`), "Stripe-Signature", "t=1,v1=abc")
	f.Add([]byte("\x00binary"), "k", "v")
	f.Add([]byte("\xff\xfe"), "", "")
	f.Add([]byte("ok \uFFFD \U0001F600"), "name", "\uFFFE")
	f.Add([]byte(strings.Repeat("a", MaxBodyBytes)), "k", "v")
	f.Fuzz(func(t *testing.T, body []byte, k, v string) {
		err := CheckSend(body, SendOptions{Attributes: map[string]string{k: v}})
		if err != nil {
			return
		}
		if !utf8.Valid(body) || !utf8.ValidString(k) || !utf8.ValidString(v) {
			t.Fatalf("accepted invalid UTF-8: %q %q %q", body, k, v)
		}
		if len(body) == 0 || len(body)+len(k)+len(v) > MaxBodyBytes || k == "" || v == "" {
			t.Fatalf("accepted out-of-range message: %d bytes, %q=%q", len(body), k, v)
		}
		for _, r := range string(body) + k + v {
			if r < 0x20 && r != '\t' && r != '\n' && r != '\r' {
				t.Fatalf("accepted control character %U", r)
			}
		}
	})
}
