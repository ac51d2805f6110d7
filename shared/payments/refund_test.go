package payments

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseRefundRequest(t *testing.T) {
	cases := map[string]struct {
		body    string
		want    RefundRequest
		invalid []string // fields named invalid; nil with malformed false: accepted
		bad     bool     // malformed
	}{
		"empty body refunds what remains": {body: ``},
		"empty object":                    {body: ` {} `},
		"amount and reason":               {body: `{"amount":300,"reason":"requested_by_customer"}`, want: RefundRequest{Amount: 300, Reason: "requested_by_customer"}},
		"free-text reason":                {body: `{"reason":"damaged in transit"}`, want: RefundRequest{Reason: "damaged in transit"}},
		"zero amount":                     {body: `{"amount":0}`, invalid: []string{"amount"}},
		"amount over the provider's cap":  {body: `{"amount":100000000}`, invalid: []string{"amount"}},
		"reason too long":                 {body: `{"reason":"` + strings.Repeat("x", 501) + `"}`, invalid: []string{"reason"}},
		"reason with a control character": {body: `{"reason":"a\u0000b"}`, invalid: []string{"reason"}},
		"unknown field":                   {body: `{"amount":1,"currency":"usd"}`, bad: true},
		"amount twice":                    {body: `{"amount":2000,"amount":1}`, bad: true},
		"fractional amount":               {body: `{"amount":1.5}`, bad: true},
		"not an object":                   {body: `[]`, bad: true},
		"trailing data":                   {body: `{} {}`, bad: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRefundRequest([]byte(c.body))
			var invalid *InvalidError
			switch {
			case c.bad:
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("want malformed, got %v", err)
				}
			case c.invalid != nil:
				if !errors.As(err, &invalid) || strings.Join(invalid.Names(), ",") != strings.Join(c.invalid, ",") {
					t.Fatalf("want invalid %v, got %v", c.invalid, err)
				}
			case err != nil || got != c.want:
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

// FuzzParseRefundRequest: any body is accepted as a request within the limits, or refused as
// malformed or invalid with a 400 problem document; nothing panics.
func FuzzParseRefundRequest(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"amount":300}`, `{"amount":300,"reason":"duplicate"}`, `{"amount":-1}`, `{"amount":1,"amount":2}`,
		`{"reason":null}`, `{"amount":1e400}`, `[]`, `{"reason":"\u00ff"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := ParseRefundRequest(b)
		if err != nil {
			var invalid *InvalidError
			if !errors.As(err, &invalid) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("unclassified error %v", err)
			}
			p := RefundRequestProblem(err)
			if p.Status != http.StatusBadRequest {
				t.Fatalf("problem status %d", p.Status)
			}
			if _, err := json.Marshal(p); err != nil {
				t.Fatalf("problem does not encode: %v", err)
			}
			return
		}
		if req.Amount < 0 || req.Amount > maxAmount || len(req.Reason) > maxRefundReason || !utf8.ValidString(req.Reason) {
			t.Fatalf("accepted an invalid request: %+v", req)
		}
		if fp := req.fingerprint("pay_x"); fp.Sum == req.fingerprint("pay_y").Sum {
			t.Fatal("two payments' refunds share a fingerprint")
		}
	})
}
