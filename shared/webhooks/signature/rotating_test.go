package signature

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/runtwice/twice/shared/webhooks"
)

type mapSource struct {
	m     map[string][]string
	err   error
	calls int
}

func (s *mapSource) Secrets(_ context.Context, name string) ([]string, error) {
	s.calls++
	if s.err != nil {
		return nil, s.err
	}
	return s.m[name], nil
}

func TestRotating(t *testing.T) {
	body := mustRead(t, "pi_succeeded.json")
	src := &mapSource{m: map[string][]string{"/stripe": {stripeSecret}, "/standard": {"not base64!"}}}
	r, err := NewRotating(Rotating{Source: src, Names: map[string]string{webhooks.ProviderStripe: "/stripe", webhooks.ProviderStandard: "/standard"}, Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	verify := func(secret string) error {
		v, err := r.Verifier(t.Context(), webhooks.ProviderStripe)
		if err != nil {
			return err
		}
		h := http.Header{}
		h.Set(webhooks.StripeSignatureHeader, stripeSigned(body, secret, testNow))
		return v.Verify(h, body)
	}
	steps := []struct {
		name    string
		secrets []string
		signer  string
		want    error
	}{
		{"current secret", []string{stripeSecret}, stripeSecret, nil},
		{"next secret not yet active", []string{stripeSecret}, stripeSecret2, webhooks.ErrNoValidSignature},
		{"rotation window: new signs", []string{stripeSecret2, stripeSecret}, stripeSecret2, nil},
		{"rotation window: old still verifies", []string{stripeSecret2, stripeSecret}, stripeSecret, nil},
		{"old retired", []string{stripeSecret2}, stripeSecret, webhooks.ErrNoValidSignature},
	}
	for _, s := range steps {
		src.m["/stripe"] = s.secrets
		if err := verify(s.signer); !errors.Is(err, s.want) || (s.want == nil && err != nil) {
			t.Fatalf("%s: %v, want %v", s.name, err, s.want)
		}
	}
	v1, _ := r.Verifier(t.Context(), webhooks.ProviderStripe)
	v2, _ := r.Verifier(t.Context(), webhooks.ProviderStripe)
	if v1 != v2 {
		t.Fatal("rebuilt a verifier although the secrets did not change")
	}

	tests := map[string]struct {
		provider string
		err      error
		want     error
	}{
		"unknown provider": {provider: "paypal", want: webhooks.ErrUnknownProvider},
		"malformed secret": {provider: webhooks.ProviderStandard, want: webhooks.ErrBadSecret},
		"source down":      {provider: webhooks.ProviderStripe, err: errSourceDown, want: errSourceDown},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src.err = tc.err
			defer func() { src.err = nil }()
			if _, err := r.Verifier(t.Context(), tc.provider); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := NewRotating(Rotating{Source: src, Names: map[string]string{"paypal": "/p"}}); !errors.Is(err, webhooks.ErrUnknownProvider) {
		t.Fatalf("NewRotating with an unknown provider: %v", err)
	}
}

var errSourceDown = errors.New("source down")
