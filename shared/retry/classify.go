package retry

import (
	"errors"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// Verdict is what an outbound result means for a repeat. It is decided here and nowhere else.
type Verdict int

const (
	Success        Verdict = iota
	Throttled              // 429: wait Retry-After, or back off when it is absent
	Transient              // not applied (5xx, refused connection): back off with full jitter
	UnknownOutcome         // maybe applied: repeat only with the same provider idempotency key
	Decline                // 402 card decline: a final business outcome, never repeated here
	Permanent              // 400/404/422 and other 4xx: the same request fails again
	Credentials            // 401/403: needs an operator
)

var verdictNames = [...]string{"success", "throttled", "transient", "unknown_outcome", "decline", "permanent", "credentials"}

func (v Verdict) String() string {
	if v < 0 || int(v) >= len(verdictNames) {
		return "verdict(" + strconv.Itoa(int(v)) + ")"
	}
	return verdictNames[v]
}

// ClassifyStatus is the verdict on an HTTP status from the provider.
//
// 409 is an unknown outcome, not a permanent error: Stripe answers 409 when another request with
// the same idempotency key is still in flight, and that request may yet charge. Repeating with the
// same key later returns its result.
func ClassifyStatus(status int) Verdict {
	switch {
	case status >= 200 && status < 300:
		return Success
	case status == http.StatusTooManyRequests:
		return Throttled
	case status == http.StatusPaymentRequired:
		return Decline
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return Credentials
	case status == http.StatusConflict:
		return UnknownOutcome
	case status == http.StatusInternalServerError, status == http.StatusBadGateway,
		status == http.StatusServiceUnavailable, status == http.StatusGatewayTimeout:
		// The provider may have applied the request before failing (Stripe saves a 500 for
		// the key once execution started), so for a write this is an unknown outcome; the
		// adapter says so with *provider.UnknownOutcomeError. For the policy both back off.
		return Transient
	case status >= 500:
		return Transient
	default:
		return Permanent
	}
}

// ClassifyTransport classifies an error returned by http.Client.Do (no response arrived).
// A connection that was never made (dial failure, DNS) cannot have applied the request:
// Transient. Everything else - timeout, reset, EOF, a cancelled context - happened after the
// request may have left: UnknownOutcome.
func ClassifyTransport(err error) Verdict {
	if err == nil {
		return Success
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return Transient
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return Transient
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return Transient
	}
	return UnknownOutcome
}

// Classify classifies an error of package provider (or nil). Errors of other types are
// Permanent: the policy never repeats what it does not understand.
func Classify(err error) Verdict {
	if err == nil {
		return Success
	}
	var (
		decline  *provider.DeclineError
		unknown  *provider.UnknownOutcomeError
		throttle *provider.ThrottledError
		trans    *provider.TransientError
		creds    *provider.CredentialsError
	)
	switch {
	case errors.As(err, &decline):
		return Decline
	case errors.As(err, &throttle):
		return Throttled
	case errors.As(err, &unknown):
		return UnknownOutcome
	case errors.As(err, &trans):
		return Transient
	case errors.As(err, &creds):
		return Credentials
	}
	return Permanent
}

// maxRetryAfter bounds a parsed Retry-After so that adding it to a time cannot overflow.
const maxRetryAfter = 100 * 365 * 24 * time.Hour

// ParseRetryAfter parses an HTTP Retry-After value (RFC 9110 10.2.3): delta-seconds or an
// HTTP-date, relative to now. A date in the past gives zero. ok is false for an empty or
// malformed value. The result is never negative and never beyond a hundred years.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil || secs > uint64(maxRetryAfter/time.Second) {
			// All digits but too large for uint64, or beyond the bound: still a valid delta.
			return maxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d = t.Sub(now)
	switch {
	case d < 0:
		return 0, true
	case d > maxRetryAfter || d == math.MaxInt64:
		return maxRetryAfter, true
	}
	return d, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
