package attempts

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRedactText(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"plain text unchanged":      {"hello world 123", "hello world 123"},
		"visa":                      {"card 4242424242424242 ok", "card [card ****4242] ok"},
		"visa in spaced groups":     {"4242 4242 4242 4242", "[card ****4242]"},
		"amex in dashed groups":     {"3782-822463-10005", "[card ****0005]"},
		"13 digits":                 {"4222222222222", "[card ****2222]"},
		"19 digits":                 {"6011000990139424009", "[card ****4009]"},
		"not luhn":                  {"4242424242424241", "4242424242424241"},
		"12 digits too short":       {"424242424242", "424242424242"},
		"20 digit reference kept":   {"12345678901234567890", "12345678901234567890"},
		"card then expiry and cvc":  {"4242 4242 4242 4242 12 34 567", "[card ****4242] 12 34 567"},
		"amount before card":        {"1000 4242424242424242", "1000 [card ****4242]"},
		"double space splits":       {"4242  4242424242424242", "4242  [card ****4242]"},
		"card inside word":          {"x4242424242424242y", "x[card ****4242]y"},
		"two cards":                 {"4242424242424242,5555555555554444", "[card ****4242],[card ****4444]"},
		"unix seconds kept":         {`"created":1700000000`, `"created":1700000000`},
		"secret key":                {"Bearer sk_live_51Habc123", "Bearer sk_live_[redacted]"},
		"test key":                  {"key=sk_test_4eC39HqLyjWDarjtT1zdp7dc.", "key=sk_test_[redacted]."},
		"restricted keys":           {"rk_live_abc rk_test_def", "rk_live_[redacted] rk_test_[redacted]"},
		"key prefix alone":          {"sk_live_ is the prefix", "sk_live_ is the prefix"},
		"publishable key kept":      {"pk_test_abc", "pk_test_abc"},
		"webhook secret":            {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/+=", "whsec_[redacted]"},
		"client secret":             {`"client_secret":"pi_3MtwBw_secret_YrKJUKribcBjcG8HVhfZluoGH"`, `"client_secret":"pi_3MtwBw_secret_[redacted]"`},
		"setup intent secret":       {"seti_123_secret_abc", "seti_123_secret_[redacted]"},
		"secret glued to card":      {"sk_test_4242424242424242", "sk_test_[redacted]"},
		"nested prefixes":           {"whsec_sk_test_abc", "whsec_[redacted]_test_abc"},
		"utf8 around card survives": {"é4242424242424242é", "é[card ****4242]é"},
		"stripe event id kept":      {"evt_000000000000000A", "evt_000000000000000A"},
		"stripe id all digits kept": {"pi_4242424242424242", "pi_4242424242424242"},
		"our id kept":               {"twice_pay_4242424242424242 x", "twice_pay_4242424242424242 x"},
		"id then a card":            {"evt_1 4242424242424242", "evt_1 [card ****4242]"},
		"upper-case start no id":    {"EVT_4242424242424242", "EVT_[card ****4242]"},
		"underscore alone no id":    {"_4242424242424242", "_[card ****4242]"},
		"card after a dash":         {"pi_abc-4242424242424242", "pi_abc-[card ****4242]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := RedactText(tc.in)
			if got != tc.want {
				t.Errorf("RedactText(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if again := RedactText(got); again != got {
				t.Errorf("not idempotent: %q -> %q", got, again)
			}
		})
	}
}

