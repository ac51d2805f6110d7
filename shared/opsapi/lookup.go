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

// find answers a lookup. By idempotency key it merges, newest first: the caller's own
// requests under its key in scope, a provider key as given (twice_pay_..., filed unscoped),
// and, with PaymentIDFor, everything filed under the payment the caller's key created in
// scope. A cursor continues that payment's list (the key's own attempts fit one page: a key
// is a few calls).
func (h *Handler) find(ctx context.Context, by attempts.By, value, scope, cursor string) (Lookup, error) {
	out := Lookup{By: by, Value: value}
	if by != attempts.ByIdempotencyKey {
		page, err := h.Attempts.Lookup(ctx, by, value, cursor)
		out.Page = page
		return out, err
	}
	if scope == "" {
		scope = h.CallerScope
	}
	out.Scope = scope
	var pages []attempts.Page
	if h.PaymentIDFor != nil {
		out.PaymentID = h.PaymentIDFor(scope, value)
		page, err := h.Attempts.Lookup(ctx, attempts.ByPaymentID, out.PaymentID, cursor)
		if err != nil {
			return out, err
		}
		out.Cursor, out.UnverifiedClaims, out.Notice = page.Cursor, page.UnverifiedClaims, page.Notice
		pages = append(pages, page)
	}
	if cursor == "" {
		own, err := h.Attempts.LookupKey(ctx, scope, value, "")
		if err != nil {
			return out, err
		}
		given, err := h.Attempts.Lookup(ctx, by, value, "")
		if err != nil {
			return out, err
		}
		pages = append(pages, own, given)
	}
	seen := map[string]bool{}
	out.Attempts = []attempts.Attempt{}
	for _, p := range pages {
		for _, a := range p.Attempts {
			if !seen[a.ID] {
				seen[a.ID] = true
				out.Attempts = append(out.Attempts, a)
			}
		}
	}
	slices.SortStableFunc(out.Attempts, func(a, b attempts.Attempt) int { return b.StartedAt.Compare(a.StartedAt) })
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
