package opsapi

import (
	"context"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/deadletter"
)

// PaymentFacts is what the dead-letter list shows of a record's payment, where it is known.
type PaymentFacts struct {
	Amount        int64  `json:"amount,omitempty"`
	Currency      string `json:"currency,omitempty"`
	Customer      string `json:"customer,omitempty"`
	PaymentStatus string `json:"payment_status,omitempty"`
	Brand         string `json:"card_brand,omitempty"`
	Last4         string `json:"card_last4,omitempty"`
}

// facts reads the payment behind each record that names one (its amount, customer, status)
// and the card the provider last named for it in the attempt log. What cannot be read is
// left out: the list is still the list.
func (h *Handler) facts(ctx context.Context, recs []deadletter.Record) map[string]PaymentFacts {
	out := map[string]PaymentFacts{}
	for _, r := range recs {
		id := r.PaymentID
		if id == "" {
			id = r.Facts.PaymentID
		}
		if id == "" || !validID(id) {
			continue
		}
		if _, done := out[id]; done {
			continue
		}
		var f PaymentFacts
		if h.Payments != nil {
			if p, err := h.Payments.Payment(ctx, id); err == nil {
				f = PaymentFacts{Amount: p.Amount, Currency: p.Currency, Customer: p.Customer, PaymentStatus: p.Status}
			}
		}
		if h.Attempts != nil {
			if page, err := h.Attempts.Lookup(ctx, attempts.ByPaymentID, id, ""); err == nil {
				for _, a := range page.Attempts { // newest first: the card most recently named
					if a.CardBrand != "" || a.CardLast4 != "" {
						f.Brand, f.Last4 = a.CardBrand, a.CardLast4
						break
					}
				}
			}
		}
		out[id] = f
	}
	return out
}

// listRow is one line of the console's dead-letter list.
type listRow struct {
	deadletter.Record
	PaymentFacts
	Pay  string // the record's payment id
	Age  time.Duration
	Next string
}

// nextAction is the short form of what to do next: the record's own suggestion, so a hard
// decline (whose suggestion says not to retry) never reads "retry".
func nextAction(r deadletter.Record) string {
	switch {
	case r.Status == deadletter.StatusRetrying:
		return "wait for the retry"
	case r.Status == deadletter.StatusResolved || r.Status == deadletter.StatusOverridden:
		return "none"
	case r.RetryAdvised():
		return "retry"
	}
	if next, ok := nextByCause[r.Cause]; ok {
		return next
	}
	return "resolve or override"
}

// nextByCause is the short next step of the causes whose suggestion says not to retry.
var nextByCause = map[deadletter.Cause]string{
	deadletter.CauseDeclineHard:         "ask for another card",
	deadletter.CauseDeclineCancellation: "cancel the order",
	deadletter.CauseDeclineAuth:         "send a payment link",
	deadletter.CauseDeclineReview:       "check for a duplicate",
}

// tries counts a record's attempts: "1 try", "5 tries".
func tries(n int) string {
	if n == 1 {
		return "1 try"
	}
	return strconv.Itoa(n) + " tries"
}

// Sort keys of the console list (?sort=).
var listSorts = []string{"age", "amount", "customer", "status", "class"}

func sortRows(rows []listRow, by string, desc bool) {
	cmp := func(a, b listRow) int {
		switch by {
		case "amount":
			return int(a.Amount - b.Amount)
		case "customer":
			return strings.Compare(a.Customer, b.Customer)
		case "status":
			return strings.Compare(string(a.Status), string(b.Status))
		case "class":
			return strings.Compare(string(a.Cause), string(b.Cause))
		}
		return int(a.Age - b.Age)
	}
	slices.SortStableFunc(rows, func(a, b listRow) int {
		if desc {
			return cmp(b, a)
		}
		return cmp(a, b)
	})
}

// sortLink is the list's URL sorted by key, flipping the order when it is already so.
func sortLink(f deadletter.Filter, cur, key string, desc bool) string {
	q := filterQuery(f, "")
	q.Set("sort", key)
	if cur == key && !desc {
		q.Set("order", "desc")
	}
	return "/ops/?" + q.Encode()
}

func readSort(q url.Values) (string, bool) {
	by := q.Get("sort")
	if !slices.Contains(listSorts, by) {
		by = "age"
	}
	return by, q.Get("order") == "desc"
}