func TestRedactHeader(t *testing.T) {
	h := http.Header{
		"Authorization":       {"Bearer sk_live_abc"},
		"Proxy-Authorization": {"Basic dXNlcjpwYXNz"},
		"Cookie":              {"session=abc"},
		"Set-Cookie":          {"a=1", "b=2"},
		"Stripe-Signature":    {"t=1,v1=abcdef"},
		"Webhook-Signature":   {"v1,abc="},
		"X-Api-Key":           {"k"},
		"Content-Type":        {"application/json"},
		"Idempotency-Key":     {"order-42"},
		"X-Debug":             {"card 4242424242424242", "key sk_test_abc"},
	}
	h["x-lower"] = []string{"kept"} // not canonical: still found
	want := map[string]string{
		"Authorization":       "Bearer [redacted]",
		"Proxy-Authorization": "Basic [redacted]",
		"Cookie":              Redacted,
		"Set-Cookie":          Redacted,
		"Stripe-Signature":    Redacted,
		"Webhook-Signature":   Redacted,
		"X-Api-Key":           Redacted,
		"Content-Type":        "application/json",
		"Idempotency-Key":     "order-42",
		"X-Debug":             "card [card ****4242], key sk_test_[redacted]",
		"X-Lower":             "kept",
	}
	got := RedactHeader(h)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d headers, want %d: %v", len(got), len(want), got)
	}
	tests := map[string]struct{ in, want string }{
		"authorization without scheme": {"sk_live_abc", Redacted},
		"authorization odd scheme":     {"a=b c", Redacted},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := RedactHeader(http.Header{"Authorization": {tc.in}})["Authorization"]; got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRedactBody(t *testing.T) {
	tests := map[string]struct {
		contentType string
		in, want    string
	}{
		"stripe form": {
			"application/x-www-form-urlencoded",
			"amount=1000&currency=usd&card[number]=4242424242424242&card[exp_month]=12&card[exp_year]=2030&card[cvc]=123",
			"amount=1000&currency=usd&card[number]=[card+****4242]&card[exp_month]=12&card[exp_year]=2030&card[cvc]=[redacted]",
		},
		"form with escaped brackets": {
			"application/x-www-form-urlencoded",
			"payment_method_data%5Bcard%5D%5Bcvc%5D=314&confirm=true",
			"payment_method_data%5Bcard%5D%5Bcvc%5D=[redacted]&confirm=true",
		},
		"form card in free text with encoded spaces": {
			"application/x-www-form-urlencoded",
			"description=paid+with+4242%204242%204242%204242&metadata[password]=hunter2",
			"description=paid+with+[card+****4242]&metadata[password]=[redacted]",
		},
		"form short number": {
			"application/x-www-form-urlencoded; charset=utf-8",
			"number=INV-0001&token=tok_visa",
			"number=[redacted]&token=[redacted]",
		},
		"json nested": {
			"application/json",
			`{"id":"pm_1","card":{"number":"4242424242424242","cvc":"123","exp_month":12,"brand":"visa"},"amount":1000}`,
			`{"id":"pm_1","card":{"number":"[card ****4242]","cvc":"[redacted]","exp_month":12,"brand":"visa"},"amount":1000}`,
		},
		"json sensitive containers and arrays": {
			"application/json; charset=utf-8",
			`[{"Secret":{"a":[1,2]}},{"api_key":null},{"password":false},{"list":["sk_test_abc"]}]`,
			`[{"Secret":"[redacted]"},{"api_key":"[redacted]"},{"password":"[redacted]"},{"list":["sk_test_[redacted]"]}]`,
		},
		"json number as number": {
			"application/json",
			`{"number":4242424242424242}`,
			`{"number":"[card ****4242]"}`,
		},
		"json escaped card in string": {
			"application/json",
			`{"note":"4242\u00204242\u00204242\u00204242"}`,
			`{"note":"[card ****4242]"}`,
		},
		"json truncated falls back to pattern": {
			"application/json",
			`{"a":1,"cvc":"123","card":{"number":"4242424242424242","passw`,
			`{"a":1,"cvc":"[redacted]","card":{"number":"[card ****4242]","passw`,
		},
		"json truncated inside a value": {
			"application/json",
			`{"a":1,"password":"hunt`,
			`{"a":1,"password":"[redacted]"`,
		},
		"sniffed json": {
			"",
			` {"token":"abc"}`,
			`{"token":"[redacted]"}`,
		},
		"sniffed form": {
			"text/plain",
			"cvc=123&x=1",
			"cvc=[redacted]&x=1",
		},
		"text stays text": {
			"text/html",
			"<p>cvc=123 4242424242424242</p>",
			"<p>cvc=123 [card ****4242]</p>",
		},
		"empty": {"application/json", "", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := RedactBody(tc.contentType, []byte(tc.in))
			if got != tc.want {
				t.Errorf("RedactBody:\n got %s\nwant %s", got, tc.want)
			}
			if again := RedactBody(tc.contentType, []byte(got)); again != got {
				t.Errorf("not idempotent:\n%s\n%s", got, again)
			}
		})
	}
}

