package retry

import "sync"

// Budget defaults: the AWS SDK's standard retry mode.
const (
	DefaultBudgetCapacity = 500
	DefaultRetryCost      = 5
	DefaultTimeoutCost    = 10
	DefaultSuccessRefund  = 1
)

// Budget is a per-provider retry token bucket, as in the AWS SDK's standard retry mode. Every
// retry takes tokens (more for an unknown outcome, which usually means a timeout); a success puts
// back what its own retries took, or DefaultSuccessRefund when it needed none. When the bucket
// cannot pay for a retry, the call fails fast with its last error: during an outage the policy
// stops multiplying load instead of tripling it. A Budget is safe for concurrent use.
type Budget struct {
	mu       sync.Mutex
	tokens   int
	capacity int
}

// NewBudget returns a full bucket of capacity tokens (DefaultBudgetCapacity when capacity <= 0).
func NewBudget(capacity int) *Budget {
	if capacity <= 0 {
		capacity = DefaultBudgetCapacity
	}
	return &Budget{tokens: capacity, capacity: capacity}
}

// Take takes cost tokens if the bucket holds them, and reports whether it did.
func (b *Budget) Take(cost int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cost < 0 || b.tokens < cost {
		return false
	}
	b.tokens -= cost
	return true
}

// Refund puts n tokens back, never beyond the capacity.
func (b *Budget) Refund(n int) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(b.capacity, b.tokens+n)
}

// Tokens returns the tokens left, for metrics and tests.
func (b *Budget) Tokens() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tokens
}
