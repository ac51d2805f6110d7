package redact

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/runtwice/twice/shared/redact/header"
	"github.com/runtwice/twice/shared/redact/redacttest"
)

func TestText(t *testing.T) {
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
			got := Text(tc.in)
			if got != tc.want {
				t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if again := Text(got); again != got {
				t.Errorf("not idempotent: %q -> %q", got, again)
			}
		})
	}
}

func TestHeader(t *testing.T) {
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
	got := Header(h)
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
			if got := Header(http.Header{"Authorization": {tc.in}})["Authorization"]; got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBody(t *testing.T) {
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
			got := Body(tc.contentType, []byte(tc.in))
			if got != tc.want {
				t.Errorf("Body:\n got %s\nwant %s", got, tc.want)
			}
			if again := Body(tc.contentType, []byte(got)); again != got {
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

func TestCardSeparators(t *testing.T) {
	for name, in := range map[string]string{
		"dots":    "4242.4242.4242.4242",
		"slashes": "4242/4242/4242/4242",
		"mixed":   "4242 4242-4242.4242",
		"amex":    "3782.822463.10005",
		"in text": "paid with 5555/5555/5555/4444 today",
	} {
		t.Run(name, func(t *testing.T) {
			out := Text(in)
			if c := redacttest.LeakedCard(out); c != "" || !strings.Contains(out, "[card ****") {
				t.Errorf("%q -> %q", in, out)
			}
		})
	}
	// Dates, versions and amounts are not card numbers.
	for _, keep := range []string{"2026/12/01", "v1.2.3", "1234.56", "10.0.0.1", "12/34"} {
		if out := Text(keep); out != keep {
			t.Errorf("%q -> %q", keep, out)
		}
	}
}

func TestSensitiveNames(t *testing.T) {
	body := `{"card_cvc":"123","security_code":"999","Card-CVC":"5","cardCvv":"1","card_number":"4000056655665556",` +
		`"pin":"0000","webhook_secret":"abc","stripe_signature":"t=1","password":"hunter2","exp_month":"12","exp_year":"2030",` +
		`"tokenization_method":"apple_pay","customer":"cus_1"}`
	out := Body("application/json", []byte(body))
	var v map[string]string
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"card_cvc", "security_code", "Card-CVC", "cardCvv", "pin", "webhook_secret", "stripe_signature", "password"} {
		if v[k] != Redacted {
			t.Errorf("%s kept %q", k, v[k])
		}
	}
	if v["card_number"] != "[card ****5556]" {
		t.Errorf("card_number: %q", v["card_number"])
	}
	for k, want := range map[string]string{"exp_month": "12", "exp_year": "2030", "tokenization_method": "apple_pay", "customer": "cus_1"} {
		if v[k] != want {
			t.Errorf("%s: %q, want it kept", k, v[k])
		}
	}
	form := Body("application/x-www-form-urlencoded", []byte("payment_method_data[card][security_code]=999&card[cvc]=123&amount=100"))
	if strings.Contains(form, "999") || strings.Contains(form, "123") || !strings.Contains(form, "amount=100") {
		t.Errorf("form: %s", form)
	}
	for _, n := range SensitiveFieldNames {
		if !sensitiveName(n) {
			t.Errorf("documented name %q is not sensitive", n)
		}
	}
}

// The fuzz targets check redaction against an independent statement of what must not
// survive (redacttest).

func FuzzText(f *testing.F) {
	for _, s := range redacttest.Seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Text(s)
		redacttest.Check(t, "Text", out)
		if Text(out) != out {
			t.Fatalf("not idempotent on %q", s)
		}
	})
}

func FuzzBody(f *testing.F) {
	for _, s := range redacttest.Seeds {
		for _, ct := range []string{"application/json", "application/x-www-form-urlencoded", ""} {
			f.Add(ct, []byte(s), 64)
		}
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte, n int) {
		out := Body(contentType, body)
		redacttest.Check(t, "Body", out)
		if n < 0 {
			n = -n
		}
		capped, cut := Cap(out, n%(len(out)+2))
		redacttest.Check(t, "Cap", capped)
		if utf8.ValidString(out) && !utf8.ValidString(capped) {
			t.Fatalf("cap broke UTF-8: %q", capped)
		}
		if cut != (len(capped) < len(out)) {
			t.Fatalf("cut %v but %d of %d bytes kept", cut, len(capped), len(out))
		}
		// A valid JSON document stays valid, and its sensitive members are masked.
		// (Unless an escape such as \u0001 put digits next to others: then Text may
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

func FuzzHeader(f *testing.F) {
	f.Add("Authorization", "Bearer sk_live_abc")
	f.Add("X-Note", "4242 4242 4242 4242")
	f.Add("stripe-signature", "t=1,v1=abc")
	f.Fuzz(func(t *testing.T, k, v string) {
		for name, got := range Header(http.Header{k: {v}}) {
			redacttest.Check(t, name, got)
			if header.Sensitive(http.CanonicalHeaderKey(k)) && !strings.HasSuffix(got, Redacted) {
				t.Fatalf("%s kept %q", k, got)
			}
		}
	})
}
