package redacttest

import (
	"regexp"
	"testing"
)

var (
	secretPattern = regexp.MustCompile(`(?:sk|rk)_(?:live|test)_[0-9A-Za-z]|whsec_[A-Za-z0-9+/=]|_secret_[0-9A-Za-z]`)
	digitGroup    = regexp.MustCompile(`[0-9]+`)
	// idBefore matches text that ends inside an id ("evt_1N", "twice_pay_"): digits that
	// continue it are part of the id, not a card number.
	idBefore = regexp.MustCompile(`(?:^|[^A-Za-z0-9_])[a-z]+_[A-Za-z0-9_]*$`)
)

// LeakedCard returns a card number left in s: 13-19 digits from the start of one digit group
// (not one that continues an id) to the end of the same or a later one, the groups joined by
// single spaces, dashes, dots or slashes, passing the Luhn check.
func LeakedCard(s string) string {
	groups := digitGroup.FindAllStringIndex(s, -1)
	for i := range groups {
		if idBefore.MatchString(s[:groups[i][0]]) {
			continue
		}
		digits := ""
		for j := i; j < len(groups); j++ {
			if j > i {
				gap := s[groups[j-1][1]:groups[j][0]]
				if gap != " " && gap != "-" && gap != "." && gap != "/" {
					break
				}
			}
			digits += s[groups[j][0]:groups[j][1]]
			if len(digits) > 19 {
				break
			}
			if len(digits) >= 13 && Luhn(digits) {
				return s[groups[i][0]:groups[j][1]]
			}
		}
	}
	return ""
}

// Luhn reports whether the digits d pass the Luhn check.
func Luhn(d string) bool {
	sum := 0
	for i := range len(d) {
		n := int(d[len(d)-1-i] - '0')
		if i%2 == 1 {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
	}
	return sum%10 == 0
}

// Check fails t if s still holds a card number (LeakedCard) or a Stripe key or secret.
func Check(t testing.TB, what, s string) {
	t.Helper()
	if c := LeakedCard(s); c != "" {
		t.Fatalf("%s: card number %q survived in %q", what, c, s)
	}
	if m := secretPattern.FindString(s); m != "" {
		t.Fatalf("%s: secret %q survived in %q", what, m, s)
	}
}

// Seeds are inputs the fuzz targets start from: cards in every grouping, secrets, form and
// JSON bodies (a truncated one among them), and invalid UTF-8.
var Seeds = []string{
	"",
	"4242424242424242",
	"4242 4242 4242 4242 12/34 123",
	"3782-822463-10005",
	"amount=1000&card[number]=4242424242424242&card[cvc]=123",
	"card%5Bnumber%5D=4242+4242+4242+4242",
	`{"card":{"number":"4242424242424242","cvc":"123"},"client_secret":"pi_1_secret_x"}`,
	`{"a":"4242\u00204242\u00204242\u00204242"`,
	"Bearer sk_live_abc whsec_abc= rk_test_x pi_1_secret_y",
	"12345678901234567890 4242424242424242",
	"\xff\xfe4242424242424242",
}
