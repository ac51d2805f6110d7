package opsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/problem"
	"github.com/runtwice/twice/shared/provider"
)

// Payment is what the timeline shows of a payment at its head.
type Payment struct {
	ID                string    `json:"id"`
	Status            string    `json:"status"`
	Amount            int64     `json:"amount"`
	Currency          string    `json:"currency"`
	Customer          string    `json:"customer"`
	ProviderPaymentID string    `json:"provider_payment_id,omitempty"`
	Invoice           string    `json:"invoice,omitempty"`
	IdempotencyKey    string    `json:"idempotency_key,omitempty"`
	CreatedAt         time.Time `json:"created_at"`
	// AmountRefunded and Dispute (its status) appear once a refund or a dispute exists.
	AmountRefunded int64  `json:"amount_refunded,omitempty"`
	Dispute        string `json:"dispute,omitempty"`
	// CardBrand and CardLast4 are the card the provider last charged, where it said which.
	CardBrand string `json:"card_brand,omitempty"`
	CardLast4 string `json:"card_last4,omitempty"`
	// NextActionType is what the customer must do while requires_action (use_stripe_sdk,
	// redirect_to_url). The client secret never comes here.
	NextActionType string `json:"next_action_type,omitempty"`
	// CaptureMethod, AmountCapturable and CaptureBefore describe an authorization's hold.
	CaptureMethod    string     `json:"capture_method,omitempty"`
	AmountCapturable int64      `json:"amount_capturable,omitempty"`
	CaptureBefore    *time.Time `json:"capture_before,omitempty"`
	// Refunds are the payment's refunds, oldest first, as GET /payments/{id} shows them.
	Refunds []payments.RefundView `json:"refunds,omitempty"`
	// refunds are the ledger's entries behind Refunds, for the timeline's rows.
	refunds []payments.RefundEntry
	// scope is the caller's scope of IdempotencyKey and of the refunds' keys.
	scope string
}

// ErrNoPayment is what a PaymentReader returns for an unknown payment id.
var ErrNoPayment = errors.New("opsapi: no such payment")

// PaymentReader reads one payment for the timeline.
type PaymentReader interface {
	Payment(ctx context.Context, id string) (Payment, error)
}

// AttemptGetter reads one whole attempt (headers and bodies), for a timeline row's details.
type AttemptGetter interface {
	Get(ctx context.Context, id string) (attempts.Attempt, error)
}

// Row kinds of a timeline.
const (
	RowAPI        = "api"
	RowProvider   = "provider"
	RowRecovery   = "recovery"
	RowWebhook    = "webhook"
	RowRefused    = "refused"
	RowDeadLetter = "deadletter"
	// RowRefund is a refund's outcome, from the payment's refund ledger.
	RowRefund = "refund"
	// RowCustomer is a wait for the customer (authentication).
	RowCustomer = "customer"
)

// Row is one line of a payment's timeline.
type Row struct {
	At       time.Time `json:"at"`
	Kind     string    `json:"kind"`
	Title    string    `json:"title"`
	Status   int       `json:"status,omitempty"`
	Result   string    `json:"outcome,omitempty"`
	Duration string    `json:"duration,omitempty"` // human units: "3.3 ms", "1.2 s"
	// DurationMS is the duration in milliseconds, for scripts.
	DurationMS float64 `json:"duration_ms,omitempty"`
	Detail     string  `json:"detail,omitempty"`
	// Attempt is the whole redacted attempt behind the row (headers and bodies), if any.
	Attempt *attempts.Attempt `json:"attempt,omitempty"`
	// Record is the dead-letter record an action belongs to.
	Record string `json:"record,omitempty"`
	// Replayed marks an answer given from an idempotency record (Idempotent-Replayed: true).
	Replayed bool `json:"replayed,omitempty"`
}

