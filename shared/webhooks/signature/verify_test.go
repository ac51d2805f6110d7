package signature

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/runtwice/twice/shared/webhooks"
)

var (
	testNow       = time.Unix(1767225600, 0)
	stripeSecret  = "whsec_test_current"
	stripeSecret2 = "whsec_test_next"
	stdSecret     = "whsec_" + base64.StdEncoding.EncodeToString([]byte("standard-secret-0123456789abcdef"))
	stdSecret2    = "whsec_" + base64.StdEncoding.EncodeToString([]byte("standard-secret-rotated-987654321"))
)

func fixedClock() time.Time { return testNow }

func mustRead(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/" + name) // the fixtures package webhooks decodes
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stripeSigned signs body with stripe-go's own test helper.
func stripeSigned(body []byte, secret string, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
		Payload: body, Secret: secret, Timestamp: at,
	}).Header
}

func TestStripeVerifier(t *testing.T) {
	body := mustRead(t, "pi_succeeded.json")
	v, err := NewStripeVerifier(StripeVerifier{Secrets: []string{stripeSecret}, Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	rotating, err := NewStripeVerifier(StripeVerifier{Secrets: []string{stripeSecret, stripeSecret2}, Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	good := stripeSigned(body, stripeSecret, testNow)
	other := stripeSigned(body, "whsec_other", testNow)
	otherSig := other[strings.Index(other, "v1="):]
	tests := map[string]struct {
		v      webhooks.Verifier
		header []string // nil: no header
		body   []byte
		want   error
	}{
		"valid":                       {v: v, header: []string{good}, body: body},
		"valid at edge of past":       {v: v, header: []string{stripeSigned(body, stripeSecret, testNow.Add(-300*time.Second))}, body: body},
		"valid at edge of future":     {v: v, header: []string{stripeSigned(body, stripeSecret, testNow.Add(300*time.Second))}, body: body},
		"body changed":                {v: v, header: []string{good}, body: append([]byte(" "), body...), want: webhooks.ErrNoValidSignature},
		"wrong secret":                {v: v, header: []string{other}, body: body, want: webhooks.ErrNoValidSignature},
		"stale":                       {v: v, header: []string{stripeSigned(body, stripeSecret, testNow.Add(-301*time.Second))}, body: body, want: webhooks.ErrTooOld},
		"future":                      {v: v, header: []string{stripeSigned(body, stripeSecret, testNow.Add(301*time.Second))}, body: body, want: webhooks.ErrTooNew},
		"missing header":              {v: v, body: body, want: webhooks.ErrMissingHeader},
		"empty header":                {v: v, header: []string{""}, body: body, want: webhooks.ErrMissingHeader},
		"garbage header":              {v: v, header: []string{"garbage"}, body: body, want: webhooks.ErrBadHeader},
		"t not a number":              {v: v, header: []string{"t=abc,v1=00"}, body: body, want: webhooks.ErrBadHeader},
		"no t":                        {v: v, header: []string{otherSig}, body: body, want: webhooks.ErrBadHeader},
		"no v1":                       {v: v, header: []string{fmt.Sprintf("t=%d,v0=abcd", testNow.Unix())}, body: body, want: webhooks.ErrNoValidSignature},
		"v1 not hex":                  {v: v, header: []string{fmt.Sprintf("t=%d,v1=zz", testNow.Unix())}, body: body, want: webhooks.ErrNoValidSignature},
		"two headers":                 {v: v, header: []string{good, good}, body: body, want: webhooks.ErrBadHeader},
		"several v1, one valid":       {v: v, header: []string{good + "," + otherSig[:3] + strings.Repeat("0", 64) + "," + otherSig}, body: body},
		"several v1, none valid":      {v: v, header: []string{other + ",v1=" + strings.Repeat("ab", 32)}, body: body, want: webhooks.ErrNoValidSignature},
		"fresh t prepended to replay": {v: v, header: []string{fmt.Sprintf("t=%d,", testNow.Unix()) + stripeSigned(body, stripeSecret, testNow.Add(-time.Hour))}, body: body, want: webhooks.ErrBadHeader},
		"rotation: old secret":        {v: rotating, header: []string{good}, body: body},
		"rotation: new secret":        {v: rotating, header: []string{stripeSigned(body, stripeSecret2, testNow)}, body: body},
		"rotation: neither":           {v: rotating, header: []string{other}, body: body, want: webhooks.ErrNoValidSignature},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := http.Header{}
			for _, s := range tc.header {
				h.Add(webhooks.StripeSignatureHeader, s)
			}
			err := tc.v.Verify(h, tc.body)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), stripeSecret) || strings.Contains(err.Error(), "whsec_")) {
				t.Fatalf("error leaks a secret: %v", err)
			}
		})
	}
}

