package retry

import (
	"context"
	"errors"
	"iter"
	"testing"

	"github.com/runtwice/twice/shared/provider"
)

// fakeOps is a fakeProvider that also captures, cancels and refunds from the same script.
type fakeOps struct {
	fakeProvider
}

func (f *fakeOps) Capture(_ context.Context, r provider.CaptureRequest) (provider.Payment, error) {
	return f.next(r.IdempotencyKey)
}
func (f *fakeOps) Cancel(_ context.Context, r provider.CancelRequest) (provider.Payment, error) {
	return f.next(r.IdempotencyKey)
}
func (f *fakeOps) Refund(_ context.Context, r provider.RefundRequest) (provider.Refund, error) {
	_, err := f.next(r.IdempotencyKey)
	if err != nil {
		return provider.Refund{}, err
	}
	return provider.Refund{ID: "re_1", Status: provider.RefundSucceeded}, nil
}
func (f *fakeOps) Refunds(context.Context, provider.RefundListParams) iter.Seq2[provider.Refund, error] {
	return func(func(provider.Refund, error) bool) {}
}

var pageErr = &provider.TransientError{Op: "refunds", StatusCode: 503}

func TestProviderWrapperOperations(t *testing.T) {
	unknown := &provider.UnknownOutcomeError{Op: "x", IdempotencyKey: "k"}
	ctx := context.Background()
	tests := map[string]struct {
		call      func(p *Provider) error
		errs      []error
		wantCalls int
		wantErr   error
	}{
		"capture without a key is refused before any call": {
			call:    func(p *Provider) error { _, err := p.Capture(ctx, provider.CaptureRequest{ID: "pi"}); return err },
			wantErr: provider.ErrMissingIdempotencyKey,
		},
		"cancel without a key is refused before any call": {
			call:    func(p *Provider) error { _, err := p.Cancel(ctx, provider.CancelRequest{ID: "pi"}); return err },
			wantErr: provider.ErrMissingIdempotencyKey,
		},
		"refund without a key is refused before any call": {
			call:    func(p *Provider) error { _, err := p.Refund(ctx, provider.RefundRequest{Payment: "pi"}); return err },
			wantErr: provider.ErrMissingIdempotencyKey,
		},
		"capture repeats an unknown outcome with its key": {
			call: func(p *Provider) error {
				_, err := p.Capture(ctx, provider.CaptureRequest{ID: "pi", IdempotencyKey: "k"})
				return err
			},
			errs: []error{unknown, unknown}, wantCalls: 3,
		},
		"cancel repeats a 429 with its key": {
			call: func(p *Provider) error {
				_, err := p.Cancel(ctx, provider.CancelRequest{ID: "pi", IdempotencyKey: "k"})
				return err
			},
			errs: []error{&provider.ThrottledError{Op: "cancel"}}, wantCalls: 2,
		},
		"refund repeats an unknown outcome with its key": {
			call: func(p *Provider) error {
				r, err := p.Refund(ctx, provider.RefundRequest{Payment: "pi", IdempotencyKey: "k"})
				if err == nil && r.ID != "re_1" {
					return errors.New("refund lost in the wrapper")
				}
				return err
			},
			errs: []error{unknown}, wantCalls: 2,
		},
		"a refund over what remains is not repeated": {
			call: func(p *Provider) error {
				_, err := p.Refund(ctx, provider.RefundRequest{Payment: "pi", IdempotencyKey: "k"})
				return err
			},
			errs:      []error{&provider.PermanentError{Op: "refund", StatusCode: 400, Code: "amount_too_large"}},
			wantCalls: 1, wantErr: &provider.PermanentError{StatusCode: 400},
		},
		"a capture in the wrong state is not repeated": {
			call: func(p *Provider) error {
				_, err := p.Capture(ctx, provider.CaptureRequest{ID: "pi", IdempotencyKey: "k"})
				return err
			},
			errs:      []error{&provider.PermanentError{Op: "capture", StatusCode: 400, Code: "payment_intent_unexpected_state"}},
			wantCalls: 1, wantErr: &provider.PermanentError{StatusCode: 400},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := &fakeOps{fakeProvider: fakeProvider{errs: tc.errs}}
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

// A failed page of refunds is fetched again after the last refund yielded, never from the
// start: no refund is yielded twice.
func TestRefundsResumeAfterTheLastYielded(t *testing.T) {
	// First call: re_3, re_2, then the page fails; second call (after re_2): re_1.
	calls := 0
	var got []string
	pol, _ := testPolicy(5)
	p := &Provider{Next: &scriptedRefunds{fn: func(after string) ([]provider.Refund, error) {
		calls++
		if calls == 1 {
			return []provider.Refund{{ID: "re_3"}, {ID: "re_2"}}, pageErr
		}
		if after != "re_2" {
			t.Errorf("resumed after %q, want re_2", after)
		}
		return []provider.Refund{{ID: "re_1"}}, nil
	}}, Policy: pol}
	for r, err := range p.Refunds(context.Background(), provider.RefundListParams{Payment: "pi_1"}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.ID)
	}
	if len(got) != 3 || got[0] != "re_3" || got[1] != "re_2" || got[2] != "re_1" || calls != 2 {
		t.Fatalf("yielded %v in %d calls", got, calls)
	}
}

func TestOperationsOfAProviderWithout(t *testing.T) {
	pol, _ := testPolicy(5)
	p := &Provider{Next: &fakeProvider{}, Policy: pol}
	if _, err := p.Capture(context.Background(), provider.CaptureRequest{ID: "pi", IdempotencyKey: "k"}); !errors.Is(err, provider.ErrOperationsUnsupported) {
		t.Fatalf("err = %v", err)
	}
	for _, err := range p.Refunds(context.Background(), provider.RefundListParams{Payment: "pi"}) {
		if !errors.Is(err, provider.ErrOperationsUnsupported) {
			t.Fatalf("err = %v", err)
		}
	}
}

// scriptedRefunds answers Refunds from fn: the refunds of one page, then its error.
type scriptedRefunds struct {
	fakeOps
	fn func(after string) ([]provider.Refund, error)
}

func (s *scriptedRefunds) Refunds(_ context.Context, p provider.RefundListParams) iter.Seq2[provider.Refund, error] {
	return func(yield func(provider.Refund, error) bool) {
		rs, err := s.fn(p.StartingAfter)
		for _, r := range rs {
			if !yield(r, nil) {
				return
			}
		}
		if err != nil {
			yield(provider.Refund{}, err)
		}
	}
}
