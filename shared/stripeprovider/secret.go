package stripeprovider

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// KeySource supplies the secret API key; secrets.Cached and secrets.Static satisfy it.
type KeySource interface {
	Secrets(ctx context.Context, name string) ([]string, error)
}

// SecretKeyed is a provider.Provider whose API key is read from a KeySource on first use, not
// at start-up: a Lambda's INIT then makes no network call, and a rotated key (a new parameter
// value) is picked up when the source's cache refreshes, with no redeploy. The first secret
// under the name is the key.
//
// Build it as a literal; it makes no call until used.
type SecretKeyed struct {
	Source KeySource
	// Name is the secret's name in Source.
	Name string
	// Client holds the settings of every Client built (its APIKey is ignored).
	Client Client

	mu     sync.Mutex
	key    string
	client *Client
}

var _ provider.Provider = (*SecretKeyed)(nil)

// current returns the Client for the key in force now. A source failure is an unavailable
// provider: nothing was sent, so the caller may retry safely.
func (s *SecretKeyed) current(ctx context.Context) (*Client, error) {
	keys, err := s.Source.Secrets(ctx, s.Name)
	if err == nil && len(keys) == 0 {
		err = ErrNoAPIKey
	}
	if err != nil {
		return nil, &provider.TransientError{Op: "api key", Err: fmt.Errorf("stripeprovider: key %s: %w", s.Name, err)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil && s.key == keys[0] {
		return s.client, nil
	}
	settings := s.Client
	settings.APIKey = keys[0]
	c, err := New(settings)
	if err != nil {
		return nil, err
	}
	s.key, s.client = keys[0], c
	return c, nil
}

// Create implements provider.Provider.
func (s *SecretKeyed) Create(ctx context.Context, req provider.CreateRequest) (provider.Payment, error) {
	c, err := s.current(ctx)
	if err != nil {
		return provider.Payment{}, err
	}
	return c.Create(ctx, req)
}

// Get implements provider.Provider.
func (s *SecretKeyed) Get(ctx context.Context, id string) (provider.Payment, error) {
	c, err := s.current(ctx)
	if err != nil {
		return provider.Payment{}, err
	}
	return c.Get(ctx, id)
}

// Confirm implements provider.Provider.
func (s *SecretKeyed) Confirm(ctx context.Context, req provider.ConfirmRequest) (provider.Payment, error) {
	c, err := s.current(ctx)
	if err != nil {
		return provider.Payment{}, err
	}
	return c.Confirm(ctx, req)
}

// PaymentMethodCard implements provider.Provider.
func (s *SecretKeyed) PaymentMethodCard(ctx context.Context, paymentMethod string) (provider.Card, error) {
	c, err := s.current(ctx)
	if err != nil {
		return provider.Card{}, err
	}
	return c.PaymentMethodCard(ctx, paymentMethod)
}

// List implements provider.Provider.
func (s *SecretKeyed) List(ctx context.Context, p provider.ListParams) iter.Seq2[provider.Payment, error] {
	return func(yield func(provider.Payment, error) bool) {
		c, err := s.current(ctx)
		if err != nil {
			yield(provider.Payment{}, err)
			return
		}
		for pp, err := range c.List(ctx, p) {
			if !yield(pp, err) {
				return
			}
		}
	}
}

var _ provider.Searcher = (*SecretKeyed)(nil)

// KeyHorizon implements provider.Searcher.
func (s *SecretKeyed) KeyHorizon() time.Duration { return provider.StripeKeyHorizon }

// SearchMetadata implements provider.Searcher.
func (s *SecretKeyed) SearchMetadata(ctx context.Context, key, value string) ([]provider.Payment, error) {
	c, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	return c.SearchMetadata(ctx, key, value)
}

var _ provider.Operations = (*SecretKeyed)(nil)

// Capture implements provider.Operations.
func (s *SecretKeyed) Capture(ctx context.Context, req provider.CaptureRequest) (provider.Payment, error) {
	c, err := s.current(ctx)
	if err != nil {
		return provider.Payment{}, err
	}
	return c.Capture(ctx, req)
}

// Cancel implements provider.Operations.
func (s *SecretKeyed) Cancel(ctx context.Context, req provider.CancelRequest) (provider.Payment, error) {
	c, err := s.current(ctx)
	if err != nil {
		return provider.Payment{}, err
	}
	return c.Cancel(ctx, req)
}

// Refund implements provider.Operations.
func (s *SecretKeyed) Refund(ctx context.Context, req provider.RefundRequest) (provider.Refund, error) {
	c, err := s.current(ctx)
	if err != nil {
		return provider.Refund{}, err
	}
	return c.Refund(ctx, req)
}

// Refunds implements provider.Operations.
func (s *SecretKeyed) Refunds(ctx context.Context, p provider.RefundListParams) iter.Seq2[provider.Refund, error] {
	return func(yield func(provider.Refund, error) bool) {
		c, err := s.current(ctx)
		if err != nil {
			yield(provider.Refund{}, err)
			return
		}
		for r, err := range c.Refunds(ctx, p) {
			if !yield(r, err) {
				return
			}
		}
	}
}
