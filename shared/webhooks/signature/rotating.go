package signature

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/runtwice/twice/shared/webhooks"
)

// SecretSource supplies the active secrets under a name; secrets.Cached and secrets.Static
// satisfy it.
type SecretSource interface {
	Secrets(ctx context.Context, name string) ([]string, error)
}

// Rotating is a webhooks.Verifiers whose verifiers follow the secrets in a SecretSource: each call asks
// the source (which caches) and rebuilds a provider's verifier only when its secrets changed.
// A rotation is then just a new parameter value; no redeploy. Build it with NewRotating, which
// checks Names once.
type Rotating struct {
	Source SecretSource
	// Names maps provider names (webhooks.ProviderStripe, webhooks.ProviderStandard) to secret names in Source.
	Names map[string]string
	// Now and Tolerance apply to every verifier built (see StripeVerifier).
	Now       func() time.Time
	Tolerance time.Duration

	cache *verifierCache
}

// verifierCache holds the verifiers built so far, behind a pointer so that NewRotating can
// take its Rotating by value.
type verifierCache struct {
	mu    sync.Mutex
	built map[string]built
}

type built struct {
	secrets []string
	v       webhooks.Verifier
}

var _ webhooks.Verifiers = (*Rotating)(nil)

// NewRotating returns r ready to hand out verifiers, or an error for an unknown provider or an
// empty secret name.
func NewRotating(r Rotating) (*Rotating, error) {
	for p, n := range r.Names {
		if p != webhooks.ProviderStripe && p != webhooks.ProviderStandard {
			return nil, fmt.Errorf("%w: %q", webhooks.ErrUnknownProvider, p)
		}
		if n == "" {
			return nil, fmt.Errorf("%w: no secret name for %s", webhooks.ErrNoSecret, p)
		}
	}
	return &Rotating{Source: r.Source, Names: r.Names, Now: r.Now, Tolerance: r.Tolerance, cache: &verifierCache{built: map[string]built{}}}, nil
}

// Verifier returns the provider's verifier over its current secrets.
func (r *Rotating) Verifier(ctx context.Context, provider string) (webhooks.Verifier, error) {
	name, ok := r.Names[provider]
	if !ok {
		return nil, webhooks.ErrUnknownProvider
	}
	secrets, err := r.Source.Secrets(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("webhooks: secrets for %s: %w", provider, err)
	}
	r.cache.mu.Lock()
	defer r.cache.mu.Unlock()
	if b, ok := r.cache.built[provider]; ok && slices.Equal(b.secrets, secrets) {
		return b.v, nil
	}
	var v webhooks.Verifier
	switch provider {
	case webhooks.ProviderStripe:
		v, err = NewStripeVerifier(StripeVerifier{Secrets: secrets, Now: r.Now, Tolerance: r.Tolerance})
	default:
		v, err = NewStandardVerifier(StandardVerifier{Secrets: secrets, Now: r.Now, Tolerance: r.Tolerance})
	}
	if err != nil {
		return nil, fmt.Errorf("webhooks: secrets for %s: %w", provider, err)
	}
	r.cache.built[provider] = built{secrets: slices.Clone(secrets), v: v}
	return v, nil
}
