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
type SecretKeyed struct {
	source KeySource
	name   string
	cfg    Config

	mu     sync.Mutex
	key    string
	client *Client
}

var _ provider.Provider = (*SecretKeyed)(nil)

// NewSecretKeyed returns a provider that builds a Client from cfg (its APIKey ignored) with the
// key stored under name in source. It makes no call.
func NewSecretKeyed(source KeySource, name string, cfg Config) *SecretKeyed {
	return &SecretKeyed{source: source, name: name, cfg: cfg}
}

// current returns the Client for the key in force now. A source failure is an unavailable
// provider: nothing was sent, so the caller may retry safely.
func (s *SecretKeyed) current(ctx context.Context) (*Client, error) {
	keys, err := s.source.Secrets(ctx, s.name)
	if err == nil && len(keys) == 0 {
		err = ErrNoAPIKey
	}
	if err != nil {
		return nil, &provider.TransientError{Op: "api key", Err: fmt.Errorf("stripeprovider: key %s: %w", s.name, err)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil && s.key == keys[0] {
		return s.client, nil
	}
	cfg := s.cfg
	cfg.APIKey = keys[0]
	c, err := New(cfg)
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
