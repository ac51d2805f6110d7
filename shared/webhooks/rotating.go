package webhooks

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// SecretSource supplies the active secrets under a name; secrets.Cached and secrets.Static
// satisfy it.
type SecretSource interface {
	Secrets(ctx context.Context, name string) ([]string, error)
}

// Rotating is a Verifiers whose verifiers follow the secrets in a SecretSource: each call asks
// the source (which caches) and rebuilds a provider's verifier only when its secrets changed.
// A rotation is then just a new parameter value; no redeploy.
type Rotating struct {
	source SecretSource
	names  map[string]string
	opts   []Option

	mu    sync.Mutex
	built map[string]built
}

type built struct {
	secrets []string
	v       Verifier
}

var _ Verifiers = (*Rotating)(nil)

// NewRotating maps provider names (ProviderStripe, ProviderStandard) to secret names in source.
// opts apply to every verifier built.
func NewRotating(source SecretSource, names map[string]string, opts ...Option) (*Rotating, error) {
	for p, n := range names {
		if p != ProviderStripe && p != ProviderStandard {
			return nil, fmt.Errorf("%w: %q", ErrUnknownProvider, p)
		}
		if n == "" {
			return nil, fmt.Errorf("%w: no secret name for %s", ErrNoSecret, p)
		}
	}
	return &Rotating{source: source, names: names, opts: opts, built: map[string]built{}}, nil
}

// Verifier returns the provider's verifier over its current secrets.
func (r *Rotating) Verifier(ctx context.Context, provider string) (Verifier, error) {
	name, ok := r.names[provider]
	if !ok {
		return nil, ErrUnknownProvider
	}
	secrets, err := r.source.Secrets(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("webhooks: secrets for %s: %w", provider, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.built[provider]; ok && slices.Equal(b.secrets, secrets) {
		return b.v, nil
	}
	var v Verifier
	switch provider {
	case ProviderStripe:
		v, err = NewStripeVerifier(secrets, r.opts...)
	default:
		v, err = NewStandardVerifier(secrets, r.opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("webhooks: secrets for %s: %w", provider, err)
	}
	r.built[provider] = built{secrets: slices.Clone(secrets), v: v}
	return v, nil
}
