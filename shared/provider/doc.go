// Package provider is the payment-provider contract: the Provider interface the payments API,
// recovery and reconciliation call, the Payment they get back in our own status vocabulary, the
// typed errors they branch on, and the deterministic provider idempotency keys.
//
// Callers branch on outcomes with errors.As:
//
//	*DeclineError        the card was declined; final; classify with the decline tables
//	*UnknownOutcomeError maybe applied; repeat only with the same IdempotencyKey
//	*ThrottledError      429; RetryAfter says how long to wait
//	*TransientError      not applied; safe to repeat
//	*PermanentError      rejected for good (ErrNotFound, ErrIdempotencyMismatch via errors.Is)
//	*CredentialsError    401/403; alert an operator
//
// The retry policy (package retry) is the only place that decides which of these are repeated.
package provider