// Timeline is a payment's history, oldest first.
type Timeline struct {
	Payment Payment `json:"payment"`
	Rows    []Row   `json:"rows"`
	// UnverifiedClaims counts refused deliveries that claimed this payment (not in Rows).
	UnverifiedClaims int    `json:"unverified_claims,omitempty"`
	Notice           string `json:"notice,omitempty"`
	// Truncated says the payment has more attempts than a timeline shows (maxTimelineAttempts).
	Truncated bool `json:"truncated,omitempty"`
	// Recovery is the payment's recovery, while it has one (Config.Recoveries).
	Recovery *payments.Recovery `json:"recovery,omitempty"`
	// Card is what the network caps still allow on the payment's card.
	Card *payments.CardView `json:"card,omitempty"`
	// Steerable says the console offers charge-now and stop (Config.Steer, and the recovery
	// is running).
	Steerable bool `json:"-"`
	// cardRefused says the recovery's dead letter is a decline the issuer never reverses (hard,
	// or the authorization revoked): the card is not to be charged again, whatever the network
	// caps still allow.
	cardRefused bool
}

const maxTimelineAttempts = 500

// HumanDuration writes d as a person reads it: "850 µs", "3.3 ms", "120 ms", "1.2 s", "2 min 5 s",
// "3 h 12 min", "2 d 4 h".
func HumanDuration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d == 0:
		return "0 ms"
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d d %d h", int(d.Hours())/24, int(d.Hours())%24)
}

