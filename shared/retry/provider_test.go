package retry

import (
	"context"
	"errors"
	"iter"
	"testing"

	"github.com/runtwice/twice/shared/provider"
)

// fakeProvider answers from scripts, counting calls.
type fakeProvider struct {
	errs  []error // per call of Create/Get/Confirm; past the end: success
	calls int
	keys  []string
}

func (f *fakeProvider) next(key string) (provider.Payment, error) {
	f.calls++
	f.keys = append(f.keys, key)
	if f.calls <= len(f.errs) && f.errs[f.calls-1] != nil {
		return provider.Payment{}, f.errs[f.calls-1]
	}
	return provider.Payment{ID: "pi_1", Status: provider.StatusSucceeded}, nil
}

func (f *fakeProvider) Create(_ context.Context, r provider.CreateRequest) (provider.Payment, error) {
	return f.next(r.IdempotencyKey)
}
func (f *fakeProvider) Get(context.Context, string) (provider.Payment, error) { return f.next("") }
func (f *fakeProvider) Confirm(_ context.Context, r provider.ConfirmRequest) (provider.Payment, error) {
	return f.next(r.IdempotencyKey)
}
func (f *fakeProvider) PaymentMethodCard(context.Context, string) (provider.Card, error) {
	_, err := f.next("")
	if err != nil {
		return provider.Card{}, err
	}
	return provider.Card{Fingerprint: "fp_1", Brand: "visa"}, nil
}
func (f *fakeProvider) List(context.Context, provider.ListParams) iter.Seq2[provider.Payment, error] {
	return func(func(provider.Payment, error) bool) {}
}

func TestProviderWrapper(t *testing.T) {
	unknown := &provider.UnknownOutcomeError{Op: "x", IdempotencyKey: "k"}
	tests := map[string]struct {
		call      func(p *Provider) error
		errs      []error
		wantCalls int
		wantErr   error
	}{
		"create without a key is refused before any call": {
			call: func(p *Provider) error {
				_, err := p.Create(context.Background(), provider.CreateRequest{})
				return err
			},
			wantErr: provider.ErrMissingIdempotencyKey,
		},
		"confirm without a key is refused before any call": {
			call: func(p *Provider) error {
				_, err := p.Confirm(context.Background(), provider.ConfirmRequest{ID: "pi"})
				return err
			},
			wantErr: provider.ErrMissingIdempotencyKey,
		},
		"create repeats an unknown outcome with its key": {
			call: func(p *Provider) error {
				_, err := p.Create(context.Background(), provider.CreateRequest{IdempotencyKey: "k"})
				return err
			},
			errs: []error{unknown, unknown}, wantCalls: 3,
		},
		"get repeats an unknown outcome": {
			call: func(p *Provider) error { _, err := p.Get(context.Background(), "pi_1"); return err },
			errs: []error{&provider.UnknownOutcomeError{Op: "get"}}, wantCalls: 2,
		},
		"a payment method's card read repeats an unknown outcome": {
			call: func(p *Provider) error {
				c, err := p.PaymentMethodCard(context.Background(), "pm_1")
				if err == nil && c.Fingerprint != "fp_1" {
					return errors.New("card lost in the wrapper")
				}
				return err
			},
			errs: []error{&provider.UnknownOutcomeError{Op: "payment_method"}, &provider.TransientError{Op: "payment_method"}}, wantCalls: 3,
		},
		"a payment method's card read stops at a 404": {
			call: func(p *Provider) error { _, err := p.PaymentMethodCard(context.Background(), "pm_x"); return err },
			errs: []error{&provider.PermanentError{Op: "payment_method", StatusCode: 404}}, wantCalls: 1,
			wantErr: &provider.PermanentError{StatusCode: 404},
		},
		"confirm stops at a decline": {
			call: func(p *Provider) error {
				_, err := p.Confirm(context.Background(), provider.ConfirmRequest{ID: "pi", IdempotencyKey: "k"})
				return err
			},
			errs: []error{&provider.DeclineError{}}, wantCalls: 1, wantErr: &provider.DeclineError{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := &fakeProvider{errs: tc.errs}
			pol, _ := testPolicy(5)
			err := tc.call(&Provider{Next: f, Policy: pol})
			if f.calls != tc.wantCalls {
				t.Fatalf("calls = %d, want %d", f.calls, tc.wantCalls)
			}
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("err = %v", err)
			case errors.Is(tc.wantErr, provider.ErrMissingIdempotencyKey) && !errors.Is(err, tc.wantErr):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			case tc.wantErr != nil && Classify(err) != Classify(tc.wantErr):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			for _, k := range f.keys {
				if k != f.keys[0] {
					t.Fatalf("keys changed between attempts: %v", f.keys)
				}
			}
		})
	}
}
