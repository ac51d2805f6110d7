// Package retry is the outbound retry policy, in one place: it classifies every result of a
// provider call, decides whether and when to repeat it, and keeps a per-provider retry budget.
//
//	429 + Retry-After (seconds or HTTP-date)  wait exactly that long (up to MaxRetryAfter)
//	500, 502, 503, 504, refused connection     exponential backoff with full jitter
//	timeout, reset, EOF after send, 409        unknown outcome: repeated only with the same idempotency key
//	400, 404, 422                              permanent: never repeated
//	401, 403                                   credentials: never repeated; alert
//	402 card decline                           a business outcome: never repeated here
//
// Full jitter: the wait before retry n is uniform in [0, min(Cap, Base*2^n)], drawn from an
// injected *rand.Rand. The Budget is the AWS SDK standard-mode token bucket (500 tokens, a retry
// costs 5, a timeout or reset 10, a success refunds what its retries took or 1): when it is empty
// no retry happens, so an outage cannot multiply the load on the provider.
//
// Provider wraps any provider.Provider with a Policy; it is what the rest of the code calls.
// NewAPI is the payments API's policy, which leaves an unknown outcome to the background
// resolver instead of repeating it while the caller waits.
package retry