// validID checks an id from a path or query before it is used.
func validID(s string) bool {
	if s == "" || len(s) > 255 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

// timeline builds the payment's history from the attempt log and the dead-letter table.
func (h *Handler) timeline(ctx context.Context, id string) (Timeline, error) {
	if !validID(id) {
		return Timeline{}, &FieldError{Field: "id", Reason: "not a payment id"}
	}
	if h.Payments == nil || h.Attempts == nil {
		return Timeline{}, errNotConfigured
	}
	p, err := h.Payments.Payment(ctx, id)
	if err != nil {
		return Timeline{}, err
	}
	tl := Timeline{Payment: p, Rows: []Row{}}
	if tl.Recovery, err = h.paymentRecovery(ctx, id); err != nil {
		return Timeline{}, err
	}
	if tl.Card, err = h.paymentCard(ctx, id); err != nil {
		return Timeline{}, err
	}
	if tl.Recovery != nil {
		// What is true now, not what the last plan said (a recovered payment says so).
		cur := tl.Recovery.Current(p.Status)
		tl.Recovery = &cur
		tl.Recovery.Resume = ""
		tl.Steerable = h.Steer != nil && tl.Recovery.Running()
	}
	seen := map[string]bool{}
	var found []attempts.Attempt
	collect := func(by attempts.By, value string, lookup func(cursor string) (attempts.Page, error)) error {
		if value == "" {
			return nil
		}
		cursor := ""
		for {
			page, err := lookup(cursor)
			if err != nil {
				return err
			}
			if by == attempts.ByPaymentID && cursor == "" {
				tl.UnverifiedClaims, tl.Notice = page.UnverifiedClaims, page.Notice
			}
			for _, a := range page.Attempts {
				if seen[a.ID] {
					continue
				}
				if len(found) >= maxTimelineAttempts {
					tl.Truncated = true
					return nil
				}
				seen[a.ID] = true
				found = append(found, a)
			}
			if page.Cursor == "" {
				return nil
			}
			cursor = page.Cursor
		}
	}
	for _, k := range []struct {
		by attempts.By
		v  string
	}{{attempts.ByPaymentID, p.ID}, {attempts.ByProviderPaymentID, p.ProviderPaymentID}, {attempts.ByInvoice, p.Invoice}} {
		err := collect(k.by, k.v, func(cursor string) (attempts.Page, error) { return h.Attempts.Lookup(ctx, k.by, k.v, cursor) })
		if err != nil {
			return Timeline{}, err
		}
	}
	// A replay is filed under the caller's key alone (attempts.Log): the create's and each
	// refund's keys bring theirs in.
	keys := []string{p.IdempotencyKey}
	for _, r := range p.refunds {
		keys = append(keys, r.Key)
	}
	for _, key := range keys {
		err := collect(attempts.ByIdempotencyKey, key, func(cursor string) (attempts.Page, error) {
			return h.Attempts.LookupKey(ctx, p.scope, key, cursor)
		})
		if err != nil {
			return Timeline{}, err
		}
	}
	getter, _ := h.Attempts.(AttemptGetter)
	waited := false
	for _, a := range found {
		row := attemptRow(a)
		if getter != nil {
			if full, err := getter.Get(ctx, a.ID); err == nil {
				row.Attempt = &full
				if row.Kind == RowWebhook {
					if typ := eventTypeIn(full.RequestBody); typ != "" {
						row.Title = "webhook " + typ
						row.Detail = strings.TrimSpace(full.EventID + " " + row.Detail)
					}
				}
			}
		}
		if row.Attempt == nil {
			row.Attempt = &a
		}
		tl.Rows = append(tl.Rows, row)
		if !waited && a.Operation == "payments.create" && !row.Replayed {
			if w, ok := authenticationWait(*row.Attempt, p); ok {
				waited = true
				tl.Rows = append(tl.Rows, w)
			}
		}
	}
	tl.Rows = append(tl.Rows, refundRows(p)...)
	recs, err := h.Records.List(ctx, deadletter.Filter{Text: p.ID, Limit: 50})
	if err != nil {
		return Timeline{}, err
	}
	for _, rec := range recs.Records {
		if rec.PaymentID != p.ID {
			continue
		}
		if tl.Recovery != nil && rec.ID == tl.Recovery.DeadLetter &&
			(rec.Cause == deadletter.CauseDeclineHard || rec.Cause == deadletter.CauseDeclineCancellation) {
			tl.cardRefused = true
		}
		tl.Rows = append(tl.Rows, Row{At: rec.CreatedAt, Kind: RowDeadLetter, Title: "dead letter opened (" + string(rec.Source) + ")",
			Result: string(rec.Cause), Detail: rec.Explanation, Record: rec.ID})
		for _, au := range rec.Audit {
			if au.Action == deadletter.ActionOpened {
				continue // the row above: one row per event
			}
			detail := au.Note
			if au.Result != "" {
				detail = strings.TrimSpace("outcome: " + au.Result + ". " + detail)
			}
			title := "dead letter " + au.Action + " by " + au.Actor
			if au.From != "" {
				title += " (" + string(au.From) + " → " + string(au.To) + ")"
			}
			tl.Rows = append(tl.Rows, Row{At: au.At, Kind: RowDeadLetter, Title: title, Detail: detail, Record: rec.ID})
		}
	}
	slices.SortStableFunc(tl.Rows, func(a, b Row) int { return a.At.Compare(b.At) })
	return tl, nil
}

// authenticationWait is the row of the customer's authentication that a create's answer asked
// for (status requires_action): when it began, what the customer must do, and whether it is
// still awaited. It reads the answer's status and next action only, never its client secret.
func authenticationWait(a attempts.Attempt, p Payment) (Row, bool) {
	var ans struct {
		Status     string `json:"status"`
		NextAction *struct {
			Type string `json:"type"`
		} `json:"next_action"`
	}
	if json.Unmarshal([]byte(a.ResponseBody), &ans) != nil || ans.Status != provider.StatusRequiresAction {
		return Row{}, false
	}
	r := Row{At: a.StartedAt.Add(a.Duration), Kind: RowCustomer, Title: "waiting for the customer to authenticate (3-D Secure)"}
	if ans.NextAction != nil && len(ans.NextAction.Type) <= 64 {
		r.Detail = "next action: " + ans.NextAction.Type + ". "
	}
	if p.Status == provider.StatusRequiresAction {
		r.Result, r.Detail = "waiting", r.Detail+"The customer has not completed it yet."
	} else {
		r.Result, r.Detail = "ended", r.Detail+"The wait is over: the payment is now "+p.Status+"."
	}
	return r, true
}

// refundRows are the rows of the payment's refunds the ledger knows more of than the API
// calls do: each outcome (succeeded, failed), at the time it was recorded, and a refund made
// at the provider (its dashboard), which no call of ours asked for. A refund asked for through
// the API has that call as its "refund requested" row.
func refundRows(p Payment) []Row {
	var out []Row
	for _, e := range p.refunds {
		what := "refund " + e.ID + " of " + Money(e.Amount, e.Currency)
		if e.Key == "" {
			out = append(out, Row{At: e.CreatedAt, Kind: RowRefund, Title: "refund made at the provider", Detail: what})
		}
		switch e.Status {
		case provider.RefundSucceeded:
			out = append(out, Row{At: e.UpdatedAt, Kind: RowRefund, Title: "refund succeeded", Result: e.Status, Detail: what})
		case provider.RefundFailed, provider.RefundCanceled:
			reason := e.FailureReason
			if reason == "" {
				reason = e.Status
			}
			out = append(out, Row{At: e.UpdatedAt, Kind: RowRefund, Title: "refund failed: " + reason, Result: e.Status,
				Detail: what + "; the amount is refundable again"})
		}
	}
	return out
}

// operationTitles are the titles of the API calls that ask for something on an existing
// payment, in the words an operator uses.
var operationTitles = map[string]string{"payments.refund": "refund requested", "payments.capture": "capture requested",
	"payments.cancel": "cancel requested"}

func attemptRow(a attempts.Attempt) Row {
	r := Row{At: a.StartedAt, Status: a.Status, Result: a.Result, Detail: a.Err, Replayed: a.IsReplay(),
		Duration: HumanDuration(a.Duration), DurationMS: float64(a.Duration) / float64(time.Millisecond)}
	switch {
	case a.Provider == "api":
		r.Kind, r.Title = RowAPI, "API "+a.Method+" "+a.Path
		if a.Operation != "" {
			r.Title = "API " + a.Operation
		}
		if t, ok := operationTitles[a.Operation]; ok {
			r.Title = t + " (API " + a.Method + " " + a.Path + ")"
		}
	case a.Direction == attempts.Inbound:
		r.Kind, r.Title = RowWebhook, "webhook "+a.Provider+" "+eventType(a)
	case strings.HasPrefix(a.IdempotencyKey, "twice_rec_"):
		r.Kind, r.Title = RowRecovery, "recovery charge "+a.Operation
	default:
		r.Kind, r.Title = RowProvider, a.Provider+" "+a.Operation
	}
	return r
}

// eventType names a webhook by its event id until its body gives the type (eventTypeIn).
func eventType(a attempts.Attempt) string { return a.EventID }

// eventTypeIn reads an event's type ("payment_intent.succeeded") from its stored body.
func eventTypeIn(body string) string {
	var ev struct {
		Type string `json:"type"`
	}
	if json.Unmarshal([]byte(body), &ev) != nil || len(ev.Type) > 64 {
		return ""
	}
	return ev.Type
}

var errNotConfigured = errors.New("opsapi: not configured")

func (h *Handler) timelineAPI(w http.ResponseWriter, r *http.Request, _ string) {
	tl, err := h.timeline(r.Context(), r.PathValue("id"))
	if err != nil {
		h.failTimeline(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, tl)
}

func (h *Handler) failTimeline(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, ErrNoPayment):
		problem.Write(w, problem.New(problem.NotFound, "No such payment."))
	case errors.Is(err, errNotConfigured):
		problem.Write(w, problem.New(problem.NotFound, "The payment timeline is not configured."))
	default:
		h.fail(w, r, err)
	}
}

