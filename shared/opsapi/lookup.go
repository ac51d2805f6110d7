package opsapi

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runtwice/twice/shared/attempts"
)

// Lookup is the answer of GET /ops/attempts: the attempts found, newest first, and how the
// value was read. A lookup by a caller's Idempotency-Key also lists everything filed under the
// payment that key created (PaymentID), in the key's Scope.
type Lookup struct {
	attempts.Page
	By        attempts.By `json:"by"`
	Value     string      `json:"value"`
	Scope     string      `json:"scope,omitempty"`
	PaymentID string      `json:"payment_id,omitempty"`
}

// ParseLookup reads an attempt lookup: exactly one of idempotency_key, payment_id, event_id,
// provider_payment_id, invoice; and, with idempotency_key, an optional scope (the caller's
// principal; the API's own scope when absent).
func ParseLookup(q url.Values) (attempts.By, string, error) {
	var by attempts.By
	var value string
	for _, b := range attempts.Lookups {
		if v := q.Get(string(b)); v != "" {
			if by != "" {
				return "", "", &FieldError{Field: string(b), Reason: "give exactly one of " + lookupNames()}
			}
			by, value = b, v
		}
	}
	if by == "" {
		return "", "", &FieldError{Field: "idempotency_key", Reason: "give one of " + lookupNames()}
	}
	if len(value) > 255 || !utf8.ValidString(value) {
		return "", "", &FieldError{Field: string(by), Reason: "at most 255 characters"}
	}
	if s := q.Get("scope"); len(s) > 255 || !utf8.ValidString(s) {
		return "", "", &FieldError{Field: "scope", Reason: "at most 255 characters"}
	}
	return by, value, nil
}

func lookupNames() string {
	names := make([]string, len(attempts.Lookups))
	for i, b := range attempts.Lookups {
		names[i] = string(b)
	}
	return strings.Join(names, ", ")
}

// find answers a lookup. By idempotency key it asks twice: under the key as given (a provider
// key, twice_pay_..., is filed so) and under the payment the caller's key created in scope, and
// merges the two, newest first.
func (h *Handler) find(ctx context.Context, by attempts.By, value, scope, cursor string) (Lookup, error) {
	out := Lookup{By: by, Value: value}
	page, err := h.Attempts.Lookup(ctx, by, value, cursor)
	if err != nil {
		return out, err
	}
	out.Page = page
	if by != attempts.ByIdempotencyKey || h.PaymentIDFor == nil || cursor != "" {
		return out, nil
	}
	if scope == "" {
		scope = h.CallerScope
	}
	out.Scope = scope
	out.PaymentID = h.PaymentIDFor(scope, value)
	more, err := h.Attempts.Lookup(ctx, attempts.ByPaymentID, out.PaymentID, "")
	if err != nil {
		return out, err
	}
	seen := map[string]bool{}
	for _, a := range out.Attempts {
		seen[a.ID] = true
	}
	for _, a := range more.Attempts {
		if !seen[a.ID] {
			out.Attempts = append(out.Attempts, a)
		}
	}
	slices.SortStableFunc(out.Attempts, func(a, b attempts.Attempt) int { return b.StartedAt.Compare(a.StartedAt) })
	// Page on by payment_id from here (the key's own attempts fit one page: a key is a few calls).
	out.Cursor = more.Cursor
	out.UnverifiedClaims, out.Notice = more.UnverifiedClaims, more.Notice
	return out, nil
}

func (h *Handler) lookup(w http.ResponseWriter, r *http.Request, _ string) {
	if h.Attempts == nil {
		problemNotConfigured(w)
		return
	}
	by, value, err := ParseLookup(r.URL.Query())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.find(r.Context(), by, value, r.URL.Query().Get("scope"), r.URL.Query().Get("cursor"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// RefusedLister lists the quarantined (unverified) deliveries of a day; *attempts.Log is one.
type RefusedLister interface {
	ListRefused(ctx context.Context, day time.Time, cursor string) (attempts.Page, error)
}

var _ RefusedLister = (*attempts.Log)(nil)

// refused serves GET /ops/refused?day=yyyy-mm-dd (default today): the deliveries that failed
// verification that day, newest first, with their source, body hash and the ids they claimed.
func (h *Handler) refused(w http.ResponseWriter, r *http.Request, _ string) {
	rl, ok := h.Attempts.(RefusedLister)
	if !ok {
		problemNotConfigured(w)
		return
	}
	q := r.URL.Query()
	day := h.now().UTC()
	if s := q.Get("day"); s != "" {
		d, err := time.Parse("2006-01-02", s)
		if err != nil || d.Year() < 2000 {
			h.fail(w, r, &FieldError{Field: "day", Reason: "want yyyy-mm-dd"})
			return
		}
		day = d
	}
	page, err := rl.ListRefused(r.Context(), day, q.Get("cursor"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}
