package provider

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Searcher is the part of the provider contract that bounds what an idempotency key can do.
// A provider remembers a key for KeyHorizon only (Stripe: "at least 24 hours"): re-sending a
// create with the same key after that may create a second payment. Past the horizon, a caller
// that does not know whether its create happened finds the payment by its own id, which it put
// in the metadata of the create itself, instead of re-sending.
type Searcher interface {
	// KeyHorizon is how long the provider is known to remember an idempotency key.
	KeyHorizon() time.Duration
	// SearchMetadata returns every payment whose metadata key has exactly value, at most
	// MaxSearchResults of them. The provider's search index may lag its writes (Stripe: about a
	// minute), so an empty answer is evidence only well after the create.
	SearchMetadata(ctx context.Context, key, value string) ([]Payment, error)
}

// StripeKeyHorizon is Stripe's idempotency key retention (docs.stripe.com/api/idempotent_requests:
// keys "are eligible to be removed from the system automatically after they're at least 24
// hours old").
const StripeKeyHorizon = 24 * time.Hour

// MaxSearchResults caps a metadata search: one payment is expected, two are a duplicate a
// person must look at, and more need no counting.
const MaxSearchResults = 10

// ErrBadSearchValue means a metadata search value has characters the query language would
// have to escape; our ids never do, so the search is refused rather than escaped.
var ErrBadSearchValue = errors.New("provider: metadata search value must be letters, digits, '_' or '-'")

// CheckSearchValue reports whether v can be searched for verbatim.
func CheckSearchValue(v string) error {
	if v == "" || len(v) > 255 || strings.IndexFunc(v, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) >= 0 {
		return ErrBadSearchValue
	}
	return nil
}

// ErrSearchUnsupported means the provider cannot search by metadata.
var ErrSearchUnsupported = errors.New("provider: metadata search not supported")