func (h *Handler) timelinePage(w http.ResponseWriter, r *http.Request, s session) {
	tl, err := h.timeline(r.Context(), r.PathValue("id"))
	if err != nil {
		status, detail := httpStatus(err)
		switch {
		case errors.Is(err, ErrNoPayment):
			status, detail = http.StatusNotFound, "No such payment."
		case errors.Is(err, errNotConfigured):
			status, detail = http.StatusNotFound, "The payment timeline is not configured."
		case status == http.StatusInternalServerError:
			h.log().ErrorContext(r.Context(), "console timeline", "err", err)
		}
		h.render(w, status, errorView(view{Title: http.StatusText(status), Session: s, Error: detail}))
		return
	}
	h.render(w, http.StatusOK, timelineView(view{Title: "Payment " + tl.Payment.ID, Session: s, Notice: notice(r.URL.Query().Get("done"))}, tl))
}

// cardText is a card as the console writes it: "visa ····4242".
func cardText(brand, last4 string) string {
	if last4 == "" {
		return brand
	}
	return strings.TrimSpace(brand + " ····" + last4)
}

// recoveryCard is the card of a payment's recovery: brand and last four digits.
func recoveryCard(tl Timeline) string {
	if c := tl.Card; c != nil && (c.Brand != "" || c.Last4 != "") {
		return cardText(c.Brand, c.Last4)
	}
	if c := cardText(tl.Payment.CardBrand, tl.Payment.CardLast4); c != "" {
		return c
	}
	if tl.Recovery != nil {
		return tl.Recovery.CardBrand
	}
	return ""
}