func TestCap(t *testing.T) {
	tests := map[string]struct {
		in        string
		n         int
		want      string
		truncated bool
	}{
		"fits":                   {"abc", 3, "abc", false},
		"cut":                    {"abcdef", 4, "abcd", true},
		"utf8 boundary":          {"aé", 2, "a", true}, // é is two bytes
		"three byte rune":        {"a€b", 3, "a", true},
		"never inside a number":  {"ref 12345678901234567890", 20, "ref ", true},
		"at a group edge is ok":  {"ref 1234 5678", 9, "ref 1234 ", true},
		"zero":                   {"abc", 0, "", true},
		"cut between two digits": {"x12", 2, "x", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, cut := Cap(tc.in, tc.n)
			if got != tc.want || cut != tc.truncated {
				t.Errorf("Cap(%q, %d) = %q, %v; want %q, %v", tc.in, tc.n, got, cut, tc.want, tc.truncated)
			}
		})
	}
}

func TestRedactedAttempt(t *testing.T) {
	body := "amount=1000&card[number]=4242424242424242&description=" + strings.Repeat("x", 100)
	a := Attempt{
		Path:           "/v1/payment_intents?client_secret=pi_1_secret_abc&expand[]=x",
		RequestHeader:  map[string]string{"authorization": "Bearer sk_test_abc", "content-type": "application/x-www-form-urlencoded"},
		RequestBody:    body,
		ResponseHeader: map[string]string{"Content-Type": "application/json"},
		ResponseBody:   `{"client_secret":"pi_1_secret_abc","id":"pi_1"}`,
		Err:            `Post "https://api.stripe.com/v1/x?key=sk_live_zzz": timeout`,
	}
	got := a.Redacted(50)
	if got.Path != "/v1/payment_intents?client_secret=[redacted]&expand[]=x" {
		t.Errorf("path %q", got.Path)
	}
	if got.RequestHeader["Authorization"] != "Bearer [redacted]" {
		t.Errorf("headers %v", got.RequestHeader)
	}
	if got.RequestBody != "amount=1000&card[number]=[card+****4242]&descripti" || !got.RequestTruncated || got.RequestBytes != len(body) {
		t.Errorf("request body %q truncated %v bytes %d", got.RequestBody, got.RequestTruncated, got.RequestBytes)
	}
	if got.ResponseBody != `{"client_secret":"[redacted]","id":"pi_1"}` || got.ResponseTruncated {
		t.Errorf("response body %q truncated %v", got.ResponseBody, got.ResponseTruncated)
	}
	if strings.Contains(got.Err, "zzz") {
		t.Errorf("err %q", got.Err)
	}
	if again := got.Redacted(50); !equalAttempts(again, got) {
		t.Errorf("not idempotent:\n%+v\n%+v", got, again)
	}
}

func equalAttempts(a, b Attempt) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// The fuzz targets check redaction against an independent statement of what must not
// survive.

var (
	secretPattern = regexp.MustCompile(`(?:sk|rk)_(?:live|test)_[0-9A-Za-z]|whsec_[A-Za-z0-9+/=]|_secret_[0-9A-Za-z]`)
	digitGroup    = regexp.MustCompile(`[0-9]+`)
	// idBefore matches text that ends inside an id ("evt_1N", "twice_pay_"): digits that
	// continue it are part of the id, not a card number.
	idBefore = regexp.MustCompile(`(?:^|[^A-Za-z0-9_])[a-z]+_[A-Za-z0-9_]*$`)
)