func TestNewVerifierValidates(t *testing.T) {
	tests := map[string]struct {
		build func() error
		want  error
	}{
		"stripe none":   {func() error { _, err := NewStripeVerifier(StripeVerifier{}); return err }, webhooks.ErrNoSecret},
		"stripe blanks": {func() error { _, err := NewStripeVerifier(StripeVerifier{Secrets: []string{"", "  "}}); return err }, webhooks.ErrNoSecret},
		"standard none": {func() error { _, err := NewStandardVerifier(StandardVerifier{}); return err }, webhooks.ErrNoSecret},
		"standard not b64": {func() error {
			_, err := NewStandardVerifier(StandardVerifier{Secrets: []string{"whsec_!!!not-base64"}})
			return err
		}, webhooks.ErrBadSecret},
		"standard empty key": {func() error { _, err := NewStandardVerifier(StandardVerifier{Secrets: []string{"whsec_"}}); return err }, webhooks.ErrBadSecret},
		"standard ok": {func() error {
			_, err := NewStandardVerifier(StandardVerifier{Secrets: []string{stdSecret}})
			return err
		}, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.build()
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "not-base64") {
				t.Fatalf("error leaks the secret: %v", err)
			}
		})
	}
}

// standardSigned signs with the standard-webhooks reference library, independent of our verifier's
// header parsing and timestamp logic.
func standardSigned(t testing.TB, id string, body []byte, secret string, at time.Time) http.Header {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(id, at, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(webhooks.StandardIDHeader, id)
	h.Set(webhooks.StandardTimestampHeader, fmt.Sprint(at.Unix()))
	h.Set(webhooks.StandardSignatureHeader, sig)
	return h
}

func TestStandardVerifier(t *testing.T) {
	body := mustRead(t, "standard.json")
	v, err := NewStandardVerifier(StandardVerifier{Secrets: []string{stdSecret}, Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	rotating, err := NewStandardVerifier(StandardVerifier{Secrets: []string{stdSecret, stdSecret2}, Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	good := func() http.Header { return standardSigned(t, "msg_1", body, stdSecret, testNow) }
	with := func(h http.Header, k, val string) http.Header { h.Set(k, val); return h }
	without := func(h http.Header, k string) http.Header { h.Del(k); return h }
	otherSig := standardSigned(t, "msg_1", body, stdSecret2, testNow).Get(webhooks.StandardSignatureHeader)
	tests := map[string]struct {
		v    webhooks.Verifier
		h    http.Header
		body []byte
		want error
	}{
		"valid":                  {v: v, h: good(), body: body},
		"body changed":           {v: v, h: good(), body: append(body, ' '), want: webhooks.ErrNoValidSignature},
		"id changed":             {v: v, h: with(good(), webhooks.StandardIDHeader, "msg_2"), body: body, want: webhooks.ErrNoValidSignature},
		"wrong secret":           {v: v, h: standardSigned(t, "msg_1", body, stdSecret2, testNow), body: body, want: webhooks.ErrNoValidSignature},
		"stale":                  {v: v, h: standardSigned(t, "msg_1", body, stdSecret, testNow.Add(-301*time.Second)), body: body, want: webhooks.ErrTooOld},
		"future":                 {v: v, h: standardSigned(t, "msg_1", body, stdSecret, testNow.Add(301*time.Second)), body: body, want: webhooks.ErrTooNew},
		"edge of window":         {v: v, h: standardSigned(t, "msg_1", body, stdSecret, testNow.Add(-300*time.Second)), body: body},
		"missing id":             {v: v, h: without(good(), webhooks.StandardIDHeader), body: body, want: webhooks.ErrMissingHeader},
		"missing timestamp":      {v: v, h: without(good(), webhooks.StandardTimestampHeader), body: body, want: webhooks.ErrMissingHeader},
		"missing signature":      {v: v, h: without(good(), webhooks.StandardSignatureHeader), body: body, want: webhooks.ErrMissingHeader},
		"garbage timestamp":      {v: v, h: with(good(), webhooks.StandardTimestampHeader, "yesterday"), body: body, want: webhooks.ErrBadHeader},
		"garbage signature":      {v: v, h: with(good(), webhooks.StandardSignatureHeader, "garbage"), body: body, want: webhooks.ErrNoValidSignature},
		"several v1, one valid":  {v: v, h: with(good(), webhooks.StandardSignatureHeader, otherSig+" v2,abc "+good().Get(webhooks.StandardSignatureHeader)), body: body},
		"rotation: old secret":   {v: rotating, h: good(), body: body},
		"rotation: new secret":   {v: rotating, h: standardSigned(t, "msg_1", body, stdSecret2, testNow), body: body},
		"rotation: neither":      {v: rotating, h: with(good(), webhooks.StandardSignatureHeader, "v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32))), body: body, want: webhooks.ErrNoValidSignature},
		"timestamp tampered":     {v: v, h: with(good(), webhooks.StandardTimestampHeader, fmt.Sprint(testNow.Unix()+1)), body: body, want: webhooks.ErrNoValidSignature},
		"prefixless secret okay": {v: mustStd(t, strings.TrimPrefix(stdSecret, "whsec_")), h: good(), body: body},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.v.Verify(tc.h, tc.body)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

func mustStd(t testing.TB, secrets ...string) *StandardVerifier {
	v, err := NewStandardVerifier(StandardVerifier{Secrets: secrets, Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestStaticVerifiers(t *testing.T) {
	s := webhooks.Static{webhooks.ProviderStandard: mustStd(t, stdSecret)}
	if _, err := s.Verifier(t.Context(), "paypal"); !errors.Is(err, webhooks.ErrUnknownProvider) {
		t.Fatalf("unknown provider: err = %v", err)
	}
	if v, err := s.Verifier(t.Context(), webhooks.ProviderStandard); err != nil || v == nil {
		t.Fatalf("known provider: %v, %v", v, err)
	}
}

func FuzzParseStripeSignature(f *testing.F) {
	body := []byte(`{"id":"evt_1"}`)
	f.Add(stripeSigned(body, stripeSecret, testNow))
	f.Add("t=1,v1=00,v1=zz,v0=ab")
	f.Add("t=1,t=2,v1=00")
	f.Add("garbage")
	f.Add("")
	f.Add("t=,v1=")
	f.Add("t=99999999999999999999")
	v, _ := NewStripeVerifier(StripeVerifier{Secrets: []string{stripeSecret}, Now: fixedClock})
	f.Fuzz(func(t *testing.T, header string) {
		sh, err := ParseStripeSignature(header)
		if err == nil && sh.Timestamp.IsZero() {
			t.Fatalf("accepted %q without a timestamp", header)
		}
		h := http.Header{}
		h.Set(webhooks.StripeSignatureHeader, header)
		verr := v.Verify(h, body)
		if verr == nil && header != stripeSigned(body, stripeSecret, testNow) && err != nil {
			t.Fatalf("verified %q that does not parse: %v", header, err)
		}
		for _, s := range []error{webhooks.ErrMissingHeader, webhooks.ErrBadHeader, webhooks.ErrNoValidSignature, webhooks.ErrTooOld, webhooks.ErrTooNew} {
			if errors.Is(verr, s) {
				return
			}
		}
		if verr != nil {
			t.Fatalf("Verify(%q) = %v, not a sentinel", header, verr)
		}
	})
}

func FuzzParseStandardHeaders(f *testing.F) {
	body := []byte(`{"type":"a","timestamp":"2026-01-01T00:00:00Z","data":{}}`)
	h := standardSigned(f, "msg_1", body, stdSecret, testNow)
	f.Add("msg_1", h.Get(webhooks.StandardTimestampHeader), h.Get(webhooks.StandardSignatureHeader))
	f.Add("", "", "")
	f.Add("id", "x", "v1,abc v1a,zz ,,")
	f.Add("id", "-99999999999999999", "v1")
	v := mustStd(f, stdSecret)
	f.Fuzz(func(t *testing.T, id, ts, sig string) {
		h := http.Header{}
		h.Set(webhooks.StandardIDHeader, id)
		h.Set(webhooks.StandardTimestampHeader, ts)
		h.Set(webhooks.StandardSignatureHeader, sig)
		_, perr := ParseStandardHeaders(h)
		err := v.Verify(h, body)
		if err == nil && perr != nil {
			t.Fatalf("verified headers that do not parse: %v", perr)
		}
		for _, s := range []error{webhooks.ErrMissingHeader, webhooks.ErrBadHeader, webhooks.ErrNoValidSignature, webhooks.ErrTooOld, webhooks.ErrTooNew} {
			if errors.Is(err, s) {
				return
			}
		}
		if err != nil {
			t.Fatalf("Verify = %v, not a sentinel", err)
		}
	})
}

// The header names package webhooks declares (to build deliveries without this package) are the
// libraries' own.
func TestHeaderNamesAreTheLibraries(t *testing.T) {
	for got, want := range map[string]string{
		webhooks.StripeSignatureHeader:   "Stripe-Signature", // stripe-go's webhook package has no exported name for it
		webhooks.StandardIDHeader:        standardwebhooks.HeaderWebhookID,
		webhooks.StandardTimestampHeader: standardwebhooks.HeaderWebhookTimestamp,
		webhooks.StandardSignatureHeader: standardwebhooks.HeaderWebhookSignature,
	} {
		if got != want {
			t.Errorf("header %q, the library's is %q", got, want)
		}
	}
}