// nextAllowed says when the card may next be charged: never after the issuer refused it for
// good (the network caps do not know that), "now" while the caps allow an attempt, else the
// time, the console's way.
func nextAllowed(tl Timeline) string {
	c := tl.Card
	if tl.cardRefused {
		return "never: the issuer refuses this card for this payment"
	}
	if c.AttemptsLeft != nil && *c.AttemptsLeft > 0 {
		return "now"
	}
	if c.NextAllowedAt == nil {
		return ""
	}
	return whenRFC3339(*c.NextAllowedAt)
}

// holdOf is what an authorization holds: its capturable amount, else its amount.
func holdOf(p Payment) int64 {
	if p.AmountCapturable > 0 {
		return p.AmountCapturable
	}
	return p.Amount
}

// customerAction says, for a payment in requires_action, that the customer must act. The
// client secret that lets the customer's browser do it is never in the console.
func customerAction(p Payment) string {
	s := "The customer must authenticate this payment (3-D Secure) before it can be charged"
	if p.NextActionType != "" {
		s += " (next action: " + p.NextActionType + ")"
	}
	return s + ". Nothing is charged until then; if the customer does not, twice cancels it after the customer window."
}

// captureAction says, for an authorization, what must happen before its hold lapses.
func captureAction(p Payment) string {
	s := "The money is held on the customer's card, not taken: capture it (POST /payments/" + p.ID + "/capture) or cancel it"
	if p.CaptureBefore != nil {
		return s + " before " + when(*p.CaptureBefore) + ", when the hold lapses."
	}
	return s + " before the hold lapses."
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// createdAt reads a refund's RFC 3339 creation time for the console.
func createdAt(v payments.RefundView) time.Time {
	t, _ := time.Parse(time.RFC3339, v.CreatedAt)
	return t
}

// timelineLink is the console path of a payment's timeline.
func timelineLink(id string) string { return "/ops/payments/" + url.PathEscape(id) }

// Money writes minor units in a currency: 2500 usd is "25.00 USD"; zero-decimal currencies
// (jpy, krw, ...) have no fraction.
func Money(amount int64, currency string) string {
	cur := strings.ToUpper(currency)
	if zeroDecimal[strings.ToLower(currency)] {
		return fmt.Sprintf("%d %s", amount, cur)
	}
	sign := ""
	if amount < 0 {
		sign, amount = "-", -amount
	}
	return fmt.Sprintf("%s%d.%02d %s", sign, amount/100, amount%100, cur)
}

var zeroDecimal = map[string]bool{"bif": true, "clp": true, "djf": true, "gnf": true, "jpy": true, "kmf": true,
	"krw": true, "mga": true, "pyg": true, "rwf": true, "ugx": true, "vnd": true, "vuv": true, "xaf": true, "xof": true, "xpf": true}