// leakedCard returns a card number left in s: 13-19 digits from the start of one digit group
// (not one that continues an id) to the end of the same or a later one, the groups joined by
// single spaces, dashes, dots or slashes, passing the Luhn check.
func leakedCard(s string) string {
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
			if len(digits) >= 13 && luhnValid(digits) {
				return s[groups[i][0]:groups[j][1]]
			}
		}
	}
	return ""
}

func luhnValid(d string) bool {
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

func checkClean(t *testing.T, what, s string) {
	t.Helper()
	if c := leakedCard(s); c != "" {
		t.Fatalf("%s: card number %q survived in %q", what, c, s)
	}
	if m := secretPattern.FindString(s); m != "" {
		t.Fatalf("%s: secret %q survived in %q", what, m, s)
	}
}

func TestLeakedCardChecker(t *testing.T) {
	// The checker must find what it is meant to, or the fuzz targets prove nothing.
	for _, s := range []string{"4242424242424242", "x 4242 4242 4242 4242 y", "1 4242-4242-4242-4242"} {
		if leakedCard(s) == "" {
			t.Errorf("checker missed the card in %q", s)
		}
	}
	if c := leakedCard("12345678901234567890"); c != "" {
		t.Errorf("checker flagged %q", c)
	}
}

var fuzzSeeds = []string{
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

func FuzzRedactText(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := RedactText(s)
		checkClean(t, "RedactText", out)
		if RedactText(out) != out {
			t.Fatalf("not idempotent on %q", s)
		}
	})
}

func FuzzRedactBody(f *testing.F) {
	for _, s := range fuzzSeeds {
		for _, ct := range []string{"application/json", "application/x-www-form-urlencoded", ""} {
			f.Add(ct, []byte(s), 64)
		}
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte, n int) {
		out := RedactBody(contentType, body)
		checkClean(t, "RedactBody", out)
		if n < 0 {
			n = -n
		}
		capped, cut := Cap(out, n%(len(out)+2))
		checkClean(t, "Cap", capped)
		if utf8.ValidString(out) && !utf8.ValidString(capped) {
			t.Fatalf("cap broke UTF-8: %q", capped)
		}
		if cut != (len(capped) < len(out)) {
			t.Fatalf("cut %v but %d of %d bytes kept", cut, len(capped), len(out))
		}
		// A valid JSON document stays valid, and its sensitive members are masked.
		// (Unless an escape such as \u0001 put digits next to others: then RedactText may
		// mask inside the escape, and keeping no card number matters more than the syntax.)
		if json.Valid(body) && bodyKind(contentType, body) == kindJSON && !strings.Contains(out, `\u`) {
			var v any
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("redacted JSON no longer parses: %v\n%s", err, out)
			}
			checkMasked(t, v)
		}
	})
}

// checkMasked walks a decoded JSON value: every sensitive member must be masked.
func checkMasked(t *testing.T, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if sensitiveName(k) {
				s, _ := x.(string)
				if s != Redacted && !isCardMask(s) {
					t.Fatalf("member %q kept %v", k, x)
				}
				continue
			}
			checkMasked(t, x)
		}
	case []any:
		for _, x := range v {
			checkMasked(t, x)
		}
	}
}

func FuzzRedactHeader(f *testing.F) {
	f.Add("Authorization", "Bearer sk_live_abc")
	f.Add("X-Note", "4242 4242 4242 4242")
	f.Add("stripe-signature", "t=1,v1=abc")
	f.Fuzz(func(t *testing.T, k, v string) {
		for name, got := range RedactHeader(http.Header{k: {v}}) {
			checkClean(t, name, got)
			if sensitiveHeaders[http.CanonicalHeaderKey(k)] && !strings.HasSuffix(got, Redacted) {
				t.Fatalf("%s kept %q", k, got)
			}
		}
	})
}
